"""What the framework callbacks share: ``Recorder`` writes what each optimizer step fed in the
``replay --batches`` JSON Lines format, ``LiveCheck`` runs the detectors on the metrics a trainer
logs, and ``lengths_of`` takes the sample lengths of a batch as the frameworks hand it over."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from losslens.findings import Finding, Report, Severity

FINDINGS_FILE = "losslens-findings.json"


def rank_path(path: str | Path, rank: int, world_size: int) -> Path:
    """The record of one rank: ``path`` itself on rank 0, ``fed.rank3.jsonl`` beside it on the
    others (each rank records what it fed; ``replay --batches`` reads one rank's file)."""
    p = Path(path)
    if rank == 0 or world_size <= 1:
        return p
    return p.with_name(f"{p.stem}.rank{rank}{p.suffix}")


class Recorder:
    """Writes one JSON line per optimizer step: ``{"step": S, "micro_batches": [[812, 790, ...],
    ...], "rank": R}``, the lengths of the samples of each micro-batch the step accumulated.
    Lines are flushed as written: a run that dies leaves every step it finished."""

    def __init__(self, path: str | Path, rank: int = 0, world_size: int = 1):
        self.path = rank_path(path, rank, world_size)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.rank = rank
        self._file = self.path.open("w", encoding="utf-8")
        self._pending: list[list[int]] = []

    def micro_batch(self, lengths: list[int]) -> None:
        """One micro-batch fed to the model (its samples' lengths)."""
        if lengths:
            self._pending.append(lengths)

    def step(self, step: int) -> None:
        """The optimizer stepped: the micro-batches since the last step are step ``step``'s."""
        if not self._pending:
            return
        rec = {"step": int(step), "micro_batches": self._pending, "rank": self.rank}
        self._file.write(json.dumps(rec, separators=(",", ":")) + "\n")
        self._file.flush()
        self._pending = []

    def close(self) -> None:
        self._file.close()


def lengths_of(batch: Any) -> list[int]:
    """The sample lengths of a batch: a mapping's ``attention_mask`` (its ones per row), else
    its ``labels`` that are not -100, else its ``input_ids``' width; a tuple's or list's first
    tensor's width; a plain ``lengths`` or ``length`` entry as it is. Empty where none is found."""
    if isinstance(batch, Mapping):
        for key in ("length", "lengths"):
            if key in batch:
                return [int(x) for x in _as_list(batch[key])]
        mask = batch.get("attention_mask")
        if mask is not None and getattr(mask, "ndim", 0) == 2:
            return [int(x) for x in mask.sum(-1).tolist()]
        labels = batch.get("labels")
        if labels is not None and getattr(labels, "ndim", 0) == 2:
            return [int(x) for x in (labels != -100).sum(-1).tolist()]
        ids = batch.get("input_ids")
        return _widths(ids)
    if isinstance(batch, list | tuple) and batch:
        return _widths(batch[0])
    return _widths(batch)


def _widths(t: Any) -> list[int]:
    shape = getattr(t, "shape", None)
    if shape is None or len(shape) < 2:
        return []
    return [int(shape[1])] * int(shape[0])


def _as_list(x: Any) -> list[Any]:
    return x.tolist() if hasattr(x, "tolist") else list(x)


class LiveCheck:
    """The detectors run on what the trainer logs, as it logs it. A non-finite value is judged
    at once; the whole set of detectors runs when its time so far and the next run's (as long as
    the last one took) stay under ``budget`` of the run's (so that it costs at most that share of
    the training), and once more at the end.
    ``log`` returns the first finding at or above ``fail_on`` (None until there is one)."""

    def __init__(self, fail_on: str | Severity, out_dir: str | Path | None, budget: float = 0.01,
                 source: str = "<live>"):
        from losslens.logs.names import canonical  # (loads the readers, polars: once, at the start)

        self._canonical = canonical
        self.fail_on = fail_on if isinstance(fail_on, Severity) else Severity.parse(fail_on)
        self.out_dir = Path(out_dir) if out_dir is not None else None
        self.budget, self.source = budget, source
        self.steps: list[int] = []
        self.columns: dict[str, list[float | None]] = {}  # (None: not in that record)
        self.started = time.perf_counter()
        self.spent = 0.0
        self.cost = 0.25  # what the next full check will take (the first: the imports too)
        self.report: Report | None = None
        self.stopped_by: Finding | None = None

    def log(self, step: int, metrics: Mapping[str, Any]) -> Finding | None:
        """One logged record; the finding that should stop the run, if any."""
        canonical = self._canonical
        if "train_runtime" in metrics:  # (the Trainer's closing summary, not a step's record)
            return None
        values = {}
        for key, value in metrics.items():
            try:
                values[canonical(str(key))] = float(value)
            except (TypeError, ValueError):
                continue
        if "loss" not in values and not any("loss" in k for k in values):
            return None  # (an evaluation or a summary record)
        n = len(self.steps)
        self.steps.append(int(step))
        for key in values.keys() | self.columns.keys():
            self.columns.setdefault(key, [None] * n).append(values.get(key))
        urgent = any(not math.isfinite(v) for v in values.values())
        elapsed = time.perf_counter() - self.started
        if urgent or self.spent + self.cost <= self.budget * elapsed:
            return self._judge()
        return None

    def finish(self) -> Report | None:
        """The detectors over everything logged; the report written beside the run's logs."""
        if self.steps:
            self._judge()
        return self.report

    def _judge(self) -> Finding | None:
        import numpy as np

        from losslens.analysis import analyze
        from losslens.logs import from_arrays

        started = time.perf_counter()
        self.report = analyze(from_arrays(np.asarray(self.steps), self.source, **self.columns))  # type: ignore[arg-type]
        self.cost = time.perf_counter() - started
        self.spent += self.cost
        worst = [f for f in self.report.findings if f.severity >= self.fail_on]
        if worst and self.stopped_by is None:
            self.stopped_by = worst[0]
            self.write()
            return worst[0]
        return None

    def write(self) -> Path | None:
        """The report (and the finding that stopped the run) as JSON in ``out_dir``."""
        if self.out_dir is None or self.report is None:
            return None
        self.out_dir.mkdir(parents=True, exist_ok=True)
        path = self.out_dir / FINDINGS_FILE
        body = self.report.as_dict()
        body["stopped_by"] = self.stopped_by.as_dict() if self.stopped_by is not None else None
        path.write_text(json.dumps(body, indent=1) + "\n", encoding="utf-8")
        return path
