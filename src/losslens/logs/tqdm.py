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


def update_seconds(redraws: list[tuple[int, float]], smoothing: float = SMOOTHING
                   ) -> tuple[np.ndarray, np.ndarray]:
    """From a bar's redraws (count, rate) in order: the count at each update and the seconds
    since the one before (the first: since the bar was made). A redraw whose rate is the last
    one's is a refresh and is passed over; a count that goes back starts the averages again (a
    new bar with the same total)."""
    a, b = smoothing, 1.0 - smoothing
    counts, seconds = [], []
    last_n, last_rate, edn, edt = 0, None, 0.0, 0.0
    for n, rate in redraws:
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


def step_times(redraws: list[tuple[int, float]], steps: np.ndarray) -> np.ndarray:
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
