"""The accumulator ladder under lost records, and what comes after its last episode."""


from __future__ import annotations

import numpy as np
import pytest

from losslens.analysis import analyze
from losslens.logs import from_arrays
from tests.unit.shapes import alarms, of


def _summed_ladder(seed: int, K: int = 4, episodes: int = 19) -> tuple[np.ndarray, np.ndarray]:
    """A summed-but-never-divided loss logged every step: record k of an accumulation is the sum of
    k noisy per-step losses, then a reset, under a decaying level; about 8 % of the records are
    lost (rungs and resets go missing)."""
    rng = np.random.default_rng(seed)
    n = episodes * K
    level = 1.1 * (0.45 / 1.1) ** (np.arange(n) / n)
    per_step = level * np.exp(rng.normal(0, 0.06, n))
    acc = np.concatenate([np.cumsum(per_step[i:i + K]) for i in range(0, n, K)])
    keep = rng.random(n) >= 0.08
    return np.arange(1, n + 1)[keep], acc[keep]


@pytest.mark.parametrize("seed", range(40))
def test_an_accumulator_with_lost_records_is_only_the_ladder(seed: int) -> None:
    """The climbs recur one accumulation apart even where missed episodes make the median distance
    between the episodes found twice as long: a period at one accumulation is the ladder's, and a
    climb after the last episode found is one more, not a divergence ("lower the LR" would be the
    wrong advice). 5 of these 40 gave a periodicity alarm beside the ladder before."""
    steps, loss = _summed_ladder(seed)
    report = analyze(from_arrays(steps, loss=loss))
    assert [f.evidence["cause"] for f in of(report, "ladder")] == ["accumulator"]
    assert alarms(report) == ["ladder"]


def test_a_climb_after_the_last_episode_found_is_not_a_divergence() -> None:
    """An accumulator log (K = 4, records lost) from bench/simlogs.py whose last episodes were not
    found as episodes (a lost reset): the final climb, 0.58 -> 2.31 over steps 73-76, was reported
    as a divergence error ("rises 45 %, try a warm-up") beside the ladder."""
    steps = np.array([1, 2, 3, 4, 5, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 19, 20, 21, 22, 23, 24,
                      25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44,
                      45, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65,
                      66, 68, 70, 71, 72, 73, 74, 75, 76])
    loss = np.array([1.0777, 2.1282, 3.146, 4.3374, 1.0423, 3.1393, 4.1329, 1.0117, 1.9951, 2.9709,
                     3.9354, 0.926, 1.9364, 2.8359, 3.8489, 1.8301, 2.8011, 3.6822, 0.9469, 1.7748,
                     2.7053, 3.6476, 0.7959, 1.6764, 2.5834, 3.4476, 0.81, 1.5341, 2.3953, 3.2007,
                     0.8092, 1.5944, 2.3782, 3.0386, 0.7068, 1.4885, 2.2543, 2.9971, 0.8381, 1.5924,
                     2.4279, 3.1892, 0.6903, 2.142, 2.7849, 0.7087, 1.4285, 2.0959, 2.7925, 0.6267,
                     1.4116, 2.0995, 2.7948, 0.6547, 1.27, 1.9628, 2.5588, 0.6115, 1.2906, 1.8545,
                     2.501, 0.6858, 1.3028, 2.4707, 1.1439, 1.7163, 2.2737, 0.5834, 1.2195, 1.7671,
                     2.3053])
    report = analyze(from_arrays(steps, loss=loss))
    assert [f.evidence["cause"] for f in of(report, "ladder")] == ["accumulator"]
    assert alarms(report) == ["ladder"]


def test_the_short_median_of_a_climb_is_numpy_s() -> None:
    """find_episodes takes the median of each climb's increments thousands of times a run (its
    shuffles): its own short median must give np.median's value, to the bit."""
    from losslens.detectors.ladder import _median

    rng = np.random.default_rng(0)
    for n in range(1, 40):
        for scale in (1e-8, 1.0, 1e8):
            x = rng.standard_normal(n) * scale
            assert _median(x) == float(np.median(x))
    assert _median(np.array([1.0, 1.0, 2.0, 2.0])) == 1.5
