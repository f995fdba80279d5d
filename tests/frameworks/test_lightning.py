"""losslens on what a real PyTorch Lightning run writes: CSVLogger's metrics.csv and
TensorBoardLogger's event file, as written. Each fault's step is read back from the CSV."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

from tests.frameworks.test_hf_trainer import findings, report

pytestmark = pytest.mark.slow


def logged(run: Path) -> list[dict]:
    with next(run.glob("csv/*/metrics.csv")).open() as f:
        return [{k: float(v) for k, v in r.items() if v != ""} for r in csv.DictReader(f)]


def written(run: Path) -> list[Path]:
    return [next(run.glob("csv/*/metrics.csv")), next(run.glob("tb/*/events.out.tfevents.*"))]


@pytest.mark.frameworks_full
def test_a_clean_run_is_silent_in_both_loggers(lightning_runs) -> None:
    run = lightning_runs("clean")
    for path in written(run):
        code, r = report(path)
        assert code == 0 and [f for f in r["findings"] if f["severity"] != "info"] == [], path
        assert r["steps"]["count"] == 250 and r["loss"]["column"] in ("train_loss",)


@pytest.mark.frameworks_full
def test_a_corrupted_batch_is_a_spike_at_its_step(lightning_runs) -> None:
    rows = logged(run := lightning_runs("spike"))
    top = max(rows[20:], key=lambda r: r["train_loss"])
    for path in written(run):
        assert [(f["kind"], f["evidence"]["peak_step"]) for f in findings(path)] == \
            [("spike", int(top["step"]))], path


@pytest.mark.frameworks_full
def test_weights_that_overflow_are_found_non_finite_from_their_step(lightning_runs) -> None:
    rows = logged(run := lightning_runs("nan"))
    first = next(int(r["step"]) for r in rows if "train_loss" in r and math.isnan(r["train_loss"]))
    for path in written(run):
        got = [f for f in findings(path) if f["kind"] == "nonfinite"]
        assert [(f["metric"], f["start_step"], f["severity"]) for f in got] == \
            [("loss", first, "error")], path


@pytest.mark.frameworks_full
def test_an_lr_raised_fiftyfold_is_a_divergence_at_the_jump(lightning_runs) -> None:
    run = lightning_runs("diverge")
    rows = [r for r in logged(run) if "train_loss" in r]
    least = min(rows[20:140], key=lambda r: r["train_loss"])
    jump = next(int(r["step"]) for r in rows[rows.index(least):]
                if r["train_loss"] >= 1.4 * least["train_loss"])
    for path in written(run):
        got = findings(path)
        assert [f["kind"] for f in got] == ["divergence"], path
        assert abs(got[0]["start_step"] - jump) <= 2


@pytest.mark.frameworks_full
def test_an_lr_set_to_zero_is_a_plateau_from_that_step(lightning_runs) -> None:
    run = lightning_runs("lr_zero")
    rows = [r for r in logged(run) if "lr" in r]
    zero = next(int(r["step"]) for r in rows[20:] if r["lr"] == 0)
    for path in written(run):
        got = findings(path)
        assert [(f["kind"], f["start_step"]) for f in got] == [("plateau", zero)], path
