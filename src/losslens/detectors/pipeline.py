"""Pipeline stalls: producer queues drained to zero, consumer queues growing without bound,
and gaps in wall time between records far beyond the usual spacing."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from losslens.detectors.base import Detector, KindDoc, Series
from losslens.detectors.stats import kept, median_where, runs_of, spearman
from losslens.detectors.throughput import per_step, running_total
from losslens.findings import Finding, Severity, Skipped


def queue_metric(name: str) -> bool:
    """A producer/consumer queue column (``q_*`` or ``*queue*``, plain or the min/mean of a list)."""
    base = name.removesuffix("_min").removesuffix("_mean")
    return (base.startswith("q_") or "queue" in base) and name.endswith(("_min", "_mean")) or \
        (name.startswith("q_") or "queue" in name) and not name.endswith(("_min", "_mean"))


@dataclass(frozen=True)
class PipelineStall(Detector):
    """Producer/consumer queues (q_* columns) drained to zero (starvation) or growing without bound
    (backlog), and wall-clock gaps or hangs between records.

    min_empty / empty_share: records at zero needed (a count, or a share of the run, whichever is
    more). min_growth: how many times its start level a queue must grow to. gap_ratio / gap_min_s:
    a pause between records this many times the usual interval and at least this many seconds.
    hang_s: a pause this long (and 50 times the usual) is a hang. stall_min_s: a slow step takes
    at least gap_ratio times the median step and this many seconds more."""

    name = "pipeline_stall"
    title = "queues drained to zero (starved) or growing without bound (backlog); wall-time gaps"
    doc = KindDoc(
        meaning=(
            'a queue (`q_pre=[...]`, `q_hs=[...]`, `queue_depth`) drained to 0 or growing without bound '
            '(from the turn where it starts to grow); pauses between records'),
        severity=(
            'warning; info for pauses (checkpoints, evals); warning for a hang (>= 600 s and >= 50x '
            'usual)'),
        evidence=(
            'queues: `queue`, `empty_records`, `longest_empty`, `stretches` or `start`, `end`, '
            '`turn_step`, `growth_per_step`, `trend`; time: `gaps_s`, `steps`, `usual_s`; step times '
            "(any name, or the Hugging Face Trainer's tqdm redraws): `steps` (each stall's first step), "
            "`seconds` (each stall's total), `usual_s`, `periodic`"),
        contract=(
            'producer/consumer queue depths show starvation or backlog'),
        extensions=(
            ('`{kind}` (extension, the frameworks issue)',
             'also a step whose time (under any name: `rtime`, `itime`, `iter_time`, `step_time`, '
             "`time(s)`, `dt`, `*_ms`, `data_time`, an elapsed time's increments, or from tqdm's "
             "redraws where the records carry no time) is far above the run's, but for the slow steps "
             "a run or a resumed segment starts with (its start-up: compiling, CUDA's first kernels) "
             "(evidence: steps, seconds, usual_s, periodic); a few slow steps in a row (a progress "
             "bar's update spreads a stall over the steps it covers) are one stall when they took "
             '0.5 s more than usual in all and the steps are fast again after them'),
        ),
    )
    metrics = ("q_*", "time")  # queue columns are found per log (see wants)

    min_empty: int = 3
    empty_share: float = 0.02
    min_growth: float = 2.0
    gap_ratio: float = 8.0
    gap_min_s: float = 30.0
    hang_s: float = 600.0
    stall_min_s: float = 0.5

    def wants(self, columns: list[str]) -> list[str]:
        return [c for c in columns if queue_metric(c) and not c.endswith("_mean")] + \
            [c for c in columns if c.endswith("_mean") and queue_metric(c)] + \
            (["time"] if "time" in columns else []) + [c for c in STEP_TIMES if c in columns]

    def detect(self, series: Series) -> list[Finding] | Skipped:
        if series.metric == "time":
            return self._gaps(series)
        if series.metric in STEP_TIMES:
            return self._slow_steps(series)
        v, steps = series.finite()
        if len(v) < 10:
            return Skipped(self.name, series.metric, f"only {len(v)} points; needs 10")
        base = series.metric.removesuffix("_min").removesuffix("_mean")
        if series.metric.endswith("_mean"):
            return self._backlog(base, v, steps, series.segment)
        if series.metric.endswith("_min"):
            return self._starved(base, v, steps, series.segment)
        # a plain depth column (queue_depth, q_pre) can do either
        return self._starved(base, v, steps, series.segment) + self._backlog(base, v, steps, series.segment)

    def _starved(self, base: str, v: np.ndarray, steps: np.ndarray, segment: int) -> list[Finding]:
        empty = v <= 0
        if not empty.any() or not (v > 0).any():
            return []
        # a queue that normally runs near empty (a consumer keeping up) is fine at 0
        if float(np.median(v)) < max(2.0, 0.25 * float(v.max())):
            return []
        edges = np.flatnonzero(np.diff(np.concatenate([[0], empty.astype(int), [0]])))
        runs = [(a, b) for a, b in zip(edges[::2], edges[1::2], strict=True)]
        need = max(self.min_empty, int(self.empty_share * len(v)))
        long = [(a, b) for a, b in runs if b - a >= need]
        if not long:
            return []
        a, b = max(long, key=lambda r: r[1] - r[0])
        total = int(empty.sum())
        summary = (f"queue {base} drains to 0 for {b - a} records from step {int(steps[a])} "
                   f"({total} empty records in all, {len(long)} stretch(es)): the consumer waits "
                   "on its producers (data loading or the target model too slow)")
        return [Finding(self.name, Severity.WARNING, base, int(steps[a]), int(steps[b - 1]), summary,
                        {"queue": base, "empty_records": total, "longest_empty": int(b - a),
                         "stretches": len(long)}, segment)]

    def _backlog(self, base: str, v: np.ndarray, steps: np.ndarray, segment: int) -> list[Finding]:
        n = len(v)
        start, end = float(np.median(v[:max(3, n // 10)])), float(np.median(v[-max(3, n // 10):]))
        if end < max(self.min_growth * max(start, 1.0), 10.0):
            return []
        turn, slope = _hinge(v)
        grown = v[turn:]
        # still growing at the end: a queue that filled up to its bound and stays there is fine
        if len(grown) < 5 or spearman(grown) < 0.8 or spearman(v[-max(5, n // 4):]) < 0.5:
            return []
        level = float(np.median(v[:turn])) if turn >= 3 else start
        per_step = slope / max(1.0, float(np.median(np.diff(steps)))) if n > 1 else slope
        summary = (f"queue {base} grows from {level:.3g} to {end:.3g} from step {int(steps[turn])} "
                   f"(~{per_step:.3g} per step) and keeps growing: the consumer cannot keep up "
                   "(backlog; memory will run out if it is unbounded)")
        return [Finding(self.name, Severity.WARNING, base, int(steps[turn]), int(steps[-1]), summary,
                        {"queue": base, "start": level, "end": end, "turn_step": int(steps[turn]),
                         "growth_per_step": round(per_step, 4), "trend": round(spearman(grown), 3)},
                        segment)]

    def _gaps(self, series: Series) -> list[Finding]:
        t, steps = kept(np.isfinite(series.values), series.values, series.steps)
        if len(t) < 10:
            return []
        # (a long run's arrays: the steps' gaps taken a block at a time, each median of a
        # selection made in place, temporaries dropped)
        dt = np.diff(t)
        per_step = np.empty_like(dt)
        for lo, dstep in _step_gaps(steps):
            np.divide(dt[lo:lo + len(dstep)], dstep, out=per_step[lo:lo + len(dstep)])
        usual_step = median_where(per_step, per_step > 0, spent=True)
        del per_step
        usual = median_where(dt, dt > 0)
        if np.mean(dt < 1.0) > 0.5 and (dt >= 1.0).sum() >= 5:
            # records printed in bursts (an epoch's lines, or two ranks' a millisecond apart, then
            # nothing until the next epoch): the usual spacing is that between the bursts
            usual = usual_step = median_where(dt, dt >= 1.0)
        if usual <= 0 or usual_step <= 0:
            return []
        # time the steps in between do not explain (a log with gaps in steps is not a stall)
        excess = np.empty_like(dt)
        for lo, dstep in _step_gaps(steps):
            part = excess[lo:lo + len(dstep)]
            np.multiply(dstep, usual_step, out=part)
            np.subtract(dt[lo:lo + len(dstep)], part, out=part)
        big = np.flatnonzero(excess >= max(self.gap_ratio * usual, self.gap_min_s))
        if len(big) == 0:
            return []
        dt = excess
        worst = float(dt[big].max())
        hang = worst >= self.hang_s and worst >= 50 * usual
        at = [int(steps[i + 1]) for i in big]
        summary = (f"{len(big)} pause(s) between records of {dt[big].min():.0f}–{worst:.0f} s "
                   f"(usual spacing {usual:.3g} s) at step(s) {', '.join(map(str, at[:6]))}"
                   f"{' …' if len(at) > 6 else ''}")
        summary += (": the job hung or stalled (a dead rank, I/O, a stuck data loader?)" if hang else
                    ": checkpoints, evaluation or data-shard loads?")
        return [Finding(self.name, Severity.WARNING if hang else Severity.INFO, "time", at[0], at[-1],
                        summary, {"gaps_s": [round(float(x), 3) for x in dt[big][:50]], "steps": at[:50],
                                  "usual_s": usual}, series.segment)]


    def _slow_steps(self, series: Series) -> list[Finding] | Skipped:
        """Steps that took ``gap_ratio`` times the median step and ``stall_min_s`` more (the time
        of each step, or the increments of an elapsed time): one or two are a stall (a data
        loader, I/O, a collective waiting on a rank); more, at a regular spacing, are the run's
        own periodic work (evaluation, checkpoints): information."""
        t, steps = kept(np.isfinite(series.values), series.values, series.steps)
        if len(t) < 10:
            return Skipped(self.name, series.metric, f"only {len(t)} points; needs 10")
        if series.metric == "elapsed_s" or running_total(t):
            t, steps = per_step(t, steps)
        scale = 1e-3 if series.metric == "step_time_ms" else 1.0
        usual = median_where(t, t > 0)
        if usual <= 0 or len(t) < 10:
            return []
        # a stall is slow steps in a row (one, or the few a progress bar's update spreads it
        # over) that took stall_min_s more than usual in all, and after which the steps are
        # fast again (a slow-down that lasts to the end is a throughput drop, not a stall)
        runs = runs_of(np.flatnonzero(t >= usual * self.gap_ratio))
        # the slow steps a run (or a resumed segment) starts with are its start-up: compiling
        # (nanoGPT's iter 0 under torch.compile takes 30 s), CUDA's first kernels, the data
        # loader's first workers; no stall
        runs = [r for r in runs if r[0] > 0 and float(np.sum(t[r] - usual)) * scale >= self.stall_min_s
                and (r[-1] + 1 < len(t) or len(r) <= 2) and len(r) <= max(2, len(t) // 10)]
        if not runs:
            return []
        totals = [float(np.sum(t[r])) * scale for r in runs]  # each stall's seconds in all
        n_slow = sum(len(r) for r in runs)
        at = [int(steps[r[0]]) for r in runs]
        worst, longest = max(totals), runs[int(np.argmax(totals))]
        what = {"data_time": "data-loading time", "elapsed_s": "time per step (elapsed)"}.get(
            series.metric, "step time")
        regular = len(runs) >= 3 and np.ptp(np.diff(at)) <= 0.1 * float(np.median(np.diff(at)))
        took = f"{worst:.3g} s" if len(runs) == 1 else f"{min(totals):.3g}-{worst:.3g} s"
        times = max(float(np.mean(t[r])) for r in runs) / usual
        if n_slow == len(runs):
            summary = (f"{n_slow} step(s) with a {what} of {took} against a usual "
                       f"{usual * scale:.3g} s ({times:.0f}×) "
                       f"at step(s) {', '.join(map(str, at[:6]))}{' …' if len(at) > 6 else ''}")
        else:  # (a progress bar's update spreads a stall over the steps it covers)
            summary = (f"{len(runs)} stall(s); the longest: steps {int(steps[longest[0]])}-"
                       f"{int(steps[longest[-1]])} took {worst:.3g} s in all against a usual "
                       f"{usual * scale:.3g} s per step ({times:.0f}× over {len(longest)} records)")
        if regular:
            summary += (f": every {int(np.median(np.diff(at)))} steps, the run's periodic work "
                        "(evaluation, checkpoints, logging)?")
        elif len(runs) <= 2:
            summary += (": the input pipeline stalled (a data loader worker, I/O, a slow shard) or "
                        "a rank waited on another")
        else:
            summary += ": stalls of the input pipeline, I/O or a rank (they come irregularly)"
        severity = Severity.INFO if regular else Severity.WARNING
        return [Finding(self.name, severity, series.metric, at[0], int(steps[runs[-1][-1]]), summary,
                        {"steps": at[:50],
                         "seconds": [round(x, 4) for x in totals[:50]],
                         "usual_s": usual * scale, "periodic": bool(regular)}, series.segment)]


# the columns that time each step (or count the run's time: their increments do)
STEP_TIMES = ("step_time_s", "step_time_ms", "data_time", "elapsed_s")
GAP_BLOCK = 1 << 18  # step gaps taken at a time


def _step_gaps(steps: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """The gaps between successive steps (at least 1), GAP_BLOCK at a time: (the first gap's
    index, the gaps)."""
    block = GAP_BLOCK
    for lo in range(0, len(steps) - 1, block):
        gaps = np.diff(steps[lo:lo + block + 1])
        np.maximum(gaps, 1, out=gaps)
        yield lo, gaps


def _hinge(v: np.ndarray) -> tuple[int, float]:
    """Where a level turns into steady growth: the least-squares fit of a + b * max(0, i - c)
    over candidate turns c (at most ~400 of them); (c, b)."""
    n = len(v)
    i = np.arange(n, dtype=float)
    best, at, slope = np.inf, 0, 0.0
    for c in np.unique(np.linspace(0, n - 5, min(n - 4, 400)).astype(int)):
        x = np.maximum(0.0, i - c)
        xm, vm = x.mean(), v.mean()
        sxx = float(((x - xm) ** 2).sum())
        if sxx <= 0:
            continue
        b = float(((x - xm) * (v - vm)).sum()) / sxx
        sse = float(((v - vm - b * (x - xm)) ** 2).sum())
        if b > 0 and sse < best:
            best, at, slope = sse, int(c), b
    return at, slope
