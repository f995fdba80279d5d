"""Run the detector registry over a log's series → Report. Never prints, never exits."""

from __future__ import annotations

import numpy as np
import polars as pl

from losslens.detectors import REGISTRY, Detector, Series
from losslens.findings import Finding, Report, Skipped
from losslens.logs import LogData

CONTEXT = ("epoch", "lr", "grad_norm", "acc", "loss")


def series_of(log: LogData, metric: str) -> list[Series]:
    """Per segment: the metric's values at ascending steps (repeated steps: the last record)."""
    if metric not in log.train.columns or isinstance(log.train.schema[metric], pl.List):
        return []
    out = []
    context = [c for c in CONTEXT if c in log.train.columns and c != metric
               and not isinstance(log.train.schema[c], pl.List)]
    frame = log.train.select("segment", "step", metric, *context).filter(pl.col(metric).is_not_null())
    for (seg,), part in frame.group_by("segment", maintain_order=True):
        part = part.unique("step", keep="last", maintain_order=True).sort("step")
        ctx = {c: part[c].cast(pl.Float64).to_numpy() for c in context}
        out.append(Series(metric, part["step"].to_numpy().astype(np.int64),
                          part[metric].to_numpy().astype(np.float64), int(seg), ctx))  # type: ignore[arg-type]
    return out


def analyze(log: LogData, detectors: tuple[Detector, ...] = REGISTRY,
            ignore: frozenset[str] = frozenset()) -> Report:
    findings: list[Finding] = []
    skipped: list[Skipped] = []
    for det in detectors:
        if det.name in ignore:
            continue
        for metric in det.metrics:
            for s in series_of(log, metric):
                result = det.detect(s)
                if isinstance(result, Skipped):
                    skipped.append(result)
                else:
                    findings.extend(result)
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
