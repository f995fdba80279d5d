"""Vectorised reading of CSV metric tables: the header through the per-line parser (its delimiter,
names and step column), then each chunk's rows through polars' CSV reader as text columns and
the shared column rules (``logs.columnar``). A row polars could split differently from Python's
``csv`` module (a quote inside a field, a quoted field running over the line's end, a '\r' inside
it, a row longer than the module's field limit), a row with
the wrong number of fields, and a step that is no number go to the per-line parser, which gives
their skip reasons.
"""

from __future__ import annotations

import csv
import io
import re

import numpy as np
import polars as pl

from losslens.logs.columnar import add_rows, any_of, metric_columns
from losslens.logs.formats.csvlog import _CsvParser
from losslens.logs.sink import MAX_KEYS, Sink


def _simple_row(sep: str, width: int) -> str:
    """A row of ``width`` fields each bare (no quote) or wholly quoted (no quote inside): split
    the same way by polars and by the csv module."""
    s = r"\t" if sep == "\t" else re.escape(sep)
    field = rf'(?:"[^"\r]*"|[^"{s}\r]*)'  # (a '\r' inside a row: the csv module's error)
    return rf"^{field}(?:{s}{field}){{{width - 1}}}\r?$"


def _rows(parser: _CsvParser, text: pl.Series) -> pl.DataFrame | None:
    assert parser.header is not None
    width = len(parser.header)
    data = text.str.join("\n").item().encode()
    try:
        df = pl.read_csv(io.BytesIO(data), has_header=False, separator=parser.delimiter,
                         quote_char='"', infer_schema=False,
                         schema={f"c{i}": pl.String for i in range(width)}, raise_if_empty=False)
    except pl.exceptions.PolarsError:
        return None
    return df if df.height == len(text) else None


def _read_rows(parser: _CsvParser, df: pl.DataFrame, lineno: pl.Series, sink: Sink) -> pl.Series:
    """Add the rows of ``df`` to ``sink``; the rows left to the per-line parser."""
    assert parser.header is not None
    cols = [pl.when(pl.col(c).str.strip_chars().str.len_bytes() > 0).then(pl.col(c)).alias(c)
            for c in df.columns]  # a blank cell holds nothing
    df = df.select(cols)
    unread: list[pl.Series] = []
    step = None
    if parser.step_col is not None:
        cell = df[f"c{parser.step_col}"]
        as_float = cell.cast(pl.Float64, strict=False)
        # int(float(cell)): truncated; a cell that is no finite number skips the row
        step = pl.select(pl.when(as_float.is_finite()).then(as_float.cast(pl.Int64, strict=False))
                         ).to_series()
        unread.append(cell.is_not_null() & step.is_null())
    keys, raws = [], []
    for i, name in enumerate(parser.header):
        if name.endswith(("__MIN", "__MAX", "__step")):
            continue
        if i == parser.step_col and not parser.epoch_as_step:
            continue
        keys.append(name)
        raws.append(df[f"c{i}"])
    found, values, more = metric_columns(sink, keys, raws, exact=True)
    bad = any_of(unread + more, df.height)
    add_rows(sink, {"step": found if step is None else step.fill_null(found), "line": lineno},
             values, bad)
    return bad


def csv_rows(text: pl.Series, lineno: pl.Series, sink: Sink, parser: _CsvParser) -> pl.Series:
    """A chunk's rows read column-wise (the first line that is not blank: the header, fed to
    ``parser``); the rows read."""
    n = text.len()
    done = np.zeros(n, dtype=bool)
    start = 0
    if parser.header is None:
        blank = text.is_null() | (text.str.strip_chars().str.len_bytes() == 0)
        if blank.all():
            return pl.Series(done)
        first = int(blank.not_().arg_true()[0])
        if parser.feed(int(lineno[first]), text[first]) is not None:
            return pl.Series(done)  # no header (the parser gives the reason, and takes the next line)
        done[first] = True
        start = first + 1
    header = parser.header
    if header is None or len(header) > MAX_KEYS or start >= n:
        return pl.Series(done)
    body = text.slice(start)
    simple = (body.str.contains(_simple_row(parser.delimiter, len(header)))
              & ~body.str.contains("\x00", literal=True)
              & (body.str.len_bytes() <= csv.field_size_limit())).fill_null(False)  # (over it: an error)
    df = _rows(parser, body.filter(simple)) if simple.any() else None
    if df is not None:
        at = start + simple.arg_true().to_numpy()
        done[at] = ~_read_rows(parser, df, lineno.gather(at), sink).to_numpy()
    return pl.Series(done)

