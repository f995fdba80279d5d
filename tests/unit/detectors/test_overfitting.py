"""Overfitting against an epoch sawtooth: memorisation when the eval loss rises, information when
it falls."""


from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from losslens import read_log
from losslens.analysis import analyze
from losslens.findings import Severity
from tests.unit.shapes import alarms, of


def epochs_jsonl(eval_rises: bool, per: int = 300, epochs: int = 5) -> list[str]:
    """A JSON-lines log of several epochs over a small dataset: the train loss drops at each epoch
    start (the model has seen those samples) and an eval loss is written at each epoch's end."""
    import json

    rng = np.random.default_rng(11)
    n = per * epochs
    t = np.arange(n)
    e = t // per
    loss = (1.2 + 1.8 * np.exp(-t / 400)) * (1 - 0.16 * e) * (1 + 0.12 * (t % per) / per)
    loss = loss * np.exp(rng.normal(0, 0.03, n))
    lines = [json.dumps({"step": int(i), "loss": round(float(loss[i - 5:i].mean()), 4),
                         "epoch": round(i / per, 3)}) for i in range(5, n + 1, 5)]
    for k in range(epochs):
        ev = 2.0 - 0.2 * min(k, 1) + (0.15 * max(0, k - 1) if eval_rises else -0.05 * k)
        lines.append(json.dumps({"step": (k + 1) * per, "eval/loss": round(ev, 4)}))
    return lines


def test_epoch_sawtooth_with_a_rising_eval_loss_is_memorisation(tmp_path: Path) -> None:
    path = tmp_path / "epochs.jsonl"
    path.write_text("\n".join(epochs_jsonl(eval_rises=True)) + "\n")
    (f,) = of(analyze(read_log(path)), "periodicity")
    assert f.severity == Severity.WARNING and f.evidence["cause"] == "memorisation"
    assert f.evidence["eval_best_step"] == 600
    assert f.evidence["eval_rise"] == pytest.approx(0.45 / 1.8, abs=1e-3)
    assert "memorising its training set" in f.summary and "up 25% from its best (step 600)" in f.summary


def test_the_same_sawtooth_with_a_falling_eval_loss_is_information(tmp_path: Path) -> None:
    path = tmp_path / "epochs.jsonl"
    path.write_text("\n".join(epochs_jsonl(eval_rises=False)) + "\n")
    report = analyze(read_log(path))
    assert [f.evidence.get("cause") for f in of(report, "periodicity")] == ["epoch"]
    assert alarms(report) == []
