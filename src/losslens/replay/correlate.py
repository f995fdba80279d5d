"""Does the loss follow the replayed batch composition? Rank correlation of the de-trended loss
with the mean length of each step's batches, per-bucket loss levels, and a Monte-Carlo p-value
over replayed seeds (the same strategy, other seeds: the null that the loss ignores this order)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from itertools import chain

import numpy as np
import torch

from losslens.detectors.stats import ranks, spearman, spearman_rows
from losslens.replay.align import check_alignment
from losslens.replay.fed import (
    Fed,
    attribute,
    correlate_fed,
    dependence,
    event_positions,
    in_long_runs,
    logged_view,
    logged_words,
    nearby_offsets,
    not_found,
    settled_residual,
    verdict,
    window_of,
)
from losslens.replay.strategies import Epoch, Plan, bucket_layout, build_epochs

__all__ = ["attribute", "correlate", "seed_tables", "step_table", "to_length"]


def step_table(epochs: list[Epoch], plan: Plan) -> tuple[np.ndarray, np.ndarray]:
    """Per optimizer step (``plan.per_step`` micro-batches): mean longest-sample length of its
    batches, and the bucket of its longest batch. Steps are counted epoch by epoch, as the
    frameworks count them: an epoch's last micro-batches that do not fill a step are a step of
    their own (the HF Trainer, Lightning and fairseq step on a partial accumulation at the end
    of an epoch), and the next epoch starts a new step."""
    per = plan.per_step
    means, buckets = [], []
    for e in epochs:
        ml, b = e.max_len.double(), e.bucket
        full = ml.numel() // per * per
        parts = [(ml[:full].reshape(-1, per), b[:full].reshape(-1, per))]
        if full < ml.numel():  # the epoch's tail: a step of fewer micro-batches
            parts.append((ml[full:].reshape(1, -1), b[full:].reshape(1, -1)))
        for m, bb in parts:
            top = torch.argmax(m, dim=1)
            means.append(m.mean(1).cpu().numpy())
            buckets.append(bb.gather(1, top[:, None]).flatten().cpu().numpy())
    if not means:
        return np.zeros(0), np.zeros(0, dtype=np.int64)
    return np.concatenate(means), np.concatenate(buckets)


def correlate(steps: np.ndarray, loss: np.ndarray, strategy: str, lengths: torch.Tensor, plan: Plan,
              seed: int, epochs: int, offset: int = 0,
              null_seeds: int = 99, window: int = 201, run_k: int = 4,
              tick: Callable[[int, int], None] | None = None, log_epoch: np.ndarray | None = None,
              allow_misalignment: bool = False, logged_loss: str = "mean", built: list[Epoch] | None = None,
              alignment: dict | None = None) -> dict:
    """Align logged steps (minus ``offset``) with replayed steps — refused on a mismatch (see
    ``align``) unless allowed — and test the dependence. ``built``: this seed's epochs when the
    caller has them already; ``alignment``: the caller's check of the same steps."""
    eps = built if built is not None else build_epochs(strategy, lengths, plan, seed, epochs)
    mean_len, bucket = step_table(eps, plan)
    idx = steps.astype(np.int64) - offset
    if alignment is None:
        alignment = check_alignment(idx, log_epoch, len(mean_len), epochs, sum(e.n for e in eps) / epochs,
                                    plan.per_step, allow_misalignment)
    ok = (idx >= 0) & (idx < len(mean_len)) & np.isfinite(loss)
    if ok.sum() < 10:
        note = "fewer than 10 logged steps fall inside the replayed steps"
        return {"aligned_records": int(ok.sum()), "rho": None, "p_value": None, "note": note,
                "alignment": alignment, "verdict": verdict(None, None, "sampler", {}, note)}
    idx, y = idx[ok], loss[ok]
    events = idx[event_positions(y)]  # replayed steps of ladder peaks and spikes
    r, idx, trend, w = settled_residual(y, idx, window_of(idx, "mean"), window)
    ratio = bool(np.nanmin(y) > 0 and np.nanmin(trend) > 0)  # detrend's own choice
    k_log = window_of(idx, logged_loss)
    rho = spearman(r, logged_view(mean_len, idx, k_log))
    nearby_offsets(r, idx, mean_len, k_log, rho, offset, alignment)
    levels = {int(k): round(float(np.median(r[bucket[idx] == k])), 4) for k in np.unique(bucket[idx])}
    in_runs = in_long_runs(bucket, events, run_k)
    null_runs, others = [], []
    seeds = [seed + 10_000 + 97 * i for i in range(null_seeds)]
    # the first seed alone: a sampler whose order ignores the seed needs no other
    tables = chain(seed_tables(strategy, lengths, plan, seeds[:1], epochs),
                   seed_tables(strategy, lengths, plan, seeds[1:], epochs))
    for i, (other, other_bucket) in enumerate(tables):
        if i == 0 and np.array_equal(other, mean_len) and np.array_equal(other_bucket, bucket):
            return _fixed_order(steps, loss, mean_len, bucket, offset, null_seeds, seed, window, run_k,
                                logged_loss, alignment)
        # another order may pack into a step or two more or fewer (greedy packing, a bucket's tail)
        other, other_bucket = to_length(other, len(mean_len)), to_length(other_bucket, len(bucket))
        null_runs.append(in_long_runs(other_bucket, events, run_k))
        others.append(logged_view(other, idx, k_log))
        if tick:
            tick(i + 1, null_seeds)
    null = [float(x) for x in spearman_rows(r, np.asarray(others))]
    out = dependence(int(ok.sum()), rho, null, levels, ratio, len(events), in_runs, null_runs, run_k,
                     {"null_seeds": null_seeds, "alignment": alignment, "detrend_window_records": w})
    out["logged_loss"] = logged_words(k_log)
    v = seed_specific(r, logged_view(mean_len, idx, k_log), np.asarray(others))
    if v["dependence"] is False:  # no seed's order is proven the run's: "no" cannot be said
        v = not_found(v["p_value"], "sampler", v["tests"], v["tests"]["seed_specific"]["null"], alignment,
                      f"seed {seed} is not verified as the run's (a wrong seed, or an RNG state "
                      f"the emulation misses, shows no dependence either): record what the run "
                      f"fed (LossLensCallback(record=...)) and replay it with --batches")
    elif alignment.get("warning") and v["dependence"] is None:
        v["reason"] = f"the steps disagree: {alignment['warning']}; {v.get('reason', '')}"
    for name in ("seed_specific", "step_to_step"):
        v["tests"].get(name, {}).pop("null", None)
    out["verdict"] = v
    return out


def seed_tables(strategy: str, lengths: torch.Tensor, plan: Plan, seeds: list[int], epochs: int
                ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """``step_table`` of each seed's replay, in the order of ``seeds``: the batch tables only (no
    per-sample order), one seed per core at a time, each on one torch thread (a replay's ops are
    too small to gain from torch's own threads; whole seeds side by side do). Started when first
    iterated."""
    if not seeds:
        return
    workers = min(len(seeds), os.cpu_count() or 1)
    # what every seed's epochs share, made once (a bucketed strategy's buckets and batch ids)
    layout = bucket_layout(lengths.clamp(max=plan.max_seq_len), plan) \
        if strategy in ("bucketed-shuffle", "stride-interleave") else None

    def one(s: int) -> tuple[np.ndarray, np.ndarray]:
        return step_table(build_epochs(strategy, lengths, plan, s, epochs, samples=False, layout=layout),
                          plan)

    if workers == 1 or lengths.device.type != "cpu":
        yield from map(one, seeds)
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with ThreadPoolExecutor(workers) as pool:
            yield from pool.map(one, seeds)
    finally:
        torch.set_num_threads(threads)


def to_length(x: np.ndarray, n: int) -> np.ndarray:
    """Another replay's per-step ``x`` cut or extended (repeating its last value) to ``n`` entries."""
    return x[:n] if len(x) >= n else np.concatenate([x, np.repeat(x[-1:], n - len(x))])


def _fixed_order(steps: np.ndarray, loss: np.ndarray, mean_len: np.ndarray, bucket: np.ndarray, offset: int,
                 shifts: int, seed: int, window: int, run_k: int, logged_loss: str, alignment: dict) -> dict:
    """A sampler whose order does not depend on the seed (Lhotse without its in-bucket shuffle: its
    bucket picks come from a fixed RNG) replays the run's order exactly, like a record of what it
    fed: the null shifts that order against the loss, as for ``--batches``."""
    n = len(mean_len)
    fed = Fed(np.arange(n), mean_len, mean_len, bucket, "length")
    out = correlate_fed(steps, loss, fed, offset, shifts, seed, window, run_k, allow_misalignment=True,
                        logged_loss=logged_loss)
    out["alignment"] = alignment
    out["null"] = (f"{shifts} circular shifts of the replayed order (every seed of this sampler feeds "
                   "the same order)")
    out["verdict"] = {**out["verdict"], "method": "sampler"}
    return out


def _beyond(r: np.ndarray, shape: np.ndarray) -> np.ndarray:
    """The loss residual with its linear fit on the shared shape taken out."""
    c = shape - shape.mean()
    denom = float(c @ c)
    return r if denom == 0 else r - (float((r - r.mean()) @ c) / denom) * c


def seed_specific(r: np.ndarray, observed: np.ndarray, others: np.ndarray, alpha: float = 0.01) -> dict:
    """The verdict of a sampler replay: does the loss follow *this seed's* batch lengths beyond the
    shape every seed of the sampler shares (a length-grouped sampler's sawtooth has the same phase
    for every seed, so a plain correlation cannot tell this order from any other)? Two statistics,
    each computed for every seed: the loss with the shared shape (the mean over all seeds) fitted
    out, rank-correlated with the seed's lengths ranked among all seeds step by step
    (``seed_specific``); and the loss's step-to-step changes rank-correlated with the seed's
    (``step_to_step``: where seeds share the shape they differ at its edges, the steps where a
    grouped sampler moves from one length to the next). The sampler's sequences alone pick the
    one tested (``step_to_step`` where every seed feeds the same lengths at half the steps or
    more); the seed under test against the others is a permutation test (all seeds are
    exchangeable when the loss ignores the order)."""
    k = len(others)
    rows = np.vstack([observed[None, :], others])  # row 0: the seed under test
    shape = rows.mean(0)
    # each step's length as its rank among the seeds at that step: uniform under the null at every
    # step, whatever the sampler's shape, skew or spread there
    u = ranks(np.ascontiguousarray(rows.T)).T
    stats = spearman_rows(_beyond(r, shape), u)
    steps = spearman_rows(np.diff(r), np.diff(rows, axis=1)) if len(r) > 3 else np.zeros(k + 1)
    spec, null = float(stats[0]), stats[1:]
    p_level = (1 + sum(abs(x) >= abs(spec) for x in null)) / (1 + k)
    p_steps = (1 + sum(abs(x) >= abs(steps[0]) for x in steps[1:])) / (1 + k)
    shared = spearman(r, shape)
    spread = float(np.std(rows - shape))
    share = 1 - spread ** 2 / max(float(np.var(observed)), 1e-12)
    tests = {"seed_specific": {"rho": round(spec, 4), "p_value": p_level,
                               "null_rho_abs_95": round(float(np.quantile(np.abs(null), 0.95)), 4),
                               "null": [float(x) for x in null]},
             "step_to_step": {"rho": round(float(steps[0]), 4), "p_value": p_steps,
                              "null": [float(x) for x in steps[1:]]},
             "shared_shape": {"rho": round(shared, 4), "share_of_length_variance": round(share, 4)}}
    # one test, chosen by the sampler's sequences alone (not by the loss): where at most steps
    # every seed feeds the same lengths (a grouped sampler over a few distinct lengths), the seeds
    # differ only at the edges between them, and the step-to-step test is the one that sees them
    same = float(np.mean(np.all(rows == rows[:1], axis=0)))
    edges = same >= 0.5
    tests["step_to_step" if edges else "seed_specific"]["tested"] = True
    tests["shared_shape"]["steps_every_seed_feeds_alike"] = round(same, 4)
    p = p_steps if edges else p_level
    if spread < 1e-9:
        return verdict(None, None, "sampler", tests, "every seed of this sampler feeds the same "
                       "lengths per step: the order cannot be told from another seed's")
    if p <= alpha:
        return verdict(True, p, "sampler", tests)
    if abs(shared) >= 0.3:
        return verdict(None, p, "sampler", tests, f"the loss follows the shape every seed of this "
                       f"sampler shares (ρ={shared:+.2f}) but not this seed's order beyond it: wrong "
                       "seed or RNG state, or a cause with the same period")
    return verdict(False, p, "sampler", tests)
