"""Megatron-LM / Megatron-DeepSpeed console: ' iteration N/ M | ... | lm loss: X | ...'."""

from __future__ import annotations

import re

from losslens.logs.base import (
    COMMON_NOISE,
    Format,
    LineParser,
    RegexLineParser,
    count_matching,
    whole,
)
from losslens.logs.names import parse_number
from losslens.logs.sink import Sink

# --- Megatron / Megatron-DeepSpeed -----------------------------------------------------------
MEGA_ITER = re.compile(r"^\s*iteration\s+(\d+)\s*/\s*(\d+)\s*\|(.*)$")


MEGA_VALID = re.compile(r"validation loss at iteration\s+(\d+)\s*(?:on \w+ set)?\s*\|(.*)$")


# a field 'name: value' (the name with its trailing spaces: the reader strips it; it was a lazy
# '[^:|]+?' between two '\s*', which tried every split of a run of spaces: 'Loss:' after 1,600
# spaces took seconds)
MEGA_FIELD = re.compile(r"^\s*+([^:|]++)\s*:\s*+(\S++)\s*+$")


MEGA_NAMES = {
    "lm loss": "loss", "learning rate": "lr", "grad norm": "grad_norm", "loss scale": "loss_scale",
    "elapsed time per iteration (ms)": "step_time_s", "global batch size": "global_batch_size",
    "consumed samples": "consumed_samples", "consumed tokens": "consumed_tokens",
    "samples per second": "samples_per_s", "tokens per gpu per second (tgs)": "tokens_per_gpu_s",
    "tflops": "tflops", "number of skipped iterations": "skipped_iterations",
    "number of nan iterations": "nan_iterations", "num zeros": "num_zeros",
    "actual seqlen": "seq_len", "lm loss value": "eval_loss", "lm loss ppl": "eval_ppl",
}


class _MegatronParser(RegexLineParser):
    noise = ((re.compile(r"^-{10,}$"), "separator"), *COMMON_NOISE)

    def _fields(self, body: str) -> dict[str, float]:
        metrics: dict[str, float] = {}
        for part in body.split("|"):
            m = MEGA_FIELD.match(part)
            if not m:
                continue  # a field cut short by the line's width
            key = m.group(1).strip().lower()
            name = MEGA_NAMES.get(key)
            value = parse_number(m.group(2))
            if name is None or value is None:
                continue
            if name == "step_time_s":
                value /= 1000.0
            metrics[name] = value
            self.sink.names.setdefault(name, m.group(1).strip())
        return metrics

    def feed(self, lineno: int, line: str) -> str | None:
        m = MEGA_ITER.match(line)  # (a '[default7]: ' rank prefix is cut off by the reader)
        if m:
            if not self.sink.emit(lineno, whole(m.group(1)), self._fields(m.group(3))):
                return "no training metric"
            return None
        m = MEGA_VALID.search(line)
        if m:
            if not self.sink.emit(lineno, whole(m.group(1)), self._fields(m.group(2)), kind="eval"):
                return "no training metric"
            return None
        return self.classify_noise(line.strip())


class Megatron(Format):
    """--format megatron: ' iteration N/ M | lm loss: X | ...' and validation lines."""
    name = "megatron"
    rows = "line_columns:megatron_rows"  # column-wise for large files
    title = "Megatron-LM / Megatron-DeepSpeed console ( iteration N/ M | ... | lm loss: X | ...)"
    example = (" iteration    29050/  311541 | consumed samples:     10728784 | elapsed time per "
               "iteration (ms): 22148.5 | learning rate: 9.849E-05 | lm loss: 7.343709E+00 | "
               "loss scale: 8192.0 | grad norm: 0.000 |")

    def sniff(self, lines: list[str]) -> int:
        return count_matching((MEGA_ITER, MEGA_VALID), lines)

    def parser(self, sink: Sink) -> LineParser:
        return _MegatronParser(sink)

