"""Slow, obviously-correct references that the fast paths are checked against."""

from __future__ import annotations

from pathlib import Path

from losslens.logs.base import read_lines
from losslens.logs.formats.kv import KeyValue
from losslens.logs.frame import LogData, assemble
from losslens.logs.sink import Accounting, Sink
from losslens.logs.source import open_source


def read_kv_per_line(path: str | Path) -> LogData:
    """The key=value log read line by line by the per-line parser (no vectorised path)."""
    src = open_source(path)
    try:
        sink, acc = Sink(), Accounting()
        read_lines(src, KeyValue(), sink, acc)
        return assemble(src.name, "kv", sink, acc)
    finally:
        src.close()
