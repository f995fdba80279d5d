"""Run folders and binary logs: TensorBoard event files, MLflow file-store runs, W&B history
dumps and offline runs. All produce the same canonical frame as the text readers.

Line accounting for event files counts *records* (events): every event is parsed (it held a
scalar), or skipped with a reason (file version, graphs, histograms, images, text)."""

from __future__ import annotations

import os
from pathlib import Path

from losslens.errors import FormatError, InputError
from losslens.logs.records import Accounting, Sink

TB_MARK = b"brain.Event:"
TB_HINT = "pip install 'losslens[tensorboard]' (or: pip install tensorboard)"


def is_event_file(path: str) -> bool:
    if "tfevents" in os.path.basename(path):
        return True
    try:
        with open(path, "rb") as f:
            return TB_MARK in f.read(64)
    except OSError:
        return False


def read_event_file(path: str, sink: Sink, acc: Accounting) -> None:
    """Scalars of one event file (simple values, and tensor-encoded scalars as newer writers
    store them) under canonical names; step and wall time kept."""
    try:
        from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
        from tensorboard.util import tensor_util
    except ImportError:
        raise InputError(f"reading TensorBoard event files needs the tensorboard package: {TB_HINT}",
                         source=path) from None
    from datetime import datetime

    by_step: dict[tuple[int, int], dict] = {}
    try:
        events = list(EventFileLoader(path).Load())
    except Exception as exc:  # noqa: BLE001 - a corrupt record: say which file, never a traceback
        raise InputError(f"cannot read the event file: {exc}", source=path) from None
    for n, ev in enumerate(events, 1):
        acc.total += 1
        kind = ev.WhichOneof("what")
        if kind != "summary":
            acc.skip(kind or "empty event", n, str(kind))
            continue
        values = {}
        for v in ev.summary.value:
            which = v.WhichOneof("value")
            try:
                if which == "simple_value":
                    values[v.tag] = float(v.simple_value)
                elif which == "tensor":
                    arr = tensor_util.make_ndarray(v.tensor)
                    if arr.size == 1 and arr.dtype.kind in "fiu":
                        values[v.tag] = float(arr.reshape(-1)[0])
            except (ValueError, TypeError):
                continue
        if not values:
            tags = ",".join(v.tag for v in ev.summary.value)
            acc.skip("no scalar (histogram, image, text or graph)", n, tags)
            continue
        acc.parsed += 1
        rec = by_step.setdefault((int(ev.step), n), {"_time": ev.wall_time, "_line": n})
        rec.update(values)
    # one record per step: scalars logged at the same step by separate events are merged
    merged: dict[int, dict] = {}
    for (step, _), rec in sorted(by_step.items(), key=lambda kv: kv[1]["_line"]):
        merged.setdefault(step, {"_line": rec["_line"], "_time": rec["_time"]}).update(
            {k: v for k, v in rec.items() if not k.startswith("_")})
    for step, rec in merged.items():
        line, t = rec.pop("_line"), rec.pop("_time")
        pairs = [(k, repr(v)) for k, v in rec.items()]
        found, metrics = sink.metrics_from_pairs(pairs)
        sink.emit(line, step, metrics, time=datetime.fromtimestamp(t))


def is_mlflow_run(path: Path) -> bool:
    return path.is_dir() and (path / "metrics").is_dir() and (path / "meta.yaml").exists()


def read_mlflow_run(path: Path, sink: Sink, acc: Accounting) -> None:
    """mlruns/<experiment>/<run>/metrics/<name>: 'timestamp value step' per line."""
    from datetime import datetime

    rows: dict[int, dict] = {}
    metric_dir = path / "metrics"
    files = sorted(p for p in metric_dir.rglob("*") if p.is_file())
    if not files:
        raise FormatError("no metric files in this MLflow run", source=str(path))
    for f in files:
        name = f.relative_to(metric_dir).as_posix()
        for n, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
            acc.total += 1
            parts = line.split()
            if not parts:
                acc.blank += 1
                continue
            try:
                ts, value = int(parts[0]), float(parts[1])
                step = int(parts[2]) if len(parts) > 2 else 0
            except (ValueError, IndexError):
                acc.skip("not 'timestamp value step'", n, f"{name}: {line}")
                continue
            acc.parsed += 1
            rec = rows.setdefault(step, {"_time": ts, "_line": acc.total})
            rec[name] = value
    for step in sorted(rows):
        rec = rows[step]
        t, line = rec.pop("_time"), rec.pop("_line")
        found, metrics = sink.metrics_from_pairs([(k, repr(v)) for k, v in rec.items()])
        sink.emit(line, step, metrics, time=datetime.fromtimestamp(t / 1000))


def wandb_offline(path: Path) -> str | None:
    """A W&B offline run folder: its history is in a binary .wandb file losslens cannot read."""
    if not path.is_dir():
        return None
    if any(path.glob("run-*.wandb")) or any(path.glob("*.wandb")):
        hist = list(path.glob("files/wandb-history.jsonl"))
        if hist:
            return str(hist[0])
        return ("a W&B offline run: its history is in the binary run-*.wandb file, which only the "
                "wandb client reads; run `wandb sync` and export the history (run.history() to "
                "JSON/CSV, or the chart's CSV export), then point losslens at that file")
    return None
