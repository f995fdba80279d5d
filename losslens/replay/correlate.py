"""Does the loss follow the replayed batch composition? Rank correlation of the de-trended loss
with the mean length of each step's batches, per-bucket loss levels, and a Monte-Carlo p-value
over replayed seeds (the same strategy, other seeds: the null that the loss ignores this order)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from losslens.detectors.stats import detrend, spearman
from losslens.replay.strategies import Epoch, Plan, build_epochs


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
    events = idx[_event_positions(y)]  # replayed steps of ladder peaks and spikes
    in_runs = _in_long_runs(bucket, events, run_k)
    null, null_runs = [], []
    for i in range(null_seeds):
        other, other_bucket = step_table(build_epochs(strategy, lengths, plan, seed + 10_000 + 97 * i,
                                                      epochs), grad_accum, world_size)
        null.append(spearman(r, other[idx]))
        null_runs.append(_in_long_runs(other_bucket, events, run_k))
        if tick:
            tick(i + 1, null_seeds)
    p = (1 + sum(abs(x) >= abs(rho) for x in null)) / (1 + len(null))
    out = {"aligned_records": int(ok.sum()), "rho": round(rho, 4), "p_value": p,
           "null_seeds": null_seeds, "null_rho_abs_95": round(float(np.quantile(np.abs(null), 0.95)), 4),
           "loss_level_by_bucket": levels,
           "loss_level_is": "ratio to trend" if ratio else "difference from trend",
           "events": int(len(events))}
    if len(events):
        p_runs = (1 + sum(x >= in_runs for x in null_runs)) / (1 + len(null_runs))
        out.update({f"events_in_runs_ge_{run_k}": round(in_runs, 4),
                    "events_in_runs_null_mean": round(float(np.mean(null_runs)), 4),
                    "events_in_runs_p_value": p_runs})
    return out


def _event_positions(y: np.ndarray) -> np.ndarray:
    """Positions of ladder peaks and loss spikes in the aligned loss."""
    from losslens.detectors.ladder import find_episodes
    from losslens.detectors.spike import Spike, spikes

    pos = [e.peak for e in find_episodes(y)]
    if len(y) > 8 and np.all(y > 0):
        d = Spike()  # the detector's own rule and defaults, not a copy of them
        flagged, _, _ = spikes(y, d.window, d.z, d.min_ratio, d.history)
        pos += np.flatnonzero(flagged).tolist()
    return np.unique(np.asarray(pos, dtype=np.int64))


def _in_long_runs(bucket: np.ndarray, at: np.ndarray, k: int) -> float:
    """Share of the steps ``at`` that sit inside a run of >= k steps of the same bucket."""
    if len(at) == 0:
        return 0.0
    change = np.concatenate([[True], bucket[1:] != bucket[:-1]])
    run_id = np.cumsum(change) - 1
    lengths = np.bincount(run_id)
    return float(np.mean(lengths[run_id[at]] >= k))


def attribute(findings: list, correlation: dict, alpha: float = 0.01) -> list:
    """Ladder and multimodal findings take cause ``batch_composition`` when the replay ties the
    loss to the batch order (p <= alpha); the correlation goes into their evidence."""
    from dataclasses import replace

    p = correlation.get("p_value")
    if p is None or p > alpha:  # with 99 null seeds the smallest p is 0.01: inclusive
        return findings
    out = []
    for f in findings:
        if f.kind in ("ladder", "multimodal"):
            ev = {**f.evidence, "cause": "batch_composition",
                  "replay_correlation": {"rho": correlation["rho"], "p_value": p}}
            f = replace(f, evidence=ev, summary=f.summary + f" — replay: the loss follows the batch "
                        f"lengths (ρ={correlation['rho']:+.2f}, p={p:.2g})")
        out.append(f)
    return out
