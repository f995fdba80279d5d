"""key=value logs (the DFlash drafter's lines, generic trainer loggers): one format with two
paths, line by line here and column-wise in ``kv.columns`` (for a large file, or a batch of a
live log's lines: see ``stream.LineStream``)."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache

from losslens.logs.base import (
    ANSI,
    COMMON_NOISE,
    Format,
    LineParser,
    RegexLineParser,
    leading_time,
    whole,
)
from losslens.logs.formats.kv.patterns import (
    BAR_COUNT,
    ESPNET_BATCH,
    ESPNET_RESULTS,
    ESPNET_SECTION,
    KV,
    TOKRATE,
    TOKRATE_SCALE,
    kv_pairs,
)
from losslens.logs.names import (
    STEP_KEYS,
    canonical,
    is_eval,
    is_setting,
    is_training_metric,
    unreserved,
)
from losslens.logs.sink import Sink


class _KVParser(RegexLineParser):
    noise = COMMON_NOISE

    def __init__(self, sink: Sink):
        super().__init__(sink)
        self.bars: dict[int, tuple[int, int]] = {}  # a bar's total -> (steps before this pass, last count)
        self.last_step: int | None = None  # ESPnet's last report (its epoch results are evaluated there)

    def feed(self, lineno: int, line: str) -> str | None:
        if "\x1b" in line:
            line = ANSI.sub("", line)
        if "\r" in line and BAR_COUNT.search(line):
            return self._bar(lineno, line)
        if "epoch" in line and (espnet := ESPNET_BATCH.search(line) or ESPNET_RESULTS.search(line)):
            return self._espnet(lineno, line, espnet)
        pairs = kv_pairs(line)
        if not pairs:
            return self.classify_noise(line)
        step, metrics = self.sink.metrics_from_pairs(pairs)
        m = TOKRATE.search(line)
        if m and "tokens_per_s" not in metrics:
            metrics["tokens_per_s"] = float(m.group(1)) * TOKRATE_SCALE[m.group(2)]
            self.sink.names.setdefault("tokens_per_s", "(Ktok/s)")
        if not self.sink.emit(lineno, step, metrics, time=leading_time(line)):
            return "no training metric"
        return None

    def _espnet(self, lineno: int, line: str, head: re.Match[str]) -> str | None:
        """ESPnet2's lines: a report of the last batches at the epoch's batch count (made to count
        the run by the frame), or an epoch's results, whose train part averages the reports
        already read and whose 'valid' part is the evaluation at the last train step."""
        time = leading_time(line)
        if head.re is ESPNET_BATCH:
            _, metrics = self.sink.metrics_from_pairs(kv_pairs(line[head.end():]))
            # ESPnet's iter_time is the wait for the batch, train_time the whole step
            if "step_time_s" in metrics:
                metrics["data_time"] = metrics.pop("step_time_s")
                self.sink.names["data_time"] = "iter_time"
            if "train_time" in metrics:
                metrics["step_time_s"] = metrics.pop("train_time")
                self.sink.names["step_time_s"] = "train_time"
            metrics["epoch"] = float(head.group(1))
            kind = None if head.group(2) == "train" else "eval"
            if not self.sink.emit(lineno, whole(head.group(3)), metrics, time=time, kind=kind):
                return "no training metric"
            self.last_step = whole(head.group(3))
            return None
        body = line[head.end():]
        cuts = list(ESPNET_SECTION.finditer(body))
        for m, nxt in zip(cuts, [*cuts[1:], None], strict=True):
            if m.group(1) in ("valid", "validation", "eval", "dev"):
                section = body[m.end():nxt.start() if nxt else None]
                _, metrics = self.sink.metrics_from_pairs(kv_pairs(section))
                for kept in ("total_count", "step_time_s"):  # ('time=30.1 seconds' is the loop's)
                    metrics.pop(kept, None)
                if self.sink.emit(lineno, self.last_step, metrics, time=time, kind="eval"):
                    return None
        return "epoch average"

    def _bar(self, lineno: int, line: str) -> str | None:
        """A tqdm bar redrawn with '\r', its postfix 'loss=2.31, lr=1e-4' (`pbar.set_postfix`) in
        each state: every state is a record (a NaN in one of them is not hidden by the last), at
        the bar's count, counted on across the bar's later passes (epochs) of the same total."""
        emitted = False
        time = leading_time(line)
        for state in line.split("\r"):
            pairs = kv_pairs(state)
            if not pairs:
                continue
            step, metrics = self.sink.metrics_from_pairs(pairs)
            counts = BAR_COUNT.findall(state)
            if step is None and counts:
                n, total = whole(counts[-1][0]), whole(counts[-1][1])
                before, last = self.bars.get(total, (0, 0))
                if n < last:  # the bar starts again (the next epoch)
                    before += last
                self.bars[total] = (before, n)
                step = before + n
            emitted |= self.sink.emit(lineno, step, metrics, time=time)
        return None if emitted else "no training metric"


def _is_kv_record(line: str) -> bool:
    """Two pairs or more, one of them a metric the parser makes a record of: DeepSpeed's
    'step=10, skipped=0, lr=[0.0001], mom=[(0.9, 0.999)]' holds none (its pipeline engine prints
    the loss on lines of their own, 'steps: 10 loss: 2.3012 ...', which another format reads)."""
    # (the pairs found one at a time, up to the answer: a DFlash line's first two, step and loss,
    # decide it; finding all of them was most of a `check`'s sniffing)
    n, record = 0, False
    for m in KV.finditer(line):
        n += 1
        record = record or _makes_record(m.group(1))
        if n >= 2 and record:
            return True
    return False


@lru_cache(maxsize=4096)
def _makes_record(key: str) -> bool:
    """A key the parser makes a record of (a training metric, or an evaluated one); keys repeat
    line after line, so each is judged once."""
    if key.strip().lower() in STEP_KEYS:
        return False
    name = unreserved(canonical(key))
    return is_training_metric(name) or is_eval(name) and not is_setting(name)


class KeyValue(Format):
    """--format kv: key=value fields (also 'key = value'), lists as [a, b], a token rate in parentheses;
    a whole file is read vectorised."""
    name = "kv"
    title = "key=value lines (DFlash drafter monitor, Python logging of step=/loss=/lr=, ...)"
    example = ("[2026-05-15 21:26:03] step=338 loss=0.8183 acc=0.055 streak=1.2 lr=8.81e-05 "
               "noise=0.1000 | tgt=0.68b/s dft=0.68b/s (32.1Ktok/s) | "
               "q_pre=[50, 50, 46, 45, 44, 46] q_hs=[0] | epoch~0.02 ETA=4.0d")

    def sniff(self, lines: list[str]) -> int:
        return sum(1 for x in lines if _is_kv_record(ANSI.sub("", x) if "\x1b" in x else x))

    def parser(self, sink: Sink) -> LineParser:
        return _KVParser(sink)

    def chunk_reader(self, size: int | None = None) -> Callable[..., None]:
        """Each chunk's template lines vectorised (see ``kv.columns``; with numba on a large file,
        ``kv.fast``), the templates found in the first kept for the next."""
        from losslens.logs.formats.kv.columns import TemplateReader

        return TemplateReader(size)
