"""GPU check for the device tool: a 1,000-seed Monte-Carlo of the longest same-bucket run on
CUDA against CPU (goal >= 10x), and the per-seed statistics identical on both devices; then the
replay itself (902K seed-shaped lengths × 6 epochs of bucketed-shuffle) on both devices: timed,
and the batch sequences identical (a seed names one sequence on every machine).

    python bench/replay_gpu.py [--seeds 1000] [--json FILE]   # torch with CUDA, numpy; no polars

On the device tool: `python bench/replay_gpu.py --json $OUT/replay_gpu.json` from the repo root.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, not installed

from losslens.replay.order import shuffled_max_runs  # noqa: E402
from losslens.replay.strategies import Plan, build_epochs  # noqa: E402
from losslens.synth import seed_lengths  # noqa: E402

SEED_PLAN = Plan((0, 770, 1216, 1728, 2432, 3296, 8193), 49152, 64, 8192)


def replay_on(device: torch.device, lengths: np.ndarray) -> tuple[float, torch.Tensor]:
    lens = torch.from_numpy(lengths).to(device)
    build_epochs("bucketed-shuffle", lens, SEED_PLAN, 0, 1)  # warm-up
    if device.type == "cuda":
        torch.cuda.synchronize()
    t = time.perf_counter()
    eps = build_epochs("bucketed-shuffle", lens, SEED_PLAN, 0, 6)
    buckets = torch.cat([e.bucket for e in eps])
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t, buckets.cpu()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=1000)
    ap.add_argument("--batches", type=int, default=55_715)  # one epoch of the seed-shaped replay
    ap.add_argument("--json", help="Also write the figures to this file.")
    args = ap.parse_args()
    result: dict = {"seeds": args.seeds, "batches": args.batches, "torch": torch.__version__}
    rng = np.random.default_rng(0)
    share = np.array([0.05, 0.08, 0.10, 0.13, 0.13, 0.51])
    labels = torch.from_numpy(rng.choice(6, size=args.batches, p=share / share.sum()))
    t = time.perf_counter()
    cpu = shuffled_max_runs(labels, args.seeds, seed=1)
    t_cpu = time.perf_counter() - t
    print(f"CPU  {args.seeds} seeds × {args.batches:,} batches: {t_cpu:.2f} s; mean max run "
          f"{cpu.double().mean():.2f}")
    result.update(cpu_s=round(t_cpu, 3), cpu_mean_max_run=float(cpu.double().mean()))
    if not torch.cuda.is_available():
        print("no CUDA device: GPU part skipped")
        _write(args.json, result)
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
    result.update(device=torch.cuda.get_device_name(), gpu_s=round(t_gpu, 4),
                  speedup=round(t_cpu / t_gpu, 1), identical=same)
    lengths = seed_lengths()
    r_cpu, b_cpu = replay_on(torch.device("cpu"), lengths)
    r_gpu, b_gpu = replay_on(dev, lengths)
    same_replay = bool(torch.equal(b_cpu, b_gpu))
    print(f"replay 902K × 6 epochs bucketed-shuffle: CPU {r_cpu:.2f} s, CUDA {r_gpu:.3f} s; "
          f"batch sequences identical: {same_replay}")
    result.update(replay_cpu_s=round(r_cpu, 3), replay_gpu_s=round(r_gpu, 4), replay_identical=same_replay)
    _write(args.json, result)


def _write(path: str | None, result: dict) -> None:
    if path:
        Path(path).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
