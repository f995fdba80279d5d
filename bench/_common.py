"""Helpers shared by the benchmarks: generated logs, timing, peak RSS of a child process."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

OUT = Path(__file__).parent / "out"


def dflash_log(n: int) -> Path:
    """A generated DFlash log of ``n`` lines (cached in bench/out)."""
    from losslens import synth

    OUT.mkdir(exist_ok=True)
    path = OUT / f"dflash_{n}.log"
    if not path.exists():
        with open(path, "w") as f:
            for line in synth.dflash_lines(n):
                f.write(line + "\n")
    return path


def jsonl_log(n: int) -> Path:
    """A generated narrow JSON Lines log of ``n`` records of four columns (step, loss, lr, grad
    norm; cached in bench/out)."""
    import json
    import math
    import random

    OUT.mkdir(exist_ok=True)
    path = OUT / f"narrow_{n}.jsonl"
    if not path.exists():
        rng = random.Random(0)
        with open(path, "w") as f:
            for i in range(n):
                loss = round(3 / math.sqrt(1 + i / 100) + rng.gauss(0, 0.02), 4)
                f.write(json.dumps({"step": i, "train/loss": loss, "train/lr": 1e-4,
                                    "train/grad_norm": round(rng.uniform(0.5, 1.5), 3)}) + "\n")
    return path


def best_of(fn, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def child_peak_rss_mb(code: str) -> float:
    """Run ``code`` in a fresh interpreter; its own peak resident memory in MiB."""
    probe = code + "\nimport resource; print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True)
    return int(out.stdout.strip().splitlines()[-1]) / 1024
