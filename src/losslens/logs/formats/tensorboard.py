"""TensorBoard event files (needs the tensorboard extra)."""

from __future__ import annotations

import os

from losslens.errors import InputError
from losslens.logs.base import Format, local_time
from losslens.logs.sink import Accounting, Sink


class TensorBoard(Format):
    """--format tensorboard: an event file's scalars (needs the tensorboard extra)."""
    name = "tensorboard"
    title = ("TensorBoard event files (events.out.tfevents.*): scalars, tensor-encoded too; needs "
             "the tensorboard extra")
    example = "events.out.tfevents.1701361200.host.1234.0  (binary: add_scalar('train/loss', 2.49, 10))"
    whole_file = True

    def sniff(self, lines: list[str]) -> int:
        return 0  # binary: recognised by its bytes in read_log, never by text sniffing


TB_MARK = b"brain.Event:"


TB_HINT = "pip install 'losslens[tensorboard]' (or: pip install tensorboard)"


def is_event_file(path: str) -> bool:
    """A TensorBoard event file, by its name or its first bytes."""
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
        sink.emit(line, step, metrics, time=local_time(t))
