"""How each detector's time grows with the run's length: analyze() on 100k, 1M and 10M records
built from arrays (no reading: a decaying loss with AR noise, accuracy, a cosine LR, throughput,
a data-queue depth, a NaN-free grad norm, one planted spike), each detector alone and all
together. The baseline in the same run is linear growth itself: every detector's time at 10x
the records against 10x its time (the exponent log10(t10M / t1M), 1.0 = linear), and the cost of
one pass that touches every value once (np.sort of the loss column, n log n) at each size. Peak
RSS of analyze at each size comes from a fresh interpreter.

    python bench/detector_growth.py [--sizes 100000,1000000,10000000] [--no-rss]
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from losslens.analysis import analyze
from losslens.detectors import REGISTRY
from losslens.logs.frame import LogData, from_arrays


def run(n: int, seed: int = 0) -> LogData:
    """A healthy-looking long run with one planted loss spike, ``n`` records."""
    rng = np.random.default_rng(seed)
    t = np.arange(n, dtype=np.float64)
    from scipy.signal import lfilter

    noise = lfilter([1.0], [1.0, -0.6], rng.normal(0, 0.02, n))  # AR(1), phi 0.6
    loss = 1.5 + 2.5 * np.exp(-t / (n / 8)) + noise
    loss[n // 2] *= 3.0
    acc = 0.3 + 0.4 * (1 - np.exp(-t / (n / 6))) + rng.normal(0, 0.01, n)
    lr = 1e-4 * 0.5 * (1 + np.cos(np.pi * t / n))
    tok = 32_000 + rng.normal(0, 300, n)
    queue = np.clip(45 + rng.normal(0, 3, n), 0, 50)
    grad = np.abs(1 + rng.normal(0, 0.1, n))
    return from_arrays(np.arange(n), loss=loss, acc=acc, lr=lr, tokens_per_s=tok, q_pre=queue,
                       grad_norm=grad)


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def peak_rss_mib(n: int) -> float:
    code = (f"import sys; sys.path.insert(0, {str(Path(__file__).resolve().parent)!r}); "
            f"from detector_growth import run; from losslens.analysis import analyze; "
            f"log = run({n}); import resource; before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss; "
            f"analyze(log); print(before, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return int(out.stdout.split()[1]) / 1024


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100000,1000000,10000000")
    ap.add_argument("--no-rss", action="store_true")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    # memory first, in fresh interpreters (a child forked from a big parent inherits its RSS)
    rss = {} if args.no_rss else {n: peak_rss_mib(n) for n in sizes}
    times: dict[str, list[float]] = {d.name: [] for d in REGISTRY}
    times["all (analyze)"] = []
    times["np.sort(loss)"] = []
    for n in sizes:
        log = run(n)
        loss = log.train["loss"].to_numpy()
        times["np.sort(loss)"].append(timed(lambda loss=loss: np.sort(loss)))
        for det in REGISTRY:
            times[det.name].append(timed(lambda log=log, det=det: analyze(log, detectors=(det,))))
        report = analyze(log)
        times["all (analyze)"].append(timed(lambda log=log: analyze(log)))
        kinds = sorted({f.kind for f in report.findings})
        print(f"{n:>11,} records: {len(report.findings)} finding(s) {kinds}", flush=True)
        del log, loss
    head = "".join(f"{n:>12,}" for n in sizes)
    print(f"\n{'seconds':18s}{head}   growth exponent per 10x (1.0 = linear)")
    for name, ts in times.items():
        grow = [math.log10(b / a) / math.log10(m / k) if a > 0.005 else float("nan")
                for a, b, k, m in zip(ts, ts[1:], sizes, sizes[1:], strict=False)]
        print(f"{name:18s}" + "".join(f"{x:12.3f}" for x in ts) + "   "
              + "  ".join(f"{g:.2f}" for g in grow))
    if rss:
        print("\npeak RSS of a fresh interpreter building the run and analysing it:")
        for n, mib in rss.items():
            print(f"{n:>11,} records: {mib:7.0f} MiB ({mib / n * 2**20:.0f} B a record)")


if __name__ == "__main__":
    main()
