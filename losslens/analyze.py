"""Run the detector registry over a log's series → Report. Never prints, never exits."""

from __future__ import annotations

import numpy as np
import polars as pl

from losslens.detectors import REGISTRY, Detector, Series
from losslens.findings import Finding, Report, Skipped
from losslens.logs import LogData

CONTEXT = ("epoch", "lr", "grad_norm", "acc", "loss")


def series_of(log: LogData, metric: str) -> list[Series]:
    """Per segment: the metric's values at ascending steps (repeated steps: the last record).
    ``eval_*`` metrics come from the eval records (with the train loss as context); ``time`` is
    wall-clock seconds."""
    frame = log.eval if metric.startswith("eval_") and metric in log.eval.columns else log.train
    if metric not in frame.columns or isinstance(frame.schema[metric], pl.List):
        return []
    value = pl.col(metric)
    if metric == "time":
        value = (pl.col("time").cast(pl.Int64) / 1e6).alias("time")  # µs → s
    context = [c for c in CONTEXT if c in frame.columns and c != metric
               and not isinstance(frame.schema[c], pl.List)]
    data = frame.select("segment", "step", value, *context).filter(pl.col(metric).is_not_null())
    if frame is log.eval and "loss" in log.train.columns and log.train.height:
        train = (log.train.select("segment", "step", pl.col("loss").alias("train_loss"))
                 .filter(pl.col("train_loss").is_not_null()).sort("step"))
        data = data.sort("step").join_asof(train, on="step", by="segment", strategy="backward",
                                                check_sortedness=False)
        context.append("train_loss")
    out = []
    for (seg,), part in data.group_by("segment", maintain_order=True):
        part = part.unique("step", keep="last", maintain_order=True).sort("step")
        ctx = {c: part[c].cast(pl.Float64).to_numpy() for c in context}
        out.append(Series(metric, part["step"].to_numpy().astype(np.int64),
                          part[metric].cast(pl.Float64).to_numpy(), int(seg), ctx))  # type: ignore[arg-type]
    return out


def analyze(log: LogData, detectors: tuple[Detector, ...] = REGISTRY,
            ignore: frozenset[str] = frozenset()) -> Report:
    findings: list[Finding] = []
    skipped: list[Skipped] = []
    columns = list(dict.fromkeys(log.train.columns + log.eval.columns))
    cache: dict[str, list[Series]] = {}
    for det in detectors:
        if det.name in ignore:
            continue
        for metric in det.wants(columns):
            if metric not in cache:
                cache[metric] = series_of(log, metric)
            for s in cache[metric]:
                result = det.detect(s)
                if isinstance(result, Skipped):
                    skipped.append(result)
                else:
                    findings.extend(result)
    findings = _spikes_outside_structure(findings)
    findings.sort(key=lambda f: (-int(f.severity), f.start_step, f.kind, f.metric))
    train = log.train
    steps = {"first": int(train["step"].min()) if train.height else None,  # type: ignore[arg-type]
             "last": int(train["step"].max()) if train.height else None,  # type: ignore[arg-type]
             "count": train.height}
    return Report(source=log.source, format=log.format, lines=log.lines.as_dict(),
                  skipped_reasons=dict(log.lines.skipped), steps=steps,
                  eval_records=log.eval.height, segments=max(1, len(log.segments)),
                  metrics=log.metrics + [m for m in log.eval_metrics if m not in log.metrics],
                  findings=findings, skipped=skipped, notes=list(log.notes))


def _spikes_outside_structure(findings: list[Finding]) -> list[Finding]:
    """A spike inside a ladder's stretch is a rung of the ladder, and one inside a divergence is
    part of it: neither is a separate event."""
    ladders = [f for f in findings if f.kind in ("ladder", "divergence")]
    return [f for f in findings if f.kind != "spike" or not any(
        lf.metric == f.metric and lf.segment == f.segment and lf.start_step <= f.start_step
        <= lf.end_step for lf in ladders)]
