"""The spike detector with a grad-norm column, on a run with many spikes, against the same run
without spikes (the baseline, in the same run): each loss spike is looked up in the grad norm's
spikes, found once per series, so the time stays near the spike-free one (the goal: within 2x).

    python bench/spike_grad_norm.py [--records 200000] [--spikes 400] [--repeat 3]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from _common import best_of  # noqa: E402

from losslens.analysis import analyze  # noqa: E402
from losslens.detectors import REGISTRY  # noqa: E402
from losslens.logs import from_arrays  # noqa: E402


def run_arrays(n: int, spikes: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A decaying loss and its grad norm over ``n`` records; ``spikes`` of them spike in both
    (the grad norm a step before the loss, as an optimizer instability does)."""
    rng = np.random.default_rng(seed)
    steps = np.arange(n)
    loss = 1 + 2 * np.exp(-steps / (n / 10)) + rng.normal(0, 0.02, n)
    grad = 1 + rng.normal(0, 0.05, n) ** 2
    at = np.sort(rng.choice(np.arange(200, n - 10), size=spikes, replace=False)) if spikes else []
    loss[at] *= 2.0
    grad[np.asarray(at, dtype=int) - 1] *= 5.0
    return steps, loss, grad


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--spikes", type=int, default=400)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    spike = REGISTRY  # every detector, as `losslens analyze` runs them
    times, found = {}, {}
    for name, k in (("no spikes (baseline)", 0), (f"{args.spikes} spikes", args.spikes)):
        steps, loss, grad = run_arrays(args.records, k)
        log = from_arrays(steps, loss=loss, grad_norm=grad)
        report = analyze(log, detectors=spike)
        found[name] = sum(1 for f in report.findings if "grad_norm_spike_step" in f.evidence)
        times[name] = best_of(lambda log=log: analyze(log, detectors=spike), args.repeat)
    base, many = times.values()
    for name, t in times.items():
        print(f"{name:24} {t:6.2f} s   spikes with a grad-norm lead: {found[name]:,}")
    print(f"ratio {many / base:.2f}x the spike-free time (goal: <= 2x)")


if __name__ == "__main__":
    main()
