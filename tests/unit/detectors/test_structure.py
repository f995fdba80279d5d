"""Structure detectors (ladder, multimodal, periodicity) on seeded curves with known truth."""

from __future__ import annotations

import numpy as np
import pytest

from losslens import read_log, synth
from losslens.analysis import analyze
from losslens.detectors.ladder import find_episodes
from losslens.detectors.stats import runs_test
from losslens.findings import Severity
from losslens.logs import from_arrays
from tests.conftest import FIXTURES


def findings(curve: synth.Curve, kind: str, scale: float = 1.0, offset: float = 0.0, shift: int = 0):
    log = from_arrays(curve.steps + shift, loss=curve.loss * scale + offset)
    return [f for f in analyze(log).findings if f.kind == kind]


def test_seed004_fixture_is_an_accumulator_ladder() -> None:
    report = analyze(read_log(FIXTURES / "seed004_dflash.log"))
    (f,) = report.findings
    assert (f.kind, f.severity, f.metric, f.start_step, f.end_step) == \
        ("ladder", Severity.ERROR, "loss", 144, 349)
    assert f.evidence["cause"] == "accumulator"
    assert f.evidence["episodes"] == 3 and f.evidence["median_length"] == 5
    assert f.evidence["increment"] == pytest.approx(0.91, abs=0.01)
    assert [e["reset_step"] for e in f.evidence["clearest"]] == [153, 259, 349]
    assert "integer multiples of ~0.91" in f.summary


def test_the_seed_excerpt_episodes() -> None:
    v = np.array([0.8183, 1.5599, 2.4042, 3.2330, 4.0884, 4.4271, 0.8700])
    (ep,) = find_episodes(v)
    assert (ep.start, ep.peak) == (0, 5)
    assert ep.increment == pytest.approx(0.8366, abs=1e-3)  # the short last step is left out


@pytest.mark.parametrize("cause", ["accumulator", "batch_composition"])
@pytest.mark.parametrize("period", [5, 8])
def test_ladder_cause(cause: str, period: int) -> None:
    (f,) = findings(synth.ladder(period=period, cause=cause, seed=3), "ladder")
    assert f.evidence["cause"] == cause
    assert f.evidence["median_length"] == period - 1
    assert f.severity == Severity.ERROR
    if cause == "batch_composition":
        assert f.evidence["period_steps"] == period


def test_bands_harmonic_and_runs() -> None:
    (f,) = findings(synth.bands(seed=1), "multimodal")
    assert len(f.evidence["modes"]) == 3 and f.evidence["harmonic"] is True
    assert f.evidence["runs_p"] < 1e-6
    assert f.severity == Severity.ERROR
    (g,) = findings(synth.bands(levels=(0.6, 1.0, 1.7), seed=1), "multimodal")
    assert g.evidence["harmonic"] is False
    assert sum(g.evidence["shares"]) == pytest.approx(1.0, abs=1e-3)


@pytest.mark.parametrize(("period", "uneven"), [(25.0, False), (120.0, False), (60.0, True)])
def test_period_found_within_5_percent(period: float, uneven: bool) -> None:
    (f,) = findings(synth.periodic(period=period, seed=2, uneven=uneven), "periodicity")
    assert abs(f.evidence["period_steps"] - period) <= 0.05 * period
    assert f.evidence["p_value"] < 1e-3


def test_known_period_is_named() -> None:
    (f,) = findings(synth.periodic(period=50.0, seed=0), "periodicity")
    assert f.evidence["matches"] == ["Hugging Face group_by_length mega-batch (50 steps)"]


@pytest.mark.parametrize("family", synth.CLEAN_FAMILIES)
def test_clean_curves_stay_silent(family: str) -> None:
    for seed in range(3):
        c = synth.clean(family, seed=seed)
        report = analyze(from_arrays(c.steps, loss=c.loss))
        assert [f for f in report.findings if f.severity >= Severity.WARNING] == [], family


def test_runs_test() -> None:
    z, p = runs_test(np.array([1, 1, 1, 1, 0, 0, 0, 0] * 20, dtype=bool))
    assert z < -6 and p < 1e-9
    z, p = runs_test(np.array([1, 0] * 80, dtype=bool))
    assert z > 8 and p > 0.99


def test_rank_sum_matches_scipy() -> None:
    from scipy.stats import mannwhitneyu

    from losslens.detectors.stats import rank_sum_p

    rng = np.random.default_rng(0)
    a, b = rng.normal(1, 1, 12), np.round(rng.normal(0, 1, 9), 1)
    assert rank_sum_p(a, b) == pytest.approx(
        mannwhitneyu(a, b, alternative="greater", method="asymptotic").pvalue, rel=1e-6)


def test_spearman_handles_ties_like_scipy() -> None:
    """A loss printed to 2 decimals repeats values: ties share their average rank (scipy is the
    oracle, installed with the dev extra only)."""
    from scipy.stats import rankdata, spearmanr

    from losslens.detectors.stats import ranks, spearman

    rng = np.random.default_rng(1)
    for _ in range(20):
        a = np.round(rng.normal(2, 0.02, 60), 2)  # a handful of distinct values
        b = np.round(rng.normal(0, 1, 60), 1)
        assert np.array_equal(ranks(a), rankdata(a))
        assert spearman(a, b) == pytest.approx(spearmanr(a, b).statistic, abs=1e-12)
        assert spearman(a) == pytest.approx(spearmanr(a, np.arange(60)).statistic, abs=1e-12)
    # a constant rounded loss has no trend, whatever order its ties come in
    assert spearman(np.full(50, 1.23)) == 0.0


def test_ranks_and_spearman_over_rows_at_once() -> None:
    """The replay's Monte-Carlo ranks a hundred seeds' rows in one call: the same ranks as scipy
    along either axis (with and without ties), the same correlations as one row at a time."""
    from scipy.stats import rankdata

    from losslens.detectors.stats import ranks, spearman, spearman_rows

    rng = np.random.default_rng(2)
    for decimals in (None, 1, 2):
        rows = rng.normal(0, 1, (30, 200))
        rows = rows if decimals is None else np.round(rows, decimals)
        assert np.array_equal(ranks(rows), rankdata(rows, axis=1))
        assert np.array_equal(ranks(np.ascontiguousarray(rows.T)).T, rankdata(rows, axis=0))
        a = np.round(rng.normal(0, 1, 200), 1)
        rows[3] = 7.0  # a constant row correlates 0, as spearman() says
        assert np.allclose(spearman_rows(a, rows), [spearman(a, r) for r in rows], atol=1e-12)
    # a matrix large enough to be ranked in blocks of rows on threads: the same ranks
    big = np.round(rng.normal(0, 1, (40, 9000)), 1)
    assert np.array_equal(ranks(big), rankdata(big, axis=1))
    assert np.array_equal(ranks(np.ascontiguousarray(big.T)).T, rankdata(big, axis=0))


def test_a_wide_centred_median_is_taken_on_a_subsample_and_stays_close() -> None:
    """A centred median over a window wider than EXACT_WINDOW (a quarter of a 1M-record run) is
    taken on every k-th record: on a decaying noisy loss of 200,000 records it stays within a
    fraction of the noise of the exact median (which costs O(n log w))."""
    import polars as pl

    from losslens.detectors.stats import EXACT_WINDOW, rolling_median

    rng = np.random.default_rng(0)
    t = np.arange(200_000)
    x = (2 + 3 * np.exp(-t / 40_000)) * np.exp(rng.normal(0, 0.05, len(t)))
    window = 50_001
    assert window > EXACT_WINDOW
    exact = pl.Series(x).rolling_median(window_size=window, center=True, min_samples=1).to_numpy()
    fast = rolling_median(x, window)
    assert np.max(np.abs(fast - exact) / exact) < 0.01  # the noise is 5 %


def test_a_noiseless_ramp_printed_to_four_decimals_has_no_period() -> None:
    """3 → 2 over 200,000 steps printed '%.4f': the staircase of the print beats with the trend's
    sampling (a 'period' of ~140 steps, an error before); a real pattern so printed is still found."""
    n = 200_000
    steps = np.arange(n)
    ramp = np.round(3 - steps / n, 4)
    assert not [f for f in analyze(from_arrays(steps, loss=ramp)).findings if f.kind == "periodicity"]
    rng = np.random.default_rng(0)
    saw = np.round(3 - steps / n + 0.02 * (steps % 500) / 500 + rng.normal(0, 0.002, n), 4)
    found = [f for f in analyze(from_arrays(steps, loss=saw)).findings if f.kind == "periodicity"]
    assert found and abs(found[0].evidence["period_steps"] - 500) <= 25


@pytest.mark.parametrize(("drop", "severity"), [(0.18, Severity.WARNING), (0.07, Severity.INFO)])
def test_a_per_epoch_sawtooth_is_judged_against_the_noise_within_an_epoch(drop: float,
                                                                         severity: Severity) -> None:
    """Five epochs of 300 steps, the loss a step lower at each epoch start: 18 % against 2 %
    noise is the model memorising what it saw (a warning); 7 % (about 4 times the noise) is the
    ordinary gain of seeing the data again (information). Either way the summary says why."""
    rng = np.random.default_rng(7)
    n, per = 1500, 300
    e = np.arange(n) // per
    loss = 2.0 * (1 - drop) ** e * np.exp(0.02 * rng.standard_normal(n))
    log = from_arrays(np.arange(1, n + 1), loss=loss, epoch=np.arange(n) / per)
    [f] = [f for f in analyze(log).findings if f.kind == "periodicity"]
    assert f.severity == severity and f.evidence["cause"] == "epoch"
    assert f.evidence["within_epoch_noise"] == pytest.approx(0.02, rel=0.2)
    assert "the noise within an epoch" in f.summary
    assert ("memorises" in f.summary) == (severity == Severity.WARNING)
