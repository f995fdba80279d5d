"""JSON records: JSON Lines (one object per line) and a JSON array of records (W&B
run.history() / pandas dumps), decoded one record at a time.

A large JSON Lines file is read column-wise (``jsonl_rows``): each chunk's object lines through
polars' NDJSON reader, nested objects flattened to 'a/b' columns, then the same column rules as
the key=value reader (``logs.columnar``). Whatever polars would read differently from
``json.loads`` + ``emit_mapping`` goes to the per-line parser: lines that are not one object,
NaN/Infinity literals and bare 'nan'/'inf' values (Python's json reads the first, the parser
reads both, polars neither), run summaries, a key's value that is text but no number, lists of
anything but numbers, two keys with one canonical name on one line; a chunk polars cannot read
at all goes line by line, and so does an object naming a key twice (json.loads keeps the last
value, polars the first: two lines glued together).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import polars as pl

from losslens.errors import FormatError
from losslens.logs.base import COMMON_NOISE, Format, LineParser, RegexLineParser
from losslens.logs.columnar import (
    ENGINE,
    add_rows,
    any_of,
    metric_columns,
)
from losslens.logs.mappings import SUMMARY_KEYS, emit_mapping, json_errors, load_json, loads_object
from losslens.logs.names import is_eval
from losslens.logs.sink import MAX_KEYS, Accounting, Sink


class _JsonlParser(RegexLineParser):
    long_lines = True
    noise = COMMON_NOISE

    def feed(self, lineno: int, line: str) -> str | None:
        text = line.strip()
        if not text.startswith("{"):
            return self.classify_noise(text)
        try:
            obj = loads_object(text)  # (a bare 'nan' or 'inf' value read as JSON's NaN, Infinity)
        except (ValueError, RecursionError):  # also nested too deeply, or a 5,000-digit number
            return "invalid JSON"
        if not isinstance(obj, dict):
            return "invalid JSON"
        try:
            return emit_mapping(self.sink, lineno, obj)
        except RecursionError:
            return "JSON nested too deeply"



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


def read_objects(body: pl.Series, lineno: pl.Series, sink: Sink, names: pl.Series, evals: bool = True,
                 given: pl.Series | None = None) -> tuple[np.ndarray, pl.Series, np.ndarray]:
    """JSON object lines (``body``) read column-wise into ``sink`` as ``emit_mapping`` reads each;
    the rows read, the steps of the train records made, and the rows whose object names a step
    of its own other than ``given`` (each row's step where its object names none, as
    ``emit_mapping``'s ``step``). ``names``: how many '"name":' each line holds, nested ones
    too; a row holding fewer values (a key named twice: polars keeps the first value, Python
    the last; a null) is left to the per-line parser. Without ``evals``, rows holding an eval
    metric are left to it too."""
    read = np.zeros(len(body), dtype=bool)
    nothing = pl.Series("step", [], dtype=pl.Int64)
    names = names.cast(pl.Int64)
    read_in = _objects(body, names) if len(body) else None
    if read_in is None:
        return read, nothing, read.copy()
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
        return read, nothing, read.copy()
    step, cols, more = metric_columns(sink, kept_keys, kept, ordered=False, exact=True)
    if not evals:
        more += [v.is_not_null() for k, v in cols.items() if is_eval(k)]
    bad = any_of(unread + more, df.height)
    own = read.copy()
    if given is not None:
        own = (step.is_not_null() & (given.is_null() | (step != given))).fill_null(False).to_numpy()
        step = step.fill_null(given)
    steps = add_rows(sink, {"step": step, "line": lineno}, cols, bad)
    read[:] = (~bad).to_numpy()
    return read, steps, own & read


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


class JsonLines(Format):
    """--format jsonl: one JSON object per line."""
    name = "jsonl"
    rows = staticmethod(jsonl_rows)  # column-wise for large files
    line_records = True
    long_lines = _JsonlParser.long_lines
    title = ("JSON Lines metrics, any key naming (LLaMA-Factory trainer_log.jsonl, ms-swift "
             "logging.jsonl, train/loss, NaN/Infinity literals, bare nan/inf)")
    example = '{"current_steps": 10, "total_steps": 8660, "loss": 2.4977, "learning_rate": 5.77e-07}'

    def sniff(self, lines: list[str]) -> int:
        n = 0
        for x in lines:
            t = x.strip()
            if t.startswith("{") and t.endswith("}"):
                try:
                    n += isinstance(loads_object(t), dict)
                except (ValueError, RecursionError):
                    pass
        return n

    def parser(self, sink: Sink) -> LineParser:
        return _JsonlParser(sink)



# --- JSON array of records (W&B run.history() / pandas dumps) ---------------------------------
class JsonRecords(Format):
    """--format json-records: one JSON array of records, decoded a record at a time."""
    name = "json-records"
    title = "a JSON array of metric records (W&B run.history() or pandas to_json dumps: _step, train/loss)"
    example = '[{"_step": 0, "train/loss": 3.12, "lr": 0.0001}, {"_step": 1, "train/loss": 3.05}]'
    whole_file = True

    def sniff(self, lines: list[str]) -> int:
        head = "".join(lines[:5]).lstrip()
        return len(lines) if head.startswith("[") and head[1:].lstrip().startswith("{") else 0

    def parse_text(self, text: str, lines: list[str], sink: Sink, acc: Accounting,
                   source: str) -> None:
        read_json_records(text, lines, sink, acc, source)


def read_json_records(text: str, lines: list[str], sink: Sink, acc: Accounting, source: str) -> None:
    """A JSON array of records (pandas/W&B `run.history()` dumps: `_step`, `train/loss`, …),
    decoded one record at a time (the records of a 250 MB array as Python objects at once took
    15 times the file's size); pandas' orient="split" document too."""
    items: Iterable[Any]
    if text.lstrip().startswith("["):
        items = array_items(text, source)
    else:
        doc = load_json(text, source)
        if not (isinstance(doc, dict) and isinstance(doc.get("data"), list)
                and isinstance(doc.get("columns"), list)):
            raise FormatError("expected a JSON array of records", source=source)
        items = (dict(zip(doc["columns"], row, strict=False)) for row in doc["data"])
    for i, rec in enumerate(items, 1):
        if isinstance(rec, dict):
            emit_mapping(sink, i, {k: v for k, v in rec.items() if v is not None}, step=None)
        if i % 1000 == 0:
            sink.compact()
    account_document(lines, acc)


def account_document(lines: list[str], acc: Accounting) -> None:
    """A whole document's lines: each is part of it (parsed) or blank."""
    blank = sum(1 for x in lines if not x.strip())
    acc.blank += blank
    acc.parsed += len(lines) - blank


_SPACE = re.compile(r"\s*")


def array_items(text: str, source: str) -> Iterator[Any]:
    """The elements of the JSON array ``text``, decoded one by one (json.loads' rules: NaN and
    Infinity read); a FormatError naming the line where it stops being JSON."""
    decoder = json.JSONDecoder()
    i = _SPACE.match(text, text.index("[") + 1).end()  # type: ignore[union-attr]
    if text.startswith("]", i):
        return _array_end(text, i, source)
    while True:
        with json_errors(source):
            item, i = decoder.raw_decode(text, i)
        yield item
        i = _SPACE.match(text, i).end()  # type: ignore[union-attr]
        if text.startswith(",", i):
            i = _SPACE.match(text, i + 1).end()  # type: ignore[union-attr]
            continue
        if text.startswith("]", i):
            return _array_end(text, i, source)
        raise FormatError("invalid JSON: expecting ',' or ']' between records", source=source,
                          line=text.count("\n", 0, i) + 1)


def _array_end(text: str, i: int, source: str) -> None:
    if text[i + 1:].strip():
        raise FormatError("invalid JSON: extra data after the array", source=source,
                          line=text.count("\n", 0, i + 1) + 1)
