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
