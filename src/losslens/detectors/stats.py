"""Robust statistics shared by the detectors (numpy only: scipy is the tests' oracle, not a dependency)."""

from __future__ import annotations

import math
import os

import numpy as np
import polars as pl

MAD_SCALE = 1.4826


def robust_scale(x: np.ndarray) -> float:
    """1.4826·MAD: the standard deviation for Gaussian data, immune to a few outliers. (One copy
    of the finite values, reordered by the medians and made the deviations in place: a median
    does not see the order.)"""
    x = x[np.isfinite(x)]
    if len(x) == 0:
        return 0.0
    np.abs(np.subtract(x, np.median(x, overwrite_input=True), out=x), out=x)
    return float(MAD_SCALE * np.median(x, overwrite_input=True))


BLOCK = 1 << 20  # records a long series' element-wise steps take at a time (temporaries of 8 MB)
EXACT_WINDOW = 8001  # centred medians over wider windows are taken on a regular subsample
SUBSAMPLED_WINDOW = 2001  # records in such a median's window after subsampling


def rolling_median(x: np.ndarray, window: int, center: bool = True) -> np.ndarray:
    """Rolling median (centred, or causal: only past values). NaNs are ignored. A centred window
    wider than EXACT_WINDOW (a trend over a quarter of a 1M-record run) is the median of every
    k-th record in it (SUBSAMPLED_WINDOW of them), interpolated between them: the exact one costs
    O(n log w) with w a fraction of n, and a median of 2,001 records of a smooth trend is as
    good."""
    w = max(1, min(window, len(x)))
    if center and w > EXACT_WINDOW:
        k = w // SUBSAMPLED_WINDOW
        at = np.arange(0, len(x), k)
        coarse = rolling_median(x[at], max(1, w // k) | 1, center=True)
        dense = np.empty(len(x))
        for lo in range(0, len(x), BLOCK):  # (no arange of the series' length)
            hi = min(lo + BLOCK, len(x))
            dense[lo:hi] = np.interp(np.arange(lo, hi), at, coarse)
        return dense
    f = x.astype(np.float64, copy=False)
    s = pl.Series(f)
    if np.isnan(f).any():  # (a copy of the series only where there is a NaN to leave out)
        s = s.fill_nan(None)
    n = len(f)
    if center and w % 2 and n > w:
        # polars' centred window costs three times its trailing one (0.50 s against 0.17 s on 2M
        # records, w=65): the same medians are the trailing ones h records on, and the last h
        # (windows cut short by the end) are taken on the last w records alone
        h = w // 2
        out = pl.concat([s.rolling_median(window_size=w, center=False, min_samples=1).slice(h),
                         s.slice(n - w).rolling_median(window_size=w, center=True,
                                                       min_samples=1).slice(w - h)])
    else:
        out = s.rolling_median(window_size=w, center=center, min_samples=1)
    if out.null_count():
        out = out.fill_null(strategy="forward").fill_null(strategy="backward")
    return out.to_numpy()


def rolling_mean(x: np.ndarray, window: int) -> np.ndarray:
    """A centred rolling mean over ``window`` records (fewer at the ends; NaN left out)."""
    f = x.astype(np.float64, copy=False)
    s = pl.Series(f)
    if np.isnan(f).any():  # (a copy of the series only where there is a NaN to leave out)
        s = s.fill_nan(None)
    w = max(1, min(window, len(x)))
    return s.rolling_mean(window_size=w, center=True, min_samples=1).to_numpy()


def detrend(values: np.ndarray, window: int, robust: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(residual, trend): ratio to a centred rolling median (or mean: stable when the values
    fall in bands) for positive metrics, else the difference."""
    trend = rolling_median(values, window) if robust else rolling_mean(values, window)
    if np.nanmin(values) > 0 and np.nanmin(trend) > 0:
        return values / trend, trend
    return values - trend, trend


def settled(residual: np.ndarray, window: int) -> slice:
    """The part of a de-trended series past its first half-window: there the centred window is
    cut short and the trend lags a loss's fast early fall, a bump that passes for a long period
    or a band of its own."""
    return slice(min(window // 2, len(residual) // 5), None)


def runs_of(idx: np.ndarray, gap: int = 1) -> list[np.ndarray]:
    """Sorted indices ``idx`` in runs: a new run wherever two are more than ``gap`` apart."""
    return np.split(idx, np.flatnonzero(np.diff(idx) > gap) + 1) if len(idx) else []


def kept(ok: np.ndarray, *arrays: np.ndarray) -> tuple[np.ndarray, ...]:
    """``arrays`` where ``ok`` holds: the arrays themselves where it holds everywhere (a long
    run's arrays are not copied for a selection of all of them), else their selections."""
    return arrays if ok.all() else tuple(a[ok] for a in arrays)


def median_where(x: np.ndarray, where: np.ndarray, spent: bool = False, empty: float = 0.0) -> float:
    """The median of ``x`` where ``where`` holds (``empty`` where it holds nowhere), its selection
    partitioned in place (one copy of it, not two); ``spent``: ``x`` is not read again, and where
    ``where`` holds everywhere it is partitioned itself (no copy)."""
    chosen = x if spent and where.all() else x[where]
    return float(np.median(chosen, overwrite_input=True)) if len(chosen) else empty


def median_gap(t: np.ndarray) -> float:
    """The median of the gaps between successive ``t`` that are positive (1.0 where none is):
    the usual spacing of a run's steps (steps that always rise: no copy of their gaps)."""
    diffs = np.diff(t)
    return median_where(diffs, diffs > 0, spent=True, empty=1.0)


def regular_grid(steps: np.ndarray, values: np.ndarray, max_points: int = 1 << 20
                 ) -> tuple[np.ndarray, float]:
    """Values linearly interpolated onto an even step grid (for logs that log every ~k steps)."""
    spacing = median_gap(steps)
    span = float(steps[-1] - steps[0])
    n = int(span / spacing) + 1
    if n > max_points:
        spacing = span / (max_points - 1)
        n = max_points
    grid = steps[0] + spacing * np.arange(n)
    return np.interp(grid, steps.astype(np.float64), values), spacing


RANK_BLOCK = 1 << 16  # values ranked at a time: the sort and its gathers stay in the cache


def ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n along the last axis, tied values sharing their average rank (as
    scipy.stats.rankdata does): a loss printed to 2 decimals repeats values, and ranking ties by
    order of appearance would read a trend into them. A large matrix is ranked in blocks of rows
    on a few threads (numpy's sorts release the GIL): a 100 x 56,000 one in 0.12 s, not 0.86."""
    x = np.asarray(x)
    if x.ndim != 2 or x.size <= 4 * RANK_BLOCK or len(x) < 2:
        return _ranks(x)
    rows = max(1, RANK_BLOCK // max(1, x.shape[1]))
    out = np.empty(x.shape, dtype=np.float64)

    def block(i: int) -> None:
        out[i:i + rows] = _ranks(x[i:i + rows])

    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(min(4, os.cpu_count() or 1)) as pool:
        list(pool.map(block, range(0, len(x), rows)))
    return out


def _ranks(x: np.ndarray) -> np.ndarray:
    """``ranks`` in one piece."""
    n = x.shape[-1]
    order = np.argsort(x, axis=-1)  # (ties get their average rank: the order among them is moot)
    sx = np.take_along_axis(x, order, -1)
    new = np.ones(sx.shape, dtype=bool)
    new[..., 1:] = sx[..., 1:] != sx[..., :-1]
    out = np.empty(sx.shape, dtype=np.float64)
    if new.all():  # no ties: each value's rank is its place in the sorted order
        np.put_along_axis(out, order, np.broadcast_to(np.arange(1.0, n + 1.0), sx.shape), -1)
        return out
    last = np.ones(sx.shape, dtype=bool)
    last[..., :-1] = new[..., 1:]
    at = np.broadcast_to(np.arange(n), sx.shape)
    first = np.maximum.accumulate(np.where(new, at, 0), axis=-1)  # where each tie group starts
    end = np.flip(np.minimum.accumulate(np.flip(np.where(last, at, n - 1), -1), axis=-1), -1)
    np.put_along_axis(out, order, (first + end) / 2.0 + 1.0, -1)
    return out


def spearman(a: np.ndarray, b: np.ndarray | None = None) -> float:
    """Spearman's rank correlation of ``a`` with ``b`` (default: with time, i.e. a monotone
    trend); 0 for fewer than 3 points or a constant input."""
    if b is None:
        b = np.arange(len(a), dtype=np.float64)
    if len(a) < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return 0.0
    return float(np.corrcoef(ranks(a), ranks(b))[0, 1])


def spearman_rows(a: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``spearman(a, row)`` for every row of ``rows`` at once."""
    rows = np.atleast_2d(np.asarray(rows, dtype=np.float64))
    out = np.zeros(len(rows))
    if len(a) < 3 or np.ptp(a) == 0 or not len(rows):
        return out
    ra = ranks(a)
    ra -= ra.mean()
    live = np.ptp(rows, axis=1) > 0
    rb = ranks(rows[live])
    rb -= rb.mean(axis=1, keepdims=True)
    out[live] = (rb @ ra) / np.sqrt((rb * rb).sum(axis=1) * float(ra @ ra))
    return out


def runs_test(labels: np.ndarray) -> tuple[float, float]:
    """Wald–Wolfowitz runs test on a two-valued sequence: (z, one-sided p of too few runs).
    Few runs means like values cluster together (same-bucket batch runs)."""
    labels = np.asarray(labels, dtype=bool)
    n1 = int(labels.sum())
    n2 = len(labels) - n1
    if n1 == 0 or n2 == 0:
        return 0.0, 1.0
    runs = 1 + int(np.count_nonzero(labels[1:] != labels[:-1]))
    n = n1 + n2
    mean = 2.0 * n1 * n2 / n + 1
    var = 2.0 * n1 * n2 * (2.0 * n1 * n2 - n) / (n * n * (n - 1)) if n > 1 else 0.0
    if var <= 0:
        return 0.0, 1.0
    z = (runs - mean) / math.sqrt(var)
    return z, 0.5 * math.erfc(-z / math.sqrt(2))  # P(Z <= z)


def autocorrelation(x: np.ndarray) -> np.ndarray:
    """The autocorrelation of ``x`` (mean already removed) at every lag 0..n-1, by FFT, each lag
    normalised by the pairs it has (a long lag is not shrunk towards zero)."""
    n = len(x)
    auto = np.fft.irfft(np.abs(np.fft.rfft(x, 2 * n)) ** 2)[:n]
    return auto / auto[0] * n / np.maximum(1, n - np.arange(n)) if auto[0] > 0 else auto


def ar1(x: np.ndarray) -> float:
    """Lag-1 autocorrelation, clipped to (-0.95, 0.95)."""
    x = x - x.mean()
    denom = float(np.dot(x, x))
    if denom == 0:
        return 0.0
    return float(np.clip(np.dot(x[1:], x[:-1]) / denom, -0.95, 0.95))


def gmm_1d(x: np.ndarray, k: int, iters: int = 80, seed: int = 0
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """A 1-D Gaussian mixture by EM: (weights, means, sds, BIC). Deterministic for a seed."""
    n = len(x)
    x = np.asarray(x, dtype=np.float64)
    x2 = x * x
    means = np.quantile(x, (np.arange(k) + 0.5) / k).astype(np.float64)
    sd0 = max(float(np.std(x)), 1e-12)
    sds = np.full(k, sd0 / k)
    weights = np.full(k, 1.0 / k)
    floor = max(sd0 * 1e-3, 1e-12)
    half_log_2pi = 0.5 * math.log(2 * math.pi)
    ll = -np.inf
    for _ in range(iters):
        # log w_k N(x | m_k, s_k) as a quadratic in x, a k×n array (rows: reductions over the
        # k components are then element-wise across a few long rows, which numpy does fast)
        inv = 1.0 / (sds * sds)
        logp = np.multiply.outer(-0.5 * inv, x2)
        logp += np.multiply.outer(means * inv, x)
        logp += (-0.5 * means * means * inv - np.log(sds) - half_log_2pi + np.log(weights))[:, None]
        top = logp.max(axis=0)
        logp -= top
        np.exp(logp, out=logp)
        total = logp.sum(axis=0)
        new_ll = float(top.sum() + np.log(total).sum())
        logp /= total  # responsibilities
        nk = logp.sum(axis=1) + 1e-12
        weights = nk / n
        means = (logp @ x) / nk
        var = (logp @ x2) / nk - means * means
        sds = np.sqrt(np.maximum(var, floor * floor))
        if abs(new_ll - ll) < 1e-6 * abs(new_ll) + 1e-10:
            ll = new_ll
            break
        ll = new_ll
    bic = -2 * ll + (3 * k - 1) * math.log(n)
    order = np.argsort(means)
    return weights[order], means[order], sds[order], bic


def rank_sum_p(a: np.ndarray, b: np.ndarray) -> float:
    """One-sided Mann–Whitney U test that ``a`` is larger than ``b`` (normal approximation with
    a tie correction; numpy only, so that the CLI never imports scipy for it)."""
    x = np.concatenate([a, b])
    n1, n2 = len(a), len(b)
    u = ranks(x)[:n1].sum() - n1 * (n1 + 1) / 2
    _, counts = np.unique(x, return_counts=True)
    n = n1 + n2
    var = n1 * n2 / 12 * ((n + 1) - ((counts ** 3 - counts).sum()) / (n * (n - 1)))
    if var <= 0:
        return 1.0
    z = (u - n1 * n2 / 2 - 0.5) / math.sqrt(var)
    return 0.5 * math.erfc(z / math.sqrt(2))


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularised incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-12:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta function I_x(a, b)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                     + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1 - x) / b


def f_sf(f: float, d1: float, d2: float) -> float:
    """P(F > f) for Fisher's F with (d1, d2) degrees of freedom (a one-way ANOVA's p-value)."""
    if not f > 0:
        return 1.0
    return betainc(d2 / 2, d1 / 2, d2 / (d2 + d1 * f))


def lr_schedule(lr: np.ndarray | None) -> dict | None:
    """What the logged LR did: a warm-up at the start? does it decay by the end?"""
    if lr is None:
        return None
    ok = lr[np.isfinite(lr)]
    if len(ok) == 0 or ok.max() <= 0:
        return None
    peak = int(np.argmax(ok))
    return {"warmup": bool(ok[0] < 0.5 * ok.max() and peak > 0),
            "decays": bool(ok[-1] < 0.5 * ok.max() and peak < len(ok) - 1),
            "peak_lr": float(ok.max()), "last_lr": float(ok[-1])}


def smooth(v: np.ndarray, frac: int = 20) -> np.ndarray:
    """A rolling median over a twentieth of the series (a light one for short series)."""
    n = len(v)
    return rolling_median(v, max(1, n // frac) | 1) if n >= 20 else v.astype(float)


def hinge_onset(y: np.ndarray, lo: int, hi: int, max_points: int = 2000, candidates: int = 300
                ) -> tuple[int, float]:
    """Where a rise sets in: the t0 in [lo, hi] whose model y = a + b·t + c·t² + d·max(0, t − t0)
    (a smooth, possibly curved, course and an added rise from t0, d > 0) fits ``y[lo:]`` best by
    least squares; with its R². Fitted on at most ``max_points`` points (a regular subsample) and
    ``candidates`` onsets. Fits within rounding of each other are ties, won by the earlier onset,
    and a rise within rounding of 0 counts: on an exactly straight line every onset fits, and
    which one rounding error favours would depend on the machine's BLAS."""
    n = len(y)
    idx = np.arange(lo, n, max(1, (n - lo) // max_points))
    yy, t = y[idx].astype(np.float64), idx.astype(np.float64)
    scale = max(1.0, float(t.std()))
    tn = (t - t.mean()) / scale
    base = np.stack([np.ones_like(tn), tn, tn * tn], 1)
    total = float(((yy - yy.mean()) ** 2).sum()) or 1.0
    tie, flat = 1e-9 * total, -1e-9 * (float(np.abs(yy).max()) + 1e-300)
    best, onset = np.inf, hi
    for t0 in np.unique(np.linspace(lo, hi, min(candidates, max(2, hi - lo + 1))).astype(np.int64)):
        a = np.column_stack([base, np.maximum(0.0, t - t0) / scale])
        coef, *_ = np.linalg.lstsq(a, yy, rcond=None)
        sse = float(((a @ coef - yy) ** 2).sum())
        if coef[-1] > flat and sse < best - tie:
            best, onset = sse, int(t0)
    return onset, 1 - best / total if np.isfinite(best) else 0.0


def level_shift(x: np.ndarray, min_side: int, block: int = 1 << 18) -> tuple[int | None, float, float]:
    """The split that best separates two mean levels (CUSUM / two-sample t statistic), each side
    >= ``min_side`` points: (index, median before, median after). The splits' scores are taken
    ``block`` at a time (a 10M-point series holds its running sum and a block's temporaries, not
    eight arrays of its length); the first best, as one argmax over them all would pick."""
    n = len(x)
    min_side = max(3, min_side)
    if n < 2 * min_side:
        return None, 0.0, 0.0
    csum = np.cumsum(x)
    best, top = -1, -np.inf
    for lo in range(min_side, n - min_side + 1, block):
        c = np.arange(lo, min(lo + block, n - min_side + 1))
        left = csum[c - 1] / c
        right = (csum[-1] - csum[c - 1]) / (n - c)
        score = np.abs(left - right) * np.sqrt(c * (n - c) / n)
        i = int(np.argmax(score))
        if np.isnan(score[i]):  # (argmax takes the first NaN as the largest)
            best = int(c[i])
            break
        if score[i] > top or best < 0:
            best, top = int(c[i]), float(score[i])
    return best, float(np.median(x[:best])), float(np.median(x[best:]))
