"""TensorBoard event files (needs the tensorboard extra)."""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterator

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


HEADER = struct.Struct("<QI")  # a record: its length, the length's masked CRC-32C, the data, its CRC


def event_records(path: str, lost: list[str]) -> Iterator[bytes]:
    """The records of an event file (TFRecord framing), each checked against its CRCs. What
    cannot be read is said in ``lost`` and never passed over in silence: a damaged record (its
    data fails its CRC) is left out and the next one read; a damaged length is searched past
    for the next record whose length passes its CRC; a file cut short ends at its last whole
    record. (tensorboard's own loader stops at the first of these, without a word.)"""
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise InputError(f"cannot read the event file: {exc.strerror or exc}", source=path) from None
    at, end, bad, skipped = 0, len(data), 0, 0
    while at < end:
        if end - at < HEADER.size:
            lost.append(f"cut short: {end - at} byte(s) at offset {at:,} are the start of a record the "
                        "file ends inside (a writer stopped mid-record, or a copy cut short)")
            return
        length, crc = HEADER.unpack_from(data, at)
        if masked_crc32c(data[at:at + 8]) != crc:
            found = _next_record(data, at + 1, masked_crc32c)
            lost.append(f"damaged at offset {at:,}: a record's length fails its CRC; "
                        + (f"{found - at:,} byte(s) passed over to the next record at offset {found:,}"
                           if found is not None else f"no whole record in the {end - at:,} byte(s) after it"))
            if found is None:
                return
            at = found
            continue
        start, stop = at + HEADER.size, at + HEADER.size + length
        if stop + 4 > end:
            lost.append(f"cut short: the record at offset {at:,} needs {length + 4:,} byte(s) of data "
                        f"and CRC, the file holds {max(0, end - start):,} (a writer stopped mid-record, "
                        "or a copy cut short)")
            return
        record = data[start:stop]
        if masked_crc32c(record) != struct.unpack_from("<I", data, stop)[0]:
            bad += 1
            if bad == 1:
                skipped = at
        else:
            yield record
        at = stop + 4
    if bad:
        lost.append(f"{bad} record(s) damaged (their data fails its CRC), the first at offset {skipped:,}: "
                    "left out, the records around them read")


def _next_record(data: bytes, at: int, crc: Callable[[bytes], int]) -> int | None:
    """The first offset from ``at`` where a record's length passes its CRC."""
    end = len(data) - HEADER.size
    while at <= end:
        length, check = HEADER.unpack_from(data, at)
        if crc(data[at:at + 8]) == check and at + HEADER.size + length + 4 <= len(data):
            return at
        at += 1
    return None


def read_event_file(path: str, sink: Sink, acc: Accounting) -> None:
    """Scalars of one event file (simple values, and tensor-encoded scalars as newer writers
    store them) under canonical names; step and wall time kept. Records lost to damage or a cut
    are in ``sink.lost`` (a read short: the gate does not pass it)."""
    try:
        from tensorboard.compat.proto import event_pb2
        from tensorboard.util import tensor_util
    except ImportError:
        raise InputError(f"reading TensorBoard event files needs the tensorboard package: {TB_HINT}",
                         source=path) from None

    by_step: dict[tuple[int, int], dict] = {}
    events = []
    undecodable = 0
    for record in event_records(path, sink.lost):
        try:
            events.append(event_pb2.Event.FromString(record))
        except Exception:  # noqa: BLE001 - a record whose CRC holds but whose bytes are no event
            undecodable += 1
    if undecodable:
        sink.lost.append(f"{undecodable} record(s) are no TensorBoard event (their bytes pass the CRC "
                         "but do not decode): left out")
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
