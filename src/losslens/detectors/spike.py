"""Isolated spikes far above the local level (causal rolling median and MAD)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from losslens.detectors.base import Detector, KindDoc, Series, fmt_number, fmt_times
from losslens.detectors.relations import at_cycle_peak, blows_up_into_nan, same_series, structures
from losslens.detectors.stats import kept, rolling_median, runs_of
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
    At most six arrays of the series' length are held at once (each 80 MB at 10M records): the
    later ones are made in the place of those they follow."""
    # in place where it can be: on a 10M-record loss each temporary is 80 MB
    x = np.log(v)
    n = len(x)
    # the median of the ``window`` values before each one: x's causal median, a record late
    # (a median over the previous values with a NaN in front costs two more arrays to fill)
    med = _late(rolling_median(x, window, center=False) if n else x, n)
    dev = np.empty_like(x)  # each previous value's deviation from that median
    dev[:1] = np.nan
    np.abs(np.subtract(x[:-1], med[1:], out=dev[1:]), out=dev[1:])
    del x  # (taken again below: one array less while the deviations' median is taken)
    scale = _late(rolling_median(dev[1:], window, center=False) if n > 1 else dev[1:], n)
    del dev
    x = np.log(v)
    # in a steep fall (or rise) the deviations from a median that lags it are the trend, not the
    # noise: a ×4 spike early in a run read as z=6. The scale is also taken about a centred
    # median, from records at least half a window back (their centred window is then all past),
    # and the smaller of the two is the noise
    centred = rolling_median(x, 2 * (window // 2) + 1, center=True)
    detrended = _detrended_scale(x, centred, window)
    # (polars' median may be a read-only view of its own buffer: then a new array)
    excursion = np.subtract(x, centred, out=centred if centred.flags.writeable else None)
    lagging = scale.copy()
    np.fmin(scale, detrended, out=scale)
    del detrended
    scale *= 1.4826
    lagging *= 1.4826
    z = np.subtract(x, med, out=x)
    level = np.exp(med, out=med)
    # ...and the lagging median stands above a steep fall: a spike is also that many times the
    # median of the few records before it
    recent = _late(rolling_median(v, SHORT, center=False), n) if n > SHORT else level.copy()
    np.fmin(level, recent, out=recent)
    recent *= min_ratio
    big = v >= recent
    del recent
    for s in (lagging, scale):  # (each with its own floor: half its median)
        floor = np.nanmedian(s[history:]) * 0.5 if n > history else 0.0
        np.maximum(np.nan_to_num(s, nan=0.0, copy=False), max(floor, 1e-3), out=s)
    lagging *= k
    lagging = np.greater(z, lagging) & big
    lagging[:history] = False
    z /= scale
    del scale
    z[:history] = 0.0
    flagged = (z > k) & big
    flagged[:history] = False
    return flagged, level, np.nan_to_num(z, copy=False), lagging, excursion


def _detrended_scale(x: np.ndarray, centred: np.ndarray, window: int) -> np.ndarray:
    """For each record, the median absolute deviation of the ``window`` records that end half a
    window before it from ``centred``, their centred rolling median (over ``window // 2``
    records each side): only values before the record enter it. NaN where fewer than
    ``window // 2`` records are that far back."""
    n, h = len(x), window // 2
    if h < 1 or n <= 2 * h + 1:
        return np.full(n, np.nan)
    res = np.subtract(x, centred)
    np.abs(res, out=res)
    typical = rolling_median(res, window, center=False)  # of res[j - window + 1 .. j]
    out = res  # (its buffer: res is read)
    out[:2 * h + 1] = np.nan
    out[2 * h + 1:] = typical[h:n - h - 1]  # record i: res up to i - h - 1, centred up to i - 1
    return out


def _late(m: np.ndarray, n: int) -> np.ndarray:
    """``m`` one record later, as a new array of ``n``: out[i] = m[i - 1], and out[0] = m[0], the
    first value a backward fill gives it (NaN with nothing to fill from, n < 2)."""
    out = np.empty(n)
    if n:
        out[0] = m[0] if n > 1 else np.nan
        out[1:] = m[:n - 1]
    return out


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
