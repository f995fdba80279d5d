"""Vectorised reading of JSON Lines: each chunk's object lines through polars' NDJSON reader,
nested objects flattened to 'a/b' columns, then the same column rules as the key=value reader
(``logs.columnar``). Whatever polars would read differently from ``json.loads`` + ``emit_mapping``
goes to the per-line parser: lines that are not one object, NaN/Infinity literals (Python's json
reads them, polars does not), run summaries, a key's value that is text but no number, lists of
anything but numbers, two keys with one canonical name on one line; a chunk polars cannot read at
all goes line by line. One difference is left: a key written twice in one object (polars keeps the
first value, json.loads the last); ``json.dumps`` never writes one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import polars as pl

from losslens.logs.base import LineParser, feed_ranked
from losslens.logs.columnar import (
    account_chunk,
    add_rows,
    any_of,
    line_numbers,
    lines_of,
    metric_columns,
    without_prefixes,
)
from losslens.logs.mappings import SUMMARY_KEYS
from losslens.logs.sink import MAX_KEYS, Accounting, Sink, feed_line
from losslens.logs.source import Source

NONFINITE = r"[:\[,]\s*-?(?:NaN|Infinity)\s*[,}\]]"
SUMMARY = "|".join(f'"{k}"' for k in SUMMARY_KEYS)


def _leaves(df: pl.DataFrame) -> tuple[list[str], list[pl.Series]]:
    """Nested struct columns as 'a/b' leaves, in order."""
    keys: list[str] = []
    cols: list[pl.Series] = []
    for s in df.iter_columns():
        if isinstance(s.dtype, pl.Struct):
            inner, inner_cols = _leaves(s.struct.unnest())
            keys += [f"{s.name}/{k}" for k in inner]
            cols += inner_cols
        else:
            keys.append(s.name)
            cols.append(s)
    return keys, cols


def _objects(body: pl.Series) -> pl.DataFrame | None:
    """The object lines as one frame, or None where polars cannot read them (or reads a
    different number of rows)."""
    data = body.str.join("\n").item().encode()
    try:
        df = pl.read_ndjson(data, infer_schema_length=None)
    except (pl.exceptions.PolarsError, ValueError, OverflowError):
        return None
    return df if df.height == len(body) else None


def parse_chunk(chunk: bytes, first_lineno: int, sink: Sink, acc: Accounting, parser: object,
                original: pl.Series | None = None,
                feed: Callable[[Any, int, str], str | None] = feed_line) -> None:
    """Parse one chunk (whole lines) into ``sink`` and ``acc``. ``original``: the chunk's lines as
    the file has them, when ``chunk`` holds them without their prefixes (the lines left to the
    per-line parser go to ``feed`` as they are in the file)."""
    text = lines_of(chunk)
    n = text.len()
    body = text.str.strip_chars()
    as_filed = body if original is None else original.str.strip_chars()
    blank = as_filed.is_null() | (as_filed.str.len_bytes() == 0)
    lineno = line_numbers(first_lineno, n)
    pending = pl.Series(np.ones(n, dtype=bool))
    n_idle = len(sink.idle_lines)
    obj = (body.str.starts_with("{") & body.str.ends_with("}") & ~body.str.contains(NONFINITE)
           & ~body.str.contains(SUMMARY) & ~body.str.contains("\x00", literal=True)).fill_null(False)
    df = _objects(body.filter(obj)) if obj.any() else None
    if df is not None:
        keys, raws = _leaves(df)
        unread: list[pl.Series] = []
        kept_keys, kept = [], []
        for key, raw in zip(keys, raws, strict=True):
            dtype = raw.dtype
            if dtype == pl.Boolean or dtype == pl.Null:
                continue  # not a metric (emit_mapping drops true/false/null)
            if isinstance(dtype, pl.List) and not dtype.inner.is_numeric():
                unread.append(raw.is_not_null())  # '[]' or a list of text: the per-line rules
                continue
            if not (dtype.is_numeric() or dtype == pl.String or isinstance(dtype, pl.List)):
                unread.append(raw.is_not_null())
                continue
            kept_keys.append(key)
            kept.append(raw)
        if len(df.columns) <= MAX_KEYS and len(kept) <= MAX_KEYS:
            step, cols, more = metric_columns(sink, kept_keys, kept, ordered=False, exact=True)
            bad = any_of(unread + more, df.height)
            add_rows(sink, {"step": step, "line": lineno.filter(obj)}, cols, bad)
            read = np.zeros(n, dtype=bool)
            read[obj.arg_true().to_numpy()] = (~bad).to_numpy()
            pending = ~pl.Series(read)
    account_chunk(chunk, text if original is None else original, lineno, blank, pending, n_idle,
                  sink, acc, parser, feed)


def read(src: Source, parser: LineParser, sink: Sink, acc: Accounting, strip: bool = False) -> None:
    """A JSON Lines log, chunk by chunk; a capture's prefixes (``strip``) and torchrun rank
    prefixes cut off first, their time and rank kept."""

    def ranked(p: LineParser, lineno: int, line: str) -> str | None:
        return feed_ranked(p, sink, lineno, line, strip)

    for chunk in src.chunks():
        data, original = without_prefixes(chunk, acc.total + 1, strip, sink)
        parse_chunk(data, acc.total + 1, sink, acc, parser, original, ranked)
    sink.tags = None
