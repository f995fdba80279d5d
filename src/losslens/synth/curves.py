"""Loss curves with known ground truth: clean families (power law, warm-up, uneven logging, heavy
tails, ...) and each failure the detectors look for (ladder, bands, period, NaN, spikes, ...)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Curve:
    """A generated series: steps, loss values and its ground truth (``truth``: the kind and where)."""
    steps: np.ndarray  # (n,) int
    loss: np.ndarray  # (n,) float
    truth: dict


# --- labelled curves for the detection benchmark ------------------------------------------------
def _ar_noise(rng: np.random.Generator, n: int, sigma: float, phi: float = 0.6,
              heavy: bool = False) -> np.ndarray:
    shocks = rng.standard_t(5, n) * sigma / 1.3 if heavy else rng.normal(0, sigma, n)
    out = np.zeros(n)
    for i in range(1, n):
        out[i] = phi * out[i - 1] + shocks[i]
    return out


def _decay(n: int, start: float = 3.0, floor: float = 1.0, rate: float = 50.0) -> np.ndarray:
    return floor + (start - floor) * (1 + np.arange(n) / rate) ** -0.5


def ladder(n: int = 600, period: int = 7, seed: int = 0, cause: str = "accumulator",
           noise: float = 0.02) -> Curve:
    """Climbs of ``period`` records then a reset. accumulator: the logged value is k × the
    per-step loss (k = 1..period). batch_composition: level + k × an unrelated increment."""
    rng = np.random.default_rng(seed)
    steps = np.arange(n)
    base = _decay(n, 1.2, 0.8, 200.0)
    k = steps % period
    if cause == "accumulator":
        loss = (k + 1) * base
    else:
        loss = base * (1.0 + 0.35 * k)
    loss = loss * np.exp(rng.normal(0, noise, n))
    return Curve(steps, loss, {"kind": "ladder", "cause": cause, "period": period,
                               "start": int(steps[0]), "end": int(steps[-1])})


def bands(n: int = 2000, levels: tuple[float, ...] = (0.55, 1.1, 1.65), stay: float = 0.8,
          seed: int = 0, noise: float = 0.04) -> Curve:
    """Loss that depends on the batch's length bucket; buckets come in runs (stay probability)."""
    rng = np.random.default_rng(seed)
    b = np.zeros(n, dtype=int)
    for i in range(1, n):
        b[i] = b[i - 1] if rng.random() < stay else rng.integers(len(levels))
    trend = _decay(n, 1.3, 1.0, 300.0)
    loss = np.asarray(levels)[b] * trend * np.exp(rng.normal(0, noise, n))
    ratios = [lv / levels[0] for lv in levels]
    harmonic = all(abs(r - round(r)) < 0.1 for r in ratios)
    return Curve(np.arange(n), loss, {"kind": "multimodal", "modes": len(levels),
                                      "harmonic": harmonic, "buckets": b})


def periodic(n: int = 3000, period: float = 50.0, amplitude: float = 0.08, seed: int = 0,
             uneven: bool = False) -> Curve:
    """A decaying loss with a periodic component; ``uneven`` logs every 1-3 steps."""
    rng = np.random.default_rng(seed)
    steps = np.cumsum(rng.integers(1, 4, n)) if uneven else np.arange(n)
    trend = _decay(int(steps[-1]) + 1)[steps]
    loss = trend * (1 + amplitude * np.sin(2 * np.pi * steps / period)) * np.exp(
        _ar_noise(rng, n, 0.02))
    return Curve(steps, loss, {"kind": "periodicity", "period": period})


def clean(family: str, n: int = 3000, seed: int = 0) -> Curve:
    """Healthy curves that must raise nothing at warning or above."""
    long = family.startswith("long_")  # 10,000 steps, a slower early fall (rate 100)
    if long:
        family, n = family.removeprefix("long_"), 10_000
    elif family.startswith("short_"):  # 600 steps: the warm-up and early fall are a third of it
        family, n = family.removeprefix("short_"), 600
    rng = np.random.default_rng(seed)
    steps = np.arange(n)
    trend = _decay(n, rate=100.0 if long else 50.0)
    if family == "powerlaw":
        loss = trend * np.exp(_ar_noise(rng, n, 0.03))
    elif family == "warmup":
        warm = np.minimum(1.0, steps / 200)
        loss = (trend + 2.0 * (1 - warm) ** 2) * np.exp(_ar_noise(rng, n, 0.03))
    elif family == "uneven":
        steps = np.cumsum(rng.integers(1, 4, n))
        loss = _decay(int(steps[-1]) + 1)[steps] * np.exp(_ar_noise(rng, n, 0.03))
    elif family == "epoch_drops":
        epoch = steps // (n // 4)
        loss = trend * (1 - 0.03 * epoch) * np.exp(_ar_noise(rng, n, 0.02))
    elif family == "heavy_tails":
        loss = trend * np.exp(_ar_noise(rng, n, 0.03, phi=0.3, heavy=True))
    elif family == "lr_steps":
        loss = trend * np.where(steps > n // 2, 0.9, 1.0) * np.where(steps > 3 * n // 4, 0.95, 1.0)
        loss = loss * np.exp(_ar_noise(rng, n, 0.02))
    elif family == "skewed":
        loss = trend * np.exp(rng.gamma(1.5, 0.06, n))
    elif family == "white_noise":
        loss = trend + rng.normal(0, 0.05, n)
    elif family == "random_walk_noise":
        loss = trend * np.exp(np.cumsum(rng.normal(0, 0.004, n)) + rng.normal(0, 0.02, n))
    else:
        raise ValueError(f"unknown clean family {family!r}")
    return Curve(steps, loss, {"kind": "clean", "family": family})


CLEAN_FAMILIES = ("powerlaw", "warmup", "uneven", "epoch_drops", "heavy_tails", "skewed",
                  "lr_steps", "white_noise", "random_walk_noise", "long_powerlaw", "long_white_noise",
                  "short_warmup", "short_epoch_drops", "short_random_walk_noise")


# --- labelled health curves ------------------------------------------------------------------------
def with_nan(n: int = 800, at: int = 500, seed: int = 0) -> Curve:
    """A decaying loss that turns NaN at step ``at`` and stays NaN."""
    c = clean("powerlaw", n, seed)
    loss = c.loss.copy()
    loss[at:] = np.nan
    return Curve(c.steps, loss, {"kind": "nonfinite", "start": int(c.steps[at])})


def with_spikes(n: int = 2000, at: tuple[int, ...] = (700, 1400), height: float = 2.0,
                seed: int = 0) -> Curve:
    """A power-law loss whose values at the indices ``at`` are ``height`` times what they were."""
    c = clean("powerlaw", n, seed)
    loss = c.loss.copy()
    for i in at:
        loss[i] *= height
    return Curve(c.steps, loss, {"kind": "spike", "steps": [int(c.steps[i]) for i in at]})


def diverging(n: int = 2000, turn: int = 1200, rate: float = 0.8, seed: int = 0) -> Curve:
    """A power-law loss whose level turns up at ``turn`` and is ``1 + rate`` times higher by the
    end."""
    c = clean("powerlaw", n, seed)
    ramp = np.where(c.steps > turn, (c.steps - turn) / (n - turn), 0.0)
    return Curve(c.steps, c.loss * (1 + rate * ramp), {"kind": "divergence", "turn": turn})


def evaluated(n: int = 3000, every: int = 30, turn: int | None = 1800, rise: float = 0.15,
              noise: float = 0.01, seed: int = 0) -> tuple[Curve, np.ndarray, np.ndarray]:
    """(train curve, eval steps, eval loss): a power-law train loss and an eval loss every
    ``every`` steps with relative noise ``noise`` (drawn afresh at each eval, as on a sampled
    validation set), flattening as a cosine schedule's learning rate runs out. The eval loss
    follows the train loss down and keeps its level (``turn`` None: a healthy run, truth
    'clean'), or from ``turn`` on rises by ``rise`` of its level by
    the end while the train loss still falls (overfitting; truth: the turn)."""
    c = clean("powerlaw", n, seed)
    rng = np.random.default_rng(seed + 7919)
    steps = np.arange(every, n, every)
    # a cosine-decayed learning rate: the loss falls with the LR summed so far, flat at the end
    summed = (steps + n / np.pi * np.sin(np.pi * steps / n)) / 2
    level = 1.1 * _decay(n, rate=20.0)[summed.astype(int)]
    if turn is not None:
        level = level * (1 + rise * np.clip((steps - turn) / (n - turn), 0, None))
    values = level * np.exp(rng.normal(0, noise, len(steps)))
    truth = {"kind": "clean"} if turn is None else {"kind": "overfitting", "turn": turn}
    return Curve(c.steps, c.loss, truth), steps, values


def stuck(n: int = 500, level: float = 7.6, seed: int = 0) -> Curve:
    """A loss that never learns: noise around ``level``, logged every 50 steps."""
    rng = np.random.default_rng(seed)
    return Curve(np.arange(n) * 50, level + rng.normal(0, 0.05, n), {"kind": "plateau"})


def accuracy_drop(n: int = 1000, turn: int = 600, seed: int = 0) -> tuple[Curve, np.ndarray]:
    """(loss curve, accuracy) where accuracy climbs, then falls by a third from ``turn``."""
    rng = np.random.default_rng(seed)
    steps = np.arange(n)
    acc = 0.6 * (1 - np.exp(-steps / 150)) + rng.normal(0, 0.01, n)
    acc = np.where(steps > turn, acc - 0.2 * np.minimum(1, (steps - turn) / 100), acc)
    return Curve(steps, _decay(n) * np.exp(rng.normal(0, 0.02, n)),
                 {"kind": "accuracy_drop", "turn": turn}), acc


def throughput_drop(n: int = 2000, turn: int = 1300, drop: float = 0.35, seed: int = 0
                    ) -> tuple[Curve, np.ndarray]:
    """A loss and a tokens/s column that falls by ``drop`` at ``turn`` and stays down."""
    rng = np.random.default_rng(seed)
    steps = np.arange(n)
    tps = 32000 * np.where(steps >= turn, 1 - drop, 1.0) * np.exp(rng.normal(0, 0.03, n))
    return Curve(steps, _decay(n) * np.exp(rng.normal(0, 0.02, n)),
                 {"kind": "throughput_drop", "turn": turn}), tps


def starved_queue(n: int = 1000, start: int = 600, length: int = 60, seed: int = 0
                  ) -> tuple[Curve, np.ndarray]:
    """A producer queue (depth 0..50) that drains to zero for ``length`` records."""
    rng = np.random.default_rng(seed)
    q = rng.integers(40, 51, n).astype(float)
    q[start:start + length] = 0
    return Curve(np.arange(n), _decay(n) * np.exp(rng.normal(0, 0.02, n)),
                 {"kind": "pipeline_stall", "start": start}), q


def bucket_dependent_log(mean_len_per_step: np.ndarray, strength: float = 0.5, seed: int = 0
                         ) -> tuple[np.ndarray, np.ndarray]:
    """(steps, loss) whose level follows each step's replayed mean batch length (planted
    dependence); ``strength`` 0 gives a loss that ignores the batches."""
    rng = np.random.default_rng(seed)
    n = len(mean_len_per_step)
    z = (mean_len_per_step - mean_len_per_step.mean()) / (mean_len_per_step.std() or 1.0)
    loss = _decay(n, 2.0, 1.0, 500.0) * np.exp(strength * 0.1 * z + rng.normal(0, 0.05, n))
    return np.arange(n), loss
