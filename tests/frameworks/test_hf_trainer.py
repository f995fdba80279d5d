"""losslens on what a real Hugging Face Trainer run writes: its stdout and stderr redirected to
one file (tqdm's redraws and the logged dicts, transformers 5 quoting every value) and its
``checkpoint-*/trainer_state.json``. Each fault's step is read back from what the run logged,
never assumed."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def history(run: Path) -> list[dict]:
    state = next(run.glob("checkpoint-*/trainer_state.json"))
    return [r for r in json.loads(state.read_text())["log_history"] if "loss" in r]


def report(path: Path, *args: str) -> tuple[int, dict]:
    """``losslens analyze PATH --json``: its exit code and report."""
    p = subprocess.run([sys.executable, "-m", "losslens", "analyze", str(path), "--json", *args],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode in (0, 1), p.stderr
    return p.returncode, json.loads(p.stdout)


def findings(path: Path) -> list[dict]:
    return [f for f in report(path)[1]["findings"] if f["severity"] in ("warning", "error")]


def both(run: Path) -> list[Path]:
    return [run / "train.log", next(run.glob("checkpoint-*/trainer_state.json"))]


def test_a_clean_run_is_silent_and_every_line_is_accounted_for(hf_runs) -> None:
    run = hf_runs("clean")
    for path in both(run):
        assert findings(path) == [], path
    code, r = report(run / "train.log")
    lines = r["lines"]
    assert lines["parsed"] == 200 and r["steps"]["count"] == 200
    assert lines["parsed"] + lines["skipped"] + lines["blank"] == lines["total"]
    p = subprocess.run([sys.executable, "-m", "losslens", "check", str(run)], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr


def test_a_corrupted_batch_is_a_spike_at_its_step(hf_runs) -> None:
    run = hf_runs("spike")
    h = history(run)
    top = max(h[20:], key=lambda r: r["loss"])
    before = h[h.index(top) - 1]["loss"]
    assert top["loss"] > 2.5 * before  # the run logged the spike (a batch of random tokens)
    for path in both(run):
        got = [f for f in findings(path) if f["kind"] == "spike"]
        assert [f["evidence"]["peak_step"] for f in got] == [top["step"]], path
        assert [f["kind"] for f in findings(path)] == ["spike"]


def test_an_lr_raised_a_millionfold_is_found_non_finite_from_its_first_step(hf_runs) -> None:
    run = hf_runs("nan")
    h = history(run)
    first = next(r["step"] for r in h if not all(math.isfinite(float(r[k])) for k in ("loss", "grad_norm")))
    for path in both(run):
        got = [f for f in findings(path) if f["kind"] == "nonfinite"]
        assert got and min(f["start_step"] for f in got) == first, path
        assert report(path, "--fail-on", "error")[0] == 1


def test_an_lr_raised_thirtyfold_is_a_divergence_at_the_jump(hf_runs) -> None:
    run = hf_runs("diverge")
    h = history(run)
    least = min(h[20:110], key=lambda r: r["loss"])
    jump = next(r["step"] for r in h[h.index(least):] if r["loss"] >= 1.4 * least["loss"])
    for path in both(run):
        got = findings(path)
        assert [f["kind"] for f in got] == ["divergence"], path
        assert abs(got[0]["start_step"] - jump) <= 2 and got[0]["severity"] == "error"


def test_an_lr_set_to_zero_says_nothing_is_learned_from_that_step(hf_runs) -> None:
    run = hf_runs("lr_zero")
    h = history(run)
    zero = next(r["step"] for r in h if float(r["learning_rate"]) == 0 and r["step"] > 20)
    for path in both(run):
        got = findings(path)
        assert [f["kind"] for f in got] == ["plateau"], path
        assert got[0]["evidence"]["lr_zero_step"] == zero and got[0]["start_step"] == zero


def test_runs_reading_the_same_data_share_a_bad_batch_that_neither_shows_alone(hf_runs) -> None:
    """Two runs with the same data order and different optimizers, 2 of the 16 rows of batch 120
    random: each run's loss rises ~1.35x there (below what one run can tell from its noise);
    together they are a bad batch. A third run with its own corrupted batch at step 150 shares
    nothing and keeps its own finding."""
    adamw = hf_runs("spike", "--corrupt-rows", "2")
    adafactor = hf_runs("spike", "--corrupt-rows", "2", "--optim", "adafactor")
    other = hf_runs("spike", "--at", "150")
    for run in (adamw, adafactor):  # what each logged at the shared batch
        h = history(run)
        at = next(r for r in h if r["step"] == 120)
        assert 1.2 < at["loss"] / h[h.index(at) - 1]["loss"] < 1.6
    logs = [str(r / "train.log") for r in (adamw, adafactor, other)]
    alone = [report(Path(p))[1]["findings"] for p in logs]
    assert alone[0] == [] and alone[1] == []
    assert [f["evidence"]["peak_step"] for f in alone[2]] == [150]

    def same_data(*paths: str) -> dict[str, list[dict]]:
        p = subprocess.run([sys.executable, "-m", "losslens", "analyze", *paths, "--same-data", "--json"],
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        return {r["source"]: r["findings"] for r in map(json.loads, p.stdout.splitlines())}

    pair = same_data(*logs[:2])
    for me, them in ((logs[0], logs[1]), (logs[1], logs[0])):
        [f] = pair[me]
        assert (f["kind"], f["severity"], f["start_step"]) == ("spike", "warning", 120)
        assert f["evidence"]["cause"] == "data" and f["evidence"]["chance"] <= 0.01
        assert [s["run"] for s in f["evidence"]["shared_with"]] == [them]
        assert "a bad batch" in f["summary"] and "check the data" in f["summary"]
    three = same_data(*logs)  # (three pairs to compare: the same coincidence is less rare)
    assert [(f["start_step"], f["evidence"]["cause"]) for f in three[logs[0]]] == [(120, "data")]
    assert three[logs[2]] == alone[2]  # an unshared spike is left as it was
