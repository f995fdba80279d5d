"""The eval loss rising while the train loss keeps falling."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from losslens.detectors.base import Detector, Series, fmt_number
from losslens.detectors.stats import spearman
from losslens.findings import Finding, Severity, Skipped


@dataclass(frozen=True)
class Overfitting(Detector):
    """The eval loss rises from its best while the train loss still falls; start_step is the best
    eval step.

    min_points: eval records needed. min_rise: relative rise of the last eval loss over the best."""

    name = "overfitting"
    title = "eval loss rises while the train loss still falls (start_step at the eval minimum)"
    metrics = ("eval_loss",)

    min_points: int = 4
    min_rise: float = 0.03

    def detect(self, series: Series) -> list[Finding] | Skipped:
        ok = np.isfinite(series.values)
        v, steps = series.values[ok], series.steps[ok]
        if len(v) < self.min_points:
            return Skipped(self.name, series.metric, f"only {len(v)} evals; needs {self.min_points}")
        best = int(np.argmin(v))
        if best >= len(v) - 2 or v[-1] < v[best] * (1 + self.min_rise) or spearman(v[best:]) < 0.6:
            return []
        train = (series.context or {}).get("train_loss")
        evidence: dict = {"best_step": int(steps[best]), "best": float(v[best]), "last": float(v[-1])}
        summary = (f"eval loss bottoms out at {fmt_number(v[best])} (step {int(steps[best])}) and rises "
                   f"to {fmt_number(v[-1])} by step {int(steps[-1])}")
        if train is not None and np.isfinite(train).sum() >= 4:
            t = train[np.isfinite(train)]
            falling = bool(np.median(t[-max(2, len(t) // 5):]) < np.median(t[:max(2, len(t) // 5)]))
            evidence["train_still_falling"] = falling
            if not falling:
                return []
            summary += " while the train loss keeps falling: overfitting (stop at the best eval step)"
        else:
            summary += ": overfitting? (stop at the best eval step)"
        return [Finding(self.name, Severity.WARNING, "eval_loss", int(steps[best]), int(steps[-1]),
                        summary, evidence, series.segment)]
