"""The pipeline stall detector: a backlog reported from its turn, a queue filling to its bound."""


from __future__ import annotations

import numpy as np
import pytest

from losslens.analysis import analyze
from losslens.logs import from_arrays
from tests.unit.shapes import of


def test_a_backlog_is_reported_from_its_turn_not_from_step_0() -> None:
    rng = np.random.default_rng(4)
    steps = np.arange(0, 20_000, 10)
    depth = rng.integers(2, 8, len(steps)).astype(float)
    grow = steps >= 10_000
    depth[grow] += 0.05 * (steps[grow] - 10_000) + rng.normal(0, 3, grow.sum())
    loss = 2.0 + 0.3 * np.exp(-steps / 5000) + rng.normal(0, 0.02, len(steps))
    (f,) = of(analyze(from_arrays(steps, loss=loss, queue_depth=depth)), "pipeline_stall")
    assert abs(f.start_step - 10_000) <= 300 and f.evidence["turn_step"] == f.start_step
    assert f.evidence["growth_per_step"] == pytest.approx(0.05, rel=0.1)
    assert f.evidence["start"] == pytest.approx(5, abs=1.5) and f.end_step == 19_990


def test_a_queue_that_fills_to_its_bound_is_not_a_backlog() -> None:
    rng = np.random.default_rng(4)
    steps = np.arange(0, 20_000, 10)
    depth = np.minimum(64, 2 + 0.01 * steps) + rng.normal(0, 1, len(steps))
    loss = 2.0 + rng.normal(0, 0.02, len(steps))
    assert of(analyze(from_arrays(steps, loss=loss, queue_depth=depth)), "pipeline_stall") == []


@pytest.mark.parametrize("warmup", [[30.0], [30.0, 4.0, 2.5]])
def test_the_slow_steps_a_run_starts_with_are_its_start_up_not_a_stall(warmup: list[float]) -> None:
    """nanoGPT's iter 0 under torch.compile takes 30 s against 0.1 s after it (and a compiled run
    may recompile for a few steps more): start-up, no stall; a stall later in the same run, and
    the first steps after a restart, are told apart as before."""
    rng = np.random.default_rng(7)
    n = 400
    steps = np.arange(n)
    loss = 3.0 - steps / 400 + rng.normal(0, 0.01, n)
    dt = 0.1 + rng.normal(0, 0.003, n)
    dt[:len(warmup)] = warmup
    assert of(analyze(from_arrays(steps, loss=loss, step_time_s=dt)), "pipeline_stall") == []
    # resumed at step 200 (the step goes back): the resumed segment's start-up is no stall either
    resumed = np.concatenate([steps[:300], steps[200:300]])
    again = np.concatenate([dt[:300], np.r_[warmup, dt[200 + len(warmup):300]]])
    found = of(analyze(from_arrays(resumed, loss=np.concatenate([loss[:300], loss[200:300]]),
                                   step_time_s=again)), "pipeline_stall")
    assert found == []
    dt[250] = 12.0  # a data loader that waited 12 s
    (f,) = of(analyze(from_arrays(steps, loss=loss, step_time_s=dt)), "pipeline_stall")
    assert (f.start_step, f.evidence["steps"]) == (250, [250])
