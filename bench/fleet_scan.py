"""`losslens scan` over a generated fleet of run folders: runs/s with 1, 2 and all cores and on a
Dask local cluster, against the simplest baseline in the same run (one `losslens check` process
per run, timed on a sample and divided by the cores); then the incremental re-run, and an
interrupted scan resumed.

    python bench/fleet_scan.py [--runs 2000] [--sample 20] [--no-dask]

Each run folder holds a config.json (passed over) and one log of 300-1,200 records in one of five
formats (key=value, HF trainer_state.json, JSON Lines, nanoGPT stdout, Megatron); one run in ten
has a NaN, one in seven a loss ladder; one in a hundred is broken on purpose: a truncated .gz, an
empty log, binary garbage, a dangling link, a JSON Lines log cut in the middle of a record.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from _common import OUT  # noqa: E402

BROKEN = ("truncated.log.gz", "empty.log", "garbage.log", "dangling.log", "cut.jsonl")


def _loss(rng: np.random.Generator, n: int, kind: str) -> np.ndarray:
    t = np.arange(n)
    loss = (2.0 + 2.5 * np.exp(-t / (n / 6))) * np.exp(rng.normal(0, 0.02, n))
    if kind == "nan":
        loss[int(rng.integers(n // 2, n)):] = np.nan
    elif kind == "ladder":  # a summed, never divided loss: k x level, then a reset
        loss = loss * (1 + np.arange(n) % 5)
    return loss


def _write_run(folder: Path, i: int, rng: np.random.Generator) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({"lr": 3e-4, "run": i}))
    if i % 100 == 99:
        broken = BROKEN[(i // 100) % len(BROKEN)]
        path = folder / broken
        if broken == "truncated.log.gz":
            text = "".join(f"step={s} loss={2 + rng.random():.4f}\n" for s in range(500))
            whole = gzip.compress(text.encode())
            path.write_bytes(whole[: len(whole) // 2])  # a copy that stopped half-way
        elif broken == "empty.log":
            path.write_bytes(b"")
        elif broken == "garbage.log":
            path.write_bytes(bytes(rng.integers(0, 256, 4096, dtype=np.uint8)))
        elif broken == "dangling.log":
            path.symlink_to(folder / "gone.log")
        else:
            path.write_text("".join(json.dumps({"step": s, "loss": 2.0}) + "\n" for s in range(50))
                            + '{"step": 50, "lo')
        return
    n = int(rng.integers(300, 1201))
    u = rng.random()
    kind = "nan" if u < 0.1 else "ladder" if u < 0.24 else "clean"
    loss = _loss(rng, n, kind)
    style = i % 5
    num = [("nan" if not np.isfinite(x) else f"{x:.4f}") for x in loss]
    if style == 0:
        lines = [f"step={s} loss={v} lr=3.0e-04" for s, v in enumerate(num)]
        (folder / "train.log").write_text("\n".join(lines) + "\n")
    elif style == 1:
        hist = [{"step": s + 1, "loss": float(x) if np.isfinite(x) else float("nan"), "learning_rate": 3e-4}
                for s, x in enumerate(loss)]
        (folder / "trainer_state.json").write_text(json.dumps({"global_step": n, "log_history": hist}))
    elif style == 2:
        rows = (json.dumps({"step": s, "train/loss": v}).replace('"nan"', "NaN") for s, v in enumerate(num))
        (folder / "metrics.jsonl").write_text("\n".join(rows) + "\n")
    elif style == 3:
        (folder / "stdout.log").write_text("".join(f"iter {s}: loss {v}, time 101.2ms, mfu 12.3%\n"
                                                   for s, v in enumerate(num)))
    else:
        head = " iteration {:8d}/{:8d} | consumed samples: {:10d} | elapsed time per iteration (ms): 812.3 | "
        rows = (head.format(s + 1, n, s * 8) + "learning rate: 3.000E-04 | global batch size:     8 | "
                f"lm loss: {v if v == 'nan' else f'{float(v):.6E}'} | loss scale: 1.0 |\n"
                for s, v in enumerate(num))
        (folder / "megatron.log").write_text("".join(rows))


def fleet(runs: int) -> Path:
    """``runs`` run folders (cached in bench/out)."""
    root = OUT / f"fleet_{runs}"
    marker = root / ".complete"
    if marker.exists():
        return root
    shutil.rmtree(root, ignore_errors=True)
    rng = np.random.default_rng(0)
    for i in range(runs):
        _write_run(root / f"run{i:05d}", i, rng)
    marker.write_text("")
    return root


def cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "losslens", *args]


def timed(args: list[str]) -> tuple[float, int, str]:
    t = time.perf_counter()
    proc = subprocess.run(args, capture_output=True, text=True)
    return time.perf_counter() - t, proc.returncode, proc.stdout + proc.stderr


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--sample", type=int, default=20, help="runs timed one `check` process each")
    ap.add_argument("--no-dask", action="store_true")
    args = ap.parse_args()
    from losslens.runner import default_jobs

    cores = default_jobs()
    root = fleet(args.runs)
    size = sum(f.stat().st_size for f in root.rglob("*") if f.is_file() and not f.is_symlink())
    work = OUT / "fleet_scan"
    shutil.rmtree(work, ignore_errors=True)
    print(f"{args.runs:,} run folders, {size / 2**20:,.0f} MiB, {cores} cores")

    folders = sorted(p for p in root.iterdir() if p.is_dir())
    sample = folders[:: max(1, args.runs // args.sample)][: args.sample]
    t = time.perf_counter()
    for p in sample:
        subprocess.run(cmd("check", "-q", str(p)), capture_output=True)
    per_call = (time.perf_counter() - t) / len(sample)
    baseline = per_call * args.runs / cores
    print(f"baseline: one `losslens check RUN` per run / {cores} cores  {baseline:7.1f} s "
          f"({per_call:.2f} s a call, {len(sample)} timed)  {args.runs / baseline:6.1f} runs/s")

    results = {}
    jobs = sorted({1, 2, cores})
    for j in jobs:
        took, rc, out = timed(cmd("scan", str(root), "--out", str(work / f"j{j}" / "f.parquet"),
                                  "--jobs", str(j), "-q"))
        results[f"--jobs {j}"] = took
        print(f"scan --jobs {j:<3}                                     {took:7.1f} s  "
              f"{args.runs / took:6.1f} runs/s  (exit {rc})")
    if not args.no_dask:
        took, rc, out = timed(cmd("scan", str(root), "--out", str(work / "dask" / "f.parquet"),
                                  "--dask", "local", "--jobs", str(cores), "-q"))
        print(f"scan --dask local --jobs {cores}                           {took:7.1f} s  "
              f"{args.runs / took:6.1f} runs/s  (exit {rc})")
        import polars as pl

        a = pl.read_parquet(work / f"j{cores}" / "f.parquet")
        b = pl.read_parquet(work / "dask" / "f.parquet")
        print(f"  the table ({a.height:,} rows): {'identical to' if a.equals(b) else 'DIFFERS from'} "
              f"--jobs {cores}'s")

    # nightly re-run: nothing changed, then 1 % of the logs touched
    again = work / f"j{cores}" / "f.parquet"
    took, rc, out = timed(cmd("scan", str(root), "--out", str(again), "--jobs", str(cores), "-q"))
    print(f"re-run, nothing changed                                {took:7.1f} s")
    touched = sorted(root.rglob("*.log"))[:: 100]
    for p in touched:
        os.utime(p)
    took, rc, out = timed(cmd("scan", str(root), "--out", str(again), "--jobs", str(cores)))
    line = next((x for x in out.splitlines() if x.startswith("scanned")), "")
    print(f"re-run, {len(touched)} logs touched                              {took:7.1f} s  ({line[:90]})")

    # interrupted after ~40 % of the time, then resumed
    fresh = work / "resume" / "f.parquet"
    proc = subprocess.Popen(cmd("scan", str(root), "--out", str(fresh), "--jobs", str(cores), "-q"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.4 * results[f"--jobs {cores}"])
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate()
    kept = sum(1 for _ in open(work / "resume" / "f.scan-state.jsonl")) - 1
    took, rc, out = timed(cmd("scan", str(root), "--out", str(fresh), "--jobs", str(cores)))
    line = next((x for x in out.splitlines() if x.startswith("scanned")), "")
    print(f"SIGTERM at 40 %: exit {proc.returncode}, {kept:,} logs kept; resumed in {took:.1f} s "
          f"({line[:80]})")


if __name__ == "__main__":
    main()
