"""PyTorch Lightning's progress bar on stdout (a run without a logger file)."""

from __future__ import annotations

import re

from losslens.logs.base import (
    COMMON_NOISE,
    Format,
    LineParser,
    RegexLineParser,
    whole,
)
from losslens.logs.names import is_eval
from losslens.logs.sink import Sink, Value

# --- PyTorch Lightning's progress bar (stdout of a run without a logger file) ---------------
# 'Epoch 3:  20%|██        | 20/100 [00:02<00:08,  9.50it/s, v_num=0, train_loss=2.340]', redrawn
# with '\r' on one physical line per epoch; validation bars have no postfix of their own
LIGHTNING_BAR = re.compile(r"Epoch (\d+):\s*\d+%\|[^|]*\|\s*(\d+)/(\d+) \[[^\]]*?(?:it/s|s/it)(?:, (.*))?\]")


LIGHTNING_PAIR = re.compile(r"([A-Za-z_][\w/.\-]*)=([^\s,\]]+)")
# LIGHTNING_PAIR for Python's engine: from the start of a run of key characters, past the digits,
# '.', '/' or '-' before its first letter, the key taken whole (LIGHTNING_PAIR tried one from each
# letter of a long run: quadratic). Its key is the same: a key from a later letter ends where the
# run does, and fails where the first does. A value ends before ',', ']' or a space, none of
# them a key's, so each match starts a run
_PAIR = re.compile(r"(?<![\w/.\-])(?:[^\WA-Za-z_]|[/.\-])*+([A-Za-z_][\w/.\-]*+)=([^\s,\]]++)")


class _LightningParser(RegexLineParser):
    """One record per training step seen in the bar (the last redraw of the step); an eval
    metric in the postfix ('val_loss=…', carried on every redraw) only when its value changes."""

    noise = COMMON_NOISE

    def __init__(self, sink: Sink):
        super().__init__(sink)
        self.held: tuple[int, int, dict[str, Value]] | None = None  # line, step, metrics
        self.last_eval: dict[str, Value] = {}

    def finish(self) -> None:
        if self.held is not None:
            lineno, step, metrics = self.held
            evals = {k: v for k, v in metrics.items() if is_eval(k)}
            if evals == self.last_eval:  # unchanged since last emitted: not a new evaluation
                metrics = {k: v for k, v in metrics.items() if not is_eval(k)}
            else:
                self.last_eval = evals
            self.sink.emit(lineno, step, metrics)
            self.held = None

    def feed(self, lineno: int, line: str) -> str | None:
        found = False
        for segment in line.split("\r"):
            m = LIGHTNING_BAR.search(segment)
            if not m or not m.group(4):
                continue
            epoch, done, total = whole(m.group(1)), whole(m.group(2)), whole(m.group(3))
            pairs = [(k, v) for k, v in _PAIR.findall(m.group(4)) if k != "v_num"]
            _, metrics = self.sink.metrics_from_pairs(pairs)
            if not metrics:
                continue
            metrics["epoch"] = float(epoch)
            step = epoch * total + done
            if self.held is not None and self.held[1] != step:
                self.finish()
            self.held = (lineno, step, metrics)
            found = True
        if found:
            return None
        return self.classify_noise(line.split("\r")[-1])


class Lightning(Format):
    """--format lightning: the progress bar's postfix values (train_loss=...) at each step it shows."""
    name = "lightning"
    title = "PyTorch Lightning progress bar on stdout (Epoch N: …| b/N [… train_loss=…]), '\\r' redraws"
    example = "Epoch 3:  20%|██        | 20/100 [00:02<00:08,  9.50it/s, v_num=0, train_loss=2.340]"
    rows = "line_columns:lightning_rows"  # every redraw column-wise for large files

    def sniff(self, lines: list[str]) -> int:
        return sum(1 for x in lines if any(m.group(4) for m in LIGHTNING_BAR.finditer(x)))

    def parser(self, sink: Sink) -> LineParser:
        return _LightningParser(sink)
