"""Trends of the loss and accuracy: divergence, a plateau, an accuracy drop."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from losslens.detectors.base import Detector, KindDoc, Series, fmt_change, fmt_number
from losslens.detectors.relations import blows_up_into_nan, ladder_periods, same_series, structures, top
from losslens.detectors.stats import hinge_onset, lr_schedule, robust_scale, smooth, spearman
from losslens.findings import Finding, Severity, Skipped, steps_text
from losslens.logs.names import discriminator


@dataclass(frozen=True)
class Divergence(Detector):
    """The loss trend rises persistently after warm-up (or explodes); start_step is the turn.

    min_points: records needed. min_rise: relative rise of the trend from its low to the end.
    min_rho: Spearman correlation with time after the turn. warmup: share of the run left out at
    the start (runs of 50 records or more). min_t: how significant the rise must be against the
    loss's own noise, autocorrelation included (see ``significance``): a level that wanders (an
    AR or EMA-smoothed loss, a random walk in the batches) ends above its lowest dip often, and
    only a rise beyond that wander is a divergence."""

    name = "divergence"
    title = "the trend rises persistently after warm-up, or explodes (start_step at the turn)"
    doc = KindDoc(
        meaning=(
            'the trend turns upward and keeps rising, beyond the wander of its own noise (a t statistic '
            'on the records after the turn, their autocorrelation counted: an EMA-smoothed or AR loss '
            'ends above its lowest dip without diverging); `start_step` at the turn'),
        severity=(
            'error'),
        evidence=(
            '`turn_step`, `level_at_turn`, `end_level`, `rise`, `monotonicity` (Spearman of the smoothed '
            'trend after the turn), `lr_at_turn`, `warmup_seen`, `lr_schedule` (`warmup`, `decays`, '
            '`peak_lr`, `last_lr`)'),
        contract=(
            "the metric's trend rises persistently after warm-up, or explodes"),
        extensions=(
            ('`{kind}` (extension, the frameworks issue)',
             'also a loss that jumps and stays up (evidence.jump true)'),
        ),
    )
    metrics = ("loss",)

    min_points: int = 4
    min_rise: float = 0.2
    min_rho: float = 0.7
    warmup: float = 0.1
    min_t: float = 3.0

    def explained(self, finding: Finding, findings: list[Finding]) -> bool:
        """A rise that stays within what a ladder, the bands or a short log's cycles reach, from
        inside their stretch, is composition (an epoch's tail of one bucket, a ladder cut off by
        the end of the log), where "lower the LR" would be the wrong advice; so is a rise after a
        ladder that lasts no longer than one of its climbs. A rise that ends where the loss turns
        NaN for good is the blow-up the ``nonfinite`` finding reports."""
        if blows_up_into_nan(finding, findings):
            return True
        def explains(g: Finding) -> bool:
            t, period = top(g), max(ladder_periods(g), default=0.0)
            if t is None or finding.evidence["end_level"] > 1.25 * t or finding.start_step < g.start_step:
                return False
            slack = max(0.1 * (g.end_step - g.start_step), 1.5 * period)
            return (finding.start_step <= g.end_step + slack
                    or finding.end_step - finding.start_step <= 1.5 * period)

        return any(explains(g) for g in structures(finding, findings))

    def detect(self, series: Series) -> list[Finding] | Skipped:
        v, steps = series.finite()
        n = len(v)
        if (short := self.too_short(series, n, self.min_points)) is not None:
            return short
        s = smooth(v)
        skip = int(n * self.warmup) if n >= 50 else 0
        turn = skip + int(np.argmin(s[skip:]))
        post = s[turn:]
        tail = float(np.median(v[max(turn, n - max(2, n // 20)):]))
        low = float(s[turn])
        if low <= 0 or len(post) < max(3, n // 20):
            return []
        rise = tail / low - 1
        if rise < self.min_rise:
            return []
        rho = spearman(post)
        # a blow-up that jumps and stays up (falling back a little, or climbing on): the jump is
        # the turn (a smoothed climb would place it records before, where the smoothing starts)
        jumped = self._jump(v, skip, turn, low, tail)
        if rho < self.min_rho or (jumped is not None and self._abrupt(v, jumped[0])):
            if jumped is None:
                return []
            turn, t = jumped
        else:
            jumped = None
            t = self.significance(v, s, skip, turn, tail)
            if t < self.min_t:
                return []
            turn = self._onset(v, skip, turn)
        lr = (series.context or {}).get("lr")
        evidence: dict = {"turn_step": int(steps[turn]), "level_at_turn": float(s[turn]), "end_level": tail,
                          "rise": round(rise, 4), "monotonicity": round(rho, 3),
                          "significance": round(min(t, 1e6), 1)}
        if jumped is not None:
            evidence["jump"] = True
            summary = (f"{series.metric} jumps at step {int(steps[turn])} from its low "
                       f"{fmt_number(low)} to {fmt_number(float(v[turn]))} and stays up: "
                       f"{fmt_number(tail)} at step {int(steps[-1])} ({fmt_change(rise)})")
        else:
            summary = (f"{series.metric} turns upward at step {int(steps[turn])} and rises "
                       f"{fmt_change(rise).lstrip('+')} from its low ({fmt_number(low)} → "
                       f"{fmt_number(tail)}) to step {int(steps[-1])}")
        sched = lr_schedule(lr)
        if sched is not None and lr is not None:
            evidence.update(lr_at_turn=float(lr[min(turn, len(lr) - 1)]), warmup_seen=sched["warmup"],
                            lr_schedule=sched)
            summary += "" if sched["warmup"] else "; no LR warm-up in the log: try one, or a lower peak LR"
        summary += ": training is diverging (lower the LR, clip gradients, check the data)"
        return [Finding(self.name, Severity.ERROR, series.metric, int(steps[turn]), int(steps[-1]),
                        summary, evidence, series.segment)]

    @staticmethod
    def significance(v: np.ndarray, s: np.ndarray, skip: int, turn: int, tail: float) -> float:
        """The t statistic of the rise after ``turn``: Spearman's correlation of the records
        from the turn with time, on the number of independent records they are worth,
        m·(1 − r₁)/(1 + r₁), r₁ the lag-1 autocorrelation of the records about their smoothed
        trend ``s`` before the turn (after it, when fewer than 20 records come before). Too few
        records (under 10) after the turn: with 20 or more before it, the rise of ``tail`` (the
        median of the last records) over the median of the 10 before the turn, in units of their
        noise (from their successive differences before the turn): a dip and two high records at
        the end of a noisy log are no divergence, a loss that explodes over its last records is.
        With fewer before it too: infinite (the other rules decide)."""
        post = v[turn:]
        m = len(post)
        if m < 10:
            return float("inf") if turn - skip < 20 else Divergence._shift_t(v, skip, turn, tail)
        resid = (v - s)[skip:turn] if turn - skip >= 20 else (v - s)[turn:]
        r1 = 0.0
        if len(resid) > 3 and np.ptp(resid) > 0:
            r1 = max(0.0, float(np.corrcoef(resid[:-1], resid[1:])[0, 1]))
        n_eff = max(3.0, m * (1 - r1) / (1 + r1))
        rho = spearman(post)
        if rho >= 1:
            return float("inf")
        return rho * float(np.sqrt((n_eff - 2) / (1 - rho * rho)))

    def _jump(self, v: np.ndarray, skip: int, turn: int, low: float, tail: float
              ) -> tuple[int, float] | None:
        """The record where the loss jumps up and stays up (the weights blown to a worse
        state: an LR raised too far, a bad update), or None: the end at least 2·min_rise over the
        low, every stretch of the rest above 1 + min_rise times it (a median over a tenth of it),
        and the end above the 10 records before the jump by twice min_t in units of their noise
        (from successive differences: a wandering level is its own noise); with that t."""
        n = len(v)
        if tail < (1 + 2 * self.min_rise) * low or turn - skip < 10:
            return None
        up = np.flatnonzero(v[turn:] >= (1 + 2 * self.min_rise) * low)
        if not len(up):
            return None
        at = turn + int(up[0])
        rest = v[at:]
        if len(rest) < max(10, n // 20):
            return None
        k = max(3, len(rest) // 10)
        lows = [float(np.median(rest[i:i + k])) for i in range(0, len(rest) - k + 1, k)]
        if min(lows) < (1 + self.min_rise) * low:
            return None  # it came back down: a spike or a bump, not a blow-up
        t = self._shift_t(v, skip, at, tail)
        return (at, t) if t >= 2 * self.min_t else None

    def _abrupt(self, v: np.ndarray, at: int) -> bool:
        """The record ``at`` stands 1 + 2·min_rise times above the median of the 10 before it: a
        jump in one record, not a climb through it."""
        before = v[max(0, at - 10):at]
        return bool(len(before)) and float(v[at]) >= (1 + 2 * self.min_rise) * float(np.median(before))

    @staticmethod
    def _shift_t(v: np.ndarray, skip: int, at: int, tail: float) -> float:
        """How far ``tail`` (the median of the last records, as ``detect`` takes it) stands above
        the median of the 10 records before ``at`` (``at - skip`` >= 10), in standard errors of
        the two medians from the noise of the records between ``skip`` and ``at`` (from their
        successive differences); infinite where they have none."""
        n = len(v)
        pre = v[at - 10:at]
        n_tail = n - max(at, n - max(2, n // 20))
        noise = robust_scale(np.diff(v[skip:at])) / np.sqrt(2)
        if noise <= 0:
            return float("inf")
        # a median's standard error is ~1.25 σ/√n
        se = 1.25 * noise * np.sqrt(1 / len(pre) + 1 / n_tail)
        return float((tail - np.median(pre)) / se)

    @staticmethod
    def _onset(v: np.ndarray, skip: int, low: int) -> int:
        """The turn: where the rise sets in, not the smoothed minimum (on a flat, converged loss
        that is a noise dip anywhere before the rise). A hinge fitted in log space (an exponential
        blow-up) and in linear space (a ramp), the better fit's onset; the minimum when the series
        is too short to fit."""
        n = len(v)
        end = n - max(3, n // 20)
        if end - skip < 8:
            return low
        onset, r2 = hinge_onset(v, skip, end)
        if np.all(v[skip:] > 0):
            log_onset, log_r2 = hinge_onset(np.log(v), skip, end)
            if log_r2 >= r2:
                onset = log_onset
        return onset


# the class counts whose chance level is a classic symptom: 0.6931 (a binary classifier, BCE on
# balanced labels) and 2.3026 (MNIST, CIFAR-10). Other ln K lie too close together (ln 19, ln 20,
# ln 21 are 1.7 % apart) for a flat loss near one to say anything: a converged LM sits at 3.0
CHANCE_CLASSES = (2, 10)


def chance_classes(first: float, last: float, tolerance: float) -> int | None:
    """K when both levels lie within ``tolerance`` (relative) of ln K, the cross-entropy of a uniform
    guess over K classes, for K in CHANCE_CLASSES; else None."""
    for k in CHANCE_CLASSES:
        level = float(np.log(k))
        if abs(first - level) <= tolerance * level and abs(last - level) <= tolerance * level:
            return k
    return None


@dataclass(frozen=True)
class Plateau(Detector):
    """No learning: the loss trend improves less than min_improvement over the run while the LR is
    still above lr_floor × its peak (warning when the loss also stays above high_loss, else info).
    A loss that stays above high_loss (an LM near its initial ln(vocabulary)) and moves by less than
    stuck_tolerance is stuck too: a slowly wandering level (a random walk in the batches) moves it
    by a few percent without any learning, while real runs at such losses fall by 15 % and more.

    A loss that starts and ends at ln 2 or ln 10 (within chance_tolerance, relative) is a uniform
    guess over 2 or 10 classes: stuck too, whatever the LR schedule did.

    min_points: records needed. min_improvement, stuck_tolerance: relative change of the median
    of the last tenth against the first."""

    name = "plateau"
    title = "no learning: the trend does not improve over a long stretch while the LR is not ~0"
    doc = KindDoc(
        meaning=(
            'no improvement over the run while the LR has not decayed (`warning` when stuck at a high '
            'loss, or at chance, ln 2 = 0.6931 or ln 10 = 2.3026 within 1 %, whatever the LR did)'),
        severity=(
            'warning when stuck at a high loss (>= 4 nats) from the start (moving less than 1 %, or less '
            'than `stuck_tolerance` 5 % while it stays above 4), or stuck at chance (first and last '
            'tenth within `chance_tolerance` 1 % of ln 2 = 0.6931, a binary classifier, or ln 10 = '
            '2.3026, MNIST/CIFAR-10: reported even when the LR decayed, which otherwise reads as '
            'convergence), else info'),
        evidence=(
            '`first_median`, `last_median`, `improvement`, `stuck_high`, `chance_classes` (2, 10 or '
            'null), `lr_schedule` (the summary says when the LR never decays)'),
        contract=(
            'the trend stops improving for a long stretch while training goes on'),
        extensions=(
            ('`{kind}` (extension, the frameworks issue)',
             'also the logged learning rate at 0 over the end of the run (evidence.lr_zero_step)'),
        ),
    )
    metrics = ("loss",)

    min_points: int = 50
    min_improvement: float = 0.01
    high_loss: float = 4.0
    lr_floor: float = 0.1
    stuck_tolerance: float = 0.05
    chance_tolerance: float = 0.01

    def explained(self, finding: Finding, findings: list[Finding]) -> bool:
        """A loss that blew up and stays high does not improve over the run: the divergence says
        why."""
        return any(g.kind == "divergence" and same_series(finding, g) for g in findings)

    def detect(self, series: Series) -> list[Finding] | Skipped:
        v, steps = series.finite()
        n = len(v)
        if (stopped := self._lr_zero(series)) is not None:
            return [stopped]
        if (short := self.too_short(series, n, self.min_points)) is not None:
            return short
        if discriminator(series.metric):
            return []  # flat near ln 2 at equilibrium: the discriminator is doing its job
        d = max(5, n // 10)
        first, last = float(np.median(v[:d])), float(np.median(v[-d:]))
        improvement = (first - last) / abs(first) if first else 0.0
        high = first >= self.high_loss and last >= self.high_loss
        if abs(improvement) >= (self.stuck_tolerance if high else self.min_improvement):
            return []  # improving, or getting worse (divergence's business): not flat
        classes = chance_classes(first, last, self.chance_tolerance)
        sched = lr_schedule((series.context or {}).get("lr"))
        if classes is None and sched is not None and sched["last_lr"] < self.lr_floor * sched["peak_lr"]:
            return []  # a schedule that has decayed: convergence, not a plateau
        stuck = first >= self.high_loss or classes is not None
        span = steps_text(int(steps[0]), int(steps[-1]))
        summary = (f"{series.metric} does not improve over {n} records ({span}): first-tenth median "
                   f"{fmt_number(first)}, last {fmt_number(last)} ({-improvement:+.1%})")
        if classes is not None:
            # a cross-entropy that starts and ends at ln K: the model still guesses uniformly over
            # K classes, however its LR was scheduled (a decayed LR is no convergence there)
            summary += (f": stuck at ln {classes} = {np.log(classes):.4f}, the loss of a uniform guess "
                        f"over {classes} classes: the model is not learning (check the labels, the "
                        "LR, frozen parameters, the loss's inputs)")
        else:
            summary += (": the model is not learning (stuck at its initial loss: check the LR, "
                        "frozen parameters, labels)" if stuck else
                        ": flat from the start (continued training of a converged model, or not learning)")
        if sched is not None and not sched["decays"]:
            summary += f"; the LR stays at {fmt_number(sched['last_lr'])} (it never decays)"
        evidence: dict = {"first_median": first, "last_median": last, "improvement": round(improvement, 5),
                          "stuck_high": stuck, "chance_classes": classes}
        if sched is not None:
            evidence["lr_schedule"] = sched
        return [Finding(self.name, Severity.WARNING if stuck else Severity.INFO, series.metric,
                        int(steps[0]), int(steps[-1]), summary, evidence, series.segment)]


    def _lr_zero(self, series: Series) -> Finding | None:
        """The logged learning rate is 0 over the last tenth of the run or more (at least 10
        records; a schedule that decays to 0 reaches it at the last step only) after it was
        not: nothing is learned from that step on, whatever the loss does."""
        lr = (series.context or {}).get("lr")
        if lr is None or len(lr) != len(series.values):
            return None
        nonzero = np.flatnonzero(np.isfinite(lr) & (lr != 0))
        n = len(lr)
        start = int(nonzero[-1]) + 1 if len(nonzero) else 0  # (0: never other than 0)
        if start == 0 or n - start < max(10, n // 10) or np.any(lr[start:] != 0):
            return None  # (a NaN after the last rate is no 0 either)
        v = series.values
        before = v[max(0, start - 10):start]
        after = v[start:]
        was = float(np.nanmedian(before)) if np.isfinite(before).any() else float("nan")
        now = float(np.nanmedian(after)) if np.isfinite(after).any() else float("nan")
        first, last = int(series.steps[start]), int(series.steps[-1])
        summary = (f"the learning rate is 0 from step {first} to the end ({n - start} records; it "
                   f"was {fmt_number(float(lr[start - 1]))}): nothing is learned since, "
                   f"{series.metric} {fmt_number(was)} before and {fmt_number(now)} after (a "
                   "scheduler or an LR scale set to 0, a frozen optimizer)")
        evidence = {"lr_zero_step": first, "lr_before": float(lr[start - 1]), "records": n - start,
                    "loss_before": was, "loss_after": now}
        return Finding(self.name, Severity.WARNING, series.metric, first, last, summary, evidence,
                       series.segment)


@dataclass(frozen=True)
class AccuracyDrop(Detector):
    """Accuracy's trend falls persistently; start_step is the turn.

    min_points: records needed. min_drop: the fall as a share of the peak (0.15 = 15 %).
    min_noise: the fall must also be this many times the record-to-record noise."""

    name = "accuracy_drop"
    title = "accuracy's trend falls persistently (start_step at the turn)"
    doc = KindDoc(
        meaning=(
            'accuracy falls and stays down; `start_step` at the turn'),
        severity=(
            'warning'),
        evidence=(
            '`turn_step`, `peak`, `end_level`, `drop`'),
        contract=(
            "accuracy's trend falls persistently"),
    )
    metrics = ("acc", "eval_acc")

    min_points: int = 50
    min_drop: float = 0.15
    min_noise: float = 3.0

    def detect(self, series: Series) -> list[Finding] | Skipped:
        v, steps = series.finite()
        n = len(v)
        if (short := self.too_short(series, n, self.min_points)) is not None:
            return short
        s = smooth(v)
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
        summary = (f"{series.metric} falls from {fmt_number(top)} at step {int(steps[peak])} to "
                   f"{fmt_number(tail)} ({-drop / top:.0%}) and stays down: the model is getting worse "
                   "(data order, LR too high, or a pipeline change)")
        return [Finding(self.name, Severity.WARNING, series.metric, int(steps[peak]), int(steps[-1]),
                        summary, {"turn_step": int(steps[peak]), "peak": top, "end_level": tail,
                                  "drop": round(drop / top, 4)}, series.segment)]
