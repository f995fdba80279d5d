"""A second, independently written family of labelled training logs: a small training simulator
(the loss follows the integral of the LR schedule) and a logger that writes text lines the way
trainers do (every k steps, averaged since the last log, printed to a fixed precision, with
timestamps, restarts from a checkpoint and repeated steps). Unlike ``losslens.synth`` it shares no
code or noise model with the detectors' own tests: AR(1), random-walk, Student-t and quantised
noise; cosine, step, SGDR, cyclic and WSD schedules.

Each case is (kind, name, lines, truth); the lines go through ``read_log`` like a user's file.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np

T0 = datetime(2025, 9, 1, 8, 0, 0)


# --- schedules ------------------------------------------------------------------------------------
def schedule(kind: str, n: int, peak: float = 3e-4, warmup: int = 0, period: int = 0) -> np.ndarray:
    t = np.arange(n, dtype=np.float64)
    if kind == "constant":
        lr = np.full(n, peak)
    elif kind == "cosine":
        lr = peak * (0.1 + 0.9 * 0.5 * (1 + np.cos(np.pi * t / n)))
    elif kind == "step":  # ×0.3 at 50 % and 75 %
        lr = peak * np.where(t >= n // 2, 0.3, 1.0) * np.where(t >= 3 * n // 4, 0.3, 1.0)
    elif kind == "sgdr":  # cosine annealing with warm restarts every `period` steps
        lr = peak * (0.02 + 0.98 * 0.5 * (1 + np.cos(np.pi * (t % period) / period)))
    elif kind == "cyclic":  # triangular between peak/10 and peak
        phase = (t % period) / period
        lr = peak * (0.1 + 0.9 * (1 - np.abs(2 * phase - 1)))
    elif kind == "wsd":  # warm-up, stable, then a fast decay over the last 15 %
        lr = peak * np.clip((n - t) / (0.15 * n), 0.0, 1.0)
    else:
        raise ValueError(kind)
    if warmup:
        lr = lr * np.minimum(1.0, (t + 1) / warmup)
    return lr


# --- noise -----------------------------------------------------------------------------------------
def noise(kind: str, n: int, rng: np.random.Generator, sigma: float) -> np.ndarray:
    """Multiplicative log-noise of one of the families."""
    if kind == "gauss":
        return rng.normal(0, sigma, n)
    if kind == "ar":  # strongly autocorrelated batches (phi 0.9), same marginal sigma
        e = rng.normal(0, sigma * math.sqrt(1 - 0.81), n)
        out = np.empty(n)
        acc = 0.0
        for i in range(n):
            acc = 0.9 * acc + e[i]
            out[i] = acc
        return out
    if kind == "walk":  # a slow random walk in the level plus white noise
        return np.cumsum(rng.normal(0, sigma / 15, n)) + rng.normal(0, sigma, n)
    if kind == "student":  # heavy tails: Student-t with 3 degrees of freedom
        return rng.standard_t(3, n) * sigma / math.sqrt(3)
    raise ValueError(kind)


NOISES = ("gauss", "ar", "walk", "student")


def trained(lr: np.ndarray, start: float, floor: float, tau: float, temp: float = 0.0) -> np.ndarray:
    """The noiseless per-step loss: progress is the integral of the LR; a high LR keeps the loss
    up by ``temp`` × lr/peak (so restarts of the LR lift it, a decay drops it)."""
    progress = np.cumsum(lr) / lr.max()
    return floor + (start - floor) * np.exp(-progress / tau) + temp * lr / lr.max()


# --- the logger -----------------------------------------------------------------------------------
@dataclass
class Logger:
    every: int = 1  # log every k steps: the mean since the last log (as HF and Lightning do)
    decimals: int = 4
    style: str = "kv"  # kv | jsonl | colon | hf
    jitter: bool = False  # uneven logging intervals
    skip: float = 0.0  # chance that a log record is lost
    restart_at: int = 0  # a crash at this step, resumed from the checkpoint `restart_back` earlier
    restart_back: int = 0
    duplicates: float = 0.0  # chance that a record is printed twice
    extra: dict[str, np.ndarray] = field(default_factory=dict)  # other per-step metrics

    def records(self, loss: np.ndarray, lr: np.ndarray, rng: np.random.Generator) -> list[dict]:
        n = len(loss)
        out: list[dict] = []
        at, last = 0, 0
        while at < n:
            k = int(rng.integers(1, 2 * self.every + 1)) if self.jitter else self.every
            at = min(n, at + k)
            window = loss[last:at]
            value = float(np.mean(window)) if len(window) else float(loss[at - 1])
            last = at
            if self.skip and rng.random() < self.skip:
                continue
            rec = {"step": at, "loss": value, "lr": float(lr[at - 1])}
            rec.update({k2: float(v[at - 1]) for k2, v in self.extra.items()})
            out.append(rec)
            if self.duplicates and rng.random() < self.duplicates:
                out.append(dict(rec))
        if self.restart_at:
            cut = next(i for i, r in enumerate(out) if r["step"] >= self.restart_at)
            lo = self.restart_at - self.restart_back
            back = [dict(r) for r in out if lo <= r["step"] < self.restart_at]
            for r in back:  # the resumed run logs the same steps again, with new noise
                r["loss"] *= math.exp(rng.normal(0, 0.01))
            out = out[:cut] + back + out[cut:]
        return out

    def lines(self, records: list[dict]) -> list[str]:
        out = []
        for i, r in enumerate(records):
            t = T0 + timedelta(seconds=2.5 * r["step"] + 0.1 * i)
            loss = _num(r["loss"], self.decimals)
            others = {k: v for k, v in r.items() if k not in ("step", "loss", "lr")}
            if self.style == "kv":
                tail = "".join(f" {k}={_num(v, 4)}" for k, v in others.items())
                out.append(f"{t:%Y-%m-%dT%H:%M:%S}.{i % 1000:03d}Z step={r['step']} loss={loss} "
                           f"lr={r['lr']:.3e}{tail}")
            elif self.style == "jsonl":
                rec = {"step": r["step"], "train/loss": round(r["loss"], self.decimals)
                       if math.isfinite(r["loss"]) else r["loss"], "train/lr": r["lr"]}
                rec.update({f"train/{k}": v for k, v in others.items()})
                out.append(json.dumps(rec))
            elif self.style == "colon":
                tail = "".join(f" | {k}: {_num(v, 4)}" for k, v in others.items())
                out.append(f"{t:%Y-%m-%d %H:%M:%S},{i % 1000:03d} - INFO - Step {r['step']} | "
                           f"loss: {loss} | lr: {r['lr']:.2e}{tail}")
            elif self.style == "hf":
                tail = "".join(f", '{k}': {_num(v, 4)}" for k, v in others.items())
                out.append(f"{{'loss': {loss}, 'learning_rate': {r['lr']:.4e}{tail}, "
                           f"'step': {r['step']}}}")
            else:
                raise ValueError(self.style)
        return out


def _num(x: float, decimals: int) -> str:
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{x:.{decimals}f}"


STYLES = ("kv", "jsonl", "colon", "hf")


@dataclass(frozen=True)
class Case:
    kind: str  # the finding kind that must be reported ("clean": nothing at warning or above)
    name: str
    lines: list[str]
    truth: dict


def _run(rng: np.random.Generator, n: int, sched: str, noise_kind: str, sigma: float,
         period: int = 0, start: float = 4.0, floor: float = 1.6, temp: float = 0.0,
         warmup: int = 0) -> tuple[np.ndarray, np.ndarray]:
    lr = schedule(sched, n, warmup=warmup, period=period)
    loss = trained(lr, start, floor, tau=n / rng.uniform(6, 12), temp=temp)
    return loss * np.exp(noise(noise_kind, n, rng, sigma)), lr


# --- the cases ------------------------------------------------------------------------------------
def clean_cases(seed: int) -> Iterator[Case]:
    rng = np.random.default_rng(10_000 + seed)
    style = STYLES[seed % len(STYLES)]
    for nk in NOISES:
        sched = ("cosine", "constant", "step", "wsd")[(seed + NOISES.index(nk)) % 4]
        n = int(rng.choice([400, 1500, 4000]))
        loss, lr = _run(rng, n, sched, nk, 0.03, warmup=n // 20)
        log = Logger(every=int(rng.choice([1, 5])), style=style, jitter=seed % 3 == 0)
        yield Case("clean", f"{nk}/{sched}", log.lines(log.records(loss, lr, rng)), {})
    # LR restarts and cycles, with the LR logged: periodic loss explained by the schedule
    for sched in ("sgdr", "cyclic"):
        n = 3000
        loss, lr = _run(rng, n, sched, "gauss", 0.02, period=int(rng.choice([300, 500])), temp=0.5)
        log = Logger(every=int(rng.choice([1, 10])), style=style)
        yield Case("clean", f"{sched}-lr-logged", log.lines(log.records(loss, lr, rng)), {})
    # a loss printed to 2 decimals that flattens out: repeated values are the print precision
    n = 2500
    loss, lr = _run(rng, n, "cosine", "gauss", 0.004, start=2.2, floor=1.9)
    log = Logger(every=10, decimals=2, style=style)
    yield Case("clean", "quantised-2dp", log.lines(log.records(loss, lr, rng)), {})
    # the fast early fall of a short run: 4·exp(−t/100) + 1.5 over 300 records
    t = np.arange(300)
    loss = (4 * np.exp(-t / 100) + 1.5) * np.exp(rng.normal(0, 0.02, 300))
    log = Logger(style=style)
    yield Case("clean", "fast-decay", log.lines(log.records(loss, np.full(300, 1e-4), rng)), {})
    # short pasted logs (15–60 records) of healthy runs: a fast early fall, a warm-up then a fall
    for nk in NOISES:
        records = int(rng.integers(15, 61))
        every = int(rng.choice([1, 10]))
        n = records * every
        sched = ("constant", "cosine")[NOISES.index(nk) % 2]
        loss, lr = _run(rng, n, sched, nk, 0.03 * math.sqrt(every), warmup=n // 10 * (NOISES.index(nk) % 2))
        log = Logger(every=every, style=style)
        yield Case("clean", f"short-{records}/{nk}", log.lines(log.records(loss, lr, rng)), {})
    # a crash resumed from an earlier checkpoint, and records printed twice
    n = 2000
    loss, lr = _run(rng, n, "cosine", "ar", 0.03, warmup=100)
    log = Logger(every=5, style=style, restart_at=1200, restart_back=150, duplicates=0.02)
    yield Case("clean", "restart-duplicates", log.lines(log.records(loss, lr, rng)), {})


def health_cases(seed: int) -> Iterator[Case]:
    rng = np.random.default_rng(20_000 + seed)
    style = STYLES[seed % len(STYLES)]
    nk = NOISES[seed % len(NOISES)]
    n = 1500
    # NaN from a step on (the averaged record that contains it is the first NaN record)
    loss, lr = _run(rng, n, "cosine", nk, 0.03, warmup=50)
    at = int(rng.integers(300, 1300))
    loss[at:] = np.nan
    every = int(rng.choice([1, 4, 10]))
    log = Logger(every=every, style=style)
    recs = log.records(loss, lr, rng)
    first = next(r["step"] for r in recs if not math.isfinite(r["loss"]))
    yield Case("nonfinite", "nan", log.lines(recs), {"first_step": first})
    # one standout spike in heavy-tailed noise, among many small data spikes
    loss, lr = _run(rng, n, "cosine", "student", 0.03, warmup=50)
    small = rng.random(n) < 0.02
    loss[small] *= rng.uniform(1.2, 1.45, int(small.sum()))
    at = int(rng.integers(400, 1400))
    loss[at] *= rng.uniform(3.0, 5.0)
    log = Logger(style=style)
    yield Case("spike", "standout", log.lines(log.records(loss, lr, rng)), {"step": at + 1})
    # divergence from a turn: the trend grows exponentially after it
    loss, lr = _run(rng, n, "constant", nk, 0.03, warmup=50)
    turn = int(rng.integers(500, 1100))
    grow = np.where(np.arange(n) > turn, np.exp((np.arange(n) - turn) / rng.uniform(150, 300)), 1.0)
    log = Logger(every=int(rng.choice([1, 5])), style=style)
    yield Case("divergence", "exp-growth", log.lines(log.records(loss * grow, lr, rng)),
               {"turn": turn, "span": n})
    # no learning: stuck at ln(vocab) with a constant LR
    loss = np.log(32_000) * np.exp(noise(nk, 800, rng, 0.01))
    log = Logger(every=10, style=style)
    yield Case("plateau", "stuck", log.lines(log.records(loss, np.full(800, 3e-4), rng)), {})


def accumulator(seed: int, K: int) -> Case:
    """A summed-but-never-divided loss: record k of an accumulation is the sum of k noisy per-step
    losses, then a reset; the level decays under it; some records are lost (skipped rungs)."""
    rng = np.random.default_rng(30_000 + 97 * seed + K)
    episodes = int(rng.integers(8, 20))
    base_start, base_end = rng.uniform(0.8, 2.5), rng.uniform(0.3, 0.7)
    per = episodes * K
    level = base_start * (base_end / base_start) ** (np.arange(per) / per)
    step_loss = level * np.exp(noise("gauss", per, rng, 0.06))
    acc = np.empty(per)
    for e in range(episodes):
        acc[e * K:(e + 1) * K] = np.cumsum(step_loss[e * K:(e + 1) * K])
    log = Logger(style=STYLES[seed % 4], skip=0.08)
    recs = log.records(acc, np.full(per, 1e-4), rng)
    return Case("ladder", f"accumulator-K{K}", log.lines(recs), {"cause": "accumulator", "K": K})


def static_order(seed: int, period: int, uneven: bool = False, restart: bool = False) -> Case:
    """A batch order built once and replayed every epoch-like cycle: each position in the cycle
    has its own difficulty (a random profile: many harmonics, not a sine)."""
    rng = np.random.default_rng(40_000 + 31 * seed + period)
    cycles = int(rng.integers(8, 30))
    n = period * cycles
    profile = np.exp(rng.normal(0, 0.12, period))
    profile = profile / profile.mean()
    loss, lr = _run(rng, n, "cosine", NOISES[seed % 4], 0.03, warmup=0)
    loss = loss * profile[np.arange(n) % period]
    log = Logger(style=STYLES[seed % 4], jitter=uneven, every=2 if uneven else 1,
                 restart_at=n // 2 if restart else 0, restart_back=period // 2)
    return Case("periodicity", f"static-order-{period}{'-uneven' if uneven else ''}"
                f"{'-restart' if restart else ''}", log.lines(log.records(loss, lr, rng)),
                {"period": period})


def sawtooth(seed: int, period: int) -> Case:
    """A decaying loss with a sawtooth: within each cycle the loss climbs (the batches get
    harder), then drops back at the next cycle."""
    rng = np.random.default_rng(50_000 + 7 * seed + period)
    n = period * int(rng.integers(10, 40))
    loss, lr = _run(rng, n, "constant", NOISES[(seed + 1) % 4], 0.02)
    phase = (np.arange(n) % period) / period
    loss = loss * (1 + rng.uniform(0.1, 0.3) * phase ** rng.uniform(1, 2))
    log = Logger(style=STYLES[(seed + 2) % 4])
    return Case("periodicity", f"sawtooth-{period}", log.lines(log.records(loss, lr, rng)),
                {"period": period})


def short_sawtooth(seed: int) -> Case:
    """A pasted log of 15–40 records: a few cycles of an accelerating climb and a reset (the
    pattern is per logged record; with logging every 10 steps each record averages 10 steps)."""
    rng = np.random.default_rng(60_000 + seed)
    cycle = int(rng.integers(4, 9))
    cycles = int(rng.integers(3, max(4, 40 // cycle) + 1))
    n = min(40, max(15, cycle * cycles))
    j = np.arange(n) % cycle
    base = rng.uniform(0.8, 2.0) * (1 - 0.1 * np.arange(n) / n)
    loss = base * (1 + rng.uniform(0.8, 2.0) * (j / (cycle - 1)) ** rng.uniform(1.5, 2.5))
    every = int(rng.choice([1, 10]))
    per_step = np.repeat(loss, every) * np.exp(rng.normal(0, 0.02 * math.sqrt(every), n * every))
    log = Logger(every=every, style=STYLES[seed % 4])
    return Case("short_cycles", f"short-{n}x{cycle}",
                log.lines(log.records(per_step, np.full(n * every, 1e-4), rng)), {"period_records": cycle})


def bands(seed: int) -> Case:
    """Loss level set by the batch's length bucket (3 buckets), buckets in runs, AR noise."""
    rng = np.random.default_rng(70_000 + seed)
    n = 3000
    levels = np.sort(rng.uniform(0.6, 2.0, 3))
    while np.min(np.diff(levels)) < 0.3:
        levels = np.sort(rng.uniform(0.6, 2.0, 3))
    b = np.zeros(n, dtype=int)
    for i in range(1, n):
        b[i] = b[i - 1] if rng.random() < 0.85 else rng.integers(3)
    loss, lr = _run(rng, n, "cosine", "ar", 0.02, start=1.5, floor=1.0)
    log = Logger(style=STYLES[seed % 4])
    return Case("multimodal", "buckets", log.lines(log.records(loss * levels[b], lr, rng)), {"modes": 3})


def sgdr(seed: int) -> Case:
    """An SGDR run with the LR logged: the loss is periodic, but the schedule explains it (info,
    never an error blaming the data order)."""
    rng = np.random.default_rng(80_000 + seed)
    loss, lr = _run(rng, 4000, "sgdr", NOISES[seed % 4], 0.02, period=400, temp=0.6)
    log = Logger(every=int(rng.choice([1, 5])), style=STYLES[seed % 4])
    return Case("lr_schedule", "sgdr", log.lines(log.records(loss, lr, rng)), {"period": 400})


def epoch_memorisation(seed: int) -> Case:
    """Several epochs over a small dataset: the loss drops at each epoch start (memorised) and the
    eval loss rises from its best: a warning, not information."""
    rng = np.random.default_rng(90_000 + seed)
    epochs, per = 5, int(rng.integers(200, 500))
    n = epochs * per
    loss, lr = _run(rng, n, "constant", "gauss", 0.03, start=3.0, floor=1.2)
    e = np.arange(n) // per
    loss = loss * (1 - 0.18 * e) * (1 + 0.12 * (np.arange(n) % per) / per)
    log = Logger(every=5, style="jsonl", extra={"epoch": np.arange(n) / per})
    lines = log.lines(log.records(loss, lr, rng))
    best = int(rng.integers(1, 3))
    for k in range(epochs):
        ev = 2.0 - 0.2 * min(k, best) + 0.15 * max(0, k - best)
        lines.append(json.dumps({"step": (k + 1) * per, "eval/loss": round(ev, 4)}))
    return Case("memorisation", "epochs", lines, {"period": per})


def backlog(seed: int) -> Case:
    """A queue that is steady for a while, then grows without bound from a turn."""
    rng = np.random.default_rng(95_000 + seed)
    n = 2000
    turn = int(rng.integers(600, 1400))
    q = rng.integers(2, 8, n).astype(float)
    q[turn:] += np.cumsum(rng.uniform(0.5, 3.0, n - turn))
    loss, lr = _run(rng, n, "cosine", "gauss", 0.03)
    log = Logger(every=5, style="kv", extra={"queue_depth": q})
    return Case("pipeline_stall", "backlog", log.lines(log.records(loss, lr, rng)), {"turn": turn})


def structure_cases(seed: int) -> Iterator[Case]:
    for K in (4, 8, 12, 16):
        yield accumulator(seed, K)
    for period in (24, 60, 130):
        yield static_order(seed, period)
    yield static_order(seed, 60, uneven=True)
    yield static_order(seed, 60, restart=True)
    yield sawtooth(seed, 40)
    yield short_sawtooth(seed)
    yield bands(seed)
    yield sgdr(seed)
    yield epoch_memorisation(seed)
    yield backlog(seed)


def cases(seeds: int) -> Iterator[Case]:
    for s in range(seeds):
        yield from clean_cases(s)
        yield from health_cases(s)
        yield from structure_cases(s)
