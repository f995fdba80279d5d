"""Multimodal: after removing the trend the metric falls into separated bands (one per length
bucket, or k × a level when a loss accumulates)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from losslens.detectors.base import Detector, KindDoc, Series
from losslens.detectors.relations import same_series
from losslens.detectors.stats import detrend, gmm_1d, robust_scale, runs_test, settled, spearman
from losslens.findings import Finding, Severity, Skipped

MAX_FIT = 2_000
LR_BANDS = 0.5  # |rank correlation| of band and logged LR that makes the bands the schedule's


BLOCK = 1 << 16  # records labelled at a time (a 10M-record run holds no 10M × bands array)


def nearest(r: np.ndarray, means: np.ndarray, block: int = BLOCK) -> np.ndarray:
    """Each record's band: the index of the mean nearest to it (the first of two as near), taken
    ``block`` records at a time."""
    label = np.empty(len(r), dtype=np.intp)
    for lo in range(0, len(r), block):
        part = r[lo:lo + block]
        label[lo:lo + block] = np.argmin(np.abs(part[:, None] - means[None, :]), axis=1)
    return label


def _ashman(means: np.ndarray, sds: np.ndarray, i: int) -> float:
    return float(abs(means[i + 1] - means[i]) * math.sqrt(2 / (sds[i] ** 2 + sds[i + 1] ** 2)))


def _merge(weights: np.ndarray, means: np.ndarray, sds: np.ndarray, min_separation: float
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Merge adjacent mixture components closer than ``min_separation`` (one band fitted by two
    Gaussians is still one band)."""
    w, m, s = list(weights), list(means), list(sds)
    while len(m) > 1:
        seps = [_ashman(np.array(m), np.array(s), i) for i in range(len(m) - 1)]
        i = int(np.argmin(seps))
        if seps[i] >= min_separation:
            break
        tw = w[i] + w[i + 1]
        mean = (w[i] * m[i] + w[i + 1] * m[i + 1]) / tw
        var = sum(w[j] * (s[j] ** 2 + (m[j] - mean) ** 2) for j in (i, i + 1)) / tw
        w[i:i + 2], m[i:i + 2], s[i:i + 2] = [tw], [mean], [math.sqrt(var)]
    return np.array(w), np.array(m), np.array(s)


def _merge_pair(weights: np.ndarray, means: np.ndarray, sds: np.ndarray, i: int
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bands ``i`` and ``i + 1`` made one."""
    merged = _merge(weights[i:i + 2], means[i:i + 2], sds[i:i + 2], math.inf)
    return tuple(np.concatenate([x[:i], m, x[i + 2:]])  # type: ignore[return-value]
                 for x, m in zip((weights, means, sds), merged, strict=True))


@dataclass(frozen=True)
class Multimodal(Detector):
    """The de-trended loss falls into separated bands (a Gaussian mixture chosen by BIC, modes
    merged when close); `harmonic` when the bands stand at ~1:2:3 of the first.

    min_points: records needed. window: records in the de-trending median (at least a quarter of
    the run). max_modes: mixture components tried. min_share: the least share of records in a band.
    min_separation: band centres apart by this many band widths. min_bic_gain: BIC improvement
    over one band. max_valley: the density between bands, as a share of the peaks.
    harmonic_tolerance: distance from an integer ratio for `harmonic`. min_span: share of the run
    between a band's first and last record."""

    name = "multimodal"
    title = "the de-trended metric falls into two or more separated bands"
    doc = KindDoc(
        meaning=(
            'the de-trended loss falls into separated bands (one per length bucket) met in like '
            'proportions all along the run; `harmonic` when they stand at 1:2:3; a runs test says '
            'whether high-loss records come in runs; `info` with cause `lr_schedule` when the loss '
            'repeats with the logged LR (restarts)'),
        severity=(
            'error when `harmonic`, or when bands are far apart and come in runs; else warning'),
        evidence=(
            "`modes` (band centres in the metric's units), `shares`, `separation` (Ashman's D, "
            'smallest), `bic_gain` (mixture vs one Gaussian), `harmonic` (modes at ~1:2:3), `runs_z`, '
            '`runs_p` (Wald–Wolfowitz runs test: do high-band records cluster?); `cause` `lr_schedule` '
            "(then `info`) when a periodicity of the same series is the logged LR's, or when the band a "
            'record falls in follows the logged LR (`lr_rank_correlation`, |ρ| >= 0.5: warm '
            'restarts, cyclic or step schedules)'),
        contract=(
            'the de-trended metric falls into two or more separated bands (evidence: modes, shares, '
            '`harmonic` true when the modes stand at ~1:2:3 of the first)'),
    )
    metrics = ("loss",)

    min_points: int = 100
    window: int = 201
    max_modes: int = 4
    min_share: float = 0.05
    min_separation: float = 2.5
    min_bic_gain: float = 30.0
    max_valley: float = 0.5
    harmonic_tolerance: float = 0.15
    min_span: float = 0.3

    def reconsidered(self, finding: Finding, findings: list[Finding], evaluated: bool) -> Finding:
        """Bands of a loss that repeats with the logged LR (a periodicity finding of cause
        ``lr_schedule`` on the same series) are the schedule's high- and low-LR phases:
        information."""
        lr = next((g for g in findings if same_series(finding, g) and g.kind == "periodicity"
                   and g.evidence.get("cause") == "lr_schedule"), None)
        if lr is None:
            return finding
        return dataclasses.replace(
            finding, severity=Severity.INFO, evidence={**finding.evidence, "cause": "lr_schedule"},
            summary=finding.summary.split("; ", 1)[0] + f"; the logged LR repeats every ~"
            f"{lr.evidence['period_steps']:.4g} steps with the loss: its restarts explain the bands")

    def detect(self, series: Series) -> list[Finding] | Skipped:
        v, steps = series.finite()
        if (short := self.too_short(series, len(v), self.min_points)) is not None:
            return short
        window = max(self.window, len(v) // 4) | 1
        r, trend = detrend(v, window, robust=False)  # a median jumps between bands
        settle = settled(r, window)
        r, trend = r[settle], trend[settle]
        if robust_scale(r) == 0:
            return []
        x = r if len(r) <= MAX_FIT else r[np.linspace(0, len(r) - 1, MAX_FIT).astype(int)]
        fits = [gmm_1d(x, k) for k in range(1, self.max_modes + 1)]
        best = min(range(len(fits)), key=lambda i: fits[i][3])
        gain = fits[0][3] - fits[best][3]
        if best == 0 or gain < self.min_bic_gain:
            return []
        weights, means, sds = _merge(*fits[best][:3], self.min_separation)
        keep = weights >= self.min_share
        weights, means, sds = weights[keep], means[keep], sds[keep]
        if len(means) < 2:
            return []
        # adjacent modes need a real valley in the density between them, else they are one band
        while len(means) > 1:
            flat = [i for i in range(len(means) - 1)
                    if not self._valley(x, means[i], means[i + 1], float(sds.min()))]
            if not flat:
                break
            i = flat[0]
            weights, means, sds = _merge_pair(weights, means, sds, i)
        if len(means) < 2:
            return []
        # in like proportions all along: a band that is one stretch of the run (a curve the
        # de-trending could not follow, a fast early fall) plus a few stray draws in heavy-tailed
        # noise is not a band the batches switch between; each band holds at least a third of its
        # overall share in three quarters of the run out of four. A band that does not is merged
        # into its nearest neighbour (one band whose level wanders, fitted by two Gaussians).
        while True:
            label = nearest(r, means)
            overall = np.bincount(label, minlength=len(means)) / len(label)
            quarters = np.array([np.bincount(q, minlength=len(means)) / len(q)
                                 for q in np.array_split(label, 4)])
            uneven = np.flatnonzero((quarters >= overall / 3).sum(axis=0) < 3)
            if not len(uneven) or len(means) < 2:
                break
            i = int(uneven[0])
            lower = i == len(means) - 1 or (i > 0 and means[i] - means[i - 1] < means[i + 1] - means[i])
            j = i - 1 if lower else i
            weights, means, sds = _merge_pair(weights, means, sds, j)
        if len(means) < 2:
            return []
        # bands the metric keeps switching between, not a one-off stretch at another level (the
        # warm-up's fall, a level shift): every band is met all along the run, more than once
        for b in range(len(means)):
            at = np.flatnonzero(label == b)
            visits = 1 + int(np.sum(np.diff(at) > 1)) if at.size else 0
            if at.size == 0 or visits < 3 or (at[-1] - at[0]) < self.min_span * len(r):
                return []
        seps = [_ashman(means, sds, i) for i in range(len(means) - 1)]
        level = float(np.median(trend))
        ratio_scale = np.nanmin(v) > 0
        centres = means * level if ratio_scale else means + level
        harmonic = bool(ratio_scale and centres[0] > 0 and all(
            abs(c / centres[0] - round(c / centres[0])) <= self.harmonic_tolerance
            and round(c / centres[0]) >= 1 for c in centres[1:])
            and len({round(c / centres[0]) for c in centres}) == len(centres))
        # bucket runs: do records of the upper bands come in runs longer than chance?
        cut = (means[0] + means[1]) / 2
        z, p_runs = runs_test(r > cut)
        evidence = {
            "modes": [round(float(c), 6) for c in centres],
            "shares": [round(float(w), 4) for w in weights / weights.sum()],
            "separation": round(float(min(seps)), 3),
            "bic_gain": round(float(gain), 1),
            "harmonic": harmonic,
            "runs_z": round(z, 3),
            "runs_p": float(f"{p_runs:.3g}"),
        }
        bands = ", ".join(f"{c:.3g} ({w:.0%})" for c, w in zip(centres, weights / weights.sum(),
                                                                 strict=True))
        summary = f"{series.metric} falls into {len(centres)} separated bands around {bands}"
        if harmonic:
            summary += " standing at ~1:2:3 of the first: an accumulated (not averaged) loss?"
        elif p_runs < 0.01:
            summary += (f"; high-band records come in runs (runs test p={p_runs:.2g}): batches of "
                        "one length bucket in a row?")
        else:
            summary += "; loss level depends on the batch (e.g. its length bucket)"
        strong = harmonic or (p_runs < 0.01 and min(seps) >= 3)
        severity = Severity.ERROR if strong else Severity.WARNING
        follows = self._follows_lr(series, label, settle)
        if follows is not None:  # the schedule's phases (restarts, cycles, steps) are the bands
            evidence.update(cause="lr_schedule", lr_rank_correlation=follows)
            severity = Severity.INFO
            summary = (summary.split("; ", 1)[0] + f"; the band a record falls in follows the logged "
                       f"LR (rank correlation {follows:+.2f}): the schedule's phases, not the data")
        return [Finding(self.name, severity, series.metric, int(steps[0]), int(steps[-1]), summary,
                        evidence, series.segment)]

    def _follows_lr(self, series: Series, label: np.ndarray, settle: slice) -> float | None:
        """The rank correlation of each record's band with the logged LR at it, when it is at
        least LR_BANDS (either sign: a warm restart raises the loss with the LR): bands that are
        the schedule's phases. None without a moving LR."""
        lr = (series.context or {}).get("lr")
        if lr is None:
            return None
        x = lr[np.isfinite(series.values)][settle]
        ok = np.isfinite(x)
        if ok.sum() < 10 or np.ptp(x[ok]) <= 0:
            return None
        rho = spearman(label[ok].astype(np.float64), x[ok])
        return round(rho, 3) if abs(rho) >= LR_BANDS else None

    def _valley(self, x: np.ndarray, a: float, b: float, scale: float) -> bool:
        """A kernel density estimate dips between modes ``a`` and ``b`` (bandwidth by Silverman's
        rule on the narrowest band's spread: the whole sample's would blur the bands)."""
        bw = 1.06 * scale * len(x) ** -0.2
        if bw <= 0:
            return False
        grid = np.linspace(a, b, 64)
        z = (grid[:, None] - x[None, :]) / bw
        dens = np.exp(-0.5 * z * z).sum(axis=1)
        valley = float(dens[8:-8].min())
        peaks = min(float(dens[:8].max()), float(dens[-8:].max()))
        return peaks > 0 and valley <= self.max_valley * peaks
