"""Divergence, plateau and frozen loss on realistic curves: print precision, autocorrelated
wander, a loss stuck at chance, noisy ends."""


from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from losslens import read_log
from losslens.analysis import analyze
from losslens.findings import Severity
from losslens.logs import from_arrays
from tests.unit.shapes import alarms, of, preamble_then_dicts


def _ema_logged(seed: int, n: int = 200, every: int = 10) -> tuple[np.ndarray, np.ndarray]:
    """A healthy run whose printed loss is an exponential moving average (0.9) of very noisy
    per-step losses (60 % log-normal), logged every 10 steps as the mean since the last record:
    the printed level wanders slowly up and down around a converged curve."""
    rng = np.random.default_rng(seed)
    t = np.arange(n * every)
    x = (1.4 + 2.0 * np.exp(-t / (n * every * 0.15))) * np.exp(rng.normal(0, 0.6, len(t)))
    ema = np.empty(len(t))
    e = x[0]
    for i, xi in enumerate(x):
        e = 0.9 * e + 0.1 * xi
        ema[i] = e
    return t[every - 1::every] + 1, ema.reshape(n, every).mean(1)


def test_a_loss_printed_to_two_decimals_that_flattens_is_not_frozen() -> None:
    # logged every 10 steps (means of 10), printed '%.2f': at the floor the noise is below 0.01
    rng = np.random.default_rng(2)
    t = np.arange(25_000)
    loss = (1.9 + 0.3 * np.exp(-t / 4000)) * np.exp(rng.normal(0, 0.004, len(t)))
    printed = np.round(loss.reshape(-1, 10).mean(axis=1), 2)
    report = analyze(from_arrays(np.arange(10, 25_001, 10), loss=printed))
    assert of(report, "nonfinite") == [] and alarms(report) == []


def test_a_frozen_loss_printed_to_two_decimals_above_the_noise_is_found() -> None:
    rng = np.random.default_rng(2)
    loss = np.round(2.0 * np.exp(rng.normal(0, 0.03, 600)), 2)  # noise of ~6 print quanta
    loss[400:] = loss[399]  # the logger repeats its last value (a hidden NaN)
    (f,) = of(analyze(from_arrays(np.arange(600), loss=loss)), "nonfinite")
    assert f.start_step == 399 and f.evidence["records"] == 201


def test_a_loss_stuck_at_chance_is_not_learning_even_as_the_lr_decays(tmp_path: Path) -> None:
    """The same public log: a binary classifier's loss 0.6964 → 0.6823 over 1,330 steps, ln 2 all
    along, under a linear decay to ~0. The decayed LR hid it ('convergence'); a loss that starts and
    ends at ln K is a uniform guess over K classes, whatever the schedule."""
    rng = np.random.default_rng(5)
    for k in (2, 10):
        stuck = np.log(k) + rng.normal(0, 0.003 * np.log(k), 133)
        (f,) = of(analyze(read_log(preamble_then_dicts(tmp_path, stuck, f"stuck{k}.txt"))), "plateau")
        assert (f.severity, f.evidence["chance_classes"]) == (Severity.WARNING, k)
        assert f"stuck at ln {k} = {np.log(k):.4f}" in f.summary
    learning = np.log(2) * np.exp(-np.arange(133) / 80) + rng.normal(0, 0.003, 133)
    assert of(analyze(read_log(preamble_then_dicts(tmp_path, learning, "learning.txt"))), "plateau") == []
    for level in (0.52, 1.386, 3.01):  # converged, the LR decayed: no finding. ln 4 = 1.386 and
        # ln 20 = 2.996 (a real continued pretraining sits at 3.01) say nothing: ln K lie close there
        flat = level + rng.normal(0, 0.002, 133)
        path = preamble_then_dicts(tmp_path, flat, f"flat{level}.txt")
        assert of(analyze(read_log(path)), "plateau") == []


def test_a_dip_and_two_high_records_at_the_end_of_a_noisy_log_are_no_divergence() -> None:
    """A public YOLOX log (Duke-Rodriguez-Rudolph/yolox-chepai) opens with a run stopped after 10
    epochs: 40 records of a total loss printed to one decimal, 3.2-10.7 about a flat 6. Its
    smoothed low was the dip 3 records from the end, and 5 records after a turn were 'too few to
    judge': a divergence error on noise. With 20 records or more before the turn, the tail must
    stand out of the records' own noise; a loss that explodes over its last records still does."""
    real = np.array([10.7, 10.0, 4.0, 4.7, 4.7, 4.5, 6.4, 4.8, 3.4, 5.1, 10.7, 8.3, 5.6, 6.8, 8.0, 6.3,
                     8.3, 3.6, 5.5, 4.8, 4.1, 4.9, 5.9, 7.3, 6.7, 3.2, 4.7, 7.9, 5.9, 6.1, 5.8, 6.3, 7.5,
                     5.4, 4.3, 6.9, 4.4, 4.7, 8.3, 6.7])
    steps = np.arange(1, 41) * 10
    assert of(analyze(from_arrays(steps, loss=real)), "divergence") == []
    rng = np.random.default_rng(4)
    for seed in range(20):  # the same noise model: ~1.8 about a flat level, a dip then high records
        noise = np.random.default_rng(seed)
        noisy = 6.0 + noise.normal(0, 1.8, 40).clip(-2.8, 4.7)
        noisy[-5:] = 6.0 + 1.8 * np.array([-0.3, -0.9, -0.9, 1.2, 0.4]) + noise.normal(0, 0.1, 5)
        assert of(analyze(from_arrays(steps, loss=np.round(noisy, 1))), "divergence") == [], seed
    falling = 2.0 + np.exp(-np.arange(60) / 15) + rng.normal(0, 0.03, 60)
    explodes = np.concatenate([falling, [2.4, 3.5, 6.0, 11.0, 25.0]])
    (f,) = of(analyze(from_arrays(np.arange(65) * 10, loss=explodes)), "divergence")
    assert f.severity == Severity.ERROR and 550 <= f.start_step <= 610


def test_a_stuck_run_whose_level_wanders_is_a_plateau() -> None:
    """Stuck at ln(32,000) for 800 records while the level wanders a few percent (a slow random
    walk in the batches): not learning, however it drifts; a run at the same loss that falls 15 %
    is learning."""
    rng = np.random.default_rng(7)
    for drift in (0.03, -0.03):
        walk = np.cumsum(rng.normal(0, 0.0007, 800))
        walk += np.linspace(0, drift, 800) - walk[-1] * np.linspace(0, 1, 800)  # ends `drift` away
        loss = np.log(32_000) * np.exp(walk + rng.normal(0, 0.01, 800))
        (f,) = of(analyze(from_arrays(np.arange(800) * 10, loss=loss)), "plateau")
        assert f.severity == Severity.WARNING and f.evidence["stuck_high"]
    falling = np.log(32_000) * np.linspace(1, 0.85, 800) * np.exp(rng.normal(0, 0.01, 800))
    assert of(analyze(from_arrays(np.arange(800) * 10, loss=falling)), "plateau") == []


@pytest.mark.parametrize(("seed", "noise"), [(s, n) for s in range(4) for n in ("gauss", "student")])
def test_divergence_from_a_flat_loss_starts_at_the_turn(seed: int, noise: str) -> None:
    """A converged, flat loss that starts to grow exponentially: the smoothed minimum is a noise
    dip anywhere before the rise (hundreds of steps early); the turn is where the rise sets in,
    within 50 steps (issue 12, 8d)."""
    rng = np.random.default_rng(500 + seed)
    t = np.arange(1500)
    turn = int(rng.integers(500, 1100))
    e = rng.standard_t(3, len(t)) * 0.017 if noise == "student" else rng.normal(0, 0.03, len(t))
    loss = (1.6 + 2.0 * np.exp(-t / 100)) * np.exp(e)
    loss *= np.where(t > turn, np.exp((t - turn) / rng.uniform(150, 300)), 1.0)
    (div,) = of(analyze(from_arrays(t, loss=loss)), "divergence")
    assert abs(div.start_step - turn) <= 50 and div.evidence["turn_step"] == div.start_step


@pytest.mark.parametrize("seed", [11, 30, 55, 56, 97])
def test_the_wander_of_an_autocorrelated_loss_is_no_divergence(seed: int) -> None:
    """The level of an EMA-smoothed loss ends some 20 % above its lowest dip, and the smoothed
    rise looks monotone (18 of 300 such runs were a divergence *error*, failing `check`); its raw
    records after the dip are worth a few independent ones, and their rise is not significant."""
    steps, loss = _ema_logged(seed)
    assert of(analyze(from_arrays(steps, loss=loss)), "divergence") == []


@pytest.mark.parametrize("seed", range(3))
def test_a_rise_beyond_that_wander_is_still_a_divergence(seed: int) -> None:
    """The same noisy, smoothed runs with the level ramping up 60 % over the last 40 %."""
    steps, loss = _ema_logged(seed)
    i = np.arange(len(loss))
    loss = loss * np.where(i > 120, 1 + 0.6 * (i - 120) / 80, 1.0)
    (div,) = of(analyze(from_arrays(steps, loss=loss)), "divergence")
    assert div.severity == Severity.ERROR and div.evidence["significance"] >= 3
