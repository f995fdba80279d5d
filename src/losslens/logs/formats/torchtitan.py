"""torchtitan console lines (ANSI colours stripped)."""

from __future__ import annotations

import re

from losslens.logs.base import (
    ANSI,
    COMMON_NOISE,
    Format,
    LineParser,
    RegexLineParser,
    leading_time,
    whole,
)
from losslens.logs.names import NONFINITE
from losslens.logs.sink import Sink

# --- torchtitan ------------------------------------------------------------------------------
TITAN = re.compile(r"step:\s*(\d+)\s+(loss:\s*\S+.*)$")


TITAN_PAIR = re.compile(rf"([a-z_ ()]+?):\s*({NONFINITE}(?![A-Za-z])|[-+\d.,eE]+)([A-Za-z%]*)"
                        r"(?:\([^)]*\))?")
_KEY_RUN = re.compile(r"[a-z_ ()]*+")


def titan_pairs(text: str) -> list[tuple[str, str, str]]:
    """TITAN_PAIR.findall(text), each run of key characters read once: findall tried a key from
    each character of a run (of spaces, say) that no ':' ends, to the end of the run: quadratic.
    A key from any character of a run ends where the run does (':' is not a key's character), so
    where the run's first character starts no pair, none of the others does."""
    pairs = []
    at = 0
    while at < len(text):
        m = TITAN_PAIR.match(text, at)
        if m:
            pairs.append((m.group(1), m.group(2), m.group(3)))
            at = m.end()
        else:
            at = max(_KEY_RUN.match(text, at).end(), at + 1)  # type: ignore[union-attr]
    return pairs


class _TitanParser(RegexLineParser):
    noise = COMMON_NOISE

    def feed(self, lineno: int, line: str) -> str | None:
        clean = ANSI.sub("", line)
        m = TITAN.search(clean)
        if not m:
            return self.classify_noise(clean)
        pairs = [(k.strip(), v + u) for k, v, u in titan_pairs(m.group(2))]
        _, metrics = self.sink.metrics_from_pairs(pairs)
        t = leading_time(clean.split("] ", 1)[-1]) or leading_time(clean)
        if not self.sink.emit(lineno, whole(m.group(1)), metrics, time=t):
            return "no training metric"
        return None


class TorchTitan(Format):
    """--format torchtitan: 'step: N  loss: X  memory: ...  tps: ...' with the colours stripped."""
    name = "torchtitan"
    title = "torchtitan console (step: N  loss: X  memory: ...  tps: ...), ANSI colours stripped"
    example = ("[titan] 2025-01-08 10:00:00,000 - root - INFO - step: 10  loss:  7.6442  "
               "memory: 39.12GiB(41.18%)  tps: 6,581  mfu: 38.55%")
    rows = "line_columns:torchtitan_rows"  # column-wise for large files

    def sniff(self, lines: list[str]) -> int:
        return sum(1 for x in lines if TITAN.search(ANSI.sub("", x)))

    def parser(self, sink: Sink) -> LineParser:
        return _TitanParser(sink)
