"""OLMo: "[step=N/T,epoch=E]" then indented "key=value" lines."""

from __future__ import annotations

import re

from losslens.logs.base import (
    COMMON_NOISE,
    Format,
    LineParser,
    RegexLineParser,
    leading_time,
    whole,
)
from losslens.logs.names import parse_number
from losslens.logs.sink import Sink

# --- OLMo: "[step=N/T,epoch=E]" then indented "key=value" lines ------------------------------
OLMO_HEAD = re.compile(r"\[step=(\d+)(?:/\d+)?(?:,epoch=(\d+))?\]\s*$")


OLMO_FIELD = re.compile(r"^\s+([^=\s][^=]*?)=(\S+)\s*$")


class _OlmoParser(RegexLineParser):
    noise = COMMON_NOISE

    def __init__(self, sink: Sink):
        super().__init__(sink)
        self.pending: tuple[int, int, list[tuple[str, str]], object] | None = None

    def finish(self) -> None:
        if self.pending is not None:
            lineno, step, pairs, time = self.pending
            _, metrics = self.sink.metrics_from_pairs(pairs)
            self.sink.emit(lineno, step, metrics, time=time)  # type: ignore[arg-type]
            self.pending = None

    def feed(self, lineno: int, line: str) -> str | None:
        m = OLMO_HEAD.search(line)
        if m:
            self.finish()
            pairs = [("epoch", m.group(2))] if m.group(2) is not None else []
            self.pending = (lineno, whole(m.group(1)), pairs, leading_time(line))
            return None
        if self.pending is not None:
            f = OLMO_FIELD.match(line)
            if f and parse_number(f.group(2)) is not None:
                self.pending[2].append((f.group(1), f.group(2)))
                return None
        self.finish()
        return self.classify_noise(line.strip())


class Olmo(Format):
    """--format olmo: a '[step=N/T]' head line, then one indented key=value line per metric."""
    name = "olmo"
    title = "OLMo console: '[step=N/T,epoch=E]' followed by indented key=value lines"
    example = "2025-12-12 11:05:02.009\thost:0\tolmo.train:979\tINFO\t[step=1/15000,epoch=0]"
    rows = "line_columns:olmo_rows"  # column-wise for large files

    def sniff(self, lines: list[str]) -> int:
        n, inside = 0, False
        for x in lines:
            if OLMO_HEAD.search(x):
                n, inside = n + 1, True
            elif inside and OLMO_FIELD.match(x):
                n += 1
            else:
                inside = False
        return n

    def parser(self, sink: Sink) -> LineParser:
        return _OlmoParser(sink)
