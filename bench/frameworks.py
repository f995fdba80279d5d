"""Detection on tiny real framework runs: per framework and planted fault, whether losslens finds
it (the right kind, warning or worse), locates it (its first step within 3 steps of the one the
run logged), and what else it reports (false alarms: any other warning), with the time of the
run and of ``losslens analyze`` on what it wrote.

    python bench/frameworks.py [--only hf,lightning,torchrun] [--keep DIR]

Runs fixtures/frameworks/{hf_trainer,lightning_run,torchrun_loop}.py on CPU (the ``frameworks``
extra; ~10 s each on 2 cores, about 3 minutes in all); labels are read back from what each run
logged (fixtures/frameworks/labels.py). Baseline in the same table: the clean run of each
framework, which must report no warning."""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "fixtures" / "frameworks"
sys.path.insert(0, str(RUNS))

from labels import label  # noqa: E402

CASES = {
    "hf": ("hf_trainer.py", ("clean", "nan", "spike", "diverge", "lr_zero", "stall", "creep",
                             "group_by_length")),
    "lightning": ("lightning_run.py", ("clean", "nan", "spike", "diverge", "lr_zero")),
    "torchrun": ("torchrun_loop.py", ("clean", "nan", "spike", "gan")),
}
TOLERANCE = 3  # steps


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run(framework: str, fault: str, out: Path) -> float:
    """One run into ``out`` (stdout and stderr to train.log); its wall time."""
    script, _ = CASES[framework]
    out.mkdir(parents=True, exist_ok=True)
    launch = [sys.executable]
    if framework == "torchrun":
        launch += ["-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(_port())]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    env.update(OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONWARNINGS="ignore")
    started = time.perf_counter()
    with (out / "train.log").open("wb") as f:
        subprocess.run([*launch, str(RUNS / script), str(out), "--fault", fault], stdout=f,
                       stderr=subprocess.STDOUT, env=env, cwd=out, check=True, timeout=600)
    return time.perf_counter() - started


def judge(framework: str, fault: str, out: Path) -> dict:
    want = label(framework, fault, out)
    started = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "losslens", "analyze", str(out / want.log), "--json"],
                       capture_output=True, text=True, timeout=300)
    seconds = time.perf_counter() - started
    report = json.loads(p.stdout)
    serious = [f for f in report["findings"] if f["severity"] in ("warning", "error")]
    hits = [f for f in serious if f["kind"] == want.kind]
    found = bool(hits) if want.kind else None
    located = None
    if hits and want.step is not None:
        located = any(abs(f["start_step"] - want.step) <= TOLERANCE
                      or f["start_step"] <= want.step <= f["end_step"] for f in hits)
    others = [f"{f['kind']}@{f['start_step']}" for f in serious if f["kind"] != want.kind]
    return {"framework": framework, "fault": fault, "want": want.kind, "step": want.step,
            "found": found, "located": located, "false_alarms": others, "analyze_s": round(seconds, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default=",".join(CASES))
    ap.add_argument("--keep", type=Path, default=None, help="keep the runs in this folder")
    args = ap.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="losslens-frameworks-"))
    rows = []
    for framework in args.only.split(","):
        for fault in CASES[framework][1]:
            out = base / f"{framework}_{fault}"
            took = run(framework, fault, out)
            row = judge(framework, fault, out) | {"run_s": round(took, 1)}
            rows.append(row)
            print(json.dumps(row), flush=True)
    print("\n| framework | fault | expected | found | located | other warnings | run | analyze |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        mark = {True: "yes", False: "**no**", None: "-"}
        print(f"| {r['framework']} | {r['fault']} | {r['want'] or 'nothing'} | {mark[r['found']]} | "
              f"{mark[r['located']]} | {', '.join(r['false_alarms']) or 'none'} | {r['run_s']} s | "
              f"{r['analyze_s']} s |")
    faults = [r for r in rows if r["want"]]
    print(f"\nfound {sum(bool(r['found']) for r in faults)}/{len(faults)} planted faults; located "
          f"{sum(bool(r['located']) for r in faults)}/{sum(r['step'] is not None for r in faults)}; "
          f"{sum(len(r['false_alarms']) for r in rows)} other warning(s) "
          f"({sum(len(r['false_alarms']) for r in rows if not r['want'])} on clean runs)")


if __name__ == "__main__":
    main()
