"""Slow, obviously-correct references that the fast paths are checked against."""

from __future__ import annotations

from pathlib import Path

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
