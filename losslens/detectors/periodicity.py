"""Periodicity: a significant periodic component of the de-trended metric: a narrow peak of the
periodogram above its local background, so that red noise and random runs of like batches are not
called periodic."""

from __future__ import annotations

import math

import numpy as np

from losslens.detectors.base import Detector, Series
from losslens.detectors.stats import ar1, detrend, rank_sum_p, regular_grid, settled
from losslens.findings import Finding, Severity, Skipped

KNOWN = {50: "Hugging Face group_by_length mega-batch (50 steps)"}


def default_window(n: int, window: int = 201) -> int:
    """The de-trending window for a grid of ``n`` points (odd)."""
    return max(window, n // 4) | 1


def spectrum(grid: np.ndarray, window: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(frequencies per grid step, periodogram, de-trended residual) of an evenly spaced series,
    its first half-window left out (see ``settled``)."""
    r, _ = detrend(grid, window)
    r = r[settled(r, window)]
    r = r - r.mean()
    return np.fft.rfftfreq(len(r)), np.abs(np.fft.rfft(r)) ** 2 / len(r), r


def _background(power: np.ndarray, width: float = 1.5, min_bins: int = 7) -> np.ndarray:
    """The smooth continuum under a periodogram: medians over bins that each span a factor
    ``width`` in frequency (at least ``min_bins`` ordinates), interpolated in log-log."""
    m = len(power)
    edges = [1]
    while edges[-1] < m:
        edges.append(min(m, max(edges[-1] + min_bins, int(edges[-1] * width))))
    bins = list(zip(edges, edges[1:], strict=False))
    centres = [math.sqrt(a * (b - 1)) if b - 1 > a else float(a) for a, b in bins]  # geometric
    levels = [float(np.median(power[a:b])) for a, b in bins]
    if len(centres) < 2:
        return np.full(m, max(levels[0] if levels else 1.0, 1e-300))
    k = np.log(np.maximum(np.arange(m), 1).astype(np.float64))
    return np.exp(np.interp(k, np.log(centres), np.log(np.maximum(levels, 1e-300))))


class Periodicity(Detector):
    """A significant periodic component of the de-trended loss: each periodogram ordinate is tested
    against the spectrum's local background; known periods (epoch, HF mega-batch) are named.

    min_points: records needed. window: records in the de-trending median. alpha: the p-value a
    period must beat. min_share: its least share of the variance; strong_share: share for an error.
    match_tolerance: relative distance to a known period that still matches it."""

    name = "periodicity"
    title = "a significant periodic component (period in steps), against a red-noise null"
    metrics = ("loss",)

    def __init__(self, min_points: int = 64, window: int = 201, alpha: float = 1e-3,
                 min_share: float = 0.04, strong_share: float = 0.2, match_tolerance: float = 0.05):
        self.min_points = min_points
        self.window = window
        self.alpha = alpha
        self.min_share = min_share
        self.strong_share = strong_share
        self.match_tolerance = match_tolerance

    def detect(self, series: Series) -> list[Finding] | Skipped:
        v, steps = series.finite()
        if (short := self.too_short(series, len(v), self.min_points)) is not None:
            return short
        grid, spacing = regular_grid(steps, v)
        n = len(grid)
        epoch_len = self._epoch_length(series)
        found = self._scan(grid, spacing, default_window(n, self.window), None)
        if found is None:
            return self._epoch_drops(series, epoch_len)
        period, share, p, phi = found
        matches = self._known(period, epoch_len)
        evidence = {"period_steps": round(period, 2), "share_of_variance": round(share, 4),
                    "p_value": float(f"{p:.3g}"), "ar1": round(phi, 3), "grid_spacing": spacing,
                    "matches": matches}
        if any(mm.startswith("epoch") for mm in matches):
            severity = Severity.INFO
            why = "at the epoch length: the loss drops at each epoch start (the model has seen the data)"
        else:
            severity = Severity.ERROR if share >= self.strong_share else Severity.WARNING
            why = (f"it matches {matches[0]}" if matches else
                   "data order repeating (sorted or bucketed batches), or a periodic job")
        summary = (f"{series.metric} has a period of ~{period:.4g} steps ({share:.0%} of the "
                   f"de-trended variance, p={p:.2g} above the spectrum's background); {why}")
        return [Finding(self.name, severity, series.metric, int(steps[0]), int(steps[-1]), summary,
                        evidence, series.segment)]

    def _scan(self, grid: np.ndarray, spacing: float, window: int, target: float | None
              ) -> tuple[float, float, float, float] | None:
        """(period, share of variance, p-value, AR(1) coefficient) of the strongest significant
        period; with ``target`` only that period is tested (no multiple-testing correction)."""
        freqs, power, r = spectrum(grid, window)
        n = len(r)
        if not np.any(r):
            return None
        longest = min(n / 4, window / 2)  # >= 4 cycles seen, and passed by the de-trending
        band = (freqs >= 1.0 / longest) & (freqs <= 0.5)
        if target is not None:
            band = (freqs >= 1.0 / (n / 3)) & (freqs <= 0.5)
        if band.sum() < 4:
            return None
        # each ordinate against the smooth continuum around it (medians over frequency bins a
        # factor 1.5 wide): red noise, a random walk left by the de-trending or white noise is
        # the background, a period a narrow peak above it; ordinates are ~Exp under the null
        phi = ar1(r)
        ratio = power[band] / _background(power)[band] * math.log(2)
        if target is None:
            k = int(np.argmax(ratio))
            p = min(1.0, int(band.sum()) * math.exp(-float(ratio[k])))  # Bonferroni
        else:
            k = int(np.argmin(np.abs(freqs[band] - spacing / target)))
            p = math.exp(-float(ratio[k]))
        share = float(power[band][k] / power[band].sum())
        if p >= self.alpha or share < self.min_share:
            return None
        return spacing / float(freqs[band][k]), share, p, phi

    def _epoch_drops(self, series: Series, epoch_len: float | None) -> list[Finding]:
        """The epoch staircase: the level drops at every epoch start and stays flat between."""
        epoch = (series.context or {}).get("epoch")
        if epoch is None or epoch_len is None:
            return []
        v, steps = series.values, series.steps
        whole = np.floor(np.nan_to_num(epoch, nan=-1.0) + 1e-9)
        starts = np.flatnonzero((whole[1:] > whole[:-1]) & (whole[:-1] >= 0)) + 1
        per_epoch = len(v) / max(1.0, float(np.nanmax(epoch)))
        k = int(max(3, min(10, per_epoch // 4)))
        drops, ps = [], []
        for b in starts:
            before, after = v[max(0, b - k):b], v[b:b + k]
            if len(before) < 3 or len(after) < 3:
                continue
            drops.append(1 - float(np.median(after) / np.median(before)))
            ps.append(rank_sum_p(before, after))
        if len(drops) < 2 or not all(d >= 0.03 and p < 0.01 for d, p in zip(drops, ps, strict=True)):
            return []
        at = [int(steps[b]) for b in starts][:len(drops)]
        listed = ", ".join(f"{-d:.0%} at {s}" for d, s in zip(drops, at, strict=True))
        summary = (f"{series.metric} drops at each epoch start ({listed}) and stays flat between: "
                   f"the model has memorised the data it saw (expected with several epochs; watch "
                   f"the eval loss)")
        evidence = {"period_steps": round(epoch_len, 2), "epoch_starts": at,
                    "drops": [round(d, 4) for d in drops], "p_values": [float(f"{p:.3g}") for p in ps],
                    "matches": [f"epoch length ({epoch_len:.0f} steps)"]}
        return [Finding(self.name, Severity.INFO, series.metric, int(steps[0]), int(steps[-1]),
                        summary, evidence, series.segment)]

    def _epoch_length(self, series: Series) -> float | None:
        epoch = (series.context or {}).get("epoch")
        if epoch is None:
            return None
        ok = np.isfinite(epoch)
        if ok.sum() <= 2 or np.ptp(epoch[ok]) <= 0:
            return None
        slope = float(np.polyfit(epoch[ok], series.steps[ok].astype(float), 1)[0])
        return slope if slope > 0 else None

    def _known(self, period: float, epoch_len: float | None) -> list[str]:
        tol = self.match_tolerance
        out = [name for p, name in KNOWN.items() if abs(period - p) <= tol * p]
        if epoch_len is not None:
            if abs(period - epoch_len) <= tol * epoch_len:
                out.append(f"epoch length ({epoch_len:.0f} steps)")
            elif abs(period - epoch_len / 2) <= tol * epoch_len / 2:
                out.append(f"epoch length / 2 ({epoch_len / 2:.0f} steps)")
        return out
