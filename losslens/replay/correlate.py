"""Does the loss follow the replayed batch composition? Rank correlation of the de-trended loss
with the mean length of each step's batches, per-bucket loss levels, and a Monte-Carlo p-value
over replayed seeds (the same strategy, other seeds: the null that the loss ignores this order)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from losslens.detectors.stats import detrend, spearman
from losslens.replay.fed import attribute, dependence, event_positions, in_long_runs
from losslens.replay.strategies import Epoch, Plan, build_epochs

__all__ = ["attribute", "correlate", "step_table"]


def step_table(epochs: list[Epoch], grad_accum: int, world_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Per optimizer step: mean longest-sample length of its batches, and the bucket of its
    longest batch."""
    max_len = torch.cat([e.max_len for e in epochs]).double()
    bucket = torch.cat([e.bucket for e in epochs])
    per = max(1, grad_accum * world_size)
    n = max_len.numel() // per
    ml = max_len[: n * per].reshape(n, per)
    top = torch.argmax(ml, dim=1)
    b = bucket[: n * per].reshape(n, per).gather(1, top[:, None]).flatten()
    return ml.mean(1).cpu().numpy(), b.cpu().numpy()


def correlate(steps: np.ndarray, loss: np.ndarray, strategy: str, lengths: torch.Tensor, plan: Plan,
              seed: int, epochs: int, grad_accum: int = 1, world_size: int = 1, offset: int = 0,
              null_seeds: int = 99, window: int = 201, run_k: int = 4,
              tick: Callable[[int, int], None] | None = None) -> dict:
    """Align logged steps (minus ``offset``) with replayed steps and test the dependence."""
    mean_len, bucket = step_table(build_epochs(strategy, lengths, plan, seed, epochs), grad_accum,
                                  world_size)
    idx = steps.astype(np.int64) - offset
    ok = (idx >= 0) & (idx < len(mean_len)) & np.isfinite(loss)
    if ok.sum() < 10:
        return {"aligned_records": int(ok.sum()), "rho": None, "p_value": None,
                "note": "fewer than 10 logged steps fall inside the replayed steps"}
    idx, y = idx[ok], loss[ok]
    r, trend = detrend(y, window)
    ratio = bool(np.nanmin(y) > 0 and np.nanmin(trend) > 0)  # detrend's own choice
    rho = spearman(r, mean_len[idx])
    levels = {int(k): round(float(np.median(r[bucket[idx] == k])), 4) for k in np.unique(bucket[idx])}
    events = idx[event_positions(y)]  # replayed steps of ladder peaks and spikes
    in_runs = in_long_runs(bucket, events, run_k)
    null, null_runs = [], []
    for i in range(null_seeds):
        other, other_bucket = step_table(build_epochs(strategy, lengths, plan, seed + 10_000 + 97 * i,
                                                      epochs), grad_accum, world_size)
        null.append(spearman(r, other[idx]))
        null_runs.append(in_long_runs(other_bucket, events, run_k))
        if tick:
            tick(i + 1, null_seeds)
    return dependence(int(ok.sum()), rho, null, levels, ratio, len(events), in_runs, null_runs, run_k,
                      {"null_seeds": null_seeds})
