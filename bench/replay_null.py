"""`losslens replay --log` (the Monte-Carlo over 99 other seeds) against the simplest baseline, the
same `losslens replay` without `--log` (one replay, its statistics, no null), same run.

    python bench/replay_null.py [--samples 902000] [--repeat 3] [--null-seeds 99]

902K log-normal lengths (median ~1500, clipped to 8192) under the seed's bounds make ~56K
bucketed-shuffle steps in one epoch; the log is that seed's loss: trend + 0.15 σ of each step's
batch length + noise (the dependence is planted, so the verdict must say so). Both commands run
as a user runs them (a fresh process: imports, reading, report), alternately, best of --repeat.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from _common import OUT  # noqa: E402

BOUNDS = "0,770,1216,1728,2432,3296,8193"


def inputs(samples: int, seed: int) -> tuple[Path, Path]:
    """The lengths (.npy) and a log whose loss follows the replayed batches (cached in bench/out)."""
    import torch

    from losslens.replay import Plan, build_epochs
    from losslens.replay.correlate import step_table

    OUT.mkdir(exist_ok=True)
    lengths, log = OUT / f"replay_null_{samples}.npy", OUT / f"replay_null_{samples}_seed{seed}.log"
    if lengths.exists() and log.exists():
        return lengths, log
    rng = np.random.default_rng(0)
    lens = np.clip(rng.lognormal(np.log(1500), 0.8, samples), 16, 8192).astype(np.int64)
    np.save(lengths, lens)
    plan = Plan(tuple(int(b) for b in BOUNDS.split(",")))
    mean_len, _ = step_table(build_epochs("bucketed-shuffle", torch.from_numpy(lens), plan, seed, 1), plan)
    trend = 2.0 + 0.5 * np.exp(-np.arange(len(mean_len)) / (len(mean_len) / 5))
    loss = trend + 0.15 * (mean_len - mean_len.mean()) / mean_len.std() + rng.normal(0, 0.05, len(mean_len))
    with open(log, "w") as f:
        f.writelines(f"step={i} loss={x:.4f}\n" for i, x in enumerate(loss))
    return lengths, log


def timed(cmd: list[str]) -> tuple[float, str]:
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    took = time.perf_counter() - t
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    return took, proc.stdout


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=902_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--null-seeds", type=int, default=99)
    args = ap.parse_args()
    seed = 3
    lengths, log = inputs(args.samples, seed)
    base = [sys.executable, "-m", "losslens", "replay", "--lengths", str(lengths), "--seed", str(seed),
            "--epochs", "1", "--bounds", BOUNDS]
    with_log = [*base, "--log", str(log), "--null-seeds", str(args.null_seeds)]
    plain, full, first = [], [], ""
    for _ in range(args.repeat):
        plain.append(timed(base)[0])
        took, out = timed(with_log)
        full.append(took)
        first = first or out.splitlines()[0]
    steps = sum(1 for _ in open(log))
    print(f"{args.samples:,} lengths, {steps:,} logged steps, bucketed-shuffle, {args.null_seeds} null seeds")
    print(f"plain replay (baseline)    {min(plain):6.2f} s")
    print(f"replay --log               {min(full):6.2f} s  ratio {min(full) / min(plain):.2f} (goal <= 3)")
    print(first[:120])


if __name__ == "__main__":
    main()
