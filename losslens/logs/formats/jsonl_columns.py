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

import numpy as np
import polars as pl

from losslens.logs.columnar import (
    add_rows,
    any_of,
    metric_columns,
)
from losslens.logs.mappings import SUMMARY_KEYS
from losslens.logs.sink import MAX_KEYS, Sink

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


def jsonl_rows(text: pl.Series, lineno: pl.Series, sink: Sink) -> pl.Series:
    """The object lines of a chunk read column-wise into ``sink``; the rows read."""
    n = text.len()
    body = text.str.strip_chars()
    read = np.zeros(n, dtype=bool)
    obj = (body.str.starts_with("{") & body.str.ends_with("}") & ~body.str.contains(NONFINITE)
           & ~body.str.contains(SUMMARY) & ~body.str.contains("\x00", literal=True)).fill_null(False)
    df = _objects(body.filter(obj)) if obj.any() else None
    if df is None:
        return pl.Series(read)
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
    if len(df.columns) > MAX_KEYS or len(kept) > MAX_KEYS:
        return pl.Series(read)
    step, cols, more = metric_columns(sink, kept_keys, kept, ordered=False, exact=True)
    bad = any_of(unread + more, df.height)
    add_rows(sink, {"step": step, "line": lineno.filter(obj)}, cols, bad)
    read[obj.arg_true().to_numpy()] = (~bad).to_numpy()
    return pl.Series(read)
