"""Step times from tqdm's redraws (logs/tqdm.py): the block-wise sum of a long bar's averages gives
the loop's updates and seconds, and leaves to the loop the bars it cannot decide."""

from __future__ import annotations

import random

import numpy as np
import pytest

from losslens.logs import tqdm


def _bar(n: int, seed: int, refresh: float = 0.1, same_rate: float = 0.05) -> tqdm.Redraws:
    """A Trainer's bar: a redraw a step whose rate (an average, two decimals) moves a little, a
    refresh (the same count and rate) after some steps as a dict is written through it, and now
    and then the same rate shown twice."""
    rng = random.Random(seed)
    out, rate, count = tqdm.Redraws(), 4.2, 0
    for _ in range(n):
        count += 1
        if rng.random() >= same_rate:
            rate = max(0.01, round(rate + rng.gauss(0, 0.05), 2))
        out.add(count, rate)
        if rng.random() < refresh:
            out.add(count, rate)
    return out


def _loop(redraws: tqdm.Redraws) -> tuple[np.ndarray, np.ndarray]:
    """``update_seconds`` by its loop alone."""
    short = tqdm.Redraws()
    short.extend(redraws.counts, redraws.rates)
    saved = tqdm.VECTORISED
    tqdm.VECTORISED = len(short) + 1
    try:
        return tqdm.update_seconds(short)
    finally:
        tqdm.VECTORISED = saved


@pytest.mark.parametrize("seed", range(4))
def test_blocks_give_the_loop_s_updates(seed: int) -> None:
    bar = _bar(20_000 + 777 * seed, seed)
    blocks = tqdm._in_blocks(bar, tqdm.SMOOTHING)
    assert blocks is not None
    counts, seconds = _loop(bar)
    assert np.array_equal(blocks[0], counts) and len(counts) > 15_000
    np.testing.assert_allclose(blocks[1], seconds, rtol=1e-12, atol=1e-12)  # (seconds: a difference)


def test_a_bar_the_blocks_cannot_decide_is_the_loop_s() -> None:
    """A count that goes back (a second bar of the same total), or an update whose rate a left-out
    redraw showed (the loop compares with the last update, not the redraw before): the loop."""
    again = _bar(6000, 1)
    again.extend(list(range(1, 3000)), [3.0 + (k % 5) / 100 for k in range(1, 3000)])
    odd = tqdm.Redraws()
    odd.extend([1, 1, 2, 3, *range(4, 6000)], [1.0, 2.0, 2.0, 3.0] + [4.0 + k % 3 for k in range(4, 6000)])
    for bar in (again, odd):
        assert tqdm._in_blocks(bar, tqdm.SMOOTHING) is None
        counts, seconds = tqdm.update_seconds(bar)
        loop = _loop(bar)
        assert np.array_equal(counts, loop[0]) and np.array_equal(seconds, loop[1])
