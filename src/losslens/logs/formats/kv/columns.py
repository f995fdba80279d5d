"""Vectorised reading of key=value logs with polars: the path for multi-GB DFlash-style logs.

polars' CSV reader splits every line at '=' (and '~', read as '='), so cell i holds the end of
value i-1 and the name of key i. Lines whose keys follow a *template* (the key sequence of the
common lines) are read column by column; every other line, and every line the template cannot
read exactly as the per-line parser would, goes to that parser. Both paths give the same frame;
tests check this on fixtures and generated logs.
"""

from __future__ import annotations

import io
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from losslens.logs.base import TIMESTAMP, LineParser
from losslens.logs.columnar import (
    ENGINE,
    account_chunk,
    add_rows,
    any_of,
    column_unit_scale,
    first_reading,
    line_numbers,
    lines_of,
    metric_columns,
    most_ranked,
    ranked_feed,
    times,
    unit_of,
    without_prefixes,
)
from losslens.logs.formats.kv.patterns import ESPNET_BATCH, ESPNET_RESULTS, KV, TOKRATE, TOKRATE_SCALE
from losslens.logs.names import STEP_KEYS, columnar
from losslens.logs.sink import Accounting, Sink, feed_line
from losslens.logs.source import count_lines, decode_lines

SAMPLE_LINES = 500
MAX_TEMPLATES = 3
MAX_TEMPLATE_KEYS = 256  # a wider line is read by the per-line parser
VALUE_END = r"[\s|,;\[\]()]"
DIGIT = re.compile(r"\d")
NUMBERS = re.compile(r"\b\d+")  # digits starting a word: numbers, not the 1 of a key q1


@dataclass(frozen=True)
class Template:
    """The shape of one kind of key=value line (its keys in order and the text between them), from which
    a chunk of such lines is read column by column."""
    keys: tuple[str, ...]
    lead: tuple[str, ...]  # the text between the previous value (or the line's start) and a key;
    # '\x00' + its last character where that text varies (holds numbers)
    lists: tuple[bool, ...]  # the value is a [..] list
    rate_cell: int | None  # the cell holding '(32.1Ktok/s)', if any
    # the unit each value was written with in the line the template was made from ('b/s', 'd'),
    # read in the same query as the plain numbers (a line with another unit is read all the same)
    units: tuple[str, ...] = field(compare=False)


def templates(sample: list[str]) -> list[Template]:
    """The commonest key sequences among sample lines in which every '='/'~' is a pair."""
    counts: Counter[Template] = Counter()
    seen: dict[str, Template | None] = {}
    for line in sample:
        # lines alike but for their numbers have the same template (a key never follows a digit,
        # and text with digits between a value and a key is kept as its last character)
        shape = NUMBERS.sub("0", line)
        t = seen[shape] if shape in seen else seen.setdefault(shape, _template(line))
        if t is not None:
            counts[t] += 1
    return [t for t, _ in counts.most_common(MAX_TEMPLATES)]


def _template(line: str) -> Template | None:
    """The template of one line; None when some '='/'~' in it is not a pair."""
    pairs = KV.findall(line)
    if not pairs or len(pairs) > MAX_TEMPLATE_KEYS or "\x1b" in line or \
            line.count("=") + line.count("~") != len(pairs) or \
            "epoch" in line and (ESPNET_BATCH.search(line) or ESPNET_RESULTS.search(line)):
        return None  # (ESPnet's report heads hold the step: the per-line parser reads them)
    cells = line.replace("~", "=").split("=")
    rate = [i for i, c in enumerate(cells) if TOKRATE.search(c)]
    values = [""] + [v for _, _, v in pairs]
    lead = tuple(c[len(v):-len(k)] if i else c[-len(k) - 1:-len(k)]
                 for i, (c, v, (k, _, _)) in enumerate(zip(cells, values, pairs, strict=False)))
    # text with numbers in it between a value and the next key varies: keep its last char
    lead = tuple("\x00" + x[-1:] if DIGIT.search(x) else x for x in lead)
    return Template(tuple(k for k, _, _ in pairs), lead, tuple(v.startswith("[") for _, _, v in pairs),
                    rate[0] if rate else None, tuple(unit_of(v) for _, _, v in pairs))


def read_cells(chunk: bytes, width: int) -> pl.DataFrame | None:
    """The chunk split at '=' and '~' into ``width`` string columns; None when unsure."""
    expected = count_lines(chunk)
    if b"\x1f" in chunk or b"\x00" in chunk or b"\x1b" in chunk or b"\r" in chunk:
        return None
    try:
        df = pl.read_csv(io.BytesIO(chunk.replace(b"~", b"=")), has_header=False, separator="=",
                         quote_char=None, infer_schema=False, truncate_ragged_lines=True,
                         encoding="utf8-lossy", raise_if_empty=False, missing_columns="insert",
                         schema={f"c{i}": pl.String for i in range(width)})
    except pl.exceptions.PolarsError:
        return None
    return df if df.height == expected else None


def _template_rows(cells: pl.DataFrame, t: Template, no_rate: bool) -> pl.DataFrame:
    """Per row, in one query: does it follow ``t``, the raw value of each key and its first
    reading as a number or a list (``first{i}``; see ``columnar.metric_columns``). ``no_rate``:
    no line of the chunk holds a 'tok/s' rate."""
    m = len(t.keys)
    c = [pl.col(f"c{i}") for i in range(m + 2)]
    fits = [c[m].is_not_null(), c[m + 1].is_null()]
    for i, (key, lead) in enumerate(zip(t.keys, t.lead, strict=True)):
        # cell i ends with the key, behind the same text as in the template
        fixed = lead.removeprefix("\x00")
        fits.append(c[i].str.ends_with(fixed + key) if lead or i else c[i] == key)
    raws, firsts = [], []
    for i, is_list in enumerate(t.lists):
        cell = c[i + 1]
        tail = len(t.lead[i + 1]) + len(t.keys[i + 1]) if i + 1 < m else None
        if tail and not is_list and not t.lead[i + 1].startswith("\x00"):
            # the value is all that stands before the fixed tail; where it holds a character at
            # which the per-line parser's value ends (a vertical tab, a '|'), neither a number nor
            # a step reads it, and the row goes to that parser (see columnar.metric_columns)
            raw = cell.str.head(-tail)
        else:
            if is_list:
                end = cell.str.find("]", literal=True) + 1
                fits.append(cell.str.starts_with("[") & end.is_not_null())
            else:
                end = cell.str.find(VALUE_END)
                fits.append(end.is_null() | (end > 0))
            raw = pl.when(end.is_null()).then(cell).otherwise(cell.str.slice(0, end))
        raws.append(raw.alias(f"raw{i}"))
        # (read from the column in a second stage: polars would cut the raw text twice)
        firsts.append(first_reading(pl.col(f"raw{i}"), t.keys[i], t.units[i], is_list).alias(f"first{i}"))
    if t.rate_cell is not None:
        r = c[t.rate_cell].str.extract_groups(columnar(TOKRATE)).struct
        raws.append((r.field("1").cast(pl.Float64, strict=False) * r.field("2").replace_strict(
            list(TOKRATE_SCALE), list(TOKRATE_SCALE.values()), default=None, return_dtype=pl.Float64)
        ).alias("tok"))
    before = m + 1 if t.rate_cell is None else t.rate_cell
    if not no_rate and before:  # a rate before the rate cell (or in any): the per-line parser decides
        # (the cells joined at a NUL, which none holds (see read_cells): one search, not one a cell)
        fits.append(~pl.concat_str(c[:before], separator="\x00").str.contains("tok/s", literal=True))
    # the wall time a line starts with, as the per-line parser reads it (base.leading_time)
    raws.append(c[0].str.extract(TIMESTAMP.pattern, 1).alias("stamp"))
    out = cells.lazy().select(*raws, pl.all_horizontal(fits).fill_null(False).alias("fit")
                              ).with_columns(*firsts).collect(engine=ENGINE)
    return out.with_columns(times(out["stamp"]).alias("time")).drop("stamp")


def _read_template(rows: pl.DataFrame, t: Template, lineno: pl.Series, sink: Sink,
                   pending: pl.Series) -> pl.Series:
    """Add the rows of ``t`` to ``sink``; returns the rows still unread (for the next pass)."""
    fit = rows["fit"] & pending
    n = len(t.keys)
    step, cols, unread = metric_columns(
        sink, t.keys, [rows[f"raw{i}"] for i in range(n)], lists=t.lists, taken=fit,
        first=[rows[f"first{i}"] for i in range(n)])
    if t.rate_cell is not None:
        tok = rows["tok"]
        cols["tokens_per_s"] = cols["tokens_per_s"].fill_null(tok) if "tokens_per_s" in cols \
            else tok
        sink.names.setdefault("tokens_per_s", "(Ktok/s)")
    bad = any_of([~fit, *unread], rows.height)
    meta = {"step": step, "line": lineno, "time": rows["time"]}
    add_rows(sink, meta, cols, bad)
    return pending & bad


def parse_chunk(chunk: bytes, first_lineno: int, tpls: list[Template], sink: Sink,
                acc: Accounting, parser: LineParser, original: pl.Series | None = None,
                feed: Callable[[Any, int, str], str | None] = feed_line, compiled: bool = False,
                lines: Any = None) -> None:
    """Parse one chunk (whole lines) into ``sink`` and ``acc``. ``original``: the chunk's lines as
    the file has them, when ``chunk`` holds them without their prefixes (the lines the templates
    leave go to ``feed`` as they are in the file). ``compiled``: read the templates' lines with
    the numba kernels of ``kv.fast`` where they can (the same rows as polars'); ``lines``: the
    chunk's ``kv.fast.Lines``, where the chunk is as filed, its few lines behind a rank prefix
    left to the parser (see ``read_chunk``)."""
    if compiled and tpls and _parse_compiled(chunk, first_lineno, tpls, sink, acc, parser, original, feed,
                                             lines):
        return
    if lines is not None and lines.ranked.any():  # (the polars path cuts or hides them first)
        chunk, original, _ = without_prefixes(chunk, first_lineno, False, sink)
    width = max((len(t.keys) for t in tpls), default=0) + 2
    cells = read_cells(chunk, width) if tpls else None
    if cells is None:
        text = lines_of(chunk)
        n = text.len()
        blank = text.is_null() | (text.str.strip_chars().str.len_bytes() == 0)
    else:
        n = cells.height
        c0, c1 = cells["c0"], cells["c1"]
        blank = c1.is_null() & (c0.is_null() | (c0.str.strip_chars().str.len_bytes() == 0))
    if original is not None:  # a line is blank as the file has it
        blank = original.is_null() | (original.str.strip_chars().str.len_bytes() == 0)
    lineno = line_numbers(first_lineno, n)
    pending = pl.Series(np.ones(n, dtype=bool))
    n_idle = len(sink.idle_lines)
    if cells is not None:
        # where no line holds a rate, no cell needs looking at for one (a search, not a count:
        # counting a rate on every line costs more than the cells' checks)
        no_rate = b"tok/s" not in chunk
        for t in tpls:
            rows = _template_rows(cells, t, no_rate)
            pending = _read_template(rows, t, lineno, sink, pending)
            if not pending.any():
                break
    account_chunk(chunk, original, lineno, blank, pending, n_idle, sink, acc, parser, feed)


def _parse_compiled(chunk: bytes, first_lineno: int, tpls: list[Template], sink: Sink, acc: Accounting,
                    parser: LineParser, original: pl.Series | None,
                    feed: Callable[[Any, int, str], str | None], lines: Any = None) -> bool:
    """``parse_chunk`` with the numba kernels; False where they leave the chunk to polars (bytes
    the cells reader refuses, a key that is a step written as a list). A line behind a rank
    prefix is no template's: the parser reads it (and cuts and tags its prefix)."""
    from losslens.logs.formats.kv import fast

    steps = [[k.strip().lower() in STEP_KEYS for k in t.keys] for t in tpls]
    if any(s and listed for t, st in zip(tpls, steps, strict=True)
           for s, listed in zip(st, t.lists, strict=True)):
        return False
    if lines is None:
        lines = fast.split_lines(chunk)
    if lines is None:
        return False
    n = len(lines.starts)
    blank = pl.Series(lines.blank)
    if original is not None:
        blank = original.is_null() | (original.str.strip_chars().str.len_bytes() == 0)
    lineno = line_numbers(first_lineno, n)
    pending = pl.Series(np.ones(n, dtype=bool))
    n_idle = len(sink.idle_lines)
    check_rate = b"tok/s" in chunk
    for t, st in zip(tpls, steps, strict=True):
        scales = [column_unit_scale(u) or np.nan if u else np.nan for u in t.units]
        rows = fast.template_rows(lines, pending.to_numpy() & ~lines.ranked, t, check_rate, st, scales)
        pending = _read_template(rows, t, lineno, sink, pending)
        if not pending.any():
            break

    def texts(rows: np.ndarray) -> list[str]:
        """The lines at ``rows`` (a line that is not UTF-8: the whole chunk's, as ``lines_of``
        reads it)."""
        try:
            return [chunk[lines.starts[r]:lines.ends[r]].decode() for r in rows.tolist()]
        except UnicodeDecodeError:
            return lines_of(chunk).gather(rows).to_list()

    account_chunk(chunk, original, lineno, blank, pending, n_idle, sink, acc, parser, feed,
                  texts if original is None else None)
    return True


def read_chunk(chunk: bytes, first: int, tpls: list[Template] | None, sink: Sink, acc: Accounting,
               parser: LineParser, strip: bool, compiled: bool = False) -> list[Template]:
    """One chunk of whole lines: the template lines vectorised, odd lines per line; a capture's
    prefixes (``strip``) and torchrun rank prefixes cut off first (see ``base.feed_ranked``),
    their time and rank kept. The templates (found in this chunk when ``tpls`` is None) are
    returned for the next chunk."""

    # (the kernels read a chunk as filed where few of its lines are behind a rank prefix: those
    # are the parser's, and no line is made a string but those it reads)
    lines = _with_few_ranked(chunk) if compiled and not strip else None
    if lines is not None:
        sink.tags = None
        data, original = chunk, None
    else:
        data, original, _ = without_prefixes(chunk, first, strip, sink)
    if tpls is None:
        tpls = templates(decode_lines(data[: 1 << 20])[: SAMPLE_LINES])
    parse_chunk(data, first, tpls, sink, acc, parser, original, ranked_feed(sink, strip), compiled, lines)
    sink.tags = None
    return tpls


def _with_few_ranked(chunk: bytes) -> Any:
    """The chunk's ``kv.fast.Lines`` where few of its lines are behind a rank prefix (``most_ranked``,
    as ``without_prefixes`` leaves such lines to the parser), else None."""
    from losslens.logs.formats.kv import fast

    lines = fast.split_lines(chunk)
    if lines is None:
        return None
    ranked = int(lines.ranked.sum())
    return lines if not ranked or ranked < most_ranked(len(lines.starts)) else None


class TemplateReader:
    """``read_chunk`` chunk after chunk, the templates found in the first kept for the next.
    ``size``: the file's size, where known: a large file is read with the numba kernels where the
    ``fast`` extra is installed (``kv.fast.wanted``)."""

    def __init__(self, size: int | None = None) -> None:
        self.templates: list[Template] | None = None
        self.size = size
        self.compiled: bool | None = None  # decided at the first chunk (numba loads only then)

    def __call__(self, chunk: bytes, first: int, sink: Sink, acc: Accounting, parser: LineParser,
                 strip: bool) -> None:
        if self.compiled is None:
            from losslens.logs.formats.kv.fast import wanted

            self.compiled = wanted(self.size)
        self.templates = read_chunk(chunk, first, self.templates, sink, acc, parser, strip, self.compiled)
