"""A replay says "no dependence" only where its test could have seen one: the size it could see
is stated (``detectable_rho``), and a short or misaligned record is "cannot tell" with the
reason, never a "no"."""

from __future__ import annotations

import numpy as np

from losslens.replay.fed import DETECTABLE_RHO, Fed, correlate_fed


def record(n: int, seed: int = 0) -> Fed:
    rng = np.random.default_rng(seed)
    lengths = rng.choice([200.0, 800.0, 3000.0], n)
    return Fed(np.arange(n), lengths, lengths, np.searchsorted([500, 2000], lengths), "length")


def loss(n: int, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return 2 + np.exp(-np.arange(n) / 300) + 0.05 * rng.standard_normal(n)


def test_a_long_record_the_loss_ignores_is_a_no_with_the_size_it_could_see() -> None:
    out = correlate_fed(np.arange(1250), loss(1250), record(1250))
    v = out["verdict"]
    assert v["dependence"] is False and v["p_value"] > 0.01
    assert 0 < v["detectable_rho"] <= DETECTABLE_RHO


def test_a_short_record_cannot_tell() -> None:
    v = correlate_fed(np.arange(30), loss(30), record(30))["verdict"]
    assert v["dependence"] is None and v["detectable_rho"] > DETECTABLE_RHO
    assert v["reason"].startswith("too few aligned steps for a no")


def test_steps_that_disagree_come_first_in_the_reason() -> None:
    fed = record(1250)
    steps = np.arange(1250) + 200  # a log that runs 200 steps past the record
    v = correlate_fed(steps, loss(1250), fed, allow_misalignment=True)["verdict"]
    assert v["dependence"] is None and v["reason"].startswith("the steps disagree: ")


def test_a_loss_that_follows_the_record_is_a_dependence() -> None:
    fed = record(1250)
    y = loss(1250) * (1 + 0.05 * (fed.mean_len / 3000))
    v = correlate_fed(np.arange(1250), y, fed)["verdict"]
    assert v["dependence"] is True and v["p_value"] <= 0.01


def test_a_record_per_micro_batch_against_a_log_per_step_is_refused_or_said() -> None:
    import pytest

    from losslens.errors import UsageError

    fed = record(5000)  # 4 micro-batches a step recorded as steps of their own
    with pytest.raises(UsageError, match="a record per micro-batch against a log per optimizer step"):
        correlate_fed(np.arange(1250), loss(1250), fed)
    v = correlate_fed(np.arange(1250), loss(1250), fed, allow_misalignment=True)["verdict"]
    assert v["dependence"] is None and v["reason"].startswith("the steps disagree: the record holds")


def test_a_record_one_step_off_the_log_is_said() -> None:
    fed = record(1250)
    y = loss(1250) * (1 + 0.05 * (fed.mean_len / 3000))
    out = correlate_fed(np.arange(1, 1251), y, fed)  # the log counts from 1, the record from 0
    assert "--step-offset 1" in out["alignment"]["warning"]
    assert out["alignment"]["rho_at_offsets"][1] > 0.5 > out["alignment"]["rho_at_offsets"][0]
    assert correlate_fed(np.arange(1, 1251), y, fed, offset=1)["verdict"]["dependence"] is True
