"""The worker processes behind -j: results in the items' order, a worker's exception raised in
the caller, a worker killed from outside one clear error, and no process left behind."""

from __future__ import annotations

import multiprocessing
import os
import signal
from functools import partial

import pytest

from losslens.workers import WorkerDied, in_order


def _square(x: int, *, fail_at: int | None = None, die_at: int | None = None) -> int:
    if x == fail_at:
        raise ValueError(f"bad item {x}")
    if x == die_at:
        os.kill(os.getpid(), signal.SIGKILL)
    return x * x


def test_results_come_back_in_the_items_order_over_uneven_chunks() -> None:
    assert list(in_order(_square, list(range(23)), jobs=2, chunk=4)) == [x * x for x in range(23)]
    assert not multiprocessing.active_children()


def test_more_jobs_than_chunks_and_no_items() -> None:
    assert list(in_order(_square, [3], jobs=4, chunk=8)) == [9]
    assert list(in_order(_square, [], jobs=2, chunk=1)) == []


def test_a_workers_exception_is_raised_in_the_caller_and_the_workers_end() -> None:
    with pytest.raises(ValueError, match="bad item 7"):
        list(in_order(partial(_square, fail_at=7), list(range(20)), jobs=2, chunk=3))
    assert not multiprocessing.active_children()


def test_a_worker_killed_from_outside_is_one_clear_error() -> None:
    with pytest.raises(WorkerDied, match="ended without answering .*-j 1"):
        list(in_order(partial(_square, die_at=5), list(range(20)), jobs=2, chunk=2))
    assert not multiprocessing.active_children()


def test_a_consumer_that_stops_early_ends_the_workers() -> None:
    results = in_order(_square, list(range(100)), jobs=2, chunk=1)
    assert next(results) == 0
    results.close()
    assert not multiprocessing.active_children()
