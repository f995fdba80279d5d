"""Order-free: does the loss show what a batching strategy predicts *in distribution*, when the
run's order cannot be reproduced (unknown RNG state, a custom sampler)? From the lengths and the
strategy's parameters alone:

- band weights: a loss that falls into bands by batch composition has band weights equal to the
  strategy's shares of optimizer steps by (groups of adjacent) length buckets — 52 % of steps in
  the top bucket ↔ a 52 % band. The closest grouping's distance is compared with band weights
  drawn at random (Dirichlet), the chance of a match that close;
- period: a strategy with a fixed period (HF's mega-batches: mult / W steps) puts it in the loss;
  the loss's periodogram power at that period is ranked among all its frequencies;
- smear: each logged value averages (logging interval × micro-batches per step) batches; when
  that leaves few logged values made of one bucket, the logged loss cannot show per-bucket
  levels, and "no bands" says nothing.

The verdict takes the smallest p-value of the tests that could run, Bonferroni-corrected."""

from __future__ import annotations

import itertools

import numpy as np

from losslens.replay.fed import verdict

__all__ = ["band_match", "order_free", "period_power", "smear"]

DRAWS = 20_000  # random band weights for the band test's null
MIN_PURITY = 0.6  # logged windows whose steps are mostly one bucket, below which bands are smeared


def _groupings(k: int, m: int) -> list[tuple[int, ...]]:
    """Every way of cutting k ordered buckets into m contiguous groups (the cut points)."""
    return list(itertools.combinations(range(1, k), m - 1))


def _grouped(shares: np.ndarray, cuts: tuple[int, ...]) -> np.ndarray:
    edges = (0, *cuts, len(shares))
    return np.array([shares[a:b].sum() for a, b in zip(edges[:-1], edges[1:], strict=True)])


def band_match(bands: list[float], step_share: list[float], seed: int = 0) -> dict | None:
    """Band weights (ascending loss level) against the step shares of the buckets (ascending length),
    grouped into as many adjacent groups as there are bands, in either direction (longer batches may
    carry a higher or a lower loss). None when there are fewer buckets than bands."""
    w = np.asarray(bands, dtype=np.float64)
    w = w / w.sum()
    s = np.asarray(step_share, dtype=np.float64)
    present = np.flatnonzero(s > 0)  # buckets that feed any step
    s = s[present]
    m, k = len(w), len(s)
    if m < 2 or k < m:
        return None
    cuts = _groupings(k, m)
    options = [_grouped(s, c) for c in cuts]
    options += [g[::-1] for g in options]
    table = np.asarray(options)  # (groupings, m)
    dist = 0.5 * np.abs(table - w[None, :]).sum(1)
    best = int(np.argmin(dist))
    rng = np.random.default_rng(seed)
    draws = rng.dirichlet(np.ones(m), DRAWS)
    draws = draws[(draws >= 0.05).all(1)]  # bands under 5 % are not reported as bands
    null = (0.5 * np.abs(draws[:, None, :] - table[None, :, :]).sum(2)).min(1)
    p = (1 + int((null <= dist[best]).sum())) / (1 + len(null))
    c = cuts[best % len(cuts)]
    edges = (0, *c, k)
    groups = [present[a:b].tolist() for a, b in zip(edges[:-1], edges[1:], strict=True)]
    if best >= len(cuts):  # longer batches, lower loss: the bands run the other way
        groups = groups[::-1]
    return {"band_shares": [round(float(x), 4) for x in w], "bucket_groups": groups,
            "predicted_shares": [round(float(x), 4) for x in table[best]],
            "distance": round(float(dist[best]), 4), "p_value": round(p, 5),
            "null": f"{len(null):,} random band weights (Dirichlet, bands >= 5 %)"}


def period_power(steps: np.ndarray, loss: np.ndarray, period: float) -> dict | None:
    """The loss periodogram's power at the strategy's period, ranked among all its frequencies
    (p: the share of frequencies at least as strong). None when the log is too short for 3 cycles."""
    from losslens.detectors.periodicity import default_window, spectrum
    from losslens.detectors.stats import regular_grid

    if len(steps) < 16:
        return None
    grid, spacing = regular_grid(steps, loss)
    if len(grid) * spacing < 3 * period or period < 2 * spacing:
        return None
    freqs, power, _ = spectrum(grid, default_window(len(grid)))
    f0 = spacing / period  # cycles per grid point
    if len(freqs) < 8:
        return None
    i = int(np.argmin(np.abs(freqs - f0)))
    lo, hi = max(1, i - 1), i + 2
    near = power[lo:hi].max()  # the line may fall between two bins
    rest = np.concatenate([power[1:lo], power[hi:]])  # every other frequency
    p = (1 + int((rest >= near).sum())) / (1 + len(rest))
    return {"period_steps": round(float(period), 2), "power_rank_p": round(p, 4),
            "bins": int(len(rest))}


def _runs(member: np.ndarray) -> np.ndarray:
    """Lengths of the runs of True in a boolean sequence."""
    edges = np.diff(np.concatenate([[0], member.astype(np.int8), [0]]))
    return np.flatnonzero(edges == -1) - np.flatnonzero(edges == 1)


def band_runs(high: np.ndarray, predicted: list[np.ndarray]) -> dict | None:
    """The runs of the loss's top band (consecutive logged records in it) against the runs of the
    strategy's top bucket group at the same logged steps, over replays with other seeds, and against
    records in random order (what no order at all gives for the same share). Reported, not
    counted in the verdict: a loss's own autocorrelation lengthens runs too."""
    obs = _runs(high)
    if len(obs) < 3 or not predicted:
        return None
    pred = np.array([_runs(p).mean() if p.any() else 0.0 for p in predicted])
    share = float(high.mean())
    rng = np.random.default_rng(0)
    perm = np.array([_runs(rng.permutation(high)).mean() for _ in range(199)])
    mean = float(obs.mean())
    return {"observed_mean_run": round(mean, 3), "strategy_mean_run": round(float(np.median(pred)), 3),
            "strategy_q05_q95": [round(float(np.quantile(pred, 0.05)), 3),
                                 round(float(np.quantile(pred, 0.95)), 3)],
            "replays": len(predicted), "no_order_mean_run": round(float(perm.mean()), 3),
            "longer_than_no_order_p": (1 + int((perm >= mean).sum())) / 200,
            "top_band_share": round(share, 4)}


def smear(bucket: np.ndarray, k: int, per_step: int = 1) -> dict:
    """How pure the logged windows are: each logged value covers ``k`` optimizer steps of
    ``per_step`` micro-batches each (``bucket``: each micro-batch's, in feed order; or each
    step's with ``per_step`` 1); the mean share of a window's micro-batches in its majority
    bucket (1: every logged value is one bucket's)."""
    m = k * per_step
    n = len(bucket) // m
    out: dict = {"steps_per_logged_value": k, "micro_batches_per_logged_value": m, "purity": None}
    if n == 0:
        return out
    windows = bucket[: n * m].reshape(n, m)
    counts = np.stack([(windows == b).sum(1) for b in np.unique(bucket)], 1)
    out["purity"] = round(float((counts.max(1) / m).mean()), 4)
    return out


def order_free(steps: np.ndarray, loss: np.ndarray, bands: list[float] | None,
               step_share: list[float], period: float | None, bucket: np.ndarray, k_log: int,
               alpha: float = 0.01, micro: np.ndarray | None = None, per_step: int = 1) -> dict:
    """The order-free verdict: the tests that can run, their p-values, and the smallest
    (Bonferroni) as the verdict's. ``micro``: each micro-batch's bucket in feed order, ``per_step``
    of them a step (the smear counts them; else each step's bucket, ``bucket``)."""
    tests: dict = {"smear": smear(bucket, k_log) if micro is None else smear(micro, k_log, per_step)}
    ps = []
    if bands:
        band = band_match(bands, step_share)
        if band:
            tests["band_weights"] = band
            ps.append(band["p_value"])
    if period:
        per = period_power(steps, loss, period)
        if per:
            tests["period"] = per
            ps.append(per["power_rank_p"])
    purity = tests["smear"]["purity"]
    smeared = purity is not None and purity < MIN_PURITY
    if not ps:
        reason = ("the loss has no bands and the strategy no period to test" if not smeared else
                  f"each logged value averages {tests['smear']['micro_batches_per_logged_value']} "
                  f"micro-batches and only {purity:.0%} of a window is one bucket on average: the "
                  "logged loss cannot show per-bucket levels")
        return verdict(None, None, "order-free", tests, reason)
    p = min(1.0, min(ps) * len(ps))
    if p <= alpha:
        return verdict(True, p, "order-free", tests)
    if smeared:
        return verdict(None, p, "order-free", tests, f"each logged value averages "
                       f"{tests['smear']['micro_batches_per_logged_value']} micro-batches (window purity "
                       f"{purity:.0%}): the bands a dependence would make are smeared out")
    return verdict(False, p, "order-free", tests)
