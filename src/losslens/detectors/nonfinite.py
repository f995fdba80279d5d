"""NaN/inf in a metric: the step where training blew up."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from losslens.detectors.base import Detector, KindDoc, Series, fmt_number
from losslens.findings import Finding, Severity, Skipped
from losslens.logs.names import loss_like


@dataclass(frozen=True)
class NonFinite(Detector):
    """NaN or ±inf in the loss, grad norm, eval loss, accuracy or LR: one error from the first such
    step. Also a hidden NaN in Hugging Face logs (a NaN grad norm, or a loss frozen at one value).

    frozen_records: records the loss must repeat one value (after having moved) to count as frozen."""

    name = "nonfinite"
    title = "NaN or inf in a metric (start_step = the first such step); hidden NaN in HF logs"
    doc = KindDoc(
        meaning=(
            'NaN/inf in every spelling programs print (`nan`, `-nan`, `NaN`, `inf`, `Infinity`, a bare '
            "`nan` in a JSON line, Windows' `-nan(ind)`, and its older C runtime's `1.#QNAN0` / "
            '`1.#INF00` in key=value, CSV, Megatron and fairseq lines), from the exact first step, in '
            "the loss, grad norm, eval loss, accuracy, LR and every other loss column (a detector's box "
            'and class losses, where none is the loss until `--metric` says: a NaN there fails `check` '
            "with 1, not 2); a NaN hidden by HF's Trainer (NaN grad_norm, a frozen loss that the print "
            'precision does not explain); a rare NaN grad norm while the loss stays finite and moving is '
            'a `warning` (an fp16 loss-scaling skip)'),
        severity=(
            'error; warning for a frozen loss, and for a NaN grad norm in <= 5 % of the records (not to '
            'the end) while the loss stays finite and moving (an fp16 dynamic-loss-scaling skip)'),
        evidence=(
            '`first_step`, `count`, `values` (NaN/inf/-inf), `to_end`; a value only a torchrun rank '
            "other than the analysed one printed: `rank` too, and `line` that rank's line; frozen loss: "
            '`frozen_value`, `records`, `repeat_rate_around`'),
        contract=(
            'NaN or inf in a metric (start_step = first such step)'),
    )
    metrics = ("loss", "grad_norm", "eval_loss", "acc", "lr")

    frozen_records: int = 5

    def wants(self, columns: list[str]) -> list[str]:
        """``metrics``, and every other loss column: a NaN in one of several losses (a detector's
        box and class losses, where none is the loss until --metric says) is never unseen."""
        fixed = super().wants(columns)
        return fixed + [c for c in columns if c not in fixed and loss_like(c)]

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
                       f"{' (last finite value ' + fmt_number(v[first - 1]) + ')' if first else ''}")
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

    def other_ranks(self, entries: tuple[dict, ...], findings: list[Finding],
                    segment_at: Callable[[int], int]) -> list[Finding]:
        """A finding for each non-finite value a torchrun rank other than the analysed one logged
        (``LogData.rank_nonfinite``; a NaN on any rank is the run's), where the analysed rank has
        none as early; ``segment_at``: the segment of a line."""
        out: list[Finding] = []
        for d in entries:
            metric, first = d["metric"], d["first_step"]
            if metric not in self.metrics or any(
                    f.kind == self.name and f.metric == metric and first is not None and f.start_step <= first
                    for f in findings + out):
                continue
            summary = (f"{metric} is {'/'.join(d['values'])} on rank {d['rank']} from step {first} (line "
                       f"{d['first_line']}), {d['count']} of its records; the rank analysed does not show it")
            severity = Severity.ERROR
            if metric == "grad_norm":
                severity = Severity.WARNING
                summary += ("; with fp16 dynamic loss scaling an overflowing step is skipped (normal "
                            "when rare)")
            else:
                summary += ": training has blown up on that rank (a bad batch it read, fp16 overflow)"
            evidence = {"first_step": first, "count": d["count"], "values": d["values"], "rank": d["rank"]}
            last = int(d["last_step"] or first or 0)
            out.append(Finding(self.name, severity, metric, int(first or 0), last, summary, evidence,
                               segment_at(d["first_line"]), line=d["first_line"]))
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
            summary = (f"loss is frozen at {fmt_number(v[start])} for {length} records from step "
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
