"""Replay speed on CPU: 902K synthetic lengths (log-normal, median ~1500, clipped to 8192) × 6
epochs of bucketed-shuffle + run statistics, torch vs a plain numpy reference, same run.

    python bench/replay_speed.py [--samples 902000] [--epochs 6]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from losslens.replay import Plan, build_epochs
from losslens.replay.order import order_stats

BOUNDS = (0, 770, 1216, 1728, 2432, 3296, 8193)


def numpy_reference(lens: np.ndarray, plan: Plan, seed: int, epochs: int) -> tuple[int, int]:
    """The same algorithm written plainly in numpy: (batches, longest same-bucket run)."""
    bs = np.array(plan.bucket_batch_sizes())
    edges = np.array(plan.bounds[1:-1])
    seqs = []
    for e in range(epochs):
        rng = np.random.default_rng(seed + e)
        b = np.searchsorted(edges, lens, side="right")
        perm = rng.permutation(len(lens))
        order = perm[np.argsort(b[perm], kind="stable")]
        bo = b[order]
        counts = np.bincount(b, minlength=plan.k)
        start = np.cumsum(counts) - counts
        local = (np.arange(len(order)) - start[bo]) // bs[bo]
        n_k = -(-counts // bs)
        first = np.cumsum(n_k) - n_k
        batch_id = first[bo] + local
        n_b = int(n_k.sum())
        cut = np.flatnonzero(np.diff(batch_id)) + 1
        max_len = np.maximum.reduceat(lens[order], np.concatenate([[0], cut]))
        bucket = np.searchsorted(edges, max_len, side="right")
        seqs.append(bucket[rng.permutation(n_b)])
    seq = np.concatenate(seqs)
    change = np.flatnonzero(np.diff(seq)) + 1
    runs = np.diff(np.concatenate([[0], change, [len(seq)]]))
    return len(seq), int(runs.max())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=902_000)
    ap.add_argument("--epochs", type=int, default=6)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    lens = np.clip(rng.lognormal(np.log(1500), 0.8, args.samples), 16, 8192).astype(np.int64)
    plan = Plan(BOUNDS)
    t_lens = torch.from_numpy(lens)
    build_epochs("bucketed-shuffle", t_lens[:1000], plan, 0, 1)  # warm-up
    t = time.perf_counter()
    stats = order_stats(build_epochs("bucketed-shuffle", t_lens, plan, 0, args.epochs), plan)
    t_torch = time.perf_counter() - t
    t = time.perf_counter()
    n_ref, run_ref = numpy_reference(lens, plan, 0, args.epochs)
    t_np = time.perf_counter() - t
    print(f"{args.samples:,} lengths × {args.epochs} epochs of bucketed-shuffle + run statistics")
    print(f"torch (CPU, {torch.get_num_threads()} threads)  {t_torch:6.2f} s  (goal <= 1 s)")
    print(f"numpy reference             {t_np:6.2f} s  ratio {t_np / t_torch:.2f}")
    print(f"batches {stats['batches_per_epoch'] * args.epochs:,.0f} (numpy {n_ref:,}); last-bucket share "
          f"{stats['bucket_batch_share'][-1]:.2f}; max same-bucket run {stats['max_same_bucket_run']} "
          f"(numpy {run_ref}; i.i.d. expectation {stats['expected_max_run_iid']})")


if __name__ == "__main__":
    main()
