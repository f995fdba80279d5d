"""The toy format: lines such as ``toy #1: loss is 2.5``."""

from __future__ import annotations

import re

from losslens.logs.base import Format, LineParser

TOY_LINE = re.compile(r"^toy #(\d+): loss is ([\d.]+|nan)$")


class _ToyParser(LineParser):
    def feed(self, lineno: int, line: str) -> str | None:
        m = TOY_LINE.match(line)
        if not m:
            return "not a toy line"
        self.sink.emit(lineno, int(m.group(1)), {"loss": float(m.group(2))})
        return None


class Toy(Format):
    """Reads ``toy #N: loss is X`` lines."""

    name = "toy"
    title = "toy #N: loss is X"
    example = "toy #1: loss is 2.5"

    def sniff(self, lines: list[str]) -> int:
        return sum(bool(TOY_LINE.match(x)) for x in lines)

    def parser(self, sink) -> LineParser:
        return _ToyParser(sink)
