"""Whole columns of raw values → the sink's frames, exactly as the per-line path's
``Sink.metrics_from_pairs`` + ``Sink.emit`` would make them, row by row: shared by the vectorised
readers (key=value templates, JSON Lines, CSV tables).

A reader hands over its keys in line order and one column of raw values per key (the text a line
reader would see, or numbers a columnar parser already read); every row a column cannot read the
way the per-line parser would is returned as unread, for that parser to read.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, Final, TypeVar

import numpy as np
import polars as pl

from losslens.logs.base import (
    CAPTURE_TIME,
    PREFIXES,
    TIMESTAMP,
    LineParser,
    feed_ranked,
    local_time_ms,
)
from losslens.logs.fast import line_bounds
from losslens.logs.names import (
    MAGNITUDE,
    STEP_KEYS,
    UNIT_SCALE,
    canonical,
    is_eval,
    is_training_metric,
    parse_number,
    unreserved,
)
from losslens.logs.sink import Accounting, Sink, feed_line
from losslens.logs.source import count_lines, decode_lines

GROUPED = r"^[-+]?[0-9][0-9,]*(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?$"  # digits with commas, nothing else
CLOCK = r"^(?:(?<d>\d+) (?i:days?), )?(?<h>\d+):(?<m>\d\d):(?<s>\d\d(?:\.\d+)?)$"
LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ%/()"
# the engine the readers' own multi-stage queries are collected by: polars' streaming engine runs
# their string expressions over the chunk's rows on its threads (1M DFlash lines: 1.76-1.79 s ->
# 1.63-1.71 s, the same CPU time; the same rows in the same order as the in-memory engine)
ENGINE: Final = "streaming"


def with_units(raw: pl.Series) -> pl.Series:
    """A float, or a number with a unit ('0.68b/s' → 0.68, '4.0d' → 345600), or a clock time;
    null if none. The unit is looked up once per distinct unit, not per row."""
    number = raw.str.strip_chars_end(LETTERS)
    written = raw.str.slice(number.str.len_chars())
    units = written.unique().drop_nulls().to_list()
    scales = {u: column_unit_scale(u) for u in units}
    scale = written.replace_strict(list(scales), list(scales.values()), default=None,
                                   return_dtype=pl.Float64)
    value = raw.cast(pl.Float64, strict=False).fill_null(number.cast(pl.Float64, strict=False) * scale)
    clocks = value.is_null() & raw.str.contains(":", literal=True)
    if not clocks.any():
        return value
    clock = raw.str.extract_groups(CLOCK).struct  # as names._CLOCK: '0:00:24', '1 day, 2:03:04.5'
    seconds = (clock.field("d").cast(pl.Float64, strict=False).fill_null(0.0) * 86400
               + clock.field("h").cast(pl.Float64, strict=False) * 3600
               + clock.field("m").cast(pl.Float64, strict=False) * 60
               + clock.field("s").cast(pl.Float64, strict=False))
    return value.fill_null(seconds)


def column_unit_scale(unit: str) -> float | None:
    """The factor ``with_units`` multiplies a number written with ``unit`` by, as
    ``names.unit_scale`` reads it ('1.05M' is a million, '3m' three minutes); None for none."""
    return MAGNITUDE.get(unit, UNIT_SCALE.get(unit.lower()))


def unit_of(text: str) -> str:
    """The unit ``with_units`` reads after the number in ``text`` ('0.68b/s' → 'b/s'), or ''."""
    unit = text[len(text.rstrip(LETTERS)):]
    return unit if unit and column_unit_scale(unit) is not None else ""


def number_expr(raw: pl.Expr, unit: str = "") -> pl.Expr:
    """A first reading of text as numbers, for a query that reads many columns at once: a plain
    cast, and a number followed by ``unit`` scaled as ``with_units`` scales it. Null where it is
    unsure; where it is not, exactly what ``number_column`` reads (its ``first`` reading)."""
    value = raw.cast(pl.Float64, strict=False)
    scale = column_unit_scale(unit) if unit else None
    if scale is None:
        return value
    # a finite number before the unit ends in a digit or a '.', where with_units' cut stops too
    # ('nanb/s' is no number to it)
    scaled = raw.str.strip_suffix(unit).cast(pl.Float64, strict=False) * scale
    return pl.coalesce(value, pl.when(scaled.is_finite()).then(scaled))


def first_reading(raw: pl.Expr, key: str, unit: str = "", is_list: bool = False) -> pl.Expr:
    """The first reading ``metric_columns`` takes of a key's text column (its ``first``): an
    integer cast for a step key, ``list_expr`` for a '[..]' list, ``number_expr`` for any other."""
    if key.strip().lower() in STEP_KEYS:
        return raw.cast(pl.Int64, strict=False)
    return list_expr(raw) if is_list else number_expr(raw, unit)


def list_expr(raw: pl.Expr) -> pl.Expr:
    """'[50, 50, 46]' → [50.0, 50.0, 46.0]: the first reading of ``numbers`` (a null element
    where a part is no plain number)."""
    return (raw.str.strip_prefix("[").str.strip_suffix("]").str.split(", ")
            .cast(pl.List(pl.Float64), strict=False))


def numbers(raw: pl.Series, first: pl.Series | None = None) -> tuple[pl.Series, pl.Series | None]:
    """'[50, 50, 46]' strings → List(Float64); rows that need the per-line parser or None.
    ``first``: ``list_expr`` of ``raw``, where a query has read it already (the column is read
    again only where that reading missed a list or a number in one)."""
    if first is not None and first.list.explode().null_count() == first.null_count():
        return first, None  # (a list of text splits into one part or more: a null is a miss)
    inner = raw.str.strip_prefix("[").str.strip_suffix("]")
    empty = inner.str.strip_chars().str.len_bytes() == 0
    value = raw.to_frame().select(list_expr(pl.first())).to_series()
    n_empty = int(empty.sum())
    if value.list.explode().null_count() > n_empty + value.null_count():
        # as names.parse_list: split at ',' and each part stripped ('[4 4, 5]' is no list)
        value = (inner.str.split(",").list.eval(pl.element().str.strip_chars())
                 .cast(pl.List(pl.Float64), strict=False))
    if n_empty:
        value = pl.select(pl.when(empty).then(pl.lit([], dtype=pl.List(pl.Float64)))
                          .otherwise(value)).to_series()
    missing = value.list.explode().null_count() - value.null_count() - n_empty
    if missing == 0:
        return value, None
    unread = raw.is_not_null() & ~empty & value.list.eval(pl.element().is_null()).list.any()
    return value, unread


def _step(raw: pl.Series, first: pl.Series | None = None) -> pl.Series:
    """``sink.step_value`` over a column: an integer, an integral float, '12' / '12.0' / '12/300'.
    ``first``: text ``raw`` cast to integers by a query (the rows that cast missed are read here)."""
    if first is not None and raw.dtype == pl.String:
        todo = raw.is_not_null() & first.is_null()
        if not todo.any():
            return first
        where = todo.arg_true()
        return first.scatter(where, _step(raw.gather(where)))
    if raw.dtype.is_integer():
        return raw.cast(pl.Int64, strict=False)
    as_float = raw.cast(pl.Float64, strict=False) if raw.dtype.is_float() else None
    head = None
    if as_float is None:
        head = raw.cast(pl.String).str.split("/").list.first().str.strip_chars()
        as_float = head.cast(pl.Float64, strict=False)
    whole = pl.select(pl.when(as_float.is_finite() & (as_float == as_float.floor()))
                      .then(as_float.cast(pl.Int64, strict=False))).to_series()
    return whole if head is None else head.cast(pl.Int64, strict=False).fill_null(whole)


def number_column(raw: pl.Series, exact: bool = True, first: pl.Series | None = None
                  ) -> tuple[pl.Series, pl.Series]:
    """``names.parse_number`` over a column of text, and the rows still unread. A plain cast
    first (or ``first``, the reading of ``number_expr`` where a query made it); where the raw
    text is ``exact``ly what the per-line parser reads, digits with thousands' commas of the rows
    it missed ('2,097,152', as parse_number reads them); the units and clock times of
    ``with_units`` only for the rows still missed; then, with ``exact``, ``parse_number`` itself
    for the rest ('5m 3s', ' 0.5 '). Unread: what is still missed without ``exact``; with it, only
    a '[..]' list (a scalar column's row the per-line parser reads as a list)."""
    value = raw.cast(pl.Float64, strict=False) if first is None else first
    missed = raw.is_not_null() & value.is_null()
    if exact and missed.any():
        # (before the units: with_units reads none of these, which end in a digit or a '.', and
        # a column of 'tps: 6,561' is not cut at its units row by row first)
        grouped = missed & raw.str.contains(GROUPED)
        if grouped.any():
            where = grouped.arg_true()
            value = value.scatter(where, raw.gather(where).str.replace_all(",", "", literal=True)
                                  .cast(pl.Float64, strict=False))
            missed = raw.is_not_null() & value.is_null()
    if missed.any():  # units, clock times
        where = missed.arg_true()
        value = value.scatter(where, with_units(raw.gather(where)))
        missed = raw.is_not_null() & value.is_null()
    if not exact or not missed.any():
        return value, missed
    where = missed.arg_true()
    patch = pl.Series([parse_number(t) for t in raw.gather(where).to_list()], dtype=pl.Float64)
    text = raw.str.strip_chars()
    listed = missed & text.str.starts_with("[") & text.str.ends_with("]")
    return value.scatter(where, patch), listed


def metric_columns(sink: Sink, keys: Sequence[str], raws: Sequence[pl.Series],
                   lists: Sequence[bool] | None = None, ordered: bool = True, exact: bool = False,
                   taken: pl.Series | None = None, first: Sequence[pl.Series | None] | None = None
                   ) -> tuple[pl.Series, dict[str, pl.Series], list[pl.Series]]:
    """The step, the canonical metric columns and the masks of rows left unread, from one raw
    column per key. Text is read as ``parse_value`` reads it (units; '[..]' lists where ``lists``
    says so); numeric and list columns as they are. Where two keys give one name, the first
    holding a value wins when ``ordered`` (the keys stand in this order on every line); otherwise
    rows where several hold one are left unread (their order on the line decides). Text the
    columnar parse cannot read ('0:00:24', '1,024', '5m 3s') is left unread, or, when the raw text
    is ``exact``ly what the per-line parser would read, read by ``parse_number`` itself (see
    ``number_column``). ``taken``: the rows the caller reads (the others name no metric);
    ``first``: per key, a first reading of its text column (``first_reading``) that a query has
    made already, or None."""
    n = len(raws[0]) if raws else 0
    unread: list[pl.Series] = []
    step_idx = sorted((i for i, k in enumerate(keys) if k.strip().lower() in STEP_KEYS),
                      key=lambda i: STEP_KEYS.index(keys[i].strip().lower()))
    step = pl.repeat(None, n, dtype=pl.Int64, eager=True)
    for i in step_idx:
        read = _step(raws[i], first[i] if first else None)
        missed = raws[i].is_not_null() & read.is_null()
        if raws[i].dtype == pl.String and missed.any():  # a step the columns cannot read ("'460",
            # '+5', '1_000', a vertical tab): the per-line parser decides; a plain number that is
            # no whole one ('s=0.5') is no step for either
            plain = raws[i].str.contains(r"^-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?(?:/\d+)?$")
            unread.append(missed & ~plain.fill_null(False))
        step = step.fill_null(read)
    by_name: dict[str, list[int]] = {}
    for i, key in enumerate(keys):
        if i not in step_idx:
            by_name.setdefault(canonical(key), []).append(i)
    wanted = [i for idx in by_name.values() for i in idx]
    values: dict[int, pl.Series] = {}
    for i in wanted:
        raw, given = raws[i], first[i] if first else None
        if raw.dtype == pl.String and not (lists and lists[i]):
            values[i], missed = number_column(raw, exact, given)
            unread.append(missed)
        elif raw.dtype == pl.String:
            values[i], bad = numbers(raw, given)
            if bad is not None:
                unread.append(bad)
        elif isinstance(raw.dtype, pl.List):
            values[i] = raw.cast(pl.List(pl.Float64))
        else:
            values[i] = raw.cast(pl.Float64)
    cols: dict[str, pl.Series] = {}
    for name, idx in by_name.items():
        if len(idx) == 1:
            cols[name] = values[idx[0]]
        else:
            if not ordered:
                unread.append(pl.select(pl.sum_horizontal(
                    [values[i].is_not_null() for i in idx]) > 1).to_series())
            cols[name] = pl.select(pl.coalesce([values[i] for i in idx])).to_series()
    # the per-line parser names a metric when it reads a value of it: on the rows read here
    # (each name once: a later chunk's rows change no name already set)
    unnamed = [name for name in by_name if name not in sink.names]
    if unnamed:
        named = ~any_of(unread, n) if taken is None else taken & ~any_of(unread, n)
    for name in unnamed:
        held = [i for i in by_name[name] if (values[i].is_not_null() & named).any()]
        if held:
            sink.names[name] = keys[held[0]].strip()
    return step, cols, unread


def add_rows(sink: Sink, meta: dict[str, pl.Series], cols: dict[str, pl.Series],
             bad: pl.Series | None, idle: bool = True) -> pl.Series:
    """Rows (``meta``: step, line, time…) split as ``Sink.emit`` splits records: a train frame of
    the rows holding a training metric, an eval frame of those holding an eval metric (with the
    row's epoch); the lines of rows that hold neither go to ``sink.idle_lines``. Rows flagged
    ``bad`` are left out (the per-line parser reads them). Without ``idle``, rows that hold
    no metric are read all the same (a format whose parser takes such lines as its own).
    Returns the steps of the train records made."""
    cols = {unreserved(k): v for k, v in cols.items()}
    train_names = [c for c in cols if not is_eval(c)]
    eval_names = [c for c in cols if is_eval(c)]
    frame = pl.DataFrame({**meta, **cols})
    if bad is not None:
        frame = frame.filter(~bad)
    if sink.tags is not None:
        frame = tagged(frame, sink)
        meta = {**meta, **{c: frame[c] for c in ("time", "rank") if c in frame.columns}}
    flags = frame.select(
        pl.any_horizontal([pl.col(c).is_not_null() for c in train_names if is_training_metric(c)]
                          or [pl.lit(False)]).alias("train"),
        pl.any_horizontal([pl.col(c).is_not_null() for c in eval_names] or [pl.lit(False)])
        .alias("eval"))
    for names, evals in ((train_names, False), (eval_names + (["epoch"] if "epoch" in cols else []), True)):
        if evals and not eval_names:
            break
        part = frame.filter(flags["eval" if evals else "train"]).select(list(meta) + names)
        # a metric no row here holds is no column (the per-line records would not have it)
        sink.add(part.drop([c for c in names if part[c].null_count() == part.height]), evals=evals)
    if idle:
        sink.idle_lines.extend(frame.filter(~flags["train"] & ~flags["eval"])["line"].to_list())
    return frame.filter(flags["train"])["step"]


def tagged(frame: pl.DataFrame, sink: Sink) -> pl.DataFrame:
    """Rows of a chunk with the capture's time (where they hold none) and the torchrun rank of
    their line (``sink.tags``, see ``without_prefixes``)."""
    if sink.tags is None:
        return frame
    frame = frame.join(sink.tags, on="line", how="left")
    if "when" in frame.columns:
        time = pl.coalesce("time", "when") if "time" in frame.columns else pl.col("when")
        frame = frame.with_columns(time.alias("time")).drop("when")
    return frame


def any_of(masks: Sequence[pl.Series], n: int) -> pl.Series:
    """Rows any mask flags (all False without masks)."""
    if not masks:
        return pl.Series(values=[False] * n, dtype=pl.Boolean)
    return pl.DataFrame({f"m{i}": m for i, m in enumerate(masks)}).select(
        pl.any_horizontal(pl.all())).to_series()


def lines_of(chunk: bytes) -> pl.Series:
    """One string per line of ``chunk`` ('\\r' at the end stripped)."""
    expected = count_lines(chunk)
    if b"\x1f" not in chunk and b"\x00" not in chunk:
        try:
            df = pl.read_csv(io.BytesIO(chunk), has_header=False, separator="\x1f",
                             quote_char=None, new_columns=["line"], encoding="utf8-lossy",
                             infer_schema=False, raise_if_empty=False)
            if df.height == expected:
                return df["line"].str.strip_chars_end("\r")
        except pl.exceptions.PolarsError:
            pass
    return pl.Series("line", [x.rstrip("\r") for x in decode_lines(chunk)], dtype=pl.String)


def line_numbers(first: int, n: int) -> pl.Series:
    """The line numbers ``first`` … ``first + n - 1`` as a column."""
    return pl.Series("line", np.arange(first, first + n, dtype=np.int64))


def account_chunk(chunk: bytes, text: pl.Series | None, lineno: pl.Series, blank: pl.Series,
                  pending: pl.Series, n_idle: int, sink: Sink, acc: Accounting, parser: object,
                  feed: Callable[[object, int, str], str | None] = feed_line,
                  texts: Callable[[np.ndarray], list[str]] | None = None) -> None:
    """Account one chunk's lines after its vectorised pass: blank; parsed; the rows that pass
    read but that held no metric (``sink.idle_lines`` from ``n_idle`` on) skipped as such, and
    those it skipped for the parser's reason (``sink.passed_lines``: counted at once, but for
    the first of a reason the log has no example of yet, taken in line order); every
    ``pending`` line fed to the per-line ``parser``, in order (``text``: the chunk's lines, made
    from ``chunk`` when needed, or ``texts``: the text of the lines at given rows)."""
    acc.total += len(lineno)
    acc.blank += int(blank.sum())
    idle = sink.idle_lines[n_idle:]
    passed, sink.passed_lines = sink.passed_lines, []
    acc.parsed += int((~pending).sum()) - len(idle) - sum(len(lines) for _, lines in passed)
    firsts = count_skipped(passed, acc)
    rest = pending & ~blank
    if not idle and not firsts and not rest.any():
        return
    is_idle = lineno.is_in(idle) if idle else pl.Series(values=[False] * len(lineno))
    todo = rest | is_idle | (lineno.is_in(list(firsts)) if firsts else False)
    if text is None and texts is not None:
        lines = texts(todo.arg_true().to_numpy())
    else:
        lines = (lines_of(chunk) if text is None else text).filter(todo).to_list()
    for ln, line, skipped in zip(lineno.filter(todo).to_list(), lines,
                                 is_idle.filter(todo).to_list(), strict=True):
        if ln in firsts:
            acc.skip(firsts[ln], ln, line)
        elif skipped:
            acc.skip("no training metric", ln, line)
        else:
            account_line(ln, line, acc, parser, feed)


def count_skipped(skipped: Sequence[tuple[str, np.ndarray]], acc: Accounting) -> dict[int, str]:
    """Lines a vectorised pass skipped (reason, their lines or rows) counted at once, but for the
    first of a reason the log has shown no example of yet: those are returned (line or row ->
    reason), to be taken in line order with the lines the parser reads (``Accounting.skip``)."""
    firsts: dict[int, str] = {}
    for reason, lines in skipped:
        if not len(lines):
            continue
        shown = reason in acc.examples or reason in firsts.values()
        acc.skipped[reason] += len(lines) - (not shown)
        if not shown:
            firsts[int(lines.min())] = reason
    return firsts


def account_line(lineno: int, line: str, acc: Accounting, parser: object,
                 feed: Callable[[object, int, str], str | None] = feed_line) -> None:
    """A line no column-wise pass read, as the per-line path takes it: binary data, or what the
    parser says (parsed, or skipped with its reason)."""
    if "\x00" in line:
        acc.skip("binary data", lineno, line)
    elif (reason := feed(parser, lineno, line)) is None:
        acc.parsed += 1
    else:
        acc.skip(reason, lineno, line)


# the capture prefixes of ``base.PREFIXES``, matched whole (``match_whole``); the time a prefix
# holds is its group 1, which is CAPTURE_TIME's first match in the prefix (its first character,
# or a '[', is where the group starts, and what may follow the group never starts with a digit,
# so the greedy match is it)
_WHOLE = [f"^(?:{p.pattern.removeprefix('^')})" for p in PREFIXES]
_RANK_MARK = re.compile(rb"\]:")  # (a compiled search skips the many ']' of a log faster than `in`)
_RANK = r"^(?<all>\s*\[(?:[A-Za-z_]+)?(?<rank>\d+)\]:\s?)"
_RANK_LINE = re.compile(rb"[ \t\f\v]*\[(?:[A-Za-z_]+)?\d+\]:")  # _RANK, line by line in bytes
FEW_RANKED = 32  # at most one line in this many behind a rank prefix: those lines go to the parser
# what the vectorised readers see of a line left to the parser: no pattern reads it, and it is not
# blank (a record does not run on across it, as it does across a blank line)
HIDDEN = "\x01"


def most_ranked(lines: int) -> int:
    """How many lines behind a rank prefix make a chunk of ``lines`` lines too many to leave them
    to the per-line parser: one in FEW_RANKED (any, in a chunk of fewer lines)."""
    return lines // FEW_RANKED


def _ranked_starts(chunk: bytes) -> list[int] | None:
    """Where the chunk's lines behind a torchrun rank prefix start, where they are few (at most one
    line in FEW_RANKED: a rank's NCCL warning among rank 0's records), else None. Cutting the
    prefixes column-wise costs a pass over every line of the chunk; those few lines are left to
    the per-line parser instead, which cuts them and tags their rank (``base.feed_ranked``)."""
    most = most_ranked(count_lines(chunk))
    starts: list[int] = []
    for m in _RANK_MARK.finditer(chunk):  # (']:' is rare in a log: its lines are looked at alone)
        start = chunk.rfind(b"\n", 0, m.start()) + 1
        if (not starts or start > starts[-1]) and _RANK_LINE.match(chunk, start):
            if len(starts) == most:
                return None
            starts.append(start)
    return starts


def _hidden(chunk: bytes, starts: list[int]) -> bytes:
    """``chunk`` with the lines that start at ``starts`` as ``HIDDEN`` (their newlines kept)."""
    parts, at = [], 0
    for s in starts:
        end = chunk.find(b"\n", s)
        parts += [chunk[at:s], HIDDEN.encode()]
        at = len(chunk) if end < 0 else end
    parts.append(chunk[at:])
    return b"".join(parts)


def prefix_times(text: pl.Series) -> pl.Series:
    """The capture's time among each line's prefixes (``base.strip_prefixes``' time), or null."""
    return times(_cut_prefixes(text)[1])


def _each_prefix(part: pl.Series) -> pl.DataFrame:
    """Per line, the length of the first prefix pattern's match short of the whole line ("cut",
    null where none matches) and the time that prefix holds ("found"): each pattern's match once,
    then the first that cuts something short of the whole line (a when/then chain over the
    patterns nests each earlier one twice: 2^7 evaluations)."""
    matches = pl.DataFrame({"text": part}).lazy().select(
        pl.col("text").str.len_chars().alias("n"),
        *(match_whole(pl.col("text"), whole).alias(f"g{i}") for i, whole in enumerate(_WHOLE)))
    lengths = [pl.col(f"g{i}").str.len_chars() for i in range(len(_WHOLE))]
    first = pl.coalesce([pl.when(x < pl.col("n")).then(pl.lit(i)) for i, x in enumerate(lengths)])
    cut = pl.coalesce([pl.when(first == i).then(x) for i, x in enumerate(lengths)])
    found = pl.coalesce([pl.lit(None, pl.String), *(
        pl.when(first == i).then(match_whole(pl.col(f"g{i}"), CAPTURE_TIME))
        for i, p in enumerate(PREFIXES) if p.groups)])
    return matches.select(cut.alias("cut"), found.alias("found")).collect(engine=ENGINE)


# the prefix patterns as one alternation, whose match is the first pattern's that matches at all
# (the regex crate, as Python, tries alternatives in order): ``_each_prefix``'s cut wherever it
# is short of the whole line; that pattern is the one holding a time exactly where its match is
# one of that pattern's whole (an earlier pattern's match never is, and a later one's would make
# that pattern match the line)
_ANY = "^(?:" + "|".join(w.removeprefix("^") for w in _WHOLE) + ")"
_TIMED = [w + "$" for w, p in zip(_WHOLE, PREFIXES, strict=True) if p.groups]


def _prefix_cuts(part: pl.Series) -> pl.DataFrame:
    """``_each_prefix`` through one match of ``_ANY`` a line; the lines it matches whole (where
    ``strip_prefixes`` tries the next pattern) through ``_each_prefix`` (with today's patterns
    no line matched whole by one is cut by a later one, but a new pattern could make one)."""
    t, a, n, m = pl.col("text"), pl.col("a"), pl.col("n"), pl.col("m")
    short = m < n
    out = part.to_frame("text").lazy().select(
        t.str.len_chars().alias("n"), match_whole(t, _ANY).alias("a")).with_columns(
        a.str.len_chars().alias("m")).select(  # (in stages: the match's length is read three times)
        pl.when(short).then(m).alias("cut"),
        pl.when(short & pl.any_horizontal(a.str.contains(x) for x in _TIMED))
        .then(match_whole(a, CAPTURE_TIME)).alias("found"),
        (m == n).fill_null(False).alias("whole")).collect(engine=ENGINE)
    whole = out.drop_in_place("whole")
    if whole.any():
        at = whole.arg_true()
        each = _each_prefix(part.gather(at))
        out = out.with_columns(out["cut"].scatter(at, each["cut"]), out["found"].scatter(at, each["found"]))
    return out


def _cut_prefixes(text: pl.Series) -> tuple[pl.Series, pl.Series]:
    """``base.strip_prefixes`` over a column: each line without the prefixes a capture put before
    it (the first pattern that matches, again, up to four deep, never the whole line), and the
    text of the first timestamp among them."""
    rest = text.fill_null("")
    stamp = pl.Series(values=[None] * len(rest), dtype=pl.String)
    rows = np.arange(len(rest))  # the rows a prefix was cut from in the last round
    for _ in range(4):
        part = rest if len(rows) == len(rest) else rest.gather(rows)
        out = _prefix_cuts(part)
        done = out["cut"].is_not_null()
        if not done.any():
            break
        if len(rows) == len(rest) and done.all():  # every line cut (a capture's usual round)
            rest = part.str.slice(out["cut"])
            stamp = stamp.fill_null(out["found"])
            continue
        at = done.arg_true()
        rows = rows[at.to_numpy()]
        rest = rest.scatter(rows, part.gather(at).str.slice(out["cut"].gather(at)))
        stamp = stamp.scatter(rows, stamp.gather(rows).fill_null(out["found"].gather(at)))
    return rest, stamp


def times(stamp: pl.Series) -> pl.Series:
    """``base._iso`` over a column: '2024-05-01T10:00:00,123456789' → a datetime (µs); a
    month-first '12/01/2024 10:00:00' too (day first where the month cannot be)."""
    if stamp.str.contains("/", literal=True).any():
        day_first = stamp.str.slice(0, 2).cast(pl.Int64, strict=False) > 12
        stamp = pl.select(pl.when(pl.lit(day_first))
                          .then(pl.lit(stamp).str.replace(r"^(\d\d)/(\d\d)/(\d{4})", "${3}-${2}-${1}"))
                          .otherwise(pl.lit(stamp).str.replace(r"^(\d\d)/(\d\d)/(\d{4})", "${3}-${1}-${2}"))
                          ).to_series()
    head = stamp.str.slice(0, 19)
    if head.str.contains("T", literal=True).any():
        head = head.str.replace("T", " ", literal=True)
    # (no cache of the unique stamps: a log's stamps are mostly unique, and building it cost more)
    when = head.str.to_datetime("%Y-%m-%d %H:%M:%S", strict=False, time_unit="us", cache=False)
    if (stamp.str.len_bytes() > 19).any():  # a fraction of a second, to the microsecond
        micro = stamp.str.slice(20, 6).str.pad_end(6, "0").cast(pl.Int64, strict=False).fill_null(0)
        when = pl.select(pl.lit(when) + pl.duration(microseconds=pl.lit(micro))).to_series()
    return when


def leading_times(text: pl.Series) -> pl.Series:
    """``base.leading_time`` over a column: the wall time each line starts with, or null."""
    return times(text.str.extract(TIMESTAMP.pattern, 1))


def local_times(ms: pl.Series) -> pl.Series:
    """POSIX times in ms as local wall times, as ``base.local_time_ms`` gives them (none where there
    is no such time): the UTC offset looked up once per hour of the times (hours whose two ends
    share it; the rows of an hour a daylight-saving change falls in, time by time)."""
    ok = ms.is_between(-62_135_596_800_000 + 86_400_000, 253_402_214_400_000)  # years 1..9999
    hour = (ms // 3_600_000).alias("hour")
    offsets: dict[int, int] = {}
    for h in hour.filter(ok).unique().to_list():
        ends = {_utc_offset(h * 3600), _utc_offset(h * 3600 + 3599)}
        if len(ends) == 1 and None not in ends:
            offsets[h] = ends.pop()  # type: ignore[assignment]
    offset = hour.replace_strict(list(offsets), list(offsets.values()), default=None, return_dtype=pl.Int64)
    out = pl.select(pl.when(ok & offset.is_not_null()).then(ms * 1000 + offset)).to_series()
    out = out.cast(pl.Datetime("us")).alias("time")
    odd = (ok & offset.is_null()).fill_null(False)
    if odd.any():
        at = odd.arg_true()
        fixed = pl.Series([local_time_ms(t) for t in ms.gather(at).to_list()], dtype=pl.Datetime("us"))
        out = out.scatter(at, fixed)
    return out


def _utc_offset(seconds: int) -> int | None:
    """The local UTC offset (µs) at a POSIX time, as ``datetime.fromtimestamp`` applies it."""
    try:
        local = datetime.fromtimestamp(seconds)
        utc = datetime.fromtimestamp(seconds, UTC).replace(tzinfo=None)
    except (ValueError, OverflowError, OSError):
        return None
    return round((local - utc).total_seconds() * 1e6)


def cut_prefixes(text: pl.Series, strip: bool) -> tuple[pl.Series, pl.DataFrame | None]:
    """``base.feed_ranked``'s cutting over a column of lines: without a capture's prefixes (when
    ``strip``) and a torchrun rank prefix; the rank and the capture's time per line, as a frame
    (``rank``, ``when``; None when neither is there)."""
    tags: dict[str, pl.Series] = {}
    rest = text
    if strip:
        rest, stamp = _cut_prefixes(text)
        if stamp.is_not_null().any():
            tags["when"] = times(stamp).alias("when")
    maybe = rest.str.slice(0, 32).str.contains("]:", literal=True).fill_null(False)
    if maybe.any():
        g = rest.str.extract_groups(_RANK)
        rank = pl.select(pl.when(maybe).then(g.struct.field("rank").cast(pl.Int64, strict=False))
                         ).to_series()
        if rank.is_not_null().any():
            cut = pl.select(pl.when(rank.is_not_null()).then(
                g.struct.field("all").str.len_chars()).otherwise(0)).to_series()
            rest = pl.select(rest.str.slice(cut)).to_series()
            tags["rank"] = rank
    return rest, (pl.DataFrame(tags) if tags else None)


def without_prefixes(chunk: bytes, first_lineno: int, strip: bool, sink: Sink
                     ) -> tuple[bytes, pl.Series | None, pl.Series | None]:
    """The chunk as a vectorised reader reads it: its lines without a capture's prefixes (when
    ``strip``) and torchrun rank prefixes, whose time and rank are set as ``sink.tags`` for the
    chunk's rows; with the original lines (for the per-line parser) when anything was cut or
    hidden; and the chunk's lines as the reader reads them, where they were split already."""
    sink.tags = None
    if not strip and not _RANK_MARK.search(chunk):
        return chunk, None, None
    if not strip and (few := _ranked_starts(chunk)) is not None:
        # a few lines behind a rank prefix: hidden from the vectorised reader, the parser reads
        # them as the file has them (and cuts their prefix)
        if not few:
            return chunk, None, None
        original = lines_of(chunk)
        # each hidden line's index in the chunk
        at = np.searchsorted(line_bounds(np.frombuffer(chunk, dtype=np.uint8))[0], few)
        return _hidden(chunk, few), original, original.clone().scatter(at, HIDDEN)  # (in place)
    text = lines_of(chunk)
    rest, tags = cut_prefixes(text, strip)
    if tags is None and rest.fill_null("").equals(text.fill_null("")):
        return chunk, None, None
    if tags is not None:
        sink.tags = tags.with_columns(line_numbers(first_lineno, len(text)))
    return (rest.fill_null("").str.join("\n").item() + "\n").encode(), text, None


Rows = Callable[[pl.Series, pl.Series, Sink, Any], pl.Series]  # (text, lineno, sink, parser)


def ranked_feed(sink: Sink, strip: bool) -> Callable[[Any, int, str], str | None]:
    """The per-line feed for lines as the file has them: ``base.feed_ranked`` (a capture's
    prefixes cut when ``strip``, a rank prefix always), records tagged with their time and rank."""
    return lambda parser, lineno, line: feed_ranked(parser, sink, lineno, line, strip)


def read_chunk(chunk: bytes, first: int, sink: Sink, acc: Accounting, parser: LineParser,
               strip: bool, rows: Rows) -> None:
    """One chunk of whole lines, the first numbered ``first``: ``rows(text, lineno, sink,
    parser)`` reads what it can column-wise (into ``sink``, as ``add_rows`` does; ``parser`` for
    state it shares with the per-line path) and returns the rows it read; every other line goes
    to ``parser``, as it stands in the file. A capture's prefixes (``strip``) and torchrun rank
    prefixes are cut off first, their time and rank kept (see ``without_prefixes``)."""
    data, original, text = without_prefixes(chunk, first, strip, sink)
    text = lines_of(data) if text is None else text
    as_filed = text if original is None else original
    blank = as_filed.is_null() | (as_filed.str.strip_chars().str.len_bytes() == 0)
    lineno = line_numbers(first, len(text))
    n_idle = len(sink.idle_lines)
    done = rows(text, lineno, sink, parser)
    account_chunk(data, as_filed, lineno, blank, ~done, n_idle, sink, acc, parser,
                  ranked_feed(sink, strip))
    sink.tags = None


Text = TypeVar("Text", pl.Series, pl.Expr)


def match_whole(text: Text, pattern: str) -> Text:
    """``pattern``'s first match in each text, whole (null where none). The regex crate's
    captures (``extract_groups``, ``matched``) cost two to six times a match, so where a
    pattern's groups can be cut from its match with string operations, the match is taken whole
    and cut (each such cut tested equal to the groups)."""
    return text.str.extract_all(pattern).list.first()


def matched(text: pl.Series, pattern: str) -> tuple[pl.Series, pl.DataFrame]:
    """The rows ``pattern`` matches (from their start unless it says otherwise) and its groups
    on those rows."""
    groups = text.str.extract_groups(pattern)
    first = groups.struct.field(groups.struct.fields[0])
    hit = first.is_not_null() if len(groups.struct.fields) else text.str.contains(pattern)
    return hit.fill_null(False), groups.filter(hit.fill_null(False)).struct.unnest()
