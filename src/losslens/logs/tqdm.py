"""Step times from tqdm's redraws, where a trainer's records carry no time of their own.

tqdm shows a rate (``67.27it/s``, ``1.23s/it``) that is the ratio of two exponential moving
averages, of the iterations (``dn``) and of the seconds (``dt``) between its updates, both with
its ``smoothing`` (0.3 by default): ``rate_k = Edn_k / Edt_k`` (their bias corrections cancel).
The iterations between updates are in the redraws (their counts), so ``Edn_k`` is known, and
``Edt_k = Edn_k / rate_k``; each update's own seconds follow from two successive averages,
``dt_k = (Edt_k - (1 - a) Edt_{k-1}) / a``. A redraw that repeats the rate is a refresh (a
message printed through ``tqdm.write``, as the Trainer's dicts are), not an update.

The elapsed time a bar shows is whole seconds: too coarse for steps of a few milliseconds, but
the averages above keep tqdm's own clock to the rate's printed digits."""

from __future__ import annotations

import re

import numpy as np

SMOOTHING = 0.3  # tqdm's default, which the Hugging Face Trainer's bars keep

# '[00:03<00:01, 64.37it/s' or '[00:05<00:12,  2.50s/it': the rate after the times
RATE = re.compile(r"\[[\d:]+<[^,\]]*, *(\d{1,12}(?:\.\d{1,12})?)(it/s|s/it)")


def rate_of(redraw: str) -> float | None:
    """The iterations per second one redraw shows; None without a rate ('?it/s')."""
    m = RATE.search(redraw)
    if m is None:
        return None
    value = float(m.group(1))
    if value <= 0:
        return None
    return value if m.group(2) == "it/s" else 1.0 / value


class Redraws:
    """A bar's redraws in order: each one's count and rate, in two lists (numpy reads each whole)."""

    __slots__ = ("counts", "rates")

    def __init__(self) -> None:
        self.counts: list[int] = []
        self.rates: list[float] = []

    def add(self, n: int, rate: float) -> None:
        self.counts.append(n)
        self.rates.append(rate)

    def extend(self, counts: list[int], rates: list[float]) -> None:
        self.counts.extend(counts)
        self.rates.extend(rates)

    def __len__(self) -> int:
        return len(self.counts)


def update_seconds(redraws: Redraws, smoothing: float = SMOOTHING) -> tuple[np.ndarray, np.ndarray]:
    """From a bar's redraws in order: the count at each update and the seconds since the one
    before (the first: since the bar was made). A redraw whose rate is the last one's is a
    refresh and is passed over; a count that goes back starts the averages again (a new bar with
    the same total)."""
    if len(redraws) >= VECTORISED:
        found = _in_blocks(redraws, smoothing)
        if found is not None:
            return found
    a, b = smoothing, 1.0 - smoothing
    counts, seconds = [], []
    last_n, last_rate, edn, edt = 0, None, 0.0, 0.0
    for n, rate in zip(redraws.counts, redraws.rates, strict=True):
        if n < last_n:
            last_n, last_rate, edn, edt = 0, None, 0.0, 0.0
        if rate == last_rate or n == last_n:
            continue
        edn = a * (n - last_n) + b * edn
        now = edn / rate
        counts.append(n)
        seconds.append(max(0.0, (now - b * edt) / a))
        last_n, last_rate, edt = n, rate, now
    return np.array(counts, dtype=np.int64), np.array(seconds)


VECTORISED = 4096  # redraws from which ``update_seconds`` tries ``_in_blocks``
BLOCK = 512  # a block's powers of (1 - smoothing) stay well within float64 (0.7 ** -512 ~ 1e79)


def _in_blocks(redraws: Redraws, smoothing: float) -> tuple[np.ndarray, np.ndarray] | None:
    """``update_seconds`` with numpy where the bar's count never goes back (one bar, no second one
    of the same total): the updates are the redraws whose count and rate both differ from the
    redraw before, checked to be those the loop keeps (each differs from the last update), and
    the averages' recurrence is summed a block at a time. The loop's numbers but for the last bits
    of rounding; None where the loop must decide."""
    try:
        n = np.array(redraws.counts, dtype=np.int64)
    except OverflowError:
        return None
    rate = np.array(redraws.rates, dtype=np.float64)
    if n[0] < 0 or (np.diff(n) < 0).any():
        return None
    keep = np.ones(len(n), dtype=np.bool_)
    keep[0] = n[0] != 0
    keep[1:] = (n[1:] != n[:-1]) & (rate[1:] != rate[:-1])
    last = np.maximum.accumulate(np.where(keep, np.arange(len(n)), -1))
    before = np.concatenate(([-1], last[:-1]))  # the last update before each redraw
    prev_n = np.where(before >= 0, n[np.maximum(before, 0)], 0)
    prev_rate = np.where(before >= 0, rate[np.maximum(before, 0)], np.nan)
    if not np.array_equal(keep, (n != prev_n) & (rate != prev_rate)):
        return None
    counts, rates = n[keep], rate[keep]
    a, b = smoothing, 1.0 - smoothing
    step = a * np.diff(counts, prepend=0).astype(np.float64)
    edn = np.empty(len(step))
    carry = 0.0
    for start in range(0, len(step), BLOCK):  # edn_k = step_k + b * edn_(k-1)
        part = step[start:start + BLOCK]
        k = np.arange(len(part))
        edn[start:start + len(part)] = b ** k * (b * carry + np.cumsum(part * b ** -k))
        carry = float(edn[start + len(part) - 1])
    now = edn / rates
    return counts, np.maximum(0.0, (now - b * np.concatenate(([0.0], now[:-1]))) / a)


def step_times(redraws: Redraws, steps: np.ndarray) -> np.ndarray:
    """The mean seconds per step between each of ``steps`` (rising) and the one before (from 0
    for the first), from the bar's ``redraws``: its updates' seconds spread evenly over the
    steps each covers. NaN where the bar's updates do not reach."""
    counts, seconds = update_seconds(redraws)
    out = np.full(len(steps), np.nan)
    if len(counts) < 2:
        return out
    clock = np.concatenate([[0.0], np.cumsum(seconds)])
    at = np.concatenate([[0], counts])
    s = np.asarray(steps, dtype=np.int64)
    # (rising steps: each one the bar reaches follows the last such one, or 0)
    reached = (s > 0) & (s <= at[-1])
    t = np.interp(s[reached], at, clock)
    out[reached] = np.diff(t, prepend=0.0) / np.diff(s[reached], prepend=0)
    return out
