"""A lasting drop of throughput (tokens/s, samples/s)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from losslens.detectors.base import Detector, KindDoc, Series, fmt_number
from losslens.detectors.stats import kept, level_shift
from losslens.findings import Finding, Severity, Skipped


@dataclass(frozen=True)
class ThroughputDrop(Detector):
    """Tokens/s or samples/s fall (or step time rises) persistently; start_step is the turn. A
    rise of the step time at the turn of a drop of the rate is that drop (one finding).

    min_points: records needed. min_drop: the fall as a share of the level before the turn.
    min_side: the least share of the run on each side of the turn."""

    name = "throughput_drop"
    title = "tokens/s (or samples/s; step time rising) falls persistently (start_step at the turn)"
    doc = KindDoc(
        meaning=(
            'tokens/s (or samples/s, step time) drops and stays down; `start_step` at the turn'),
        severity=(
            'warning'),
        evidence=(
            '`turn_step`, `before`, `after`, `drop`'),
        contract=(
            'tokens/s (or batches/s) falls persistently'),
    )
    metrics = ("tokens_per_s", "samples_per_s", "step_time_s")

    min_points: int = 20
    min_drop: float = 0.2
    min_side: float = 0.1

    def explained(self, finding: Finding, findings: list[Finding]) -> bool:
        """A rise of the step time that a drop of the token (or sample) rate reports already: one
        slow-down, one finding (nanoGPT-style lines print both, 'dt: 800ms | tok/sec: 2025')."""
        if finding.metric != "step_time_s":
            return False
        span = max(1, finding.end_step - finding.start_step)
        return any(g.kind == self.name and g.metric in ("tokens_per_s", "samples_per_s")
                   and g.segment == finding.segment and abs(g.start_step - finding.start_step) <= 0.1 * span
                   for g in findings)

    def detect(self, series: Series) -> list[Finding] | Skipped:
        v, steps = series.finite(True)
        n = len(v)
        if (short := self.too_short(series, n, self.min_points)) is not None:
            return short
        elapsed = series.metric == "step_time_s" and running_total(v)
        if elapsed:  # 'Time: 505.06 sec' counts from the start: its increments are the step times
            v, steps = per_step(v, steps)
            v, steps = kept(v > 0, v, steps)
            n = len(v)
            if (short := self.too_short(series, n, self.min_points)) is not None:
                return short
        rate = 1.0 / v if series.metric == "step_time_s" else v
        turn, before, after = level_shift(rate, int(n * self.min_side))
        if turn is None or after > before * (1 - self.min_drop):
            return []
        # persistent: most of what follows stays below the old level
        if np.mean(rate[turn:] < before * (1 - self.min_drop / 2)) < 0.8:
            return []
        what = ("step time, from the elapsed time's increments" if elapsed else "step time") \
            if series.metric == "step_time_s" else series.metric
        shown = (f"{fmt_number(1 / before)} s → {fmt_number(1 / after)} s per step"
                 if series.metric == "step_time_s" else f"{fmt_number(before)} → {fmt_number(after)}")
        summary = (f"throughput drops {1 - after / before:.0%} at step {int(steps[turn])} ({what}: "
                   f"{shown}) and stays down: a slower node, thermal throttling, a data-loader "
                   "or I/O bottleneck?")
        return [Finding(self.name, Severity.WARNING, series.metric, int(steps[turn]), int(steps[-1]),
                        summary, {"turn_step": int(steps[turn]), "before": before, "after": after,
                                  "drop": round(1 - after / before, 4), "elapsed": elapsed},
                        series.segment)]


def per_step(elapsed: np.ndarray, steps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """An elapsed time's increments per step (where the steps advance and the time does not go
    back), at the later record's step."""
    dt, ds = np.diff(elapsed), np.diff(steps)
    ok = (dt >= 0) & (ds > 0)
    return dt[ok] / ds[ok], steps[1:][ok]


def running_total(v: np.ndarray) -> bool:
    """A 'time' column that counts from the start of the run (it rises at nine records in ten and
    ends at least five times where it began), not the time of each step."""
    return len(v) > 2 and float(np.mean(np.diff(v) > 0)) >= 0.9 and v[-1] >= 5 * v[0]
