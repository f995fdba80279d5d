"""Detectors on shapes they were not tuned to (issue 12): the fundamental period of a pattern that
is not a sine, schedules that explain a periodic loss, the accumulator under realistic noise,
short pasted logs, print precision, heavy tails, the turn of a backlog, memorisation. Each curve
here is built inline with its own noise model (not losslens.synth's)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from losslens import read_log
from losslens.analysis import analyze
from losslens.findings import Severity
from losslens.logs import from_arrays


def of(report, kind: str) -> list:
    return [f for f in report.findings if f.kind == kind]


def alarms(report) -> list[str]:
    return [f.kind for f in report.findings if f.severity >= Severity.WARNING]


def static_order(period: int, cycles: int, seed: int, steps: np.ndarray | None = None) -> np.ndarray:
    """A decaying loss whose batch order was built once and replayed: each position of the cycle
    has its own difficulty (a random profile, many harmonics), AR(1) noise."""
    rng = np.random.default_rng(seed)
    n = period * cycles
    t = np.arange(n) if steps is None else steps
    profile = np.exp(rng.normal(0, 0.12, period))
    noise = np.zeros(len(t))
    for i in range(1, len(t)):
        noise[i] = 0.8 * noise[i - 1] + rng.normal(0, 0.015)
    return (1.5 + 2.0 * np.exp(-t / 800)) * profile[t % period] * np.exp(noise)


@pytest.mark.parametrize(("period", "cycles", "seed"), [(24, 40, 0), (60, 20, 1), (130, 10, 2)])
def test_period_is_the_fundamental_not_the_strongest_harmonic(period: int, cycles: int, seed: int) -> None:
    loss = static_order(period, cycles, seed)
    (f,) = of(analyze(from_arrays(np.arange(len(loss)), loss=loss)), "periodicity")
    assert abs(f.evidence["period_steps"] - period) <= 0.05 * period
    assert f.evidence["cause"] == "data_order" and f.severity >= Severity.WARNING
    harmonics = f.evidence["harmonics"]
    assert harmonics[0]["period_steps"] == f.evidence["period_steps"]
    assert [h["period_steps"] for h in harmonics[:3]] == pytest.approx(
        [period, period / 2, period / 3], rel=0.05)


def test_fundamental_under_uneven_logging_with_gaps() -> None:
    rng = np.random.default_rng(5)
    steps = np.cumsum(rng.integers(1, 5, 700))
    steps[350:] += 400  # a gap in the log (a crash, resumed later)
    loss = static_order(60, 1, 5, steps=steps)
    (f,) = of(analyze(from_arrays(steps, loss=loss)), "periodicity")
    assert abs(f.evidence["period_steps"] - 60) <= 3


def sgdr_lines(period: int, lr_logged: bool, n: int = 3000, every: int = 5) -> list[str]:
    """HF Trainer stdout of an SGDR run (cosine annealing with warm restarts): the loss rises
    with each restart of the LR."""
    rng = np.random.default_rng(3)
    t = np.arange(n)
    lr = 3e-4 * (0.02 + 0.98 * 0.5 * (1 + np.cos(np.pi * (t % period) / period)))
    loss = (1.6 + 2.4 * np.exp(-np.cumsum(lr) / lr.max() / 400) + 0.5 * lr / lr.max())
    loss = loss * np.exp(rng.normal(0, 0.02, n))
    out = []
    for i in range(every, n + 1, every):
        entry = f"'loss': {loss[i - every:i].mean():.4f}, 'grad_norm': {rng.uniform(0.5, 1.5):.4f}"
        if lr_logged:
            entry += f", 'learning_rate': {lr[i - 1]:.4e}"
        out.append(f"{{{entry}, 'epoch': {i / n:.2f}, 'step': {i}}}")
    return out


def test_sgdr_periodic_loss_is_the_schedule_when_the_lr_is_logged(tmp_path: Path) -> None:
    path = tmp_path / "sgdr.log"
    path.write_text("\n".join(sgdr_lines(500, lr_logged=True)) + "\n")
    report = analyze(read_log(path))
    (f,) = of(report, "periodicity")
    assert f.severity == Severity.INFO and f.evidence["cause"] == "lr_schedule"
    assert abs(f.evidence["period_steps"] - 500) <= 25
    assert "the schedule explains it" in f.summary
    assert alarms(report) == []
    check = subprocess.run([sys.executable, "-m", "losslens", "check", str(path)], capture_output=True)
    assert check.returncode == 0


def test_the_same_shape_without_the_lr_is_still_reported(tmp_path: Path) -> None:
    path = tmp_path / "sgdr.log"
    path.write_text("\n".join(sgdr_lines(500, lr_logged=False)) + "\n")
    (f,) = of(analyze(read_log(path)), "periodicity")
    assert f.severity >= Severity.WARNING and f.evidence["cause"] == "data_order"
    assert abs(f.evidence["period_steps"] - 500) <= 25


def test_nyquist_line_of_red_noise_is_not_a_period() -> None:
    # every-10-steps averages of AR(0.9) noise: the top of the spectrum is its own background
    rng = np.random.default_rng(1)
    e = np.zeros(12_000)
    for i in range(1, len(e)):
        e[i] = 0.9 * e[i - 1] + rng.normal(0, 0.013)
    loss = (1.6 + 2.4 * np.exp(-np.arange(12_000) / 1500)) * np.exp(e)
    means = loss.reshape(-1, 10).mean(axis=1)
    assert of(analyze(from_arrays(np.arange(10, 12_001, 10), loss=means)), "periodicity") == []

