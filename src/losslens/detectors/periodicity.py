"""Periodicity: a significant periodic component of the de-trended metric: a narrow peak of the
periodogram above its local background, so that red noise and random runs of like batches are not
called periodic."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from losslens.detectors.base import Detector, KindDoc, Series
from losslens.detectors.relations import ladder_periods, structures
from losslens.detectors.stats import (
    ar1,
    autocorrelation,
    detrend,
    f_sf,
    kept,
    median_gap,
    rank_sum_p,
    regular_grid,
    settled,
)
from losslens.findings import Finding, Severity, Skipped

KNOWN = {50: "Hugging Face group_by_length mega-batch (50 steps)"}


def default_window(n: int, window: int = 201) -> int:
    """The de-trending window for a grid of ``n`` points (odd)."""
    return max(window, n // 4) | 1


def spectrum(grid: np.ndarray, window: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(frequencies per grid step, periodogram, de-trended residual) of an evenly spaced series,
    its first half-window left out (see ``settled``)."""
    # (in place where it can be: the trend is let go at once, the residual and the power are
    # made in their own arrays; 80 MB each at 10M records)
    r = detrend(grid, window)[0]
    r = r[settled(r, window)]
    r -= r.mean()
    power = np.abs(np.fft.rfft(r))
    power **= 2
    power /= len(r)
    return np.fft.rfftfreq(len(r)), power, r


@dataclass(frozen=True)
class Fold:
    """The series folded at one period: its share of the variance, its BIC as a model, and the
    autocorrelation at that lag."""
    period: float
    share: float  # share of the de-trended variance in the folded profile, beyond chance
    bic: float  # the folded profile as a model of the residual: n·log(SSW/n) + bins·log(n)
    acf: float = 0.0
    ssw: float = math.inf  # the scatter left within the phase bins
    bins: int = 0  # phase bins used


def _fold(r: np.ndarray, t: np.ndarray, period: float, spacing: float) -> Fold:
    """Fold the residual ``r`` (at steps ``t``) at ``period``: the profile's share of the variance
    and its BIC as a model of the residual (one mean per phase bin): a harmonic's profile leaves
    the pattern in the scatter, a multiple of the period pays for bins that add only noise."""
    n = len(r)
    bins = int(min(max(4, round(period / spacing)), max(4, n // 6)))
    b = np.minimum((np.mod(t, period) / period * bins).astype(np.int64), bins - 1)
    count = np.bincount(b, minlength=bins)
    total = np.bincount(b, r, minlength=bins)
    used = count > 0
    k = int(used.sum())
    ssb = float(np.sum(total[used] ** 2 / count[used]))  # r has mean 0
    sst = float(np.dot(r, r))
    ssw = sst - ssb
    if k < 2 or n - k < 2 or ssw <= 0 or sst <= 0:
        return Fold(period, 0.0, math.inf)
    within = ssw / (n - k)
    return Fold(period, max(0.0, (ssb - (k - 1) * within) / sst), n * math.log(ssw / n) + k * math.log(n),
                ssw=ssw, bins=k)


FOLD_RECORDS = 50_000  # records the fundamental's candidates are folded on
MIN_ACF = 0.25  # a fundamental's records one period apart correlate at least this much
MAX_CANDIDATES = 8  # the shortest periods whose records repeat, refined and compared by BIC


def _refine(r: np.ndarray, t: np.ndarray, period: float, span: float) -> float:
    """The period of the strongest line near ``period``, to a sixteenth of a spectral bin: the
    residual's power (a direct Fourier sum on the logged steps) at 33 frequencies across one
    bin either side."""
    f0 = 1.0 / period
    freqs = f0 + np.linspace(-1.0, 1.0, 33) / span
    freqs = freqs[freqs > 0]
    if not len(freqs):
        return period
    power = np.abs(np.exp(-2j * np.pi * np.outer(freqs, t - t[0])) @ r)  # (<= 33 x FOLD_RECORDS)
    return float(1.0 / freqs[int(np.argmax(power))])


def _acf_at(r: np.ndarray, t: np.ndarray, period: float) -> float:
    """The autocorrelation of the residual at a lag of ``period`` steps (records paired with the
    record nearest one period later)."""
    target = t + period
    later = np.minimum(np.searchsorted(t, target), len(t) - 1)
    earlier = np.maximum(later - 1, 0)
    nearest = np.where(np.abs(t[earlier] - target) < np.abs(t[later] - target), earlier, later)
    ok = (target <= t[-1]) & (nearest > np.arange(len(t)))
    if ok.sum() < 3:
        return 0.0
    a, b = r[ok], r[nearest[ok]]
    denom = math.sqrt(float(np.dot(a, a)) * float(np.dot(b, b)))
    return round(float(np.dot(a, b)) / denom, 3) if denom > 0 else 0.0


def lr_explains(series: Series, period: float, min_share: float = 0.5) -> float | None:
    """The share of the logged LR's variance that its own profile folded at ``period`` (or a
    whole multiple or fraction of it, up to 3) explains, when it is at least ``min_share``: the
    schedule (SGDR restarts, a cyclic LR) repeats with the loss. None without a moving LR."""
    lr = (series.context or {}).get("lr")
    if lr is None:
        return None
    x, t = kept(np.isfinite(lr), lr, series.steps)
    if len(x) < 8 or np.ptp(x) <= 0:
        return None
    t = t.astype(np.float64)
    x = x - x.mean()
    spacing = median_gap(t)
    best = max(_fold(x, t, period * f, spacing).share for f in (1, 2, 3, 1 / 2, 1 / 3))
    return round(best, 3) if best >= min_share else None


def _continuum(power: np.ndarray, width: float = 1.5, min_bins: int = 7) -> tuple[np.ndarray, np.ndarray]:
    """The smooth continuum under a periodogram: medians over bins that each span a factor
    ``width`` in frequency (at least ``min_bins`` ordinates), interpolated in log-log; and, per
    ordinate, how many ordinates that median was taken over (the smaller of the two bins it is
    interpolated between)."""
    m = len(power)
    edges = [1]
    while edges[-1] < m:
        edges.append(min(m, max(edges[-1] + min_bins, int(edges[-1] * width))))
    if len(edges) > 2 and edges[-1] - edges[-2] < min_bins:
        del edges[-2]  # a short last bin would make the top of the spectrum its own background
    bins = list(zip(edges, edges[1:], strict=False))
    centres = [math.sqrt(a * (b - 1)) if b - 1 > a else float(a) for a, b in bins]  # geometric
    levels = [float(np.median(power[a:b])) for a, b in bins]
    sizes = np.array([b - a for a, b in bins] or [m])
    if len(centres) < 2:
        return np.full(m, max(levels[0] if levels else 1.0, 1e-300)), np.full(m, int(sizes[0]))
    k = np.log(np.maximum(np.arange(m), 1).astype(np.float64))
    at = np.searchsorted(np.log(centres), k)
    counts = np.minimum(sizes[np.clip(at - 1, 0, len(sizes) - 1)], sizes[np.clip(at, 0, len(sizes) - 1)])
    return np.exp(np.interp(k, np.log(centres), np.log(np.maximum(levels, 1e-300)))), counts


HARMONICS = 8  # harmonics a fundamental's evidence is summed over, at most
HARMONIC_BAND = 1 << 15  # ordinates in the band up to which harmonics are summed (a longer log's
# period has cycles enough to stand out in single lines; 8 x 16 x 2^14 candidates at most)
FUNDAMENTAL_STEP = 1 / 16  # candidate fundamentals, in spectral bins: the 8th harmonic within half a bin


def _harmonic_p(each: np.ndarray, index: np.ndarray) -> float:
    """The smallest p-value, over candidate fundamentals (a sixteenth of a bin apart, with at least
    two harmonics in the band) and numbers of harmonics H = 2..HARMONICS, of Fisher's combination
    of the per-ordinate p-values ``each`` (at periodogram indices ``index``) at the ordinates
    nearest the fundamental's first H multiples: −2 Σ log p ~ χ²(2H) for independent ordinates of
    noise. Bonferroni over every fundamental and H tried."""
    if len(index) < 4 or len(index) > HARMONIC_BAND:
        return 1.0
    logs = np.zeros(int(index[-1]) + 2)
    logs[index] = -np.log(np.maximum(each, 1e-300))  # outside the band: no evidence
    top = int(index[-1])
    k0 = np.arange(float(index[0]), top / 2 + 1e-9, FUNDAMENTAL_STEP)
    if not len(k0):
        return 1.0
    j = np.arange(1, HARMONICS + 1)
    at = np.rint(k0[:, None] * j[None, :]).astype(np.int64)  # (fundamentals, harmonics)
    inside = at <= top
    stat = np.cumsum(np.where(inside, logs[np.minimum(at, top)], 0.0), axis=1)
    h = np.cumsum(inside, axis=1)
    best = 1.0
    for m in range(2, HARMONICS + 1):
        ok = (h[:, m - 1] == m)  # all m harmonics in the band
        if ok.any():
            best = min(best, _chi2_even_sf(2 * float(stat[ok, m - 1].max()), m))
    return min(1.0, best * len(k0) * (HARMONICS - 1))


def _chi2_even_sf(x: float, h: int) -> float:
    """P(χ²(2h) > x) = exp(−x/2) Σ_{i<h} (x/2)^i / i!"""
    half = x / 2.0
    term, total = 1.0, 1.0
    for i in range(1, h):
        term *= half / i
        total += term
    return float(min(1.0, math.exp(-half) * total))


def _above_median_p(c: np.ndarray, m: np.ndarray) -> np.ndarray:
    """P(X > c·M) for X ~ Exp(1) (a periodogram ordinate of noise) and M the median of the m
    ordinates of its background bin, X among them: the median's own scatter matters where a bin
    holds a handful of ordinates (the lowest frequencies). For c > 1, X is above the median, which
    is then an order statistic of the m − 1 others; exact through the Rényi representation of
    exponential order statistics: E[exp(−c·Y_(j))] = Π_{i<=j} (k−i+1)/(k−i+1+c) over k = m − 1
    others, j = (m+1)//2; for even m the median is Y_(j) + E/(2(k−j)) with j = m/2, one more
    factor 2(k−j)/(2(k−j)+c). Large m tends to exp(−c·ln 2). The product is taken term by term
    for small bins, through log-gamma for wide ones: Γ(k+1)Γ(k−j+1+c) / (Γ(k−j+1)Γ(k+1+c))."""
    out = np.ones(len(c))
    for size in np.unique(m):
        sel, n = m == size, int(size)
        if n < 3:
            out[sel] = np.exp(-c[sel] * math.log(2))
            continue
        k = n - 1
        j = (n + 1) // 2 if n % 2 else n // 2
        if n <= 64:
            r = np.arange(k, k - j, -1, dtype=np.float64)  # k, k-1, ..., k-j+1
            log_p = np.sum(np.log(r)[None, :] - np.log(r[None, :] + c[sel, None]), axis=1)
        else:  # (every argument >= 32: Stirling's series is exact to float precision there)
            log_p = (_lgamma(np.float64(k + 1)) - _lgamma(np.float64(k - j + 1))
                     - _lgamma(k + 1 + c[sel]) + _lgamma(k - j + 1 + c[sel]))
        if n % 2 == 0:
            log_p += np.log(2.0 * (k - j)) - np.log(2.0 * (k - j) + c[sel])
        out[sel] = np.minimum(1.0, np.exp(log_p))
    return out


def _lgamma(z: np.ndarray | np.float64) -> np.ndarray:
    """log Γ(z) for z >= 32 (Stirling's series to z^-5: error below 1e-15 there)."""
    z = np.asarray(z, dtype=np.float64)
    return ((z - 0.5) * np.log(z) - z + 0.5 * math.log(2 * math.pi)
            + 1 / (12 * z) - 1 / (360 * z ** 3) + 1 / (1260 * z ** 5))


def print_quantum(v: np.ndarray) -> float:
    """The step of the grid the values were printed on (1e-4 for '%.4f'), or 0 where they are
    not all on one (a float printed in full)."""
    d = np.abs(np.diff(v))
    d = d[d > 0]
    if not len(d):
        return 0.0
    q = float(d.min())
    k = v / q
    return q if float(np.mean(np.abs(k - np.round(k)) < 0.01)) >= 0.99 else 0.0


def within_print_rounding(v: np.ndarray, residual: np.ndarray, window: int) -> bool:
    """What the trend leaves (away from the ends, where a centred window is cut short) is no
    more than the print's rounding: a smooth, nearly noiseless curve printed to a few decimals
    walks down a staircase whose steps beat with any sampling of it, a period of nothing."""
    q = print_quantum(v)
    if not q:
        return False
    half = window // 2
    mid = residual[half:len(residual) - half] if len(residual) > 4 * half else residual
    scale = q / float(np.median(np.abs(v))) if np.nanmin(v) > 0 else q  # a ratio to the trend
    return float(np.std(mid)) <= 0.6 * scale  # (rounding alone: 0.29 of the quantum)


@dataclass(frozen=True)
class Periodicity(Detector):
    """A significant periodic component of the de-trended loss: each periodogram ordinate is tested
    against the spectrum's local background; known periods (epoch, HF mega-batch) are named.

    min_points: records needed. window: records in the de-trending median. alpha: the p-value a
    period must beat. min_share: its least share of the variance; strong_share: share for an error.
    match_tolerance: relative distance to a known period that still matches it. short_share: the
    least share of the variance of a cycle found in a short log (fewer than min_points records).
    fold_max: up to this many records, a log whose spectrum shows no period is also folded as a
    short log is (a de-trending window as long as the log leaves too few cycles for a spectrum:
    a 200-step run with a length-grouped mega-batch every 50 steps), when its cycle climbs at
    least fold_min_climb (10 %: a wobble of a few percent in a stuck run is no batch order)."""

    name = "periodicity"
    title = "a significant periodic component (period in steps), against a red-noise null"
    doc = KindDoc(
        meaning=(
            'the fundamental period in steps (not the strongest harmonic of a pattern that is no sine), '
            "a narrow peak above the spectrum's background (red noise and random walks are not periods); "
            'cause `lr_schedule` (`info`: the logged LR repeats with it), `epoch` (`info`; a `warning`, '
            'cause `memorisation`, when it is strong and the eval loss rises from its best), or '
            '`data_order`; in a short pasted log (9–63 records) a cycle of records seen 3+ times'),
        severity=(
            'info at the epoch length (epoch staircase) or when the logged LR repeats with it; warning '
            'for memorisation (an epoch pattern holding a third of the variance, or drops of 10 %, with '
            'the eval loss up from its best); error when the period holds >= 20 % of the variance; else '
            'warning'),
        evidence=(
            '`cause` (`lr_schedule` with `lr_share_at_period`, `epoch`, `memorisation` with '
            '`eval_best_step`, `eval_rise`, `data_order`), `period_steps` (the fundamental: of the '
            "strongest line's multiples whose records one multiple apart correlate, the best fold), "
            '`strongest_line_steps`, `harmonics` (period and power over the background of the first '
            'harmonics), `autocorrelation_at_period`, `share_of_variance`, `p_value` (the ordinate '
            "against the periodogram's local background, Bonferroni over the tested frequencies), `ar1` "
            '(lag-1 autocorrelation of the residual, for reference), `grid_spacing`, `matches` (known '
            'periods: HF mega-batch of 50 steps, epoch length); for the epoch staircase: `epoch_starts`, '
            '`drops`, `p_values`; for a short log (`method` `short-log folding`): `period_records`, '
            "`cycles`, `agreement` (each cycle's correlation with the others' profile), `climb`, "
            '`cycle_peaks`, `cycle_top`'),
        contract=(
            'a significant periodic component (evidence: the fundamental period in steps, its harmonics, '
            'share of variance, p-value, cause when known: `lr_schedule`, `epoch`, `mega_batch`, '
            '`data_order`)'),
    )
    metrics = ("loss",)

    min_points: int = 64
    window: int = 201
    alpha: float = 1e-3
    min_share: float = 0.04
    strong_share: float = 0.2
    match_tolerance: float = 0.05
    short_share: float = 0.3
    fold_max: int = 600
    fold_min_climb: float = 0.1

    def explained(self, finding: Finding, findings: list[Finding]) -> bool:
        """A period at a ladder's own period (start to start, the median or that of consecutive
        episodes; or 2 or 3 times either): the ladder says it, with its cause; a short log's
        cycles under an accumulator ladder are that ladder's climbs."""
        ladders = [g for g in structures(finding, findings) if g.kind == "ladder"]
        if "cycle_top" in finding.evidence:  # (a ladder that is not an accumulator is these cycles)
            return any(g.evidence.get("cause") == "accumulator" for g in ladders)
        period = finding.evidence.get("period_steps", 0.0)
        return any(abs(period - m * p) <= 0.15 * m * p
                   for g in ladders for p in ladder_periods(g) for m in (1, 2, 3))

    def reconsidered(self, finding: Finding, findings: list[Finding], evaluated: bool) -> Finding:
        """An epoch-periodic loss (drops at each epoch start, or a sawtooth at the epoch length) is
        judged by its drops against the noise within an epoch (a warning when large). Strong (a
        third of the de-trended variance, or drops of 10 % and more) and with the eval loss
        rising from its best (the overfitting finding of the same segment), it is the model
        memorising its training set: a warning that says so. Large but with an eval loss
        (``evaluated``) that does not rise, the model still generalises: information, saying
        why."""
        if finding.kind != self.name or finding.evidence.get("cause") != "epoch":
            return finding
        ev = finding.evidence
        strength = max(ev.get("share_of_variance", 0.0),
                       float(np.median(ev["drops"])) * 10 / 3 if "drops" in ev else 0.0)
        rising = next((g for g in findings if g.kind == "overfitting" and g.segment == finding.segment), None)
        if rising is not None and strength >= 1 / 3:
            best, last = rising.evidence["best"], rising.evidence["last"]
            rise = last / best - 1 if best > 0 else float("inf")
            head = finding.summary.split(": each drop", 1)[0].split(" (expected with several epochs", 1)[0]
            head = head.split("; ", 1)[0]
            summary = (f"{head}; and the eval loss is up {rise:.0%} from its best (step "
                       f"{rising.evidence['best_step']}): the model is memorising its training set (stop "
                       f"at the best eval step, add data or regularisation)")
            evidence = {**ev, "cause": "memorisation", "eval_best_step": rising.evidence["best_step"],
                        "eval_rise": round(rise, 4)}
            return dataclasses.replace(finding, severity=Severity.WARNING, summary=summary, evidence=evidence)
        if evaluated and rising is None and finding.severity >= Severity.WARNING:
            return dataclasses.replace(finding, severity=Severity.INFO, summary=finding.summary + (
                "; but the eval loss does not rise: the model still generalises (watch the gap "
                "between the train and eval losses)"))
        return finding

    def detect(self, series: Series) -> list[Finding] | Skipped:
        v, steps = series.finite()
        if (short := self.too_short(series, len(v), self.min_points)) is not None:
            return (self._short(series, v, steps) if len(v) >= 9 else []) or short
        grid, spacing = regular_grid(steps, v)
        n = len(grid)
        window = default_window(n, self.window)
        epoch_len = self._epoch_length(series)
        spec = spectrum(grid, window)  # (frequencies, periodogram, de-trended grid), once
        found = self._scan(spec, spacing, window)
        if found is None:
            staircase = self._epoch_drops(series, epoch_len)
            if staircase or len(v) > self.fold_max:
                return staircase
            return [f for f in self._short(series, v, steps) if f.evidence["climb"] >= self.fold_min_climb]
        line, p, phi = found
        if within_print_rounding(v, spec[2], window):
            return self._epoch_drops(series, epoch_len)
        fit = self._fundamental(v, steps, spec[2], line, spacing, window)
        if fit.share < self.min_share:
            return self._epoch_drops(series, epoch_len)
        period = fit.period
        matches = self._known(period, epoch_len)
        evidence = {"period_steps": round(period, 2), "share_of_variance": round(fit.share, 4),
                    "p_value": float(f"{p:.3g}"), "ar1": round(phi, 3), "grid_spacing": spacing,
                    "matches": matches, "strongest_line_steps": round(line, 2),
                    "harmonics": self._harmonics(spec, spacing, period),
                    "autocorrelation_at_period": fit.acf}
        lr_period = lr_explains(series, period)
        if lr_period is not None:
            evidence["cause"] = "lr_schedule"
            evidence["lr_share_at_period"] = lr_period
            severity = Severity.INFO
            why = ("the logged LR repeats with the same period (restarts or a cyclic schedule): "
                   "the schedule explains it, not the data")
        elif any(mm.startswith("epoch") for mm in matches):
            evidence["cause"] = "epoch"
            severity, why = Severity.INFO, ("at the epoch length: the loss drops at each epoch start "
                                            "(the model has seen the data)")
            steps_found = _epoch_steps(series, epoch_len)
            if steps_found is not None and len(steps_found[1]) >= 2:
                _, drops, _, noise = steps_found
                evidence["drops"] = [round(d, 4) for d in drops]
                evidence["within_epoch_noise"] = round(noise, 4)
                severity, said = _sawtooth(drops, noise)
                why = f"at the epoch length, {said}"
        else:
            evidence["cause"] = "data_order"
            severity = Severity.ERROR if fit.share >= self.strong_share else Severity.WARNING
            why = (f"it matches {matches[0]}" if matches else
                   "data order repeating (sorted or bucketed batches, a batch order built once), "
                   "or a periodic job")
        harmonic = (f", strongest line at {line:.4g} steps (a harmonic)"
                    if abs(line - period) > self.match_tolerance * period else "")
        summary = (f"{series.metric} has a period of ~{period:.4g} steps ({fit.share:.0%} of the "
                   f"de-trended variance{harmonic}, p={p:.2g} above the spectrum's background); {why}")
        freqs, power, _ = spec
        keep = freqs > 2.0 / n
        figure = {"periods": spacing / freqs[keep], "power": power[keep]}
        return [Finding(self.name, severity, series.metric, int(steps[0]), int(steps[-1]), summary,
                        evidence, series.segment, figures={"periodogram": figure})]

    def _short(self, series: Series, v: np.ndarray, steps: np.ndarray) -> list[Finding]:
        """A log too short for a spectrum (9 to min_points records, or to fold_max where the
        spectrum found nothing): the de-trended
        records (log values, a quadratic trend) are folded at every cycle length of 3 to n/3
        records and each fold is a one-way ANOVA of the residual by phase; the best length must
        beat alpha after Bonferroni over the lengths tried, hold short_share of the variance, and
        every complete cycle (at least 3) must agree with the profile of the others (correlation
        of at least 0.5): a smooth curve left by the de-trending, or noise, does not repeat."""
        n = len(v)
        x = np.log(v) if np.all(v > 0) else v.astype(np.float64)
        i = np.arange(n, dtype=np.float64)
        r = x - np.polyval(np.polyfit(i, x, 2 if n >= 12 else 1), i)
        r = r - r.mean()
        sst = float(np.dot(r, r))
        lengths = range(3, n // 3 + 1)
        if sst <= 0 or not lengths:
            return []
        fits = []
        for length in lengths:
            phase = np.arange(n) % length
            ssb = float(np.sum(np.bincount(phase, r, length) ** 2 / np.bincount(phase, minlength=length)))
            d1, d2 = length - 1, n - length - 2  # the quadratic trend used two more
            if d2 < 2 or ssb >= sst:
                continue
            ssw = sst - ssb
            fits.append((f_sf(ssb / d1 / (ssw / d2), d1, d2), length, (ssb - d1 * ssw / d2) / sst))
        if not fits:
            return []
        p, length, share = min(fits)
        p = min(1.0, p * len(lengths))
        cycles = n // length
        if p >= self.alpha or share < self.short_share or cycles < 3:
            return []
        rows = r[:cycles * length].reshape(cycles, length)
        agreement = []
        for c in range(cycles):
            others = np.delete(rows, c, axis=0).mean(axis=0)
            a, b = rows[c] - rows[c].mean(), others - others.mean()
            denom = math.sqrt(float(np.dot(a, a) * np.dot(b, b)))
            agreement.append(round(float(np.dot(a, b)) / denom, 3) if denom > 0 else 0.0)
        if min(agreement) < 0.5:
            return []
        spacing = median_gap(steps)
        profile = np.bincount(np.arange(n) % length, r, length) / np.bincount(np.arange(n) % length)
        top = int(np.argmax(profile))
        peaks = []
        for k in range(top, n, length):  # the peak of each cycle, within a record of its phase
            lo = max(0, k - 1)
            peaks.append(lo + int(np.argmax(v[lo:k + 2])))
        climb = math.exp(float(np.ptp(profile))) - 1 if np.all(v > 0) else float(np.ptp(profile))
        period = length * spacing
        acf = _acf_at(r, steps.astype(np.float64), period)
        severity = Severity.ERROR if share >= self.strong_share else Severity.WARNING
        summary = (f"{series.metric} repeats a cycle of {length} records (~{period:.4g} steps) "
                   f"{cycles} times in a short log: it climbs {climb:.0%} from the cycle's low to its "
                   f"peak, then resets ({share:.0%} of the de-trended variance, p={p:.2g}); data order "
                   "repeating (batches grouped by length, a batch order built once)")
        evidence = {"period_steps": round(period, 2), "period_records": length, "cycles": cycles,
                    "share_of_variance": round(share, 4), "p_value": float(f"{p:.3g}"),
                    "agreement": agreement, "autocorrelation_at_period": acf, "climb": round(climb, 4),
                    "cycle_peaks": [int(steps[k]) for k in peaks],
                    "cycle_top": float(v[peaks].max()), "method": "short-log folding",
                    "cause": "data_order", "matches": []}
        lr_share = lr_explains(series, period)
        if lr_share is not None:  # (a cyclic LR or restarts: the schedule, not the data)
            severity = Severity.INFO
            evidence.update(cause="lr_schedule", lr_share_at_period=lr_share)
            summary = summary.rsplit("; data order", 1)[0] + (
                "; the logged LR repeats with the same period (restarts or a cyclic schedule): "
                "the schedule explains it, not the data")
        return [Finding(self.name, severity, series.metric, int(steps[0]), int(steps[-1]), summary,
                        evidence, series.segment)]

    def _fundamental(self, v: np.ndarray, steps: np.ndarray, g: np.ndarray, line: float,
                     spacing: float, window: int) -> Fold:
        """The fundamental period behind the strongest spectral line ``line``: a pattern that is
        not a sine (a batch order replayed, an epoch's curriculum) puts its power in many
        harmonics, and the strongest may be any of them. Its whole multiples m·line (up to a third
        of the span and half the de-trending window) are the candidates, and the autocorrelation
        of the de-trended series at each one's lag says which repeat: the fundamental and its
        multiples do (at least MIN_ACF, and half the best). The shortest of those (at most
        MAX_CANDIDATES) are folded (the de-trended records on their logged steps: uneven logging
        needs no resampling) at offsets fine enough to stay in phase over every cycle; the best
        fold by BIC is the start (a multiple pays for bins that add only noise), and a whole
        multiple of it wins when its extra bins explain significantly more (nested F-test at
        alpha over the candidates), at least min_share more of the variance, and its records
        correlate no less: BIC alone keeps a harmonic whose fundamental has weak odd harmonics.
        When no multiple repeats (a weak sine), the line is the period."""
        r = detrend(v, max(self.window, len(v) // 4) | 1)[0]
        keep = settled(r, max(self.window, len(v) // 4) | 1)
        r, t = r[keep], steps[keep]
        r -= r.mean()
        span = float(t[-1] - t[0]) if len(t) > 1 else 0.0
        longest = min(span / 3, window * spacing / 2 * 1.05)
        if len(r) > FOLD_RECORDS and span > 0:  # folds compare on evenly spread records
            pick = np.linspace(0, len(r) - 1, FOLD_RECORDS).astype(np.int64)
            r, t = r[pick], t[pick]
        t = t.astype(np.float64)
        if span <= 0:
            return _fold(r, t, line, spacing)
        line = _refine(r, t, line, span)
        candidates = [1]
        m_max = int(longest // line)
        if m_max >= 2:
            auto, n = autocorrelation(g), len(g)  # of the de-trended grid, at every lag
            ms = np.arange(1, m_max + 1)
            lags = ms * line / spacing
            # the refined line's error (a quarter bin), times m, and at least the nearest lag
            tol = np.maximum(0.5, ms * line * line / (4 * span * spacing))
            at = np.array([float(auto[max(0, int(lo)):min(n, int(hi) + 1)].max(initial=-1.0))
                           for lo, hi in zip(np.ceil(lags - tol), np.floor(lags + tol), strict=True)])
            if at.max() >= MIN_ACF:
                candidates = [int(m) for m in ms[at >= max(MIN_ACF, 0.5 * at.max())][:MAX_CANDIDATES]]
        by_m: dict[int, Fold] = {}
        for m in candidates:
            # m·line refined: its error (a quarter bin of the refined line, times m), in steps that
            # keep every cycle's records within a quarter of a phase bin (2·line/spacing of them)
            width = m * line * line / (4 * span)
            count = int(min(41, max(9, 2 * line / spacing + 1)))
            folds = [_fold(r, t, period, spacing) for period in m * line + np.linspace(-width, width, count)
                     if period <= max(longest, line)]
            if folds:
                by_m[m] = min(folds, key=lambda f: f.bic)
        if not by_m:
            return _fold(r, t, line, spacing)
        m_best = min(by_m, key=lambda m: by_m[m].bic)
        fit, acf = by_m[m_best], {m: _acf_at(r, t, f.period) for m, f in by_m.items()}
        for m in sorted(by_m):  # a multiple whose extra bins explain significantly more
            f = by_m[m]
            if m <= m_best or m % m_best or f.bins <= fit.bins or len(r) - f.bins < 2:
                continue
            extra = f.bins - fit.bins
            gain = (fit.ssw - f.ssw) / extra
            p = f_sf(gain / (f.ssw / (len(r) - f.bins)), extra, len(r) - f.bins) if gain > 0 else 1.0
            if f.share - fit.share >= self.min_share and p < self.alpha / len(by_m) and acf[m] >= acf[m_best]:
                m_best, fit = m, f
        return Fold(fit.period, fit.share, fit.bic, acf[m_best])

    def _harmonics(self, spec: tuple[np.ndarray, np.ndarray, np.ndarray], spacing: float,
                   period: float) -> list[dict]:
        """The first harmonics of ``period`` in the periodogram: period, power over the local
        background."""
        freqs, power, _ = spec
        if len(freqs) < 4:
            return []
        background = _continuum(power)[0]
        out = []
        for j in range(1, 9):
            f = j * spacing / period
            if f > 0.5:
                break
            k = int(np.argmin(np.abs(freqs - f)))
            out.append({"period_steps": round(period / j, 2),
                        "power_over_background": round(float(power[k] / background[k]), 1)})
        return out

    def _scan(self, spec: tuple[np.ndarray, np.ndarray, np.ndarray], spacing: float, window: int
              ) -> tuple[float, float, float] | None:
        """(period, p-value, AR(1) coefficient) of the strongest significant spectral line: each
        ordinate against the smooth continuum around it (medians over frequency bins a factor
        1.5 wide): red noise, a random walk left by the de-trending or white noise is the
        background, a period a narrow peak above it; ordinates are ~Exp under the null, and so
        are the few a low-frequency bin's median is taken over (``_above_median_p``)."""
        freqs, power, r = spec
        n = len(r)
        if not np.any(r):
            return None
        longest = min(n / 4, window / 2)  # >= 4 cycles seen, and passed by the de-trending
        # (the Nyquist ordinate of an even length is one real value, not Exp-distributed)
        band = (freqs >= 1.0 / longest) & (freqs < 0.5)
        if band.sum() < 4:
            return None
        background, counts = _continuum(power)
        ratio = power[band] / background[band]
        each = _above_median_p(ratio, counts[band])
        k = int(np.argmax(ratio))  # the strongest line (the search for the fundamental starts there)
        p = min(1.0, int(band.sum()) * float(each.min()))  # Bonferroni
        # a pattern that is not a sine spreads its power over its harmonics, none of which may
        # stand out alone in a short log: their evidence summed (the two tests, Bonferroni)
        p = min(1.0, 2 * min(p, _harmonic_p(each, np.flatnonzero(band))))
        if p >= self.alpha:
            return None
        return spacing / float(freqs[band][k]), p, ar1(r)

    def _epoch_drops(self, series: Series, epoch_len: float | None) -> list[Finding]:
        """The epoch staircase: the level drops at every epoch start and stays flat between."""
        found = _epoch_steps(series, epoch_len)
        if found is None:
            return []
        at, drops, ps, noise = found
        if len(drops) < 2 or not all(d >= 0.03 and p < 0.01 for d, p in zip(drops, ps, strict=True)):
            return []
        listed = ", ".join(f"{-d:.0%} at {s}" for d, s in zip(drops, at, strict=True))
        severity, why = _sawtooth(drops, noise)
        summary = f"{series.metric} drops at each epoch start ({listed}) and stays flat between: {why}"
        evidence = {"period_steps": round(epoch_len or 0.0, 2), "cause": "epoch", "epoch_starts": at,
                    "drops": [round(d, 4) for d in drops], "p_values": [float(f"{p:.3g}") for p in ps],
                    "within_epoch_noise": round(noise, 4),
                    "matches": [f"epoch length ({epoch_len:.0f} steps)"]}
        return [Finding(self.name, severity, series.metric, int(series.steps[0]), int(series.steps[-1]),
                        summary, evidence, series.segment)]

    def _epoch_length(self, series: Series) -> float | None:
        epoch = series.own("epoch")
        if epoch is None:
            return None
        x, y = kept(np.isfinite(epoch), epoch, series.steps)
        del epoch
        if len(x) <= 2 or np.ptp(x) <= 0:
            return None
        # the least-squares slope of step on epoch, in closed form (np.polyfit builds an n×2
        # matrix and copies it: 300 MB on a 10M-record log), centred in place (x is the
        # detector's own copy of the epochs, y a new array)
        x -= x.mean()
        y = y.astype(np.float64)
        y -= y.mean()
        slope = float(np.dot(x, y) / np.dot(x, x))
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


def _epoch_steps(series: Series, epoch_len: float | None
                 ) -> tuple[list[int], list[float], list[float], float] | None:
    """At each epoch start: its step, the loss's drop (1 - the median of the records after it
    over the median of those before), the drop's rank-sum p; and the noise within epochs (the
    robust spread of the log-loss's successive differences, boundaries left out, over sqrt 2).
    None without an epoch column."""
    epoch = series.own("epoch") if epoch_len is not None else None
    if epoch is None:
        return None
    v, steps = series.values, series.steps
    per_epoch = len(v) / max(1.0, float(np.nanmax(epoch)))
    whole = np.nan_to_num(epoch, nan=-1.0, copy=False)  # (in place: its own copy)
    del epoch
    whole += 1e-9
    np.floor(whole, out=whole)
    starts = np.flatnonzero((whole[1:] > whole[:-1]) & (whole[:-1] >= 0)) + 1
    del whole
    k = int(max(3, min(10, per_epoch // 4)))
    at, drops, ps = [], [], []
    for b in starts:
        before, after = v[max(0, b - k):b], v[b:b + k]
        if len(before) < 3 or len(after) < 3:
            continue
        at.append(int(steps[b]))
        drops.append(1 - float(np.median(after) / np.median(before)))
        ps.append(rank_sum_p(before, after))
    with np.errstate(divide="ignore", invalid="ignore"):
        d = np.diff(np.log(v))
    inside = np.ones(len(d), dtype=bool)
    inside[starts - 1] = False
    d = d[inside & np.isfinite(d)]
    noise = float(1.4826 * np.median(np.abs(d - np.median(d))) / np.sqrt(2)) if len(d) else 0.0
    return at, drops, ps, noise


SAWTOOTH_NOISES = 5.0  # a drop this many times the within-epoch noise is a warning


def _sawtooth(drops: list[float], noise: float) -> tuple[Severity, str]:
    """A per-epoch sawtooth's severity and why: large against the noise within an epoch, the
    model fits the repeated examples (memorises them) faster than it learns; small, it is
    the ordinary gain of seeing the data again."""
    typical = float(np.median(drops))
    size = -np.log1p(-min(typical, 0.99))  # the drop on the log-loss, as the noise is taken
    times = size / noise if noise > 0 else float("inf")
    if times >= SAWTOOTH_NOISES:
        return Severity.WARNING, (
            f"each drop ({typical:.0%}) is {times:.0f}× the noise within an epoch: the model "
            "memorises the examples it has seen (the train loss falls on repeated data, not "
            "from learning); compare the eval loss, and shuffle or add data")
    return Severity.INFO, (
        f"each drop ({typical:.0%}) is {times:.1f}× the noise within an epoch: small, the "
        "ordinary gain of seeing the data again (expected with several epochs)")

