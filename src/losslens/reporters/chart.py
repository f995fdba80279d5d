"""Numbers for drawing, shared by the page, the picture and the terminal: which panels, points
kept per pixel column, round ticks, an axis top that a warm-up does not flatten."""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import polars as pl

PANELS = ("loss", "eval_loss", "acc", "lr", "grad_norm", "tokens_per_s", "step_time_s", "q_pre_min",
          "q_hs_mean")


def minmax_downsample(x: np.ndarray, y: np.ndarray, columns: int) -> tuple[np.ndarray, np.ndarray]:
    """Per pixel column, the first/min/max/last point (in step order): spikes survive. (Arrays:
    ``downsampled`` over a frame of them.)"""
    return downsampled(pl.DataFrame({"x": x, "y": y}), "y", columns, x="x")


BLOCK = 1 << 18  # records drawn at a time from a frame (a long run is never copied whole)


def blocks(frame: pl.DataFrame, x: str, y: str) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """``frame``'s columns ``x`` and ``y`` as float64 values (nulls as NaN), BLOCK rows at a time."""
    for lo in range(0, frame.height, BLOCK):
        part = frame.slice(lo, BLOCK)
        yield part[x].cast(pl.Float64).to_numpy(), part[y].cast(pl.Float64).to_numpy()


def downsampled(frame: pl.DataFrame, name: str, columns: int, x: str = "step"
                ) -> tuple[np.ndarray, np.ndarray]:
    """Per pixel column of ``columns``, the first/min/max/last finite point of ``frame``'s ``name``
    against its ``x`` (in row order: spikes survive); all of them where there are at most four a
    column. Taken a block at a time: a 10M-record column is not turned into float64 arrays whole
    (three of them, and the copies of their finite part)."""
    n, first, last = 0, math.nan, math.nan
    for xs, ys in blocks(frame, x, name):
        ok = np.isfinite(ys)
        k = int(ok.sum())
        if k:
            at = np.flatnonzero(ok)
            first = float(xs[at[0]]) if not n else first
            last, n = float(xs[at[-1]]), n + k
    if n <= 4 * columns:
        parts = [(xs[np.isfinite(ys)], ys[np.isfinite(ys)]) for xs, ys in blocks(frame, x, name)]
        return (np.concatenate([p[0] for p in parts]) if parts else np.zeros(0),
                np.concatenate([p[1] for p in parts]) if parts else np.zeros(0))
    runs = _Runs()
    offset = 0  # finite points before this block
    for xs, ys in blocks(frame, x, name):
        ok = np.isfinite(ys)
        xs, ys = xs[ok], ys[ok]
        if not len(xs):
            continue
        col = ((xs - first) / max(1, last - first) * (columns - 1)).astype(np.int64)
        starts = np.concatenate([[0], np.flatnonzero(np.diff(col)) + 1])
        ends = np.concatenate([starts[1:], [len(col)]])
        for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
            runs.add(int(col[a]), offset + a, xs[a:b], ys[a:b])
        offset += len(xs)
    runs.close()
    return np.asarray(runs.x, dtype=np.float64), np.asarray(runs.y, dtype=np.float64)


class _Runs:
    """Runs of points in one pixel column, a run's part at a time (a run may go on in the next
    block): per run, its first, lowest, highest and last point (the first of equal ones), in
    order, each once."""

    def __init__(self) -> None:
        self.x: list[float] = []
        self.y: list[float] = []
        self.col: int | None = None
        self.kept: dict[str, tuple[int, float, float]] = {}  # first/low/high/last: (index, x, y)

    def add(self, col: int, index: int, xs: np.ndarray, ys: np.ndarray) -> None:
        lo, hi = int(np.argmin(ys)), int(np.argmax(ys))
        low = (index + lo, float(xs[lo]), float(ys[lo]))
        high = (index + hi, float(xs[hi]), float(ys[hi]))
        last = (index + len(ys) - 1, float(xs[-1]), float(ys[-1]))
        if col == self.col:  # the run goes on
            k = self.kept
            k["low"] = low if low[2] < k["low"][2] else k["low"]
            k["high"] = high if high[2] > k["high"][2] else k["high"]
            k["last"] = last
            return
        self.close()
        self.col = col
        self.kept = {"first": (index, float(xs[0]), float(ys[0])), "low": low, "high": high, "last": last}

    def close(self) -> None:
        """The run so far, its points in order, each once."""
        for _, x, y in sorted({p[0]: p for p in self.kept.values()}.values()):
            self.x.append(x)
            self.y.append(y)
        self.kept, self.col = {}, None


def fmt(v: float) -> str:
    """A number in at most 4 significant digits."""
    return f"{v:.4g}"


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About ``n`` round tick values (1, 2 or 5 × 10^k apart) inside [lo, hi]."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo]
    raw = (hi - lo) / max(1, n - 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = min((m * mag for m in (1, 2, 5, 10)), key=lambda c: abs(math.log(c / raw)))  # nearest
    first = math.ceil(lo / step - 1e-9) * step
    ticks = []
    v = first
    while v <= hi + step * 1e-9:
        ticks.append(round(v, 12))
        v += step
    return ticks


def tick_label(v: float, ticks: list[float]) -> str:
    """A tick value with as many decimals as its spacing needs ('0.25', '1500', '2e-05')."""
    if len(ticks) < 2:
        return fmt(v)
    step = abs(ticks[1] - ticks[0])
    if not 1e-4 <= step or abs(v) >= 1e6:
        return f"{v:.3g}"
    # the fewest decimals that write every tick exactly (0.25 and 0.50, not 0.2 and 0.5)
    decimals = next((d for d in range(7) if all(abs(round(t, d) - t) < step * 1e-6 for t in ticks)), 6)
    return f"{v:.{decimals}f}"


def robust_top(name: str, y: np.ndarray) -> tuple[float | None, int]:
    """For the loss: a top for the axis that leaves out a warm-up's first values when they stand
    far above the rest of the run (they would flatten it to a line); with how many points it
    clips. (None, 0) when nothing needs clipping."""
    if name not in ("loss", "eval_loss") or len(y) < 20:
        return None, 0
    head = max(1, len(y) // 20)
    rest_hi = float(np.max(y[head:]))
    rest_lo = float(np.min(y[head:]))
    span = rest_hi - rest_lo
    if span <= 0 or float(np.max(y[:head])) <= rest_hi + 0.5 * span:
        return None, 0
    top = rest_hi + 0.05 * span
    return top, int(np.count_nonzero(y > top))
