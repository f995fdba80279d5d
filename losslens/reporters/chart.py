"""Numbers for drawing, shared by the page, the picture and the terminal: which panels, points
kept per pixel column, round ticks, an axis top that a warm-up does not flatten."""

from __future__ import annotations

import math

import numpy as np

PANELS = ("loss", "eval_loss", "acc", "lr", "grad_norm", "tokens_per_s", "step_time_s", "q_pre_min",
          "q_hs_mean")


def minmax_downsample(x: np.ndarray, y: np.ndarray, columns: int) -> tuple[np.ndarray, np.ndarray]:
    """Per pixel column, the first/min/max/last point (in step order): spikes survive."""
    ok = np.isfinite(y)
    x, y = x[ok], y[ok]
    if len(x) <= 4 * columns:
        return x, y
    col = ((x - x[0]) / max(1, x[-1] - x[0]) * (columns - 1)).astype(np.int64)
    edges = np.flatnonzero(np.diff(col)) + 1
    starts = np.concatenate([[0], edges])
    ends = np.concatenate([edges, [len(x)]])
    keep = []
    for a, b in zip(starts, ends, strict=True):
        seg = y[a:b]
        idx = sorted({a, a + int(np.argmin(seg)), a + int(np.argmax(seg)), b - 1})
        keep.extend(idx)
    keep_arr = np.asarray(keep)
    return x[keep_arr], y[keep_arr]


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
