"""Seeded generators of training curves and logs, with ground truth. Used by tests, fixtures and
the benchmarks; public so that users can check losslens on curves they understand."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np

DFLASH_T0 = datetime(2026, 5, 15, 20, 53, 0)


@dataclass(frozen=True)
class Curve:
    steps: np.ndarray  # (n,) int
    loss: np.ndarray  # (n,) float
    truth: dict


def dflash_line(step: int, loss: float, acc: float, lr: float, time: datetime,
                tok_per_s: float = 32100.0, q_pre: tuple[int, ...] = (50, 50, 46, 45, 44, 46),
                q_hs: tuple[int, ...] = (0,), epoch: float = 0.02, eta_days: float = 4.0,
                streak: float = 1.2, noise: float = 0.1) -> str:
    """One line of the DFlash drafter monitor, in the seed's exact layout."""
    return (f"[{time:%Y-%m-%d %H:%M:%S}] step={step} loss={loss:.4f} acc={acc:.3f} "
            f"streak={streak:.1f} lr={lr:.2e} noise={noise:.4f} | tgt=0.68b/s dft=0.68b/s "
            f"({tok_per_s / 1000:.1f}Ktok/s) | q_pre=[{', '.join(map(str, q_pre))}] "
            f"q_hs=[{', '.join(map(str, q_hs))}] | epoch~{epoch:.2f} ETA={eta_days:.1f}d")


def dflash_lines(n: int, seed: int = 0) -> Iterator[str]:
    """``n`` DFlash lines of a noisy decaying loss (for speed benchmarks)."""
    rng = np.random.default_rng(seed)
    loss = 1.0 + 2.0 / np.sqrt(1 + np.arange(n) / 100.0) + rng.normal(0, 0.05, n)
    acc = np.clip(0.5 - loss / 8 + rng.normal(0, 0.01, n), 0, 1)
    tok = rng.normal(32100, 300, n)
    q = rng.integers(40, 51, size=(n, 6))
    hs = rng.integers(0, 3, size=n)
    for i in range(n):
        yield dflash_line(i, float(loss[i]), float(acc[i]), 2.52e-07 * min(i + 1, 4000),
                          DFLASH_T0 + timedelta(seconds=6 * i), tok_per_s=float(tok[i]),
                          q_pre=tuple(int(x) for x in q[i]), q_hs=(int(hs[i]),),
                          epoch=i / 150_000)


# The records quoted in seed 004 (steps 0–15, 144–153, 249–259, 338–349); acc is 0.000 for the
# first ~30 steps in the seed, lr is its linear warm-up (7.55e-07 at step 2, 8.81e-05 at 349).
SEED004: tuple[tuple[int, float, float], ...] = (
    (0, 1.3140, 0.000), (2, 11.2112, 0.000), (3, 14.5632, 0.000), (4, 14.4995, 0.000),
    (6, 14.4611, 0.000), (8, 27.0898, 0.000), (10, 14.3071, 0.000), (11, 26.4717, 0.000),
    (13, 37.2273, 0.000), (15, 13.8323, 0.000),
    (144, 3.0102, 0.029), (146, 3.9878, 0.025), (148, 4.9730, 0.027), (149, 5.9852, 0.026),
    (151, 6.2390, 0.032), (153, 0.9935, 0.035),
    (249, 1.6099, 0.040), (251, 2.7743, 0.037), (253, 3.6723, 0.046), (254, 4.6056, 0.034),
    (256, 5.5167, 0.038), (258, 6.4252, 0.035), (259, 0.9470, 0.030),
    (338, 0.8183, 0.055), (340, 1.5599, 0.045), (342, 2.4042, 0.049), (343, 3.2330, 0.046),
    (345, 4.0884, 0.039), (347, 4.4271, 0.044), (349, 0.8700, 0.046),
)
SEED004_T338 = datetime(2026, 5, 15, 21, 26, 3)
SEED004_VERBATIM = ("[2026-05-15 21:26:03] step=338 loss=0.8183 acc=0.055 streak=1.2 lr=8.81e-05 "
                    "noise=0.1000 | tgt=0.68b/s dft=0.68b/s (32.1Ktok/s) | "
                    "q_pre=[50, 50, 46, 45, 44, 46] q_hs=[0] | epoch~0.02 ETA=4.0d")


def seed004_lines() -> list[str]:
    """The seed-004 excerpt as full DFlash lines; step 338 is the seed's verbatim line."""
    out = []
    for step, loss, acc in SEED004:
        t = SEED004_T338 - timedelta(seconds=round((338 - step) * 5.85))
        lr = float(f"{2.5228e-07 * (step + 1):.2e}")
        out.append(SEED004_VERBATIM if step == 338 else
                   dflash_line(step, loss, acc, lr, t, epoch=0.02 * step / 338))
    return out


def nanogpt_lines(n_iters: int = 200, every: int = 5, eval_every: int = 100, seed: int = 0,
                  nan_from: int | None = None) -> list[str]:
    rng = np.random.default_rng(seed)
    out = []
    for it in range(0, n_iters + 1, every):
        if it % eval_every == 0:
            base = 4.2 * (1 + it / 100) ** -0.3
            out.append(f"step {it}: train loss {base:.4f}, val loss {base + 0.01:.4f}")
            if it:
                out.append("saving checkpoint to out")
        loss = 4.2 * (1 + it / 100) ** -0.3 + rng.normal(0, 0.03)
        text = "nan" if nan_from is not None and it >= nan_from else f"{loss:.4f}"
        mfu = -100.0 if it == 0 else 0.01
        out.append(f"iter {it}: loss {text}, time {1431 + rng.normal(0, 5):.2f}ms, mfu {mfu:.2f}%")
    return out


def jsonl_lines(n: int = 50, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(1, n + 1):
        rec = {"step": i * 10, "train/loss": round(3 / math.sqrt(i) + rng.normal(0, 0.02), 4),
               "train/lr": 1e-4, "train/grad_norm": round(float(rng.uniform(0.5, 1.5)), 3)}
        out.append(json.dumps(rec))
        if i % 10 == 0:
            out.append(json.dumps({"step": i * 10, "eval/loss": round(3 / math.sqrt(i) + 0.1, 4)}))
    return out


def megatron_lines(n: int = 30, seed: int = 0, rank_prefix: str = "") -> list[str]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(1, n + 1):
        loss = 9.0 * (1 + i / 10) ** -0.3 + rng.normal(0, 0.02)
        out.append(
            f"{rank_prefix} iteration {i * 10:8d}/   10000 | consumed samples: {i * 10240:12d} | "
            f"elapsed time per iteration (ms): {18000 + rng.normal(0, 200):.1f} | learning rate: "
            f"{6e-5:.3E} | global batch size:  1024 | lm loss: {loss:.6E} | loss scale: 4096.0 | "
            f"grad norm: {abs(rng.normal(1, 0.1)):.3f} | num zeros: 0.0 | number of skipped "
            f"iterations:   0 | number of nan iterations:   0 |")
        if i % 10 == 0:
            out.append(f"{rank_prefix} validation loss at iteration {i * 10} | lm loss value: "
                       f"{loss + 0.1:.6E} | lm loss PPL: {math.exp(loss + 0.1):.6E} | ")
    return out


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
    c = clean("powerlaw", n, seed)
    loss = c.loss.copy()
    loss[at:] = np.nan
    return Curve(c.steps, loss, {"kind": "nonfinite", "start": int(c.steps[at])})


def with_spikes(n: int = 2000, at: tuple[int, ...] = (700, 1400), height: float = 2.0,
                seed: int = 0) -> Curve:
    c = clean("powerlaw", n, seed)
    loss = c.loss.copy()
    for i in at:
        loss[i] *= height
    return Curve(c.steps, loss, {"kind": "spike", "steps": [int(c.steps[i]) for i in at]})


def diverging(n: int = 2000, turn: int = 1200, rate: float = 0.8, seed: int = 0) -> Curve:
    c = clean("powerlaw", n, seed)
    ramp = np.where(c.steps > turn, (c.steps - turn) / (n - turn), 0.0)
    return Curve(c.steps, c.loss * (1 + rate * ramp), {"kind": "divergence", "turn": turn})


def stuck(n: int = 500, level: float = 7.6, seed: int = 0) -> Curve:
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


def bucketed_run_lines(step_bucket: np.ndarray, levels: tuple[float, ...] = (1.0, 1.0, 1.0, 1.5, 1.5, 2.0),
                       seed: int = 4) -> list[str]:
    """DFlash lines of a run whose loss level is set by the length bucket of each step's batch
    (``levels[bucket]`` times a decaying curve, 3 % noise): the seed's bands, ground truth known."""
    rng = np.random.default_rng(seed)
    n = len(step_bucket)
    loss = _decay(n, 1.65, 0.55, 50.0) * np.asarray(levels)[step_bucket] * np.exp(rng.normal(0, 0.03, n))
    acc = np.clip(0.45 - 0.1 * np.log(loss) + rng.normal(0, 0.01, n), 0, 1)
    return [dflash_line(i, float(loss[i]), float(acc[i]), 2.5e-07 * min(i + 1, 400),
                        DFLASH_T0 + timedelta(seconds=6 * i), epoch=i / n) for i in range(n)]


def seed_lengths(n: int = 902_000, seed: int = 0) -> np.ndarray:
    """Per-sample lengths shaped like the seed's dataset: log-normal, median ~1500, clipped to
    [16, 8192] (with the seed's bounds about half of the bucketed batches fall in the last bucket)."""
    rng = np.random.default_rng(seed)
    return np.clip(rng.lognormal(np.log(1500), 0.8, n), 16, 8192).astype(np.int64)
