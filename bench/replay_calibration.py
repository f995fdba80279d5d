"""Calibration of replay's verdicts, per strategy: the share of p <= 0.01 (and <= 0.05) when the
loss ignores the batches (it should be about 0.01 and 0.05: the p-values uniform), and the power
(the share of "dependence: true") when the de-trended loss follows the step's batch length with a
rank correlation of 0.3, 0.6 and 0.9, on 1,250 optimizer steps.

    python bench/replay_calibration.py [--trials 100] [--strategies hf-group-by-length,...]

Two paths: ``batches`` (what the run fed, recorded: the fed sequence against circular shifts of
itself) and ``sampler`` (the strategy replayed with the run's seed against 99 other seeds).
The loss: a decaying trend, AR(1) noise (phi 0.5), and a·z(length) with a set for the target
correlation; 10,000 log-normal lengths, 8 samples a step. Baseline: the nominal levels (0.01,
0.05) and the issue's goal (power >= 0.99 at rho 0.9)."""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from losslens.detectors.stats import detrend
from losslens.replay.correlate import seed_specific, seed_tables, step_table
from losslens.replay.fed import Fed, correlate_fed
from losslens.replay.strategies import Plan, build_epochs

STRATEGIES = ("hf-group-by-length", "hf-random", "torch-distributed", "fairseq", "lhotse",
              "bucketed-shuffle", "static-sorted")
LEVELS = (0.3, 0.6, 0.9)


def loss_for(mean_len: np.ndarray, rho: float, rng: np.random.Generator) -> np.ndarray:
    """A decaying loss whose de-trended part correlates about ``rho`` with ``mean_len``."""
    n = len(mean_len)
    e = np.zeros(n)
    shocks = rng.normal(0, 1, n)
    for i in range(1, n):
        e[i] = 0.5 * e[i - 1] + shocks[i]
    e /= e.std()
    z = (mean_len - mean_len.mean()) / max(mean_len.std(), 1e-9)
    a = rho / np.sqrt(max(1e-9, 1 - rho ** 2))
    return 2.0 + 1.5 * np.exp(-np.arange(n) / 300) + 0.05 * (e + a * z)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--strategies", default=",".join(STRATEGIES))
    ap.add_argument("--steps", type=int, default=1250)
    args = ap.parse_args()
    rng0 = np.random.default_rng(0)
    lens = np.clip(np.round(rng0.lognormal(5.5, 0.7, args.steps * 8)), 8, 4000).astype(np.int64)
    plan = Plan((0, 256, 512, 1024, 4001), token_budget=4096, max_batch_size=8, max_seq_len=4000,
                per_device_batch=8)
    t_lens = torch.from_numpy(lens)
    print("| strategy | path | p<=0.01 under no dependence | p<=0.05 | power rho 0.3 | 0.6 | 0.9 |")
    print("|---|---|---|---|---|---|---|")
    for strategy in args.strategies.split(","):
        started = time.perf_counter()
        mean_len, bucket = step_table(build_epochs(strategy, t_lens, plan, 7, 1), plan)
        mean_len = mean_len[: args.steps]
        n = len(mean_len)
        others = np.array([m[:n] if len(m) >= n else np.resize(m, n) for m, _ in
                           seed_tables(strategy, t_lens, plan, [10_007 + 97 * i for i in range(99)], 1)])
        fed = Fed(np.arange(n), mean_len, mean_len, bucket[:n], "length")
        rows = {"batches": [], "sampler": []}
        for level in (0.0, *LEVELS):
            hits = {"batches": [], "sampler": []}
            for t in range(args.trials):
                rng = np.random.default_rng(1000 * t + int(level * 10))
                y = loss_for(mean_len, level, rng)
                steps = np.arange(n)
                v = correlate_fed(steps, y, fed, seed=t)
                hits["batches"].append(v["verdict"]["p_value"])
                r, _ = detrend(y, 201)
                hits["sampler"].append(seed_specific(r, mean_len, others)["p_value"] or 1.0)
            for path in rows:
                p = np.array(hits[path], dtype=float)
                rows[path].append((float(np.mean(p <= 0.01)), float(np.mean(p <= 0.05))))
        for path, got in rows.items():
            null01, null05 = got[0]
            power = " | ".join(f"{x[0]:.2f}" for x in got[1:])
            print(f"| {strategy} | {path} | {null01:.2f} | {null05:.2f} | {power} |", flush=True)
        print(f"<!-- {strategy}: {time.perf_counter() - started:.0f} s -->", flush=True)


if __name__ == "__main__":
    main()
