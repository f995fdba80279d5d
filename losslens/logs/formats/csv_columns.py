"""Vectorised reading of CSV metric tables: the header through the per-line parser (its delimiter,
names and step column), then each chunk's rows through polars' CSV reader as text columns and
the shared column rules (``logs.columnar``). A row polars could split differently from Python's
``csv`` module (a quote inside a field, a quoted field running over the line's end), a row with
the wrong number of fields, and a step that is no number go to the per-line parser, which gives
their skip reasons.
"""

from __future__ import annotations

import io
import re

import numpy as np
import polars as pl

from losslens.logs.columnar import (
    account_chunk,
    add_rows,
    any_of,
    line_numbers,
    lines_of,
    metric_columns,
)
from losslens.logs.formats.csvlog import _CsvParser
from losslens.logs.sink import MAX_KEYS, Accounting, Sink
from losslens.logs.source import Source


def _simple_row(sep: str, width: int) -> str:
    """A row of ``width`` fields each bare (no quote) or wholly quoted (no quote inside): split
    the same way by polars and by the csv module."""
    s = r"\t" if sep == "\t" else re.escape(sep)
    field = rf'(?:"[^"]*"|[^"{s}]*)'
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


def parse_chunk(chunk: bytes, first_lineno: int, parser: _CsvParser, sink: Sink,
                acc: Accounting) -> None:
    """Parse one chunk (whole lines) into ``sink`` and ``acc``; the first line that is not blank
    is the header."""
    text = lines_of(chunk)
    n = text.len()
    lineno = line_numbers(first_lineno, n)
    blank = text.is_null() | (text.str.strip_chars().str.len_bytes() == 0)
    pending = np.ones(n, dtype=bool)
    n_idle = len(sink.idle_lines)
    if parser.header is None:  # the header: the first line that is not blank
        first = int(blank.not_().arg_true()[0]) if not blank.all() else n
        if first < n:
            reason = parser.feed(int(lineno[first]), text[first].rstrip("\r"))
            assert reason is None  # a header line is always understood
            pending[first] = False
        start = first + 1
    else:
        start = 0
    header = parser.header
    if header is not None and len(header) <= MAX_KEYS and start < n:
        body = text.slice(start)
        simple = (body.str.contains(_simple_row(parser.delimiter, len(header)))
                  & ~body.str.contains("\x00", literal=True)).fill_null(False)
        df = _rows(parser, body.filter(simple)) if simple.any() else None
        if df is not None:
            at = start + simple.arg_true().to_numpy()
            bad = _read_rows(parser, df, lineno.gather(at), sink)
            pending[at] = bad.to_numpy()
    account_chunk(chunk, text, lineno, blank, pl.Series(pending), n_idle, sink, acc,
                  parser)


def read(src: Source, parser: _CsvParser, sink: Sink, acc: Accounting) -> None:
    """A CSV metrics table, chunk by chunk."""
    for chunk in src.chunks():
        parse_chunk(chunk, acc.total + 1, parser, sink, acc)
