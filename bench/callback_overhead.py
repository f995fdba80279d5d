"""What ``LossLensCallback`` costs a run: the tiny HF Trainer run of ``fixtures/frameworks`` (200
steps, a clean run) with the callback recording what each step fed and checking live
(``record=..., fail_on="error"``), against the same run without it.

    python bench/callback_overhead.py [--repeat 3]

Two figures: the seconds the callback's own hooks took in the steps (it times them:
``seconds``) over the run's ``train_runtime`` (the Trainer's own clock), and the difference of
the two runs' ``train_runtime`` (best of ``--repeat``; on a 2-core machine the second is noisier
than the first). Goal: at most 2 % of a step. Not in the steps, once a run: loading the readers
when training begins (~0.2 s) and the detectors over the whole log when it ends."""

from __future__ import annotations

import argparse
import ast
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "fixtures" / "frameworks" / "hf_trainer.py"


def run(out: Path, *extra: str) -> tuple[float, float | None]:
    """One run: its train_runtime and the callback's seconds (None without it)."""
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "PYTHONWARNINGS": "ignore"}
    p = subprocess.run([sys.executable, str(SCRIPT), str(out), "--fault", "clean", *extra],
                       capture_output=True, text=True, env=env, cwd=out, check=True, timeout=600)
    text = p.stdout + p.stderr
    summary = ast.literal_eval(re.search(r"\{'train_runtime'[^}]*\}", text).group(0))  # type: ignore[union-attr]
    own = re.search(r"losslens callback: ([\d.]+) s", text)
    return float(summary["train_runtime"]), float(own.group(1)) if own else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="losslens-callback-"))
    plain, with_cb, own = [], [], []
    for i in range(args.repeat):  # (interleaved: the machine's load moves both alike)
        plain.append(run(base / f"plain{i}")[0])
        t, s = run(base / f"cb{i}", "--record", str(base / f"cb{i}" / "fed.jsonl"), "--fail-on", "error")
        with_cb.append(t)
        own.append(s or 0.0)
    steps = 200
    best_plain, best_cb = min(plain), min(with_cb)
    share = min(s / t for s, t in zip(own, with_cb, strict=True))
    print(f"train_runtime without the callback: {best_plain:.3f} s ({best_plain / steps * 1e3:.2f} ms "
          f"a step), best of {args.repeat}: {', '.join(f'{x:.3f}' for x in plain)}")
    print(f"with it (record + fail_on='error'): {best_cb:.3f} s: {', '.join(f'{x:.3f}' for x in with_cb)}")
    print(f"the callback's own hooks: {min(own):.4f} s = {share:.2%} of the run "
          f"({min(own) / steps * 1e3:.3f} ms a step); runs' difference {best_cb / best_plain - 1:+.1%}")


if __name__ == "__main__":
    main()
