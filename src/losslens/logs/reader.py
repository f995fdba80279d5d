"""read_log: any supported log → one canonical frame (train and eval apart) + what was found."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import polars as pl

from losslens.errors import InputError, NotALog
from losslens.logs.base import small
from losslens.logs.frame import LogData, Segment, assemble, from_arrays
from losslens.logs.registry import BY_NAME, check_format
from losslens.logs.sink import Accounting, Sink
from losslens.logs.sniff import SNIFF_LINES, Samples, choose, sniff, strips
from losslens.logs.source import MAX_LINE, Source, decode_lines, open_source
from losslens.logs.stream import read_file

__all__ = ["LogData", "Segment", "from_arrays", "read_log", "sniff", "strips"]

SNIFF_DEEP_BYTES = 8 << 20  # how far a log whose first lines say nothing is looked into, once

def whole_document(path: str) -> bool:
    """A log that is read as one document, not line by line (so watch re-reads it whole when it
    changes): an event file, an MLflow run folder, a JSON document (trainer_state.json, a
    history dump)."""
    from losslens.logs.formats import mlflow, tensorboard

    if mlflow.is_mlflow_run(Path(path)):
        return True
    if not os.path.isfile(path):
        return False
    if tensorboard.is_event_file(path):
        return True
    with open(path, "rb") as f:
        head = f.read(1 << 16)
    return b'"log_history"' in head or head.lstrip().startswith(b"[{")


def read_log(path: str | os.PathLike[str], format: str | None = None) -> LogData:
    """Read a training log into canonical frames.

    ``format`` is a name from ``losslens formats`` or None/'auto' to detect it from content.
    Raises InputError / FormatError / UsageError (all LossLensError) on bad input.
    """
    check_format(format)
    run = _read_run(os.fspath(path), format)
    if run is not None:
        return run
    src = open_source(path)
    try:
        return _read(src, format)
    finally:
        src.close()


def _read_run(path: str, format: str | None) -> LogData | None:
    """Folders (MLflow runs, W&B offline runs) and TensorBoard event files; None for the rest."""
    from pathlib import Path

    from losslens.logs.formats import mlflow, tensorboard, wandb

    p = Path(path)
    sink, acc = Sink(), Accounting()
    if path != "-" and p.is_dir():
        if mlflow.is_mlflow_run(p):
            mlflow.read_mlflow_run(p, sink, acc)
            return assemble(path, "mlflow", sink, acc)
        offline = wandb.wandb_offline(p)
        if offline is not None and not offline.endswith(".jsonl"):
            raise InputError(offline, source=path)
        if offline is not None:
            return read_log(offline, format)
        raise InputError("is a directory: `losslens analyze DIR` or `check DIR` read the logs inside",
                         source=path)
    if path != "-" and p.is_file() and (format == "tensorboard" or (format in (None, "auto")
                                                                     and tensorboard.is_event_file(path))):
        tensorboard.read_event_file(path, sink, acc)
        return assemble(path, "tensorboard", sink, acc)
    return None


def _read(src: Source, format: str | None) -> LogData:
    if not src.head.strip(b"\n") and src.first_nul is not None:  # a hole: look past it once
        src.extend_head(SNIFF_DEEP_BYTES)
    if not src.head:
        if src.stopped:
            raise InputError(f"{src.stopped}: nothing decompresses", source=src.name)
        raise NotALog("empty file: no lines to read", source=src.name)
    if src.is_binary:
        at = src.first_nul
        hint = " (UTF-16 text without a byte-order mark? convert it to UTF-8)" if src.looks_utf16 else ""
        raise InputError(f"binary data (NUL byte at offset {at}), not a text log{hint}",
                         source=src.name)
    head_lines = decode_lines(src.head)
    samples: Samples | None
    if format in (None, "auto"):
        # the head's last line may be cut short, unless the head ends at a newline
        cut = len(head_lines) > 1 and not src.head.endswith(b"\n")
        whole = head_lines[:-1] if cut else head_lines
        sample = whole  # the lines the format is known from
        fmt, samples, limit = choose(whole)
        if fmt is None and src.extend_head(SNIFF_DEEP_BYTES):
            # some logs open with thousands of lines of start-up noise: look further once
            deep = decode_lines(src.head)
            sample, limit = deep[:-1] if len(deep) > 1 else deep, len(deep)
            fmt, samples, limit = choose(sample, limit)
        if fmt is None and src.fd is not None and max(map(len, src.head.split(b"\n"))) >= MAX_LINE:
            # a line longer than the deep look (a dumped tensor, a binary blob): the lines after it
            sample = _lines_past_long_ones(src.fd)
            limit = len(sample)
            fmt, samples, limit = choose(sample, limit)
        if fmt is None and src.fd is not None and (src.size or 0) > len(src.head):
            # its first 8 MiB say nothing (hours of a preprocessing step's progress bar): its
            # records are likelier at its end
            sample = _last_lines(src.fd)
            fmt, samples, limit = choose(sample, len(sample))
        if fmt is None:
            raise NotALog("no known log format recognised (see `losslens formats`, or pass "
                          "--format)", source=src.name)
    else:
        fmt = BY_NAME[format]
        sample, limit = head_lines, SNIFF_LINES
        samples = None if fmt.whole_file else Samples.of(sample, limit)
        if samples is not None and not samples.score(fmt, stripped=True):
            limit = len(sample)  # its lines further down, behind a preamble
            samples = Samples.of(sample, limit)
    sink, acc = Sink(source_name=os.path.basename(src.name)), Accounting()
    strip = not fmt.whole_file and strips(fmt, sample, limit, samples)
    if fmt.whole_file:
        fmt.read(src, sink, acc, strip, head_lines[:SNIFF_LINES])
    else:
        first = next((x.rstrip("\r") for x in head_lines[:SNIFF_LINES] if x.strip()), None)
        read_file(src, fmt, sink, acc, strip, first, columnar=not small(src))
    if src.stopped:  # a gzip log cut short
        sink.lost.append(f"{src.stopped}: read up to there")
    if src.hole_bytes:
        sink.lost.append(f"{src.hole_bytes:,} NUL bytes at line starts passed over (a hole in the file: a "
                          "crash before the disk caught up, or copytruncate rotating a log whose writer "
                          "does not append)")
    return with_capture_times(assemble(src.name, fmt.name, sink, acc), samples, strip)


def _lines_past_long_ones(fd: int, want: int = 1 << 20) -> list[str]:
    """Up to ``want`` bytes of the lines that follow a file's lines of MAX_LINE bytes or more,
    read with ``pread`` (the source's own reading is not moved), a block at a time: memory stays
    bounded whatever the long lines' length."""
    at, block, kept = 0, 1 << 20, bytearray()
    size = os.fstat(fd).st_size
    skipping = True
    while at < size and len(kept) < want:
        data = os.pread(fd, block, at)
        if not data:
            break
        at += len(data)
        if skipping:
            nl = data.find(b"\n")
            if nl < 0:
                continue  # still inside the long first line
            skipping = False
            data = data[nl + 1:]
        kept += data
    lines = decode_lines(bytes(kept))
    return [x for x in lines[:-1] if len(x) < MAX_LINE] if len(lines) > 1 else lines


def _last_lines(fd: int, want: int = 1 << 20) -> list[str]:
    """The whole lines of a file's last ``want`` bytes (read with ``pread``: the source's own
    reading is not moved)."""
    size = os.fstat(fd).st_size
    at = max(0, size - want)
    data = os.pread(fd, size - at, at)
    lines = decode_lines(data)
    return lines[1:] if at and len(lines) > 1 else lines


def with_capture_times(data: LogData, samples: Samples | None, strip: bool) -> LogData:
    """A format that reads its lines whole, prefixes and all (Hugging Face's dicts behind Python
    logging's '2024-05-01 10:00:00,123 - INFO - __main__ - '), keeps none of their time: when most
    sample lines carry one and no record has a time, each record gets the capture's time of its
    line, read in a second pass over the file, column-wise (not from stdin: it is gone)."""
    if strip or samples is None or data.source == "-" or "time" in data.train.columns or \
            data.train.is_empty() or 2 * samples.timed <= len(samples.raw):
        return data
    from losslens.logs.columnar import line_numbers, lines_of, prefix_times

    wanted = np.unique(np.concatenate([f["line"].to_numpy() for f in (data.train, data.eval)
                                       if "line" in f.columns]))
    src = open_source(data.source)
    parts = []
    try:
        first = 1
        for chunk in src.chunks():  # only the records' lines are looked at (not a stdout's bars)
            text = lines_of(chunk)
            lines = line_numbers(first, len(text))
            mine = pl.Series(np.isin(lines.to_numpy(), wanted, assume_unique=True))
            parts.append(pl.DataFrame({"line": lines.filter(mine),
                                       "time": prefix_times(text.filter(mine))}).drop_nulls("time"))
            first += len(text)
    finally:
        src.close()
    when = pl.concat(parts)
    if when.is_empty():
        return data

    def timed(frame: pl.DataFrame) -> pl.DataFrame:
        if frame.is_empty() or "time" in frame.columns:
            return frame
        at = frame.columns.index("line") + 1
        return frame.join(when, on="line", how="left").select(
            [*frame.columns[:at], "time", *frame.columns[at:]])

    return replace(data, train=timed(data.train), eval=timed(data.eval))
