"""Order-free: a loss tested against what a strategy predicts from lengths and parameters alone
(band weights, period, smear), for runs whose order cannot be reproduced."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from losslens.replay.orderfree import band_match, order_free, period_power, smear
from tests.conftest import FIXTURES


def test_band_weights_that_match_a_grouping_of_bucket_shares_are_not_chance() -> None:
    shares = [0.10, 0.12, 0.05, 0.11, 0.10, 0.52]  # the seed: one bucket makes half the steps
    hit = band_match([0.22, 0.26, 0.52], shares)
    assert hit is not None and hit["predicted_shares"] == [0.22, 0.26, 0.52]
    assert hit["distance"] == 0.0 and hit["p_value"] < 0.01
    miss = band_match([0.40, 0.45, 0.15], shares)
    assert miss is not None and miss["p_value"] > 0.05
    # longer batches may carry the lower loss: the grouping is tried in both directions
    assert band_match([0.52, 0.26, 0.22], shares)["distance"] == 0.0
    assert band_match([0.5, 0.5], [1.0]) is None  # fewer buckets than bands


def test_the_strategy_period_in_the_loss_spectrum() -> None:
    rng = np.random.default_rng(0)
    t = np.arange(3000)
    saw = 2 + 0.1 * ((t % 25) / 25) + rng.normal(0, 0.05, len(t))
    assert period_power(t, saw, 25.0)["power_rank_p"] < 0.01
    noise = 2 + rng.normal(0, 0.05, len(t))
    assert period_power(t, noise, 25.0)["power_rank_p"] > 0.05
    assert period_power(t[:40], saw[:40], 25.0) is None  # fewer than 3 cycles


def test_smear_of_logged_windows() -> None:
    runs = np.repeat([0, 1, 0, 2, 1], 20)
    assert smear(runs, 1)["purity"] == 1.0
    assert smear(runs, 20)["purity"] == 1.0  # windows fall on the runs
    alternating = np.tile([0, 1], 50)
    assert smear(alternating, 10)["purity"] == 0.5
    v = order_free(np.arange(100), np.ones(100), None, [0.5, 0.5], None, alternating, 10)
    assert v["dependence"] is None and "cannot show per-bucket levels" in v["reason"]


@pytest.mark.slow
@pytest.mark.parametrize("shuffled", [False, True])
def test_order_free_finds_a_grouped_run_from_lengths_alone(tmp_path: Path, shuffled: bool) -> None:
    """An HF group-by-length run (transformers' own order, recorded) whose loss follows its batch
    lengths, replayed with a seed that is not the run's: the period the sampler predicts is in the
    loss (dependence, p <= 0.01); the same loss shuffled in time is no dependence."""
    from losslens.replay.request import ReplayRequest, run
    from tests.unit.replay.test_frameworks import framework_run, planted_log

    strategy, plan, seed, epochs, lens, mean_len = framework_run("hf_grouped_long")
    rng = np.random.default_rng(3)
    loss = planted_log(mean_len, rng)
    if shuffled:
        loss = rng.permutation(loss)
    log = tmp_path / "run.log"
    log.write_text("".join(f"step={s} loss={x:.5f}\n" for s, x in enumerate(loss)))
    np.save(tmp_path / "lengths.npy", lens)
    req = ReplayRequest(lengths=str(tmp_path / "lengths.npy"), log=str(log), strategy=strategy,
                        seed=seed + 100, epochs=epochs, grad_accum=plan.grad_accum,
                        world_size=plan.world_size, per_device_batch=plan.per_device_batch,
                        bounds=plan.bounds, max_seq_len=plan.max_seq_len, order_free=True, device="cpu")
    v = run(req).summary["verdict"]
    assert v["method"] == "order-free" and v["tests"]["period"]["period_steps"] == 25
    if shuffled:
        assert v["dependence"] is False and v["p_value"] > 0.05
    else:
        assert v["dependence"] is True and v["p_value"] <= 0.01


@pytest.mark.slow
def test_order_free_names_the_bucketed_fixture_from_its_band_weights() -> None:
    from losslens.replay.request import ReplayRequest, run

    req = ReplayRequest(lengths=str(FIXTURES / "lengths_seed_shape.npy"),
                        log=str(FIXTURES / "bucketed_run.log"), seed=7, order_free=True, device="cpu")
    rep = run(req)
    v = rep.summary["verdict"]
    assert v["dependence"] is True and v["tests"]["band_weights"]["p_value"] < 0.01
    (multi,) = [f for f in rep.summary["findings"] if f["kind"] == "multimodal"]
    assert multi["evidence"]["cause"] == "batch_composition"


def test_top_band_runs_against_the_strategy_and_no_order() -> None:
    """A top band met in runs of ~5 records, as the strategy's top buckets come: the same mean run
    as the replays, longer than the same records in random order give."""
    from losslens.replay.orderfree import band_runs

    rng = np.random.default_rng(1)

    def blocks() -> np.ndarray:
        return np.repeat(rng.random(200) < 0.4, 5)

    t = band_runs(blocks(), [blocks() for _ in range(19)])
    assert t is not None and t["replays"] == 19
    lo, hi = t["strategy_q05_q95"]
    assert lo - 1 <= t["observed_mean_run"] <= hi + 1 and t["observed_mean_run"] > 4
    assert t["no_order_mean_run"] < 2 and t["longer_than_no_order_p"] == 0.005
    assert band_runs(np.zeros(50, dtype=bool), [blocks()]) is None  # no runs to compare


def test_the_order_free_view_shows_its_alignment_warning() -> None:
    """--order-free keeps the alignment block at the top of the report: a mismatch let through
    with --allow-misalignment is shown, as on the other paths."""
    from rich.console import Console

    from losslens.reporters.replay_view import _correlation

    report = {"alignment": {"warning": "the log reaches step 6,255 but the replay has 5,495 steps"},
              "verdict": {"method": "order-free", "tests": {}}}
    console = Console(width=300, record=True)
    for part in _correlation(report):
        console.print(part)
    assert "alignment: the log reaches step 6,255 but the replay has 5,495 steps (tested anyway: " \
        "--allow-misalignment)" in console.export_text()


def test_the_smear_counts_the_micro_batches_of_each_step() -> None:
    """Four micro-batches a step, two of bucket 0 and two of bucket 1, logged every step: each
    step's bucket (its longest batch's) is 1, but each logged value averages both buckets."""
    from losslens.replay.orderfree import smear

    micro = np.tile([0, 1, 0, 1], 50)
    per_step = np.ones(50, dtype=int)  # the bucket of each step's longest micro-batch
    assert smear(per_step, 1)["purity"] == 1.0
    s = smear(micro, 1, per_step=4)
    assert s["micro_batches_per_logged_value"] == 4 and s["purity"] == 0.5
