"""losslens.analysis: the loss column chosen, every detector run per metric and segment, the
findings related to each other by their detectors' hooks, each given its line in the file."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from losslens.analysis import analyze, choose_loss, related, with_lines
from losslens.detectors import REGISTRY, Detector, Series
from losslens.findings import Finding, Severity
from losslens.logs import from_arrays


def _finding(kind: str, severity: Severity = Severity.WARNING, start: int = 10, end: int = 20,
             **evidence) -> Finding:
    return Finding(kind, severity, "loss", start, end, f"{kind} here", evidence)


def test_the_loss_is_the_known_name_or_said_missing() -> None:
    steps = np.arange(50)
    log = from_arrays(steps, train_loss=2 - 0.01 * steps, acc=steps / 50)
    chosen, loss = choose_loss(log)
    assert loss is not None and loss["column"] == "train_loss" and "loss" in chosen.train.columns
    report = analyze(from_arrays(steps, acc=steps / 50))
    assert report.loss is None and [f.kind for f in report.findings] == ["no_loss_metric"]


def test_related_asks_each_finding_s_detector() -> None:
    """A spike inside a ladder is left out (Spike.explained); bands with a period of the logged
    LR become information (Multimodal.reconsidered); an epoch pattern with the eval loss up from
    its best becomes memorisation (Periodicity.reconsidered)."""
    ladder = _finding("ladder", Severity.ERROR, 0, 100, clearest=[{"values": [1.0, 2.0]}])
    spike = _finding("spike", start=40, end=41, value=1.5, peak_step=40)
    assert related([ladder, spike], REGISTRY, False) == [ladder]
    lr = _finding("periodicity", Severity.INFO, 0, 100, cause="lr_schedule", period_steps=50.0)
    bands = _finding("multimodal", modes=[1.0, 2.0])
    [_, read] = related([lr, bands], REGISTRY, False)
    assert read.severity is Severity.INFO and read.evidence["cause"] == "lr_schedule"
    assert "the logged LR repeats every ~50 steps" in read.summary
    epochs = _finding("periodicity", cause="epoch", share_of_variance=0.5)
    eval_up = _finding("overfitting", best=1.0, last=1.3, best_step=60)
    [read, _] = related([epochs, eval_up], REGISTRY, True)
    assert read.evidence["cause"] == "memorisation" and read.evidence["eval_rise"] == 0.3
    [held] = related([epochs], REGISTRY, True)
    assert held.severity is Severity.INFO and "the model still generalises" in held.summary


def test_a_finding_gets_the_line_of_its_first_record() -> None:
    steps = np.arange(0, 100, 10)
    log = from_arrays(steps, loss=np.ones(10))  # (one line a record, the first line 1)
    [f] = with_lines([_finding("spike", start=35, end=40)], log)
    assert f.line == 5  # step 40's: the first record at or after step 35


@dataclass(frozen=True)
class _Everywhere(Detector):
    name = "everywhere"
    title = "one finding per series"

    def detect(self, series: Series) -> list[Finding]:
        return [Finding(self.name, Severity.INFO, series.metric, int(series.steps[0]), int(series.steps[-1]),
                        "seen", {"segment_records": len(series)}, segment=series.segment)]


def test_every_detector_runs_once_per_segment_of_its_metric() -> None:
    steps = np.r_[np.arange(100), np.arange(60)]  # a restart: two segments
    log = from_arrays(steps, loss=np.r_[np.linspace(3, 2, 100), np.linspace(2.5, 2, 60)])
    report = analyze(log, detectors=(_Everywhere(),))
    assert sorted((f.segment, f.evidence["segment_records"]) for f in report.findings) == [(0, 100), (1, 60)]
