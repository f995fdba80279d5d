"""Vectorised reading of JSON Lines: each chunk's object lines through polars' NDJSON reader,
nested objects flattened to 'a/b' columns, then the same column rules as the key=value reader
(``logs.columnar``). Whatever polars would read differently from ``json.loads`` + ``emit_mapping``
goes to the per-line parser: lines that are not one object, NaN/Infinity literals and bare
'nan'/'inf' values (Python's json reads the first, the parser reads both, polars neither), run
summaries, a key's value that is text but no number, lists of anything but numbers, two keys with
one canonical name on one line; a chunk polars cannot read at all goes line by line, and so does
an object naming a key twice (json.loads keeps the last value, polars the first: two lines glued
together).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from losslens.logs.columnar import (
    ENGINE,
    add_rows,
    any_of,
    metric_columns,
)
from losslens.logs.mappings import SUMMARY_KEYS
from losslens.logs.names import is_eval
from losslens.logs.sink import MAX_KEYS, Sink

# NaN/Infinity literals, and non-finite values written bare ('nan', '-inf': mappings.BARE_NONFINITE)
NONFINITE = r"[:\[,]\s*[-+]?(?i:nan|inf(?:inity)?)\s*[,}\]]"
KEY = r'"(?:[^"\\]|\\.)*"\s*:'
SUMMARY = "|".join(f'"{k}"' for k in SUMMARY_KEYS)
SCHEMA_ROWS = 1000  # the rows whose types are inferred, where every row's keys are known


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


def _present(df: pl.DataFrame) -> pl.Series:
    """Per row, how many keys the frame holds a value for (a nested object counts as one key,
    and its own keys too)."""
    counts = [pl.col(c).is_not_null().cast(pl.Int64) for c in df.columns]
    total = df.select(pl.sum_horizontal(counts) if counts else pl.lit(0, pl.Int64)).to_series()
    for s in df.iter_columns():
        if isinstance(s.dtype, pl.Struct):
            total = total + _present(s.struct.unnest())
    return total


def _objects(body: pl.Series, keys: pl.Series) -> tuple[pl.DataFrame, pl.Series] | None:
    """The object lines as one frame and the values each row holds (``_present``), or None where
    polars cannot read them (or reads a different number of rows). Every row's types are
    inferred (a key first seen late, an int column that turns float), unless ``keys`` (how many
    '"name":' each line holds) shows that the schema of the first SCHEMA_ROWS rows read every
    key of every row: polars drops a key the schema lacks without a word, and raises where a
    value does not fit it; a text column may hold what other rows write as numbers or lists, and
    is inferred from them all."""
    data = body.str.join("\n").item().encode()
    try:
        if len(body) > SCHEMA_ROWS:
            try:
                df = pl.read_ndjson(data, infer_schema_length=SCHEMA_ROWS)
            except (pl.exceptions.PolarsError, ValueError, OverflowError):
                df = None
            if df is not None and df.height == len(body) and pl.String not in df.schema.values():
                present = _present(df)
                if present.equals(keys, check_names=False):
                    return df, present
        df = pl.read_ndjson(data, infer_schema_length=None)
    except (pl.exceptions.PolarsError, ValueError, OverflowError):
        return None
    return (df, _present(df)) if df.height == len(body) else None


def read_objects(body: pl.Series, lineno: pl.Series, sink: Sink, names: pl.Series, evals: bool = True
                 ) -> tuple[np.ndarray, pl.Series]:
    """JSON object lines (``body``) read column-wise into ``sink`` as ``emit_mapping`` reads each;
    the rows read, and the steps of the train records made. ``names``: how many '"name":' each
    line holds, nested ones too; a row holding fewer values (a key named twice: polars keeps the
    first value, Python the last; a null) is left to the per-line parser. Without ``evals``, rows
    holding an eval metric are left to it too."""
    read = np.zeros(len(body), dtype=bool)
    nothing = pl.Series("step", [], dtype=pl.Int64)
    names = names.cast(pl.Int64)
    read_in = _objects(body, names) if len(body) else None
    if read_in is None:
        return read, nothing
    df, present = read_in
    unread: list[pl.Series] = [present != names]
    keys, raws = _leaves(df)
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
        return read, nothing
    step, cols, more = metric_columns(sink, kept_keys, kept, ordered=False, exact=True)
    if not evals:
        more += [v.is_not_null() for k, v in cols.items() if is_eval(k)]
    bad = any_of(unread + more, df.height)
    steps = add_rows(sink, {"step": step, "line": lineno}, cols, bad)
    read[:] = (~bad).to_numpy()
    return read, steps


def jsonl_rows(text: pl.Series, lineno: pl.Series, sink: Sink, parser: object = None) -> pl.Series:
    """The object lines of a chunk read column-wise into ``sink``; the rows read. Which lines are
    objects, and how many '"name":'s each holds, in one query (polars' cost is per query). A key
    written twice (two lines glued together: json.loads keeps the last value, polars the first)
    leaves its row fewer values than names: that row goes line by line (``read_objects``)."""
    read = np.zeros(text.len(), dtype=bool)
    body = pl.col("body")
    parts = pl.LazyFrame({"body": text}).with_columns(body.str.strip_chars()).select(
        body, (body.str.starts_with("{") & body.str.ends_with("}") & ~body.str.contains(NONFINITE)
               & ~body.str.contains(SUMMARY) & ~body.str.contains("\x00", literal=True)).fill_null(False)
        .alias("obj"), body.str.count_matches(KEY).alias("keys")).collect(engine=ENGINE)
    obj = parts["obj"]
    if obj.any():
        read[obj.arg_true().to_numpy()] = read_objects(parts["body"].filter(obj), lineno.filter(obj), sink,
                                                       parts["keys"].filter(obj))[0]
    return pl.Series(read)


# a dict Python printed that JSON reads the same once its quotes are swapped: string keys, values
# that are numbers, strings with no quote or backslash, or lists of numbers
_NUM = r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?"
_STR = r"'[^'\"\\{}]*'"  # (no brace: PYDICT finds no dict where a key holds one)
_VALUE = rf"(?:{_NUM}|{_STR}|\[(?:{_NUM}(?:, {_NUM})*)?\])"
HF_FLAT = rf"^\{{{_STR}: {_VALUE}(?:, {_STR}: {_VALUE})*\}}$"
HF_SUMMARY = "|".join(f"'{k}'" for k in SUMMARY_KEYS)
BAR = r"\d+/\d+ \[[^\]]*?(?:it/s|s/it)\]"  # huggingface.TQDM


def hf_rows(text: pl.Series, lineno: pl.Series, sink: Sink, parser: Any) -> pl.Series:
    """The Trainer's printed dicts read column-wise while no progress bar has been seen (a bar's
    count is the step of the dicts after it: from the first bar on, the per-line parser reads);
    the parser learns whether the dicts carried their own steps (see ``_HFParser.finish``)."""
    read = np.zeros(text.len(), dtype=bool)
    if parser.bars:
        return pl.Series(read)
    line = pl.col("text")
    body = line.str.replace_all("'", '"', literal=True)
    parts = pl.LazyFrame({"text": text}).select(  # (one query: polars' cost is per query)
        line.str.contains(BAR).any().alias("bar"),
        (line.str.contains(HF_FLAT) & ~line.str.contains(HF_SUMMARY)).fill_null(False).alias("flat"),
        body.alias("body"), body.str.count_matches('": ', literal=True).alias("keys"),  # (flat: leaves)
    ).collect(engine=ENGINE)
    if parts["bar"].any():
        return pl.Series(read)
    flat = parts["flat"]
    if flat.any():
        done, steps = read_objects(parts["body"].filter(flat), lineno.filter(flat), sink,
                                   parts["keys"].filter(flat), evals=False)
        read[flat.arg_true().to_numpy()] = done
        parser.own_steps |= bool(steps.is_not_null().any())
        parser.stepless |= bool(steps.is_null().any())
    return pl.Series(read)
