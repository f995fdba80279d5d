"""Isolated spikes far above the local level (causal rolling median and MAD)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np

from losslens.detectors.base import Detector, KindDoc, Series, fmt_number, fmt_times
from losslens.detectors.relations import at_cycle_peak, blows_up_into_nan, same_series, structures
from losslens.detectors.stats import BLOCK, kept, rolling_median, runs_of
from losslens.findings import Finding, Severity, Skipped


@dataclass(frozen=True)
class Spike(Detector):
    """Isolated excursions of the loss far above its local level: a causal rolling median of the
    log-loss and its MAD give a robust z-score per record.

    window: records in the rolling median/MAD. z: the z-score a spike must reach.
    min_ratio: how many times the local level a spike must be (1.4 = 40 % above).
    history: records needed before the first one can be judged.
    cluster: records between flagged points that still make one spike (and the records after it
    checked for recovery). tail_factor: in heavy-tailed noise, a spike's excursion above the local
    level (log ratio) must also exceed this many times the 99th percentile of the others'.
    tail_share: the share of the downward residuals (about a centred rolling median) whose tail is
    fitted (Hill) to say how many excursions as large the run's own noise would make; noise_draws:
    a spike the noise would make this many times or more is information (1 or more: not
    reported)."""

    name = "spike"
    title = "isolated excursions far above the local level (causal rolling median and MAD)"
    doc = KindDoc(
        meaning=(
            'an isolated jump far above the local level (causal rule), with the grad-norm spike before '
            "it when logged, and how often the run's own noise makes one that large"),
        severity=(
            "warning; info when the run's own heavy-tailed noise makes such a draw often enough "
            '(`noise_draws_expected` >= 0.1, and no grad-norm spike before it)'),
        evidence=(
            '`peak_step`, `value`, `local_level` (causal rolling median), `ratio`, `z` (robust z on log '
            'loss), `records`, `recovered`, `grad_norm_spike_step` (when grad_norm spiked first), '
            '`noise_draws_expected` (how many excursions this large the noise makes in a run of this '
            'length) and `noise_tail_index` (the Hill index of its downward swings), from 200 records. '
            'Under `analyze --same-data`, a spike other runs share at the same step: `cause: "data"`, '
            '`chance` (coincidences as rare expected among independent runs; a warning at or below 0.01, '
            'information up to 0.05) and `shared_with` (each other run, its step and ratio)'),
        contract=(
            'isolated excursions far above the local level (one finding per spike or per cluster)'),
        extensions=(
            ('',
             'Extension (the real-frameworks issue): evidence.cause `data`, with the runs and steps '
             '(`shared_with`), when runs sharing a data order spike together (`analyze --same-data`)'),
        ),
    )
    metrics = ("loss",)

    window: int = 64
    z: float = 8.0
    min_ratio: float = 1.4
    history: int = 3
    cluster: int = 5
    tail_factor: float = 3.0
    tail_share: float = 0.02
    noise_draws: float = 0.1

    def explained(self, finding: Finding, findings: list[Finding]) -> bool:
        """A spike inside a ladder is a rung of it; inside a divergence it is part of the rise,
        unless it stands above the level the divergence ends at (the largest excursion of the
        run); in a short log, a spike at a cycle's peak is that cycle; one that ends where the
        loss turns NaN for good is the blow-up before it."""
        if blows_up_into_nan(finding, findings):
            return True
        if any(same_series(finding, g) and g.start_step <= finding.start_step <= g.end_step
               and (g.kind == "ladder" or finding.evidence["value"] <= g.evidence["end_level"])
               for g in findings if g.kind in ("ladder", "divergence")):
            return True
        return any(at_cycle_peak(finding, g) for g in structures(finding, findings))

    def same_event(self, finding: Finding) -> tuple:
        """Spikes are one event when they peak at the same step."""
        return (*super().same_event(finding), finding.evidence.get("peak_step"))

    def detect(self, series: Series) -> list[Finding] | Skipped:
        # (no copies where every value is usable: two arrays of the series' length less at the peak)
        v, steps = kept(np.isfinite(series.values) & (series.values > 0), series.values, series.steps)
        if len(v) <= self.history:
            return Skipped(self.name, series.metric, f"only {len(v)} points; needs {self.history + 1}")
        flagged, level, z, lagging, excursion = _rule(v, self.window, self.z, self.min_ratio,
                                                      self.history)
        if not flagged.any():
            return []
        # (a flag is only ever cleared below: the z-scores of the records flagged now are kept)
        at_flag = np.flatnonzero(flagged)
        z_at_flag = z[at_flag]
        del z
        # heavy-tailed noise: a spike must also stand out from the series' own tail, measured as
        # the excursion above the local level (log ratio): a z-score is not comparable along a
        # run (the MAD of a steep early fall is wide), and would let a ×2 draw late in the run
        # pass where a ×3 standout early in it does not
        # (about the rule's centred median: the lagging one stands off a steep fall, which would
        # count as the tail; in place where it can be: 80 MB an array at 10M records)
        rest = excursion[self.history:][~flagged[self.history:]]
        np.abs(rest, out=rest)
        if len(rest) >= 200:  # enough points for the series' own 99th percentile to mean something
            flagged &= excursion > self.tail_factor * float(np.quantile(rest, 0.99, overwrite_input=True))
        del rest, excursion
        if not flagged.any():
            return []
        groups = self._groups(flagged)
        # a group flagged against the noise about the trend that stays up is a rise, not a
        # spike: of it, only what the lagging median's own scale flags too (as before the trend
        # was taken out of the scale)
        rises = [g[~lagging[g]] for g in groups if not self._recovered(v, level, g)]
        if any(len(r) for r in rises):
            for r in rises:
                flagged[r] = False
            if not flagged.any():
                return []
            groups = self._groups(flagged)
        tops = np.array([g[np.argmax(v[g] / level[g])] for g in groups])
        draws, alpha = noise_draws(v, level, flagged, self.window, self.tail_share, tops) or (None, 0.0)
        grad = (series.context or {}).get("grad_norm")
        grad_spikes = _grad_spikes(grad, series.steps) if grad is not None else None
        z_top = z_at_flag[np.searchsorted(at_flag, tops)]
        out = []
        for i, (g, top, z) in enumerate(zip(groups, tops, z_top.tolist(), strict=True)):
            lead = _grad_lead(grad_spikes, int(steps[top])) if grad_spikes is not None else None
            # how often the run's own noise makes an excursion this large; a grad-norm spike
            # before it says it was an event, whatever the noise
            by_noise = None if draws is None or lead is not None else float(draws[i])
            if by_noise is not None and by_noise >= 1:
                continue  # an ordinary draw of this run's heavy-tailed noise
            ratio = float(v[top] / level[top])
            after = v[g[-1] + 1:g[-1] + 1 + self.cluster]
            recovered = self._recovered(v, level, g)
            summary = (f"{series.metric} spikes to {fmt_number(v[top])} at step {int(steps[top])}, "
                       f"{fmt_times(ratio)} the local level {fmt_number(level[top])} (z={z:.0f})")
            summary += (f", {len(g)} spiking records" if len(g) > 1 else "")
            summary += ("; back to the level right after" if recovered else
                        "; not recovered by the end of the cluster" if len(after) else
                        "; the log ends before it recovers")
            evidence: dict = {"peak_step": int(steps[top]), "value": float(v[top]),
                              "local_level": float(level[top]), "ratio": round(ratio, 3),
                              "z": round(z, 1), "records": int(len(g)),
                              "recovered": recovered}
            severity = Severity.WARNING
            if by_noise is not None:
                evidence["noise_draws_expected"] = round(by_noise, 4)
                evidence["noise_tail_index"] = round(alpha, 2)
            if lead is not None:
                evidence["grad_norm_spike_step"] = lead[0]
                summary += f"; grad_norm spiked first ({fmt_number(lead[1])} at step {lead[0]})"
            elif by_noise is not None and by_noise >= self.noise_draws:
                severity = Severity.INFO
                summary += (f"; likely a draw of this run's heavy-tailed noise (its downward swings "
                            f"fit a tail of index {alpha:.1f}: about {by_noise:.1f} such draws "
                            f"expected in {len(v)} records)")
            else:
                summary += "; a bad batch or an optimizer instability (check the data at that step)"
            out.append(Finding(self.name, severity, series.metric, int(steps[g[0]]),
                               int(steps[g[-1]]), summary, evidence, series.segment))
        return out


    def _groups(self, flagged: np.ndarray) -> list[np.ndarray]:
        """Flagged records, grouped: at most ``cluster`` records apart."""
        return runs_of(np.flatnonzero(flagged), self.cluster)

    def _recovered(self, v: np.ndarray, level: np.ndarray, g: np.ndarray) -> bool:
        """The ``cluster`` records after a group are back near the level (halfway to min_ratio)."""
        after = v[g[-1] + 1:g[-1] + 1 + self.cluster]
        return bool(len(after) and np.all(after < level[g[-1]] * (1 + (self.min_ratio - 1) / 2)))


SHORT = 5  # records of the short level that follows a steep fall


def spikes(v: np.ndarray, window: int, k: float, min_ratio: float, history: int
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Causal rule (only past values): (flagged, local level, z, lagging) on log(v). Shared with
    watch and replay. ``lagging``: flagged with the scale of the deviations from the lagging
    median alone (the trend in it): what a detrended scale flags beyond it in a steep rise is
    the rise, unless it comes back down (``Spike.detect`` asks)."""
    return _rule(v, window, k, min_ratio, history)[:4]


def _rule(v: np.ndarray, window: int, k: float, min_ratio: float, history: int
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``spikes``, and each record's excursion log(v) less the centred rolling median of log(v)
    over ``window // 2`` records each side that its detrended scale is taken about
    (``Spike.detect``'s tail test measures the excursions about it too: one median, not two).
    On a series of more than ``BLOCK`` records, three arrays of its length are held at most
    (each 80 MB at 10M records): the log of the values is taken again where it is needed, and
    the rest is made and used a block at a time (a rolling median's block starts its window
    earlier: the same medians), the excursions twice (for the detrended scale, then kept)."""
    n = len(v)
    # (in blocks only where every value is finite: a NaN's gap is filled across the whole series)
    spans = _spans(n) if n > BLOCK and np.isfinite(v).all() else [(0, n)]
    # the median of the ``window`` values before each one: log(v)'s causal median, a record late
    med = _late_median(partial(_logs, v), n, n, window, spans)
    # a spike is also that many times the median of the few records before it (the lagging
    # median stands above a steep fall)
    big = np.empty(n, dtype=bool)
    for a, b in spans:
        level = np.exp(med[a:b])
        if n > SHORT:
            np.fmin(level, _late_rows(partial(_rows, v), n, n, SHORT, a, b), out=level)
        level *= min_ratio
        big[a:b] = v[a:b] >= level
    # the scale: the median of each previous value's deviation from that median
    scale = _late_median(partial(_deviations, v, med), n - 1, n, window, spans)
    # flagged with that scale alone, the trend in it (``lagging``): its own floor, half its median
    lag_floor = _floor(scale, 1.4826, history)
    lagging = np.empty(n, dtype=bool)
    for a, b in spans:
        s = scale[a:b] * 1.4826
        np.maximum(np.nan_to_num(s, nan=0.0, copy=False), lag_floor, out=s)
        s *= k
        lagging[a:b] = np.greater(np.subtract(np.log(v[a:b]), med[a:b]), s) & big[a:b]
    lagging[:history] = False
    # in a steep fall (or rise) the deviations from a median that lags it are the trend, not the
    # noise: a ×4 spike early in a run read as z=6. The scale is also taken about a centred
    # median, from records at least half a window back (their centred window is then all past),
    # and the smaller of the two is the noise
    centred = 2 * (window // 2) + 1
    excursion = _excursion(v, centred, 0, n) if len(spans) == 1 else None
    _fmin_detrended(scale, partial(_rows, excursion) if excursion is not None
                    else partial(_excursion, v, centred), n, window, spans)
    scale *= 1.4826
    floor = _floor(scale, 1.0, history)
    np.maximum(np.nan_to_num(scale, nan=0.0, copy=False), floor, out=scale)
    z = scale  # (made in its place, a block at a time)
    for a, b in spans:
        z[a:b] = np.subtract(np.log(v[a:b]), med[a:b]) / scale[a:b]
    z[:history] = 0.0
    flagged = (z > k) & big
    flagged[:history] = False
    if excursion is None:
        excursion = np.empty(n)
        for a, b in spans:
            excursion[a:b] = _excursion(v, centred, a, b)
    return flagged, np.exp(med, out=med), np.nan_to_num(z, copy=False), lagging, excursion


def _rows(x: np.ndarray, a: int, b: int) -> np.ndarray:
    return x[a:b]


def _logs(v: np.ndarray, a: int, b: int) -> np.ndarray:
    return np.log(v[a:b])


def _deviations(v: np.ndarray, med: np.ndarray, a: int, b: int) -> np.ndarray:
    """Rows a..b-1 of each log value's deviation from the median of those before the next one."""
    return np.abs(np.subtract(np.log(v[a:b]), med[a + 1:b + 1]))


def _spans(n: int) -> list[tuple[int, int]]:
    """[0, n) in blocks of BLOCK records."""
    return [(a, min(a + BLOCK, n)) for a in range(0, n, BLOCK)]


def _floor(s: np.ndarray, factor: float, history: int) -> float:
    """A scale's floor: half the median of ``s * factor`` past the first ``history`` records
    (NaN left out, as ``np.nanmedian``), at least 1e-3; 0.001 where there are no such records."""
    if len(s) <= history:
        return 1e-3
    part = s[history:] * factor if factor != 1.0 else s[history:].copy()
    return max(float(np.nanmedian(part, overwrite_input=True)) * 0.5, 1e-3)


def _trailing(get: Callable[[int, int], np.ndarray], w: int, lo: int, hi: int) -> np.ndarray:
    """Rows lo..hi-1 of the causal rolling median over ``w`` records (fewer at the start) of an
    array whose rows s..e-1 are ``get(s, e)``: read from ``w`` - 1 rows before ``lo``, the same
    medians as over the whole array."""
    s = max(0, lo - w + 1)
    return rolling_median(get(s, hi), w, center=False)[lo - s:]


def _late_rows(get: Callable[[int, int], np.ndarray], size: int, n: int, w: int, a: int, b: int
               ) -> np.ndarray:
    """Rows a..b-1 of the causal rolling median over ``w`` records of an array of ``size`` rows
    (``_trailing``), one record late, for ``n`` records: out[i] is the median up to row i - 1,
    out[0] the first row's (NaN where there is none, n < 2)."""
    if n < 2:
        return np.full(b - a, np.nan)
    m = _trailing(get, w, max(a - 1, 0), min(b, size))
    return m[:b - a] if a else np.concatenate((m[:1], m[:b - 1]))


def _late_median(get: Callable[[int, int], np.ndarray], size: int, n: int, w: int,
                 spans: list[tuple[int, int]]) -> np.ndarray:
    """``_late_rows`` of the ``n`` records as a new array, made over ``spans``."""
    out = np.empty(n)
    for a, b in spans:
        out[a:b] = _late_rows(get, size, n, w, a, b)
    return out


def _excursion(v: np.ndarray, w: int, a: int, b: int) -> np.ndarray:
    """Rows a..b-1 of log(v) less its centred rolling median over ``w`` records (w odd, see
    ``rolling_median``): taken whole where the rows are all of v or v is no longer than w,
    else as the trailing medians ``w // 2`` records on (``_trailing``), and the last ``w // 2``
    over the last ``w`` records alone (as ``rolling_median`` takes them)."""
    n, h = len(v), w // 2
    if (a, b) == (0, n) or n <= w:
        x = np.log(v)
        return np.subtract(x[a:b], rolling_median(x, w, center=True)[a:b])
    off = max(0, a - h)  # (x's first record)
    x = np.log(v[off:min(n, b + h)])
    out = np.empty(b - a)
    mid = min(b, n - h)
    if a < mid:
        out[:mid - a] = _trailing(lambda s, e: x[s - off:e - off], w, a + h, mid + h)
    if b > n - h:
        tail = rolling_median(np.log(v[n - w:]), w, center=True)[w - h:]
        out[max(a, n - h) - a:] = tail[max(a, n - h) - (n - h):b - (n - h)]
    return np.subtract(x[a - off:b - off], out, out=out)


def _fmin_detrended(scale: np.ndarray, excursion: Callable[[int, int], np.ndarray], n: int, window: int,
                    spans: list[tuple[int, int]]) -> None:
    """``scale`` made, in place, the smaller of itself and each record's detrended scale: the
    median absolute excursion (about the centred median, over ``window // 2`` records each side;
    rows s..e-1 of it are ``excursion(s, e)``) of the ``window`` records that end half a window
    before it, so that only values before the record enter it. Records with fewer than
    ``window // 2`` records that far back keep their scale."""
    h = window // 2
    if h < 1 or n <= 2 * h + 1:
        return
    for a, b in spans:
        a = max(a, 2 * h + 1)
        if a >= b:
            continue
        # record i: the median of |excursion| up to i - h - 1 (centred up to i - 1)
        typical = _trailing(lambda s, e: np.abs(excursion(s, e)), window, a - h - 1, b - h - 1)
        np.fmin(scale[a:b], typical, out=scale[a:b])


def noise_draws(v: np.ndarray, level: np.ndarray, flagged: np.ndarray, window: int, share: float,
                at: np.ndarray) -> tuple[np.ndarray, float] | None:
    """How many upward excursions as large as those of the records ``at`` the run's own noise
    would make in ``len(v)`` records, and the noise's tail index; None below 200 usable records.

    ``level`` is the causal median of the ``window`` records before each one (``spikes``); taken
    ``window // 2`` records later it is centred on the record (a causal median lags a steep fall,
    and its lag would read as noise). Only the downward residuals are fitted: data spikes go up,
    never down, so the lower tail is the noise alone. A Pareto tail (Hill estimator) over the top
    ``share`` of them (10 to 200 points) is extrapolated to each excursion: light-tailed noise
    (Gaussian, Laplace) fits a large index and explains nothing far out, Student-t noise a small
    one that explains its own ×1.5 draws."""
    h = window // 2
    if len(v) <= h:
        return None
    r = np.divide(v[:-h], level[h:])
    np.log(r, out=r)
    kept = ~flagged[:-h] & np.isfinite(r)
    usable = int(kept.sum())
    if usable < 200:
        return None
    down = -r[kept & (r < 0)]
    k = int(np.clip(round(share * usable), 10, 200))
    if len(down) <= k:
        return None
    top = np.partition(down, len(down) - k - 1)[len(down) - k - 1:]
    u = float(top[0])  # the (k+1)-th largest: the tail starts above it
    spread = float(np.mean(np.log(top[1:] / u))) if u > 0 else 0.0
    if spread <= 0:
        return None
    alpha = 1.0 / spread
    # the candidates' own excursions about the same centred level (the causal one in the last h)
    e = np.where(at < len(r), r[np.minimum(at, len(r) - 1)], np.log(v[at] / level[at]))
    return k * (len(v) / usable) * (np.maximum(e, u) / u) ** -alpha, alpha


def _grad_spikes(grad: np.ndarray, steps: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The steps at which the grad norm spikes, and its values there (once per series: every
    loss spike is then looked up in them, not a rolling median run per spike); None with fewer
    than 8 usable values."""
    ok = np.isfinite(grad) & (grad > 0)
    if ok.sum() < 8:
        return None
    g, s = grad[ok], steps[ok]
    flagged, _, _, _ = spikes(g, 64, 6.0, 2.0, 3)
    return s[flagged], g[flagged]


def _grad_lead(grad_spikes: tuple[np.ndarray, np.ndarray], at: int) -> tuple[int, float] | None:
    """The first grad-norm spike within the 3 steps up to ``at`` (a loss spike's step), if any."""
    s, g = grad_spikes
    i = int(np.searchsorted(s, at - 3, "left"))
    if i >= len(s) or s[i] > at:
        return None
    return int(s[i]), float(g[i])
