"""Run the detector registry over a log's series → Report. Never prints, never exits."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import polars as pl

from losslens import progress
from losslens.detectors import REGISTRY, Detector, Series
from losslens.detectors.base import KindDoc
from losslens.detectors.nonfinite import NonFinite
from losslens.errors import UsageError
from losslens.findings import Finding, Report, Severity, Skipped
from losslens.logs import LogData
from losslens.logs.compact import values_of
from losslens.logs.frame import rising
from losslens.logs.names import canonical, discriminator, loss_like

PROGRESS_RECORDS = 1_000_000  # the detectors tell their progress on logs at least this long

CONTEXT = ("epoch", "lr", "grad_norm", "acc", "loss")


def series_of(log: LogData, metric: str, context: bool = True) -> list[Series]:
    """Per segment: the metric's values at ascending steps (repeated steps: the last record, but a
    non-finite value over finite ones: a NaN one rank or a re-run printed at a step that another
    record also holds is never hidden by it).
    ``eval_*`` metrics come from the eval records (with the train loss as context); ``time`` is
    wall-clock seconds. ``context=False``: without the other metrics (LR, epoch, grad norm) that
    only the loss's detectors read (a queue or a throughput column is analysed alone)."""
    frame = log.eval if metric.startswith("eval_") and metric in log.eval.columns else log.train
    if metric not in frame.columns or isinstance(frame.schema[metric], pl.List):
        return []
    value = frame[metric]
    if metric == "time":
        value = (value.cast(pl.Int64) / 1e6).alias("time")  # µs → s
    others = [c for c in CONTEXT if c in frame.columns and c != metric
              and not isinstance(frame.schema[c], pl.List)] if context else []
    # the columns themselves (DataFrame.select would copy a large log's chunks into one)
    data = pl.DataFrame([frame["segment"], frame["step"], value, *(frame[c] for c in others)])
    if data[metric].null_count():
        data = data.filter(pl.col(metric).is_not_null())
    if context and frame is log.eval and "loss" in log.train.columns and log.train.height:
        train = (log.train.select("segment", "step", pl.col("loss").alias("train_loss"))
                 .filter(pl.col("train_loss").is_not_null()).sort("step"))
        data = data.sort("step").join_asof(train, on="step", by="segment", strategy="backward",
                                                check_sortedness=False)
        others.append("train_loss")
    out = []
    groups = _segment_runs(data)  # (each segment's steps rising: slices, nothing to sort)
    if groups is None:
        if data[metric].dtype.is_float() and not data[metric].is_finite().all():
            # within a step, finite records first (in their order), so that 'last' is a
            # non-finite one where the step has any
            data = data.sort("step", pl.col(metric).is_finite().not_(), maintain_order=True)
        groups = [(key, part.unique("step", keep="last", maintain_order=True).sort("step"))
                  for key, part in data.group_by("segment", maintain_order=True)]
    for (seg,), part in groups:
        ctx = Columns({c: part[c] for c in others})
        out.append(Series(metric, part["step"].to_numpy().astype(np.int64, copy=False),
                          values_of(part[metric]), int(seg), ctx))  # type: ignore[arg-type]
    return out


def _segment_runs(data: pl.DataFrame) -> list[tuple[tuple[int], pl.DataFrame]] | None:
    """``data``'s segments as slices of it where each is one stretch of rows whose steps rise
    (as restart segments are: one starts where the step goes back), with its segment: no copy,
    nothing to sort or de-duplicate (a run resumed from a checkpoint is analysed as one that was
    not); None where a step repeats within a segment or segments interleave."""
    if not data.height:
        return None
    if data["segment"].min() == data["segment"].max():  # one: its steps checked without a copy
        return [((int(data["segment"][0]),), data)] if rising(data["step"]) else None  # type: ignore[arg-type]
    seg, step = data["segment"].to_numpy(), data["step"].to_numpy()
    same = seg[1:] == seg[:-1]
    if not (seg[1:] >= seg[:-1]).all() or not ((step[1:] > step[:-1]) | ~same).all():
        return None
    starts = np.r_[0, np.flatnonzero(~same) + 1]
    ends = np.r_[starts[1:], len(seg)]
    return [((int(seg[a]),), data.slice(int(a), int(b - a))) for a, b in zip(starts, ends, strict=True)]


class Columns(Mapping[str, np.ndarray]):
    """A series' context columns, turned into float64 arrays when a detector asks for one (few
    do): a large log's loss series does not hold four more arrays of its length."""

    def __init__(self, columns: dict[str, pl.Series]):
        self.columns = columns

    def __getitem__(self, name: str) -> np.ndarray:
        return values_of(self.columns[name])

    def fresh(self, name: str) -> np.ndarray:
        """The column as float64 values that no one else holds (``Series.own``): those
        ``__getitem__`` makes, or a copy where they are the column's own (read-only) values."""
        values = self[name]
        return values if values.flags.writeable else values.copy()

    def __iter__(self) -> Iterator[str]:
        return iter(self.columns)

    def __len__(self) -> int:
        return len(self.columns)


def resolve_metric(log: LogData, name: str) -> str:
    """The canonical column that ``name`` (canonical or as the log wrote it) refers to; a
    UsageError naming what the log has when there is none."""
    columns = list(dict.fromkeys(log.metrics + log.eval_metrics))
    if name in columns:
        return name
    for column in columns:
        if log.names.get(column) == name:
            return column
    if canonical(name) in columns:
        return canonical(name)
    found = ", ".join(log.names.get(c, c) for c in columns) or "none"
    raise UsageError(f"no metric named {name!r} (found: {found}); pass --metric with one of them",
                     source=log.source)


def _loss_like(column: str) -> bool:
    return not column.startswith("eval_") and loss_like(column)


def choose_loss(log: LogData, metrics: tuple[str, ...] = ()) -> tuple[LogData, dict[str, Any] | None]:
    """Which column is the loss, and why: the first ``--metric``, else the column with a known
    loss name, else the only loss-like one ('reduced_train_loss', 'loss_total'). The chosen column
    is renamed ``loss`` for the detectors. None when no column can be taken (several candidates,
    or none)."""
    if metrics:
        column = resolve_metric(log, metrics[0])
        if column not in log.train.columns:
            raise UsageError(f"{metrics[0]!r} is an evaluation metric: --metric names the training "
                             "loss first", source=log.source)
        why = "chosen with --metric"
    elif "loss" in log.train.columns:
        column, why = "loss", "a known loss name"
    else:
        candidates, preferred = _loss_candidates(log)
        if len(candidates) == 1 or len(preferred) == 1:
            column = candidates[0] if len(candidates) == 1 else preferred[0]
            why = ("the only loss-like column" if len(candidates) == 1 else
                   f"the total/train one of the loss-like columns {', '.join(candidates)}")
        else:
            return log, None
    original = log.names.get(column, column)
    if column != "loss":
        train = log.train
        if "loss" in train.columns:  # a column the user did not choose keeps its data, renamed
            train = train.rename({"loss": "loss_unchosen"})
        names = {k: v for k, v in log.names.items() if k not in ("loss", column)}
        names["loss"] = original
        renamed = {"loss": "loss_unchosen", column: "loss"}
        ranks = tuple({**d, "metric": renamed.get(d["metric"], d["metric"])} for d in log.rank_nonfinite)
        log = dataclasses.replace(log, train=train.rename({column: "loss"}), names=names,
                                  rank_nonfinite=ranks)
    return log, {"column": original, "metric": "loss", "why": why}


def worst_first(f: Finding) -> tuple[int, int, str, str]:
    """The order a report lists its findings in: worst first, then by step, kind and metric."""
    return -int(f.severity), f.start_step, f.kind, f.metric


def _named(f: Finding, column: str) -> Finding:
    """A finding on the loss, naming the column it was (in its summary's first word too)."""
    if f.metric != "loss":
        return f
    summary = column + f.summary[4:] if f.summary.startswith("loss") else f.summary
    return dataclasses.replace(f, metric=column, summary=summary)


def several_losses(log: LogData) -> tuple[str, ...]:
    """The loss-like training columns of a log that has several and no total among them (an
    actor and a critic, a generator and a discriminator, one loss per head): every one is
    analysed, the first as the loss. Empty when ``choose_loss`` can take one by itself."""
    candidates, preferred = _loss_candidates(log)
    candidates, preferred = ([c for c in cs if c in log.train.columns] for cs in (candidates, preferred))
    if len(candidates) < 2 or len(preferred) == 1:
        return ()
    return tuple(sorted(candidates, key=discriminator))  # (a generator's first: it is the loss)


def _loss_candidates(log: LogData) -> tuple[list[str], list[str]]:
    """The loss-like training columns, and those of them named a total or the train loss."""
    candidates = [c for c in log.metrics if _loss_like(c)]
    return candidates, [c for c in candidates if "total" in c or "train" in c]


# The one finding kind that no detector gives: the analysis adds it when it cannot pick the loss.
NO_LOSS_METRIC = KindDoc(
    meaning=("no column could be taken as the loss (every metric and the loss-like candidates are "
             "listed); `check` exits 2 on it unless `--metric` names one"),
    severity="warning (and `check` exits 2 on it unless `--metric` is given)",
    evidence=("`columns` (every metric of the log, as it names them), `loss_like` (the candidates when "
              "there were several). Not a detector: `analyze` adds it when no column can be taken as "
              "the loss"),
    contract=("no column could be taken as the loss (warning; added by the gate issue: `check` exits 2 "
              "on it unless `--metric` names a column)"))


def _no_loss(log: LogData, steps: dict[str, int | None]) -> Finding:
    columns = [log.names.get(c, c) for c in log.metrics]
    loss_like = [log.names.get(c, c) for c in log.metrics if _loss_like(c)]
    found = (f"several loss-like columns ({', '.join(loss_like)})" if len(loss_like) > 1 else
             f"no loss-like column among {', '.join(columns) or 'no metrics'}")
    return Finding("no_loss_metric", Severity.WARNING, "loss", steps["first"] or 0, steps["last"] or 0,
                   f"no loss metric found: {found}; pass --metric NAME to choose the loss",
                   {"columns": columns, "loss_like": loss_like})


def analyze(log: LogData, detectors: tuple[Detector, ...] = REGISTRY,
            ignore: frozenset[str] = frozenset(), metrics: tuple[str, ...] = ()) -> Report:
    """Run ``detectors`` over every metric of ``log`` and return the Report (never prints).

    ``metrics``: the first is analysed as the loss (as ``--metric`` does), the others by every
    detector that looks at the loss too. Without it the loss is found by name (see
    ``choose_loss``); a log where none can be found gets a ``no_loss_metric`` warning.
    ``ignore``: finding kinds to leave out."""
    return analyze_log(log, detectors, ignore, metrics)[1]


def analyze_log(log: LogData, detectors: tuple[Detector, ...] = REGISTRY,
                ignore: frozenset[str] = frozenset(),
                metrics: tuple[str, ...] = ()) -> tuple[LogData, Report]:
    """``analyze``, also returning the log as analysed (the chosen loss column named ``loss``),
    which is what the views draw."""
    several = () if metrics or "loss" in log.train.columns else several_losses(log)
    log, loss = choose_loss(log, metrics or several)
    if several and loss is not None:
        loss["others"] = [log.names.get(c, c) for c in several[1:]]
        loss["why"] = (f"the first of {len(several)} loss-like columns and no total: each is "
                       f"analysed ({', '.join(loss['others'])} too; --metric narrows)")
    extra = [resolve_metric(log, m) for m in (metrics or several)[1:]]
    train = log.train
    steps = {"first": int(train["step"].min()) if train.height else None,  # type: ignore[arg-type]
             "last": int(train["step"].max()) if train.height else None,  # type: ignore[arg-type]
             "count": train.height}
    findings: list[Finding] = [] if loss is not None else [_no_loss(log, steps)]
    skipped: list[Skipped] = []
    columns = list(dict.fromkeys(log.train.columns + log.eval.columns))
    cache: dict[str, list[Series]] = {}
    big = log.train.height >= PROGRESS_RECORDS
    plan = []
    for det in detectors:
        wanted = [] if det.name in ignore else det.wants(columns)
        if "loss" in det.metrics:
            wanted += [m for m in extra if m not in wanted]
        plan.append(wanted)
    last_use = {m: i for i, wanted in enumerate(plan) for m in wanted}
    for i, (det, wanted) in enumerate(zip(detectors, plan, strict=True)):
        if big:
            progress.report(f"analysing {log.train.height:,} records", i, len(detectors))
        for metric in wanted:
            if metric not in cache:
                cache[metric] = series_of(log, metric, context=metric in ("loss", "grad_norm")
                                          or metric in extra or metric.startswith("eval_"))
                log.release()  # (a large log's columns held in a file: the pages read for it)
            for s in cache[metric]:
                result = det.detect(s)
                log.release()
                if isinstance(result, Skipped):
                    skipped.append(dataclasses.replace(result, segment=s.segment))
                else:
                    findings.extend(result)
            if last_use[metric] == i or (big and i + 1 < len(plan) and metric not in plan[i + 1]):
                # no later detector reads it (or, on a large log, not the next one: built again
                # when one does, rather than held through the others): memory stays near one series
                del cache[metric]
    if big:
        progress.report(f"analysing {log.train.height:,} records", len(detectors), len(detectors))
    nonfinite = next((d for d in detectors if isinstance(d, NonFinite) and d.name not in ignore), None)
    if nonfinite is not None and log.rank_nonfinite:
        findings += _other_ranks(log, findings, nonfinite)
    findings = with_lines(related(findings, detectors, _evaluated(log)), log)
    if several and loss is not None:  # each finding names its loss, the first one's too
        findings = [_named(f, several[0]) for f in findings]
    findings.sort(key=worst_first)
    report = Report(source=log.source, format=log.format, lines=log.lines.as_dict(),
                  skipped_reasons=dict(log.lines.skipped), steps=steps,
                  eval_records=log.eval.height, segments=max(1, len(log.segments)),
                  metrics=log.metrics + [m for m in log.eval_metrics if m not in log.metrics],
                  findings=findings, skipped=skipped, notes=list(log.notes), loss=loss,
                  read_errors=list(log.lost))
    return log, report


def _other_ranks(log: LogData, findings: list[Finding], detector: NonFinite) -> list[Finding]:
    """The non-finite values that torchrun ranks other than the analysed one logged, as the
    ``nonfinite`` detector says them, each in the segment of the analysed records before it."""
    def segment_at(line: int) -> int:
        before = log.train.filter(pl.col("line") <= line).select(pl.col("segment").sort_by("line"))
        return int(before["segment"][-1]) if before.height else 0

    return detector.other_ranks(log.rank_nonfinite, findings, segment_at)


# formats whose 'line' column counts records or events, not lines of a text file
RECORD_FORMATS = ("tensorboard", "mlflow", "trainer-state", "json-records")


def with_lines(findings: list[Finding], log: LogData) -> list[Finding]:
    """Each finding gets the log's line of the first record at or after its start step (in its
    segment), so that `file:LINE:` takes an editor or a CI annotation to it. One sort, then a
    binary search per finding (a flood of findings on a long log stays cheap)."""
    train = log.train
    if log.format in RECORD_FORMATS or not findings or "line" not in train.columns or not train.height:
        return findings
    frame = train.select("segment", "step", "line").drop_nulls().sort("segment", "step")
    seg, step, line = (frame[c].to_numpy() for c in ("segment", "step", "line"))
    out = []
    for f in findings:
        if f.line is not None:  # (another rank's record: its own line)
            out.append(f)
            continue
        lo, hi = np.searchsorted(seg, f.segment, "left"), np.searchsorted(seg, f.segment, "right")
        i = lo + int(np.searchsorted(step[lo:hi], f.start_step, "left"))
        found = int(line[i]) if i < hi else None
        out.append(dataclasses.replace(f, line=found))
    return out


def related(findings: list[Finding], detectors: tuple[Detector, ...], evaluated: bool) -> list[Finding]:
    """The findings as each other make them read, each detector saying for its own: those another
    finding already explains left out (``Detector.explained``: a spike in a ladder, a period at a
    ladder's period...), the rest as the others make them read (``Detector.reconsidered``: bands
    at the logged LR's phases, an epoch pattern with the eval loss rising; ``evaluated``: the log
    holds an eval loss)."""
    by_kind = {d.name: d for d in detectors}
    out = []
    for f in findings:
        det = by_kind.get(f.kind)
        if det is None:
            out.append(f)
        elif not det.explained(f, findings):
            out.append(det.reconsidered(f, findings, evaluated))
    return out


def _evaluated(log: LogData) -> bool:
    """The log holds eval records with a loss."""
    return log.eval.height > 0 and any(c.startswith("eval_") and "loss" in c for c in log.eval.columns)


def same_data(analysed: list[tuple[LogData, Report]]) -> list[Report]:
    """The reports of runs that read the same data in the same order (``analyze --same-data``),
    each with the loss spikes it shares with another run said as such: cause ``data``, a warning
    even where the run alone took it for a draw of its noise (``detectors.shared``). A run with
    no loss column takes no part."""
    from losslens.detectors.shared import Excursions, marked, shared_spikes

    taking = [k for k, (_, report) in enumerate(analysed) if report.loss is not None]
    runs = []
    for k in taking:
        log, report = analysed[k]
        parts = series_of(log, "loss", context=False)
        steps = np.concatenate([s.steps for s in parts]) if parts else np.array([], np.int64)
        values = np.concatenate([s.values for s in parts]) if parts else np.array([])
        # a restart's steps again: the last record of each step
        order = np.argsort(steps, kind="stable")[::-1]
        steps, first = np.unique(steps[order], return_index=True)
        runs.append(Excursions.of(report.source, steps, values[order][first]))
    shared = shared_spikes(runs)
    out = [report for _, report in analysed]
    for r, k in enumerate(taking):
        log, report = analysed[k]
        count = sum(r in s.runs for s in shared)
        note = (f"compared with {len(runs) - 1} other run(s) reading the same data (--same-data): "
                f"{count or 'no'} spike(s) shared with them")
        findings = report.findings
        if count:
            metric = report.loss["column"] if report.loss and report.loss.get("others") else "loss"
            findings = with_lines(marked(findings, runs, r, shared, metric), log)
            findings.sort(key=worst_first)
        out[k] = dataclasses.replace(report, findings=findings, notes=[*report.notes, note])
    return out

