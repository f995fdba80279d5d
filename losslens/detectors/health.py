"""Health detectors: NaN/inf, spikes, divergence, plateau, accuracy drop, overfitting,
pipeline stalls and throughput drops — each placing the step where it starts."""

from __future__ import annotations

import math

import numpy as np

from losslens.detectors.base import Detector, Series
from losslens.detectors.stats import robust_scale, rolling_median, spearman
from losslens.findings import Finding, Severity, Skipped


def lr_schedule(lr: np.ndarray | None) -> dict | None:
    """What the logged LR did: a warm-up at the start? does it decay by the end?"""
    if lr is None:
        return None
    ok = lr[np.isfinite(lr)]
    if len(ok) == 0 or ok.max() <= 0:
        return None
    peak = int(np.argmax(ok))
    return {"warmup": bool(ok[0] < 0.5 * ok.max() and peak > 0),
            "decays": bool(ok[-1] < 0.5 * ok.max() and peak < len(ok) - 1),
            "peak_lr": float(ok.max()), "last_lr": float(ok[-1])}


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def _smooth(v: np.ndarray, frac: int = 20) -> np.ndarray:
    n = len(v)
    return rolling_median(v, max(1, n // frac) | 1) if n >= 20 else v.astype(float)


class NonFinite(Detector):
    """NaN or ±inf in the loss, grad norm, eval loss, accuracy or LR: one error from the first such
    step. Also a hidden NaN in Hugging Face logs (a NaN grad norm, or a loss frozen at one value).

    frozen_records: records the loss must repeat one value (after having moved) to count as frozen."""

    name = "nonfinite"
    title = "NaN or inf in a metric (start_step = the first such step); hidden NaN in HF logs"
    metrics = ("loss", "grad_norm", "eval_loss", "acc", "lr")

    def __init__(self, frozen_records: int = 5):
        self.frozen_records = frozen_records

    def detect(self, series: Series) -> list[Finding] | Skipped:
        v, steps = series.values, series.steps
        if len(v) == 0:
            return Skipped(self.name, series.metric, "no records")
        bad = ~np.isfinite(v)
        out = []
        if bad.any():
            idx = np.flatnonzero(bad)
            first, last = int(idx[0]), int(idx[-1])
            to_end = bool(bad[first:].all())
            kinds = sorted({"NaN" if math.isnan(x) else ("inf" if x > 0 else "-inf") for x in v[idx]})
            where = "to the end of the log" if to_end else f"in {len(idx)} of {len(v)} records"
            summary = (f"{series.metric} is {'/'.join(kinds)} from step {int(steps[first])} {where}"
                       f"{' (last finite value ' + _fmt(v[first - 1]) + ')' if first else ''}")
            severity = Severity.ERROR
            if series.metric == "grad_norm":
                loss = (series.context or {}).get("loss")
                moving = loss is not None and _loss_moves(loss, idx)
                if moving and not to_end and len(idx) <= max(1, 0.05 * len(v)):
                    severity = Severity.WARNING
                    summary += ("; the loss stays finite and moving: with fp16 dynamic loss scaling "
                                "an overflowing step is skipped and the scale lowered (normal when "
                                "rare; many in a row mean the scale has collapsed)")
                else:
                    summary += ("; the loss is likely NaN too (Hugging Face's Trainer logs a running "
                                "mean in its place, logging_nan_inf_filter; Megatron leaves it out)")
            else:
                summary += ": training has blown up (lower the LR, check for bad batches, fp16 overflow)"
            out.append(Finding(self.name, severity, series.metric, int(steps[first]),
                               int(steps[last]), summary,
                               {"first_step": int(steps[first]), "count": int(len(idx)),
                                "values": kinds, "to_end": to_end}, series.segment))
        if series.metric == "loss" and len(v) >= 2 * self.frozen_records:
            out += self._frozen(series)
        return out

    def _frozen(self, series: Series) -> list[Finding]:
        """The same loss value logged again and again after it varied: a NaN hidden by the logger.
        A loss printed to few decimals repeats values by itself: a run counts only when the
        repeat rate of the records before or after it (the print precision against the noise,
        the higher of the two: a loss that flattens below the precision repeats more as it does)
        makes it unlikely, chance < 1 % over the log; and not when the records around it move by
        one print quantum at most (the noise is below the precision)."""
        v, steps = series.values, series.steps
        # (a run of inf is not hidden: the non-finite finding above already says it)
        same = np.concatenate([[False], (v[1:] == v[:-1]) & np.isfinite(v[1:])])
        edges = np.flatnonzero(np.diff(np.concatenate([[0], same.astype(int), [0]])))
        for a, b in zip(edges[::2], edges[1::2], strict=True):
            start = a - 1
            length = int(b - start)
            if length < self.frozen_records or start <= 0 or np.ptp(v[:start + 1]) <= 0:
                continue
            # the repeat rate around the run, on the side where it is highest: a loss that
            # flattens out below the print precision repeats more and more as it does
            w = max(50, 10 * length)
            around = [same[max(1, start - w):start], same[b + 1:b + 1 + w]]
            rate = max((float(x.mean()) for x in around if len(x) >= min(20, w)), default=0.0)
            if len(v) * rate ** (length - 1) >= 0.01:
                continue  # the print precision repeats values this often
            if _below_precision(v, start, b, w):
                continue
            summary = (f"loss is frozen at {_fmt(v[start])} for {length} records from step "
                       f"{int(steps[start])}: a NaN hidden by the logger (HF "
                       "logging_nan_inf_filter) or a stalled optimizer")
            return [Finding(self.name, Severity.WARNING, "loss", int(steps[start]),
                            int(steps[b - 1]), summary,
                            {"frozen_value": float(v[start]), "records": length,
                             "repeat_rate_around": round(rate, 4)}, series.segment)]
        return []


def _loss_moves(loss: np.ndarray, bad: np.ndarray) -> bool:
    """The loss is finite at and after the records ``bad`` and keeps changing (not the 0.0 or the
    repeated value a logger prints in place of a NaN)."""
    after = loss[int(bad[0]):]
    return bool(len(after) >= 3 and np.all(np.isfinite(loss[bad])) and np.all(np.isfinite(after))
                and np.unique(after).size > max(2, len(after) // 2) and np.any(after != 0))


def _below_precision(v: np.ndarray, start: int, end: int, w: int) -> bool:
    """The records around a constant run move by at most one print quantum (the smallest step
    between two logged values): the noise is below the print precision and a flat stretch of
    the curve prints as one value, however long."""
    finite = v[np.isfinite(v)]
    steps = np.abs(np.diff(finite))
    steps = steps[steps > 0]
    if not len(steps):
        return False
    quantum = float(steps.min())
    around = np.concatenate([v[max(0, start - w):start + 1], v[end - 1:end + w]])
    moves = np.abs(np.diff(around[np.isfinite(around)]))
    return len(moves) >= 10 and float(np.mean(moves <= 1.5 * quantum)) >= 0.9


class Spike(Detector):
    """Isolated excursions of the loss far above its local level: a causal rolling median of the
    log-loss and its MAD give a robust z-score per record.

    window: records in the rolling median/MAD. z: the z-score a spike must reach.
    min_ratio: how many times the local level a spike must be (1.4 = 40 % above).
    history: records needed before the first one can be judged.
    cluster: records between flagged points that still make one spike (and the records after it
    checked for recovery). tail_factor: in heavy-tailed noise, a spike must also exceed this many
    times the 99th percentile of the other |z|."""

    name = "spike"
    title = "isolated excursions far above the local level (causal rolling median and MAD)"
    metrics = ("loss",)

    def __init__(self, window: int = 64, z: float = 8.0, min_ratio: float = 1.4, history: int = 3,
                 cluster: int = 5, tail_factor: float = 3.0):
        self.tail_factor = tail_factor
        self.window = window
        self.z = z
        self.min_ratio = min_ratio
        self.history = history
        self.cluster = cluster

    def detect(self, series: Series) -> list[Finding] | Skipped:
        ok = np.isfinite(series.values) & (series.values > 0)
        v, steps = series.values[ok], series.steps[ok]
        if len(v) <= self.history:
            return Skipped(self.name, series.metric, f"only {len(v)} points; needs {self.history + 1}")
        flagged, level, z = spikes(v, self.window, self.z, self.min_ratio, self.history)
        if not flagged.any():
            return []
        # heavy-tailed noise: a spike must also stand out from the series' own tail
        rest = np.abs(z[self.history:][~flagged[self.history:]])
        if len(rest) >= 200:  # enough points for the series' own 99th percentile to mean something
            flagged &= z > max(self.z, self.tail_factor * float(np.quantile(rest, 0.99)))
        if not flagged.any():
            return []
        idx = np.flatnonzero(flagged)
        groups = np.split(idx, np.flatnonzero(np.diff(idx) > self.cluster) + 1)
        grad = (series.context or {}).get("grad_norm")
        out = []
        for g in groups:
            top = g[np.argmax(v[g] / level[g])]
            ratio = float(v[top] / level[top])
            after = v[g[-1] + 1:g[-1] + 1 + self.cluster]
            recovered = bool(len(after) and np.all(after < level[g[-1]] * (1 + (self.min_ratio - 1) / 2)))
            summary = (f"{series.metric} spikes to {_fmt(v[top])} at step {int(steps[top])}, "
                       f"{ratio:.2f}× the local level {_fmt(level[top])} (z={z[top]:.0f})")
            summary += (f", {len(g)} spiking records" if len(g) > 1 else "")
            summary += ("; back to the level right after" if recovered else
                        "; not recovered by the end of the cluster" if len(after) else
                        "; the log ends before it recovers")
            evidence: dict = {"peak_step": int(steps[top]), "value": float(v[top]),
                              "local_level": float(level[top]), "ratio": round(ratio, 3),
                              "z": round(float(z[top]), 1), "records": int(len(g)),
                              "recovered": recovered}
            lead = _grad_lead(grad, series.steps, steps[top]) if grad is not None else None
            if lead is not None:
                evidence["grad_norm_spike_step"] = lead[0]
                summary += f"; grad_norm spiked first ({_fmt(lead[1])} at step {lead[0]})"
            else:
                summary += "; a bad batch or an optimizer instability (check the data at that step)"
            out.append(Finding(self.name, Severity.WARNING, series.metric, int(steps[g[0]]),
                               int(steps[g[-1]]), summary, evidence, series.segment))
        return out


def spikes(v: np.ndarray, window: int, k: float, min_ratio: float, history: int
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Causal rule (only past values): (flagged, local level, z) on log(v). Shared with watch."""
    x = np.log(v)
    n = len(x)
    prev = np.concatenate([[np.nan], x[:-1]])
    med = rolling_median(prev, window, center=False)
    dev = np.abs(prev - med)
    mad = rolling_median(dev, window, center=False) * 1.4826
    floor = np.nanmedian(mad[history:]) * 0.5 if n > history else 0.0
    scale = np.maximum(np.nan_to_num(mad, nan=0.0), max(floor, 1e-3))
    z = (x - med) / scale
    z[:history] = 0.0
    level = np.exp(med)
    flagged = (z > k) & (v >= min_ratio * level)
    flagged[:history] = False
    return flagged, level, np.nan_to_num(z)


def _grad_lead(grad: np.ndarray, steps: np.ndarray, at: int) -> tuple[int, float] | None:
    ok = np.isfinite(grad) & (grad > 0)
    if ok.sum() < 8:
        return None
    g, s = grad[ok], steps[ok]
    flagged, _, _ = spikes(g, 64, 6.0, 2.0, 3)
    hits = [i for i in np.flatnonzero(flagged) if at - 3 <= s[i] <= at]
    if not hits:
        return None
    return int(s[hits[0]]), float(g[hits[0]])


class Divergence(Detector):
    """The loss trend rises persistently after warm-up (or explodes); start_step is the turn.

    min_points: records needed. min_rise: relative rise of the trend from its low to the end.
    min_rho: Spearman correlation with time after the turn. warmup: share of the run left out at
    the start (runs of 50 records or more)."""

    name = "divergence"
    title = "the trend rises persistently after warm-up, or explodes (start_step at the turn)"
    metrics = ("loss",)

    def __init__(self, min_points: int = 4, min_rise: float = 0.2, min_rho: float = 0.7,
                 warmup: float = 0.1):
        self.min_points = min_points
        self.min_rise = min_rise
        self.min_rho = min_rho
        self.warmup = warmup

    def detect(self, series: Series) -> list[Finding] | Skipped:
        v, steps = series.finite()
        n = len(v)
        if (short := self.too_short(series, n, self.min_points)) is not None:
            return short
        s = _smooth(v)
        skip = int(n * self.warmup) if n >= 50 else 0
        turn = skip + int(np.argmin(s[skip:]))
        post = s[turn:]
        tail = float(np.median(v[max(turn, n - max(2, n // 20)):]))
        low = float(s[turn])
        if low <= 0 or len(post) < max(3, n // 20):
            return []
        rise = tail / low - 1
        rho = spearman(post)
        if rise < self.min_rise or rho < self.min_rho:
            return []
        lr = (series.context or {}).get("lr")
        evidence: dict = {"turn_step": int(steps[turn]), "level_at_turn": low, "end_level": tail,
                          "rise": round(rise, 4), "monotonicity": round(rho, 3)}
        summary = (f"{series.metric} turns upward at step {int(steps[turn])} and rises "
                   f"{rise:.0%} ({_fmt(low)} → {_fmt(tail)}) to step {int(steps[-1])}")
        sched = lr_schedule(lr)
        if sched is not None and lr is not None:
            evidence.update(lr_at_turn=float(lr[min(turn, len(lr) - 1)]), warmup_seen=sched["warmup"],
                            lr_schedule=sched)
            summary += "" if sched["warmup"] else "; no LR warm-up in the log: try one, or a lower peak LR"
        summary += ": training is diverging (lower the LR, clip gradients, check the data)"
        return [Finding(self.name, Severity.ERROR, series.metric, int(steps[turn]), int(steps[-1]),
                        summary, evidence, series.segment)]


class Plateau(Detector):
    """No learning: the loss trend improves less than min_improvement over the run while the LR is
    still above lr_floor × its peak (warning when the loss also stays above high_loss, else info).

    min_points: records needed."""

    name = "plateau"
    title = "no learning: the trend does not improve over a long stretch while the LR is not ~0"
    metrics = ("loss",)

    def __init__(self, min_points: int = 50, min_improvement: float = 0.01, high_loss: float = 4.0,
                 lr_floor: float = 0.1):
        self.min_points = min_points
        self.min_improvement = min_improvement
        self.high_loss = high_loss
        self.lr_floor = lr_floor

    def detect(self, series: Series) -> list[Finding] | Skipped:
        v, steps = series.finite()
        n = len(v)
        if (short := self.too_short(series, n, self.min_points)) is not None:
            return short
        d = max(5, n // 10)
        first, last = float(np.median(v[:d])), float(np.median(v[-d:]))
        improvement = (first - last) / abs(first) if first else 0.0
        if abs(improvement) >= self.min_improvement:
            return []  # improving, or getting worse (divergence's business): not flat
        sched = lr_schedule((series.context or {}).get("lr"))
        if sched is not None and sched["last_lr"] < self.lr_floor * sched["peak_lr"]:
            return []  # a schedule that has decayed: convergence, not a plateau
        stuck = first >= self.high_loss
        summary = (f"{series.metric} does not improve over {n} records (steps {int(steps[0])}–"
                   f"{int(steps[-1])}): first-tenth median {_fmt(first)}, last {_fmt(last)} "
                   f"({-improvement:+.1%})")
        summary += (": the model is not learning (stuck at its initial loss: check the LR, "
                    "frozen parameters, labels)" if stuck else
                    ": flat from the start (continued training of a converged model, or not learning)")
        if sched is not None and not sched["decays"]:
            summary += f"; the LR stays at {_fmt(sched['last_lr'])} (it never decays)"
        evidence: dict = {"first_median": first, "last_median": last, "improvement": round(improvement, 5),
                    "stuck_high": stuck}
        if sched is not None:
            evidence["lr_schedule"] = sched
        return [Finding(self.name, Severity.WARNING if stuck else Severity.INFO, series.metric,
                        int(steps[0]), int(steps[-1]), summary, evidence, series.segment)]


class AccuracyDrop(Detector):
    """Accuracy's trend falls persistently; start_step is the turn.

    min_points: records needed. min_drop: the fall as a share of the peak (0.15 = 15 %).
    min_noise: the fall must also be this many times the record-to-record noise."""

    name = "accuracy_drop"
    title = "accuracy's trend falls persistently (start_step at the turn)"
    metrics = ("acc", "eval_acc")

    def __init__(self, min_points: int = 50, min_drop: float = 0.15, min_noise: float = 3.0):
        self.min_points = min_points
        self.min_drop = min_drop
        self.min_noise = min_noise

    def detect(self, series: Series) -> list[Finding] | Skipped:
        v, steps = series.finite()
        n = len(v)
        if (short := self.too_short(series, n, self.min_points)) is not None:
            return short
        s = _smooth(v)
        peak = int(np.argmax(s))
        top = float(s[peak])
        tail = float(np.median(v[-max(3, n // 10):]))
        noise = robust_scale(v - s)
        drop = top - tail
        if top <= 0 or drop < self.min_drop * top or drop < self.min_noise * noise:
            return []
        tail_n = max(3, n // 10)
        if len(s[peak:]) < tail_n or np.mean(v[-tail_n:] < top - drop / 2) < 0.8:
            return []  # not persistent: it came back up
        summary = (f"{series.metric} falls from {_fmt(top)} at step {int(steps[peak])} to "
                   f"{_fmt(tail)} ({-drop / top:.0%}) and stays down: the model is getting worse "
                   "(data order, LR too high, or a pipeline change)")
        return [Finding(self.name, Severity.WARNING, series.metric, int(steps[peak]), int(steps[-1]),
                        summary, {"turn_step": int(steps[peak]), "peak": top, "end_level": tail,
                                  "drop": round(drop / top, 4)}, series.segment)]


class Overfitting(Detector):
    """The eval loss rises from its best while the train loss still falls; start_step is the best
    eval step.

    min_points: eval records needed. min_rise: relative rise of the last eval loss over the best."""

    name = "overfitting"
    title = "eval loss rises while the train loss still falls (start_step at the eval minimum)"
    metrics = ("eval_loss",)

    def __init__(self, min_points: int = 4, min_rise: float = 0.03):
        self.min_points = min_points
        self.min_rise = min_rise

    def detect(self, series: Series) -> list[Finding] | Skipped:
        ok = np.isfinite(series.values)
        v, steps = series.values[ok], series.steps[ok]
        if len(v) < self.min_points:
            return Skipped(self.name, series.metric, f"only {len(v)} evals; needs {self.min_points}")
        best = int(np.argmin(v))
        if best >= len(v) - 2 or v[-1] < v[best] * (1 + self.min_rise) or spearman(v[best:]) < 0.6:
            return []
        train = (series.context or {}).get("train_loss")
        evidence: dict = {"best_step": int(steps[best]), "best": float(v[best]), "last": float(v[-1])}
        summary = (f"eval loss bottoms out at {_fmt(v[best])} (step {int(steps[best])}) and rises "
                   f"to {_fmt(v[-1])} by step {int(steps[-1])}")
        if train is not None and np.isfinite(train).sum() >= 4:
            t = train[np.isfinite(train)]
            falling = bool(np.median(t[-max(2, len(t) // 5):]) < np.median(t[:max(2, len(t) // 5)]))
            evidence["train_still_falling"] = falling
            if not falling:
                return []
            summary += " while the train loss keeps falling: overfitting (stop at the best eval step)"
        else:
            summary += ": overfitting? (stop at the best eval step)"
        return [Finding(self.name, Severity.WARNING, "eval_loss", int(steps[best]), int(steps[-1]),
                        summary, evidence, series.segment)]


class ThroughputDrop(Detector):
    """Tokens/s or samples/s fall (or step time rises) persistently; start_step is the turn.

    min_points: records needed. min_drop: the fall as a share of the level before the turn.
    min_side: the least share of the run on each side of the turn."""

    name = "throughput_drop"
    title = "tokens/s (or samples/s; step time rising) falls persistently (start_step at the turn)"
    metrics = ("tokens_per_s", "samples_per_s", "step_time_s")

    def __init__(self, min_points: int = 20, min_drop: float = 0.2, min_side: float = 0.1):
        self.min_points = min_points
        self.min_drop = min_drop
        self.min_side = min_side

    def detect(self, series: Series) -> list[Finding] | Skipped:
        v, steps = series.finite(True)
        n = len(v)
        if (short := self.too_short(series, n, self.min_points)) is not None:
            return short
        rate = 1.0 / v if series.metric == "step_time_s" else v
        turn, before, after = level_shift(rate, int(n * self.min_side))
        if turn is None or after > before * (1 - self.min_drop):
            return []
        # persistent: most of what follows stays below the old level
        if np.mean(rate[turn:] < before * (1 - self.min_drop / 2)) < 0.8:
            return []
        what = "step time" if series.metric == "step_time_s" else series.metric
        shown = (f"{_fmt(1 / before)} s → {_fmt(1 / after)} s per step" if series.metric == "step_time_s"
                 else f"{_fmt(before)} → {_fmt(after)}")
        summary = (f"throughput drops {1 - after / before:.0%} at step {int(steps[turn])} ({what}: "
                   f"{shown}) and stays down: a slower node, thermal throttling, a data-loader "
                   "or I/O bottleneck?")
        return [Finding(self.name, Severity.WARNING, series.metric, int(steps[turn]), int(steps[-1]),
                        summary, {"turn_step": int(steps[turn]), "before": before, "after": after,
                                  "drop": round(1 - after / before, 4)}, series.segment)]


def level_shift(x: np.ndarray, min_side: int) -> tuple[int | None, float, float]:
    """The split that best separates two mean levels (CUSUM / two-sample t statistic), each side
    >= ``min_side`` points: (index, median before, median after)."""
    n = len(x)
    min_side = max(3, min_side)
    if n < 2 * min_side:
        return None, 0.0, 0.0
    c = np.arange(min_side, n - min_side + 1)
    csum = np.cumsum(x)
    left = csum[c - 1] / c
    right = (csum[-1] - csum[c - 1]) / (n - c)
    score = np.abs(left - right) * np.sqrt(c * (n - c) / n)
    best = int(c[int(np.argmax(score))])
    return best, float(np.median(x[:best])), float(np.median(x[best:]))
