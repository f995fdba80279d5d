"""GPU check for the device tool: a 1,000-seed Monte-Carlo of the longest same-bucket run on
CUDA against CPU (goal >= 10x), and the per-seed statistics identical on both devices.

    python bench/replay_gpu.py [--seeds 1000]      # needs torch with CUDA; numpy, no polars
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from losslens.replay.stats import shuffled_max_runs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=1000)
    ap.add_argument("--batches", type=int, default=55_715)  # one epoch of the seed-shaped replay
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    share = np.array([0.05, 0.08, 0.10, 0.13, 0.13, 0.51])
    labels = torch.from_numpy(rng.choice(6, size=args.batches, p=share / share.sum()))
    t = time.perf_counter()
    cpu = shuffled_max_runs(labels, args.seeds, seed=1)
    t_cpu = time.perf_counter() - t
    print(f"CPU  {args.seeds} seeds × {args.batches:,} batches: {t_cpu:.2f} s; mean max run "
          f"{cpu.double().mean():.2f}")
    if not torch.cuda.is_available():
        print("no CUDA device: GPU part skipped")
        return
    dev = torch.device("cuda")
    shuffled_max_runs(labels.to(dev), 8, seed=1)  # warm-up
    torch.cuda.synchronize()
    t = time.perf_counter()
    gpu = shuffled_max_runs(labels.to(dev), args.seeds, seed=1, chunk=256)
    torch.cuda.synchronize()
    t_gpu = time.perf_counter() - t
    same = bool(torch.equal(cpu, gpu.cpu()))
    print(f"CUDA {torch.cuda.get_device_name()}: {t_gpu:.3f} s; speed-up {t_cpu / t_gpu:.1f}x "
          f"(goal >= 10x); per-seed statistics identical: {same}")


if __name__ == "__main__":
    main()
