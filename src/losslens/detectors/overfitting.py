"""The eval loss rising while the train loss keeps falling."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from losslens.detectors.base import Detector, KindDoc, Series, fmt_number
from losslens.detectors.stats import robust_scale, spearman
from losslens.findings import Finding, Severity, Skipped


@dataclass(frozen=True)
class Overfitting(Detector):
    """The eval loss rises from its best while the train loss still falls; start_step is the best
    eval step.

    min_points: eval records needed. min_rise: relative rise of the last eval loss over the best.
    With ``noise_points`` evals or more, the rise must also stand out of the evals' own noise
    (``noise``): the best of many noisy evals is a low draw, and a converged run's last evals
    rise above it by a few noise widths (``margin``): the level of the last three evals must
    stand that far above the best."""

    name = "overfitting"
    title = "eval loss rises while the train loss still falls (start_step at the eval minimum)"
    doc = KindDoc(
        meaning=(
            'eval loss rises from its best while the train loss keeps falling (an extension of the '
            'contract)'),
        severity=(
            'warning'),
        evidence=(
            "`best_step`, `best`, `last`, `train_still_falling`; `noise` (the evals' noise the rise was "
            'measured against, from 12 evals)'),
        contract=(
            'eval loss rises while the train loss still falls (added by the health-detectors issue; '
            'start_step = the best eval step)'),
    )
    metrics = ("eval_loss",)

    min_points: int = 4
    min_rise: float = 0.03
    noise_points: int = 12

    def margin(self, n: int) -> float:
        """Noise widths the last evals' level must stand above the best of ``n``: the best of n
        draws lies some sqrt(2 ln n) widths low; two more for that level's own noise."""
        return 2 + 0.6 * math.sqrt(2 * math.log(n))

    def detect(self, series: Series) -> list[Finding] | Skipped:
        ok = np.isfinite(series.values)
        v, steps = series.values[ok], series.steps[ok]
        if len(v) < self.min_points:
            return Skipped(self.name, series.metric, f"only {len(v)} evals; needs {self.min_points}")
        best = int(np.argmin(v))
        if best >= len(v) - 2 or v[-1] < v[best] * (1 + self.min_rise) or spearman(v[best:]) < 0.6:
            return []
        sigma = noise(v) if len(v) >= self.noise_points else 0.0
        end = float(np.median(v[-min(3, len(v) - best - 1):]))  # the level of the last (up to) three
        if sigma and end - v[best] <= self.margin(len(v)) * sigma:
            return []
        train = (series.context or {}).get("train_loss")
        evidence: dict = {"best_step": int(steps[best]), "best": float(v[best]), "last": float(v[-1])}
        if sigma:
            evidence["noise"] = sigma
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


def noise(v: np.ndarray) -> float:
    """The standard deviation of a smooth curve's noise, from its second differences (which a
    smooth trend barely moves; each holds the noise of three values, 6 sigma^2), robustly."""
    if len(v) < 4:
        return 0.0
    return robust_scale(v[2:] - 2 * v[1:-1] + v[:-2]) / math.sqrt(6)
