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

from fixtures.frameworks.labels import bar as redraws

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


@pytest.mark.frameworks_full
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


@pytest.mark.frameworks_full
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


@pytest.mark.frameworks_full
def test_an_lr_raised_a_millionfold_is_found_non_finite_from_its_first_step(hf_runs) -> None:
    run = hf_runs("nan")
    h = history(run)
    first = next(r["step"] for r in h if not all(math.isfinite(float(r[k])) for k in ("loss", "grad_norm")))
    for path in both(run):
        got = [f for f in findings(path) if f["kind"] == "nonfinite"]
        assert got and min(f["start_step"] for f in got) == first, path
        assert report(path, "--fail-on", "error")[0] == 1


@pytest.mark.frameworks_full
def test_an_lr_raised_thirtyfold_is_a_divergence_at_the_jump(hf_runs) -> None:
    run = hf_runs("diverge")
    h = history(run)
    least = min(h[20:110], key=lambda r: r["loss"])
    jump = next(r["step"] for r in h[h.index(least):] if r["loss"] >= 1.4 * least["loss"])
    for path in both(run):
        got = findings(path)
        assert [f["kind"] for f in got] == ["divergence"], path
        assert abs(got[0]["start_step"] - jump) <= 2 and got[0]["severity"] == "error"


@pytest.mark.frameworks_full
def test_an_lr_set_to_zero_says_nothing_is_learned_from_that_step(hf_runs) -> None:
    run = hf_runs("lr_zero")
    h = history(run)
    zero = next(r["step"] for r in h if float(r["learning_rate"]) == 0 and r["step"] > 20)
    for path in both(run):
        got = findings(path)
        assert [f["kind"] for f in got] == ["plateau"], path
        assert got[0]["evidence"]["lr_zero_step"] == zero and got[0]["start_step"] == zero


def same_data(*paths: str) -> dict[str, list[dict]]:
    """``losslens analyze PATHS --same-data --json``: each log's findings."""
    p = subprocess.run([sys.executable, "-m", "losslens", "analyze", *paths, "--same-data", "--json"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return {r["source"]: r["findings"] for r in map(json.loads, p.stdout.splitlines())}


def shared_batch_runs(hf_runs) -> list[str]:
    """Two runs with the same data order and different optimizers (AdamW, Adafactor), 2 of the
    16 rows of batch 120 random: each run's loss rises ~1.35x there, checked in what they logged."""
    runs = [hf_runs("spike", "--corrupt-rows", "2"),
            hf_runs("spike", "--corrupt-rows", "2", "--optim", "adafactor")]
    for run in runs:
        h = history(run)
        at = next(r for r in h if r["step"] == 120)
        assert 1.2 < at["loss"] / h[h.index(at) - 1]["loss"] < 1.6
    return [str(r / "train.log") for r in runs]


@pytest.mark.frameworks_full
def test_runs_reading_the_same_data_share_a_bad_batch_that_neither_shows_alone(hf_runs) -> None:
    """Each run alone cannot tell the ~1.35x rise from its noise; together they are a bad batch."""
    logs = shared_batch_runs(hf_runs)
    assert [report(Path(p))[1]["findings"] for p in logs] == [[], []]
    pair = same_data(*logs)
    for me, them in ((logs[0], logs[1]), (logs[1], logs[0])):
        [f] = pair[me]
        assert (f["kind"], f["severity"], f["start_step"]) == ("spike", "warning", 120)
        assert f["evidence"]["cause"] == "data" and f["evidence"]["chance"] <= 0.01
        assert [s["run"] for s in f["evidence"]["shared_with"]] == [them]
        assert "a bad batch" in f["summary"] and "check the data" in f["summary"]


@pytest.mark.frameworks_full
def test_a_spike_no_other_run_shares_is_left_as_it_was(hf_runs) -> None:
    """A third run with its own corrupted batch at step 150 shares nothing: its finding is the
    one it has alone, and the pair's shared batch is still said (three pairs to compare make
    the same coincidence less rare)."""
    logs = shared_batch_runs(hf_runs) + [str(hf_runs("spike", "--at", "150") / "train.log")]
    alone = report(Path(logs[2]))[1]["findings"]
    assert [f["evidence"]["peak_step"] for f in alone] == [150]
    three = same_data(*logs)
    assert [(f["start_step"], f["evidence"]["cause"]) for f in three[logs[0]]] == [(120, "data")]
    assert three[logs[2]] == alone


@pytest.mark.frameworks_full
def test_a_collate_that_sleeps_once_is_a_stall_read_from_the_progress_bar(hf_runs) -> None:
    run = hf_runs("stall")
    bar = redraws(run)
    # the step at which the bar's elapsed time jumped by the sleep's 2 s
    jump = next(n for (_, e0, _), (n, e1, _) in zip(bar, bar[1:], strict=False) if e1 - e0 >= 2)
    code, r = report(run / "train.log")
    assert "step times read from the progress bar's redraws (tqdm's rate)" in r["notes"]
    got = [f for f in r["findings"] if f["severity"] != "info"]
    assert [f["kind"] for f in got] == ["pipeline_stall"]
    assert got[0]["start_step"] <= jump <= got[0]["end_step"] <= got[0]["start_step"] + 15
    assert 1.6 <= got[0]["evidence"]["seconds"][0] <= 3.0  # the 2 s sleep and the steps around it


@pytest.mark.frameworks_full
def test_a_collate_that_sleeps_longer_each_step_is_a_throughput_drop(hf_runs) -> None:
    run = hf_runs("creep")
    bar = redraws(run)
    early = sorted(rate for n, _, rate in bar if 20 <= n <= 100)
    usual = early[len(early) // 2]
    slow = next(n for n, _, rate in bar if n > 20 and rate < 0.5 * usual)  # the bar's rate halved
    # (a machine busy with other work can also stall the run for real: not counted against it)
    got = [f for f in findings(run / "train.log") if f["kind"] != "pipeline_stall"]
    assert [f["kind"] for f in got] == ["throughput_drop"]
    assert 100 <= got[0]["start_step"] <= slow


@pytest.mark.frameworks_full
def test_group_by_length_on_data_whose_loss_depends_on_length_is_a_period(hf_runs) -> None:
    """HF's length-grouped sampler sorts each mega-batch (50 batches) longest first, and this
    data's loss grows with the length: the logged loss jumps up at every mega-batch and falls
    through it. The period is read back from the steps where the logged loss doubled."""
    run = hf_runs("group_by_length")
    h = history(run)
    jumps = [b["step"] for a, b in zip(h[20:], h[21:], strict=False) if b["loss"] > 2 * a["loss"]]
    assert len(jumps) >= 2
    period = (jumps[-1] - jumps[0]) / (len(jumps) - 1)
    for path in both(run):
        got = findings(path)
        assert [f["kind"] for f in got] == ["periodicity"], path
        assert abs(got[0]["evidence"]["period_steps"] - period) <= 2
        assert "data order" in got[0]["summary"]
