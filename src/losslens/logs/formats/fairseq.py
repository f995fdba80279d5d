"""fairseq's train_inner / valid lines."""

from __future__ import annotations

import re

from losslens.logs.base import (
    COMMON_NOISE,
    Format,
    LineParser,
    RegexLineParser,
    count_matching,
    leading_time,
)
from losslens.logs.sink import Sink

# --- fairseq ---------------------------------------------------------------------------------
FAIRSEQ_INNER = re.compile(r"\|\s*train_inner\s*\|\s*epoch (\d+):\s*(\d+)\s*/\s*(\d+)\s+(.*)$")


FAIRSEQ_VALID = re.compile(r"\|\s*valid\s*\|\s*epoch (\d+)\s*\|(.*)$")


FAIRSEQ_TRAIN = re.compile(r"\|\s*train\s*\|\s*epoch (\d+)\s*\|")


FAIRSEQ_KV = re.compile(r"(\w+)=(\S+?)(?:,|$|\s)")
# FAIRSEQ_KV for Python's engine: a key starts where a word does and is taken whole (FAIRSEQ_KV tried
# one from each character of a long word: quadratic). A match ends after a ',' or a space, so the
# next starts at a word's start anyway: the two find the same pairs
_KV = re.compile(r"(?<!\w)(\w++)=(\S+?)(?:,|$|\s)")


FAIRSEQ_PIPE = re.compile(r"^\s*(\w+) (\S+)\s*$")


FAIRSEQ_INFO = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \| \w+ \| [\w.]+ \|")


class _FairseqParser(RegexLineParser):
    noise = ((FAIRSEQ_TRAIN, "epoch summary"), (FAIRSEQ_INFO, "framework message"),
             *COMMON_NOISE)

    def feed(self, lineno: int, line: str) -> str | None:
        m = FAIRSEQ_INNER.search(line)
        if m:
            step, metrics = self.sink.metrics_from_pairs(_KV.findall(m.group(4)))
            metrics["epoch"] = float(m.group(1))
            if not self.sink.emit(lineno, step, metrics, time=leading_time(line)):
                return "no training metric"
            return None
        m = FAIRSEQ_VALID.search(line)
        if m:
            pairs = [(p.group(1), p.group(2)) for p in map(FAIRSEQ_PIPE.match, m.group(2).split("|")) if p]
            step, metrics = self.sink.metrics_from_pairs(pairs)
            metrics = {k.removeprefix("eval_"): v for k, v in metrics.items()}
            if not self.sink.emit(lineno, step, metrics, time=leading_time(line), kind="eval"):
                return "no training metric"
            return None
        return self.classify_noise(line)


class Fairseq(Format):
    """--format fairseq: train_inner and valid lines."""
    name = "fairseq"
    title = "fairseq simple log (| train_inner | epoch 001: 100 / 1021 loss=..., num_updates=...)"
    example = ("2024-05-31 15:45:00 | INFO | train_inner | epoch 001:    100 / 1021 loss=12.835, "
               "nll_loss=12.704, ppl=6670.89, wps=27054.6, num_updates=100, lr=1.25e-05, gnorm=3.112")
    rows = "line_columns:fairseq_rows"  # column-wise for large files

    def sniff(self, lines: list[str]) -> int:
        # preamble lines of fairseq (preprocess, Namespace) count too: they come first
        inner = count_matching((FAIRSEQ_INNER, FAIRSEQ_VALID), lines)
        return inner + (count_matching((FAIRSEQ_INFO,), lines) if inner else 0)

    def parser(self, sink: Sink) -> LineParser:
        return _FairseqParser(sink)
