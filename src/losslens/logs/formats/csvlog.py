"""CSV metric logs: Lightning CSVLogger, Keras CSVLogger, W&B exports, step,loss tables.

A large file is read column-wise (``csv_rows``): the header through the per-line parser (its
delimiter, names and step column), then each chunk's rows through polars' CSV reader as text
columns and the shared column rules (``logs.columnar``). A row polars could split differently
from Python's ``csv`` module (a quote inside a field, a quoted field running over the line's
end, a carriage return inside it, a row longer than the module's field limit), a row with the
wrong number of fields, and a step that is no number go to the per-line parser, which gives
their skip reasons.
"""

from __future__ import annotations

import csv
import io
import re

import numpy as np
import polars as pl

from losslens.logs.base import Format, LineParser, RegexLineParser
from losslens.logs.columnar import add_rows, any_of, metric_columns
from losslens.logs.names import STEP_KEYS, parse_number
from losslens.logs.sink import MAX_KEYS, Sink

# --- CSV -------------------------------------------------------------------------------------
WANDB_PREFIX = re.compile(r"^.+? - ")


class _CsvParser(RegexLineParser):
    def __init__(self, sink: Sink, delimiter: str):
        super().__init__(sink)
        self.delimiter = delimiter
        self.header: list[str] | None = None
        self.step_col: int | None = None
        self.epoch_as_step = False

    def _set_header(self, cells: list[str]) -> None:
        names = [WANDB_PREFIX.sub("", c.strip()) for c in cells]
        seen: dict[str, int] = {}
        for i, name in enumerate(names):  # a name twice: the second column kept under its own name
            if name in seen and name:
                k = 2
                while f"{name}_{k}" in names:
                    k += 1
                names[i] = f"{name}_{k}"
                self.sink.notes.append(f"the header names {name!r} twice (columns {seen[name] + 1} and "
                                       f"{i + 1}): the second is read as {names[i]!r}")
            seen.setdefault(name, i)
        self.header = names
        lowered = [n.lower() for n in names]
        for key in STEP_KEYS:
            if key in lowered:
                self.step_col = lowered.index(key)
                break
        if self.step_col is None and "epoch" in lowered:
            self.step_col, self.epoch_as_step = lowered.index("epoch"), True

    def feed(self, lineno: int, line: str) -> str | None:
        try:
            cells = next(csv.reader([line.rstrip("\r")], delimiter=self.delimiter))
        except csv.Error as exc:  # a lone '\r' inside the row, a field over the csv module's limit
            return "a line break inside a CSV row" if "new-line" in str(exc) else "unreadable CSV row"
        if self.header is None:
            self._set_header(cells)
            return None
        if len(cells) != len(self.header):
            return "wrong number of CSV fields"
        pairs = []
        step = None
        for i, (name, cell) in enumerate(zip(self.header, cells, strict=True)):
            if not cell.strip() or name.endswith(("__MIN", "__MAX", "__step")):
                continue
            if i == self.step_col:
                try:
                    step = int(float(cell))
                except (ValueError, OverflowError):  # 'abc', 'inf', 'nan'
                    return "step is not a number"
                if not self.epoch_as_step:
                    continue
            pairs.append((name, cell))
        found, metrics = self.sink.metrics_from_pairs(pairs)
        if not self.sink.emit(lineno, step if step is not None else found, metrics):
            return "no training metric"
        return None


# a column name: any text but a quote or a control character ('eval/acc@k=5', 'loss{rank=0}',
# 'train/loss__MIN'); what tells a header from a text line is the numeric rows under it
HEADER_CELL = re.compile(r'^"?[^"\x00-\x08\x0a-\x1f]{1,120}"?$')


def _numeric_share(cells: list[str]) -> float:
    filled = [c for c in cells if c.strip()]
    if not filled:
        return 0.0
    return sum(1 for c in filled if parse_number(c) is not None) / len(filled)


def _csv_header(lines: list[str]) -> str | None:
    """The delimiter when the first line is a metrics header followed by numeric rows (four in
    five of the next 19 lines)."""
    if len(lines) < 2:
        return None
    for d in (",", "\t"):
        # a delimiter after every cell, the header's too ('total loss<TAB>score loss<TAB>', as a
        # loop printing each value with end='\t' writes): no empty last column
        trailing = lines[0].endswith(d)
        head = lines[0].removesuffix(d).split(d)
        if len(head) < 2 or not all(HEADER_CELL.match(h) for h in head) or _numeric_share(head):
            continue  # (a line a comma cuts into numbers is no header: '[50, 50, 46]')
        if not any(t in h.lower() for h in head for t in ("loss", "step", "epoch", "acc")):
            continue
        rows = [(x.removesuffix(d) if trailing else x).split(d) for x in lines[1:20]]
        fit = sum(1 for r in rows if len(r) == len(head) and _numeric_share(r) >= 0.5)
        if 5 * fit >= 4 * len(rows):  # (a damaged row or two among them is the reader's to skip)
            return d
    return None



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


class Csv(Format):
    """--format csv: a header row and one row per logged step."""
    name = "csv"
    rows = staticmethod(csv_rows)  # column-wise for large files
    title = "CSV with a header (W&B export, Lightning metrics.csv with sparse rows, Keras CSVLogger)"
    example = "epoch,accuracy,learning_rate,loss,val_accuracy,val_loss"

    def sniff(self, lines: list[str]) -> int:
        return len(lines) if _csv_header([x.rstrip("\r") for x in lines]) else 0

    def parser(self, sink: Sink) -> LineParser:
        return _CsvParser(sink, ",")

    def parser_for(self, sink: Sink, first_line: str) -> _CsvParser:
        return _CsvParser(sink, "\t" if first_line.count("\t") > first_line.count(",") else ",")
