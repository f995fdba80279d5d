"""Slow, obviously-correct references that the fast paths are checked against."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

from polars.testing import assert_frame_equal

from losslens import read_log
from losslens.logs.base import read_lines
from losslens.logs.frame import LogData, assemble
from losslens.logs.reader import strips
from losslens.logs.registry import BY_NAME
from losslens.logs.sink import Accounting, Sink
from losslens.logs.source import decode_lines, open_source


def read_per_line(path: str | Path, format: str) -> LogData:
    """The log read line by line by ``format``'s per-line parser (no vectorised path)."""
    src = open_source(path)
    try:
        sink, acc = Sink(), Accounting()
        fmt = BY_NAME[format]
        read_lines(src, fmt, sink, acc, strip=strips(fmt, decode_lines(src.head)))
        return assemble(src.name, format, sink, acc)
    finally:
        src.close()


def read_kv_per_line(path: str | Path) -> LogData:
    """The key=value log read line by line (see ``read_per_line``)."""
    return read_per_line(path, "kv")


def assert_same_as_per_line(path: str | Path, format: str) -> None:
    """``read_log`` (its vectorised path where the file takes one) gives what the per-line parser
    gives: line accounting, skip reasons, both frames (column order aside), segments, names."""
    fast, slow = read_log(path, format=format), read_per_line(path, format)
    assert fast.lines.as_dict() == slow.lines.as_dict()
    assert dict(fast.lines.skipped) == dict(slow.lines.skipped)
    for a, b in ((fast.train, slow.train), (fast.eval, slow.eval)):
        assert sorted(a.columns) == sorted(b.columns)
        assert_frame_equal(a.select(sorted(a.columns)), b.select(sorted(a.columns)),
                           check_dtypes=False, check_exact=True)
    assert fast.segments == slow.segments
    assert fast.names == slow.names


def sprinkle(lines: list[str], odd: Sequence[str], times: int, rng: random.Random) -> list[str]:
    """``lines`` with ``times`` lines drawn from ``odd`` put in at random places (in place)."""
    for _ in range(times):
        lines.insert(rng.randrange(len(lines)), rng.choice(odd))
    return lines
