"""`losslens check DIR` over many small logs (--jobs 1 and --jobs N) against the simplest
baseline, one `losslens check LOG` process per log, same run.

    python bench/many_logs.py [--logs 1000] [--sample 20]

The separate calls are timed on a sample of the logs and scaled to all of them, then divided by
the core count (what a shell loop with `xargs -P cores` would at best take).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import OUT  # noqa: E402


def fleet(n: int) -> Path:
    """``n`` small DFlash logs of 300 lines, every tenth with a NaN (cached in bench/out)."""
    from losslens import synth

    root = OUT / f"many_{n}"
    if root.exists() and len(list(root.iterdir())) == n:
        return root
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    lines = list(synth.dflash_lines(300))
    for i in range(n):
        body = list(lines)
        if i % 10 == 0:
            body[250] = body[250].replace("loss=", "loss=nan #", 1)
        (root / f"run{i:05d}.log").write_text("\n".join(body) + "\n")
    return root


def timed(cmd: list[str]) -> tuple[float, str]:
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    return time.perf_counter() - t, proc.stdout


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--logs", type=int, default=1000)
    ap.add_argument("--sample", type=int, default=20)
    args = ap.parse_args()
    root = fleet(args.logs)
    exe = shutil.which("losslens")
    base = [exe] if exe else [sys.executable, "-m", "losslens"]
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    t1, out1 = timed([*base, "check", str(root), "--jobs", "1", "-q"])
    tn, outn = timed([*base, "check", str(root), "--jobs", str(cores), "-q"])
    assert out1 == outn, "the output must not depend on --jobs"
    logs = sorted(root.iterdir())[: args.sample]
    sample = sum(timed([*base, "check", str(p), "-q"])[0] for p in logs) / len(logs)
    separate = sample * args.logs / cores
    print(f"{args.logs:,} logs of 300 lines, {cores} cores")
    print(f"losslens check DIR --jobs 1        {t1:8.1f} s")
    print(f"losslens check DIR --jobs {cores:<2d}       {tn:8.1f} s")
    print(f"one process per log, / {cores} cores     {separate:8.1f} s  ({sample:.2f} s a call, "
          f"{args.logs:,} calls; check DIR is {separate / tn:.1f}x faster)")


if __name__ == "__main__":
    main()
