"""losslens on what a real PyTorch Lightning run writes: CSVLogger's metrics.csv and
TensorBoardLogger's event file, as written. Each fault's step is read back from the CSV."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from tests.frameworks.test_hf_trainer import findings, report

pytestmark = pytest.mark.slow


def logged(run: Path) -> list[dict]:
    with next(run.glob("csv/*/metrics.csv")).open() as f:
        return [{k: float(v) for k, v in r.items() if v != ""} for r in csv.DictReader(f)]


def written(run: Path) -> list[Path]:
    return [next(run.glob("csv/*/metrics.csv")), next(run.glob("tb/*/events.out.tfevents.*"))]


def test_a_clean_run_is_silent_in_both_loggers(lightning_runs) -> None:
    run = lightning_runs("clean")
    for path in written(run):
        code, r = report(path)
        assert code == 0 and [f for f in r["findings"] if f["severity"] != "info"] == [], path
        assert r["steps"]["count"] == 250 and r["loss"]["column"] in ("train_loss",)


def test_a_corrupted_batch_is_a_spike_at_its_step(lightning_runs) -> None:
    rows = logged(run := lightning_runs("spike"))
    top = max(rows[20:], key=lambda r: r["train_loss"])
    for path in written(run):
        assert [(f["kind"], f["evidence"]["peak_step"]) for f in findings(path)] == \
            [("spike", int(top["step"]))], path
