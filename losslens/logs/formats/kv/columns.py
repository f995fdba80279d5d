"""Vectorised reading of key=value logs with polars: the path for multi-GB DFlash-style logs.

polars' CSV reader splits every line at '=' (and '~', read as '='), so cell i holds the end of
value i-1 and the name of key i. Lines whose keys follow a *template* (the key sequence of the
common lines) are read column by column; every other line, and every line the template cannot
read exactly as the per-line parser would, goes to that parser. Both paths give the same frame;
tests check this on fixtures and generated logs.
"""

from __future__ import annotations

import io
from collections import Counter
from dataclasses import dataclass

import numpy as np
import polars as pl

from losslens.logs.base import TIMESTAMP, Format, LineParser
from losslens.logs.formats.kv import KV, TOKRATE
from losslens.logs.names import MAGNITUDE, STEP_KEYS, UNIT_SCALE, canonical, is_eval, is_training_metric
from losslens.logs.sink import Accounting, Sink, feed_line
from losslens.logs.source import Source, count_lines, decode_lines

SAMPLE_LINES = 500
MAX_TEMPLATES = 3
MAX_TEMPLATE_KEYS = 256  # a wider line is read by the per-line parser
LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ%/()"
VALUE_END = r"[\s|,;\[\]()]"


@dataclass(frozen=True)
class Template:
    """The shape of one kind of key=value line (its keys in order and the text between them), from which
    a chunk of such lines is read column by column."""
    keys: tuple[str, ...]
    lead: tuple[str, ...]  # the text between the previous value (or the line's start) and a key;
    # '\x00' + its last character where that text varies (holds numbers)
    lists: tuple[bool, ...]  # the value is a [..] list
    rate_cell: int | None  # the cell holding '(32.1Ktok/s)', if any
    time: str | None  # 'bracket' ([2026-05-15 21:26:03] ...), 'plain', or None


def _time_shape(line: str) -> str | None:
    m = TIMESTAMP.match(line)
    if not m:
        return "other" if line[:1].isdigit() else None
    if len(m.group(1)) != 19 or m.group(0) not in (m.group(1), f"[{m.group(1)}]"):
        return "other"
    return "bracket" if line.startswith("[") else "plain"


def templates(sample: list[str]) -> list[Template]:
    """The commonest key sequences among sample lines in which every '='/'~' is a pair."""
    counts: Counter[Template] = Counter()
    for line in sample:
        pairs = KV.findall(line)
        if not pairs or len(pairs) > MAX_TEMPLATE_KEYS or "\x1b" in line or \
                line.count("=") + line.count("~") != len(pairs):
            continue
        shape = _time_shape(line)
        if shape == "other":
            continue
        cells = line.replace("~", "=").split("=")
        rate = [i for i, c in enumerate(cells) if TOKRATE.search(c)]
        values = [""] + [v for _, _, v in pairs]
        lead = tuple(c[len(v):-len(k)] if i else c[-len(k) - 1:-len(k)]
                     for i, (c, v, (k, _, _)) in enumerate(zip(cells, values, pairs, strict=False)))
        # text with numbers in it between a value and the next key varies: keep its last char
        lead = tuple("\x00" + x[-1:] if any(ch.isdigit() for ch in x) else x for x in lead)
        counts[Template(tuple(k for k, _, _ in pairs), lead,
                        tuple(v.startswith("[") for _, _, v in pairs),
                        rate[0] if rate else None, shape)] += 1
    return [t for t, _ in counts.most_common(MAX_TEMPLATES)]


def _number_expr(raw: pl.Expr) -> pl.Expr:
    """A float, or a number with a unit ('0.68b/s' → 0.68, '4.0d' → 345600); null if neither."""
    number = raw.str.strip_chars_end(LETTERS)
    written = raw.str.slice(number.str.len_chars())
    scale = pl.coalesce(  # as names.unit_scale: '1.05M' is a million, '3m' three minutes
        written.replace_strict(list(MAGNITUDE), list(MAGNITUDE.values()), default=None,
                               return_dtype=pl.Float64),
        written.str.to_lowercase().replace_strict(list(UNIT_SCALE), list(UNIT_SCALE.values()),
                                                  default=None, return_dtype=pl.Float64))
    return pl.coalesce(raw.cast(pl.Float64, strict=False),
                       number.cast(pl.Float64, strict=False) * scale)


def _numbers(raw: pl.Series) -> tuple[pl.Series, pl.Series | None]:
    """'[50, 50, 46]' strings → List(Float64); rows that need the per-line parser or None."""
    inner = raw.str.strip_prefix("[").str.strip_suffix("]")
    empty = inner.str.strip_chars().str.len_bytes() == 0
    value = inner.str.split(", ").cast(pl.List(pl.Float64), strict=False)
    n_empty = int(empty.sum())
    if value.list.explode().null_count() > n_empty + value.null_count():
        value = (inner.str.replace_all(" ", "", literal=True).str.split(",")
                 .cast(pl.List(pl.Float64), strict=False))
    if n_empty:
        value = pl.select(pl.when(empty).then(pl.lit([], dtype=pl.List(pl.Float64)))
                          .otherwise(value)).to_series()
    missing = value.list.explode().null_count() - value.null_count() - n_empty
    if missing == 0:
        return value, None
    unread = raw.is_not_null() & ~empty & value.list.eval(pl.element().is_null()).list.any()
    return value, unread


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


def _template_rows(cells: pl.DataFrame, t: Template, rate_only_there: bool) -> pl.DataFrame:
    """Per row: does it follow ``t``, and the raw value of each key."""
    m = len(t.keys)
    c = [pl.col(f"c{i}") for i in range(m + 2)]
    fits = [c[m].is_not_null(), c[m + 1].is_null()]
    for i, (key, lead) in enumerate(zip(t.keys, t.lead, strict=True)):
        # cell i ends with the key, behind the same text as in the template
        fixed = lead.removeprefix("\x00")
        fits.append(c[i].str.ends_with(fixed + key) if lead or i else c[i] == key)
    raws = []
    for i, is_list in enumerate(t.lists):
        cell = c[i + 1]
        tail = len(t.lead[i + 1]) + len(t.keys[i + 1]) if i + 1 < m else None
        if tail and not is_list and not t.lead[i + 1].startswith("\x00"):
            # the value is all that stands before the fixed tail: a float parse checks it
            raws.append(cell.str.head(-tail).alias(f"raw{i}"))
            continue
        if is_list:
            end = cell.str.find("]", literal=True) + 1
            fits.append(cell.str.starts_with("[") & end.is_not_null())
        else:
            end = cell.str.find(VALUE_END)
            fits.append(end.is_null() | (end > 0))
        raws.append(pl.when(end.is_null()).then(cell).otherwise(cell.str.slice(0, end))
                    .alias(f"raw{i}"))
    if t.rate_cell is not None:
        raws.append(c[t.rate_cell].str.extract_groups(TOKRATE.pattern).alias("rate"))
        if not rate_only_there:  # a rate elsewhere in some line: the per-line parser decides
            fits += [~c[i].str.contains("tok/s", literal=True) for i in range(t.rate_cell)]
    elif not rate_only_there:
        fits += [~c[i].str.contains("tok/s", literal=True) for i in range(m + 1)]
    if t.time is not None:
        start = 1 if t.time == "bracket" else 0
        raws.append(c[0].str.slice(start, 19).str.to_datetime("%Y-%m-%d %H:%M:%S", strict=False)
                    .alias("time"))
        fits += [pl.col("time").is_not_null(), ~c[0].str.slice(start + 19, 1).is_in([".", ","])]
    else:
        fits.append(~c[0].str.contains(r"^\[?\d{4}-\d\d-\d\d[ T]\d\d:"))
    out = cells.lazy().select(raws).collect()
    fit = pl.concat([cells, out], how="horizontal").lazy().select(
        pl.all_horizontal(fits).alias("fit")).collect()["fit"].fill_null(False)
    return out.with_columns(fit)


def _read_template(rows: pl.DataFrame, t: Template, lineno: pl.Series, sink: Sink,
                   pending: pl.Series) -> pl.Series:
    """Add the rows of ``t`` to ``sink``; returns the rows still unread (for the next pass)."""
    fit = rows["fit"] & pending
    unread = [~fit]
    names = [canonical(k) for k in t.keys]
    step_idx = sorted((i for i, k in enumerate(t.keys) if k.lower() in STEP_KEYS),
                      key=lambda i: STEP_KEYS.index(t.keys[i].lower()))
    cols: dict[str, pl.Series] = {}
    scalar = {}
    for i, key in enumerate(t.keys):
        if i in step_idx or names[i] in cols or names[i] in scalar:
            continue  # as in the per-line parser: the first key for a name wins
        sink.names.setdefault(names[i], key)
        if t.lists[i]:
            value, bad = _numbers(rows[f"raw{i}"])
            if bad is not None:
                unread.append(bad)
            cols[names[i]] = value
        else:
            scalar[names[i]] = i
    if scalar:  # all scalar columns at once, in parallel
        exprs = [_number_expr(pl.col(f"raw{i}")).alias(name) for name, i in scalar.items()]
        values = rows.lazy().select(exprs).collect()
        flags = rows.lazy().select(pl.any_horizontal(
            [pl.col(f"raw{i}").is_not_null() for i in scalar.values()]).alias("x")).collect()
        misses = pl.concat([rows, values], how="horizontal").lazy().select(pl.any_horizontal(
            [pl.col(f"raw{i}").is_not_null() & pl.col(name).is_null()
             for name, i in scalar.items()]).alias("x")).collect()["x"]
        del flags
        unread.append(misses)
        cols = {**{name: values[name] for name in scalar}, **cols}
        cols = {n: cols[n] for n in dict.fromkeys([names[i] for i in range(len(t.keys))
                                                    if i not in step_idx]) if n in cols}
    n = rows.height
    step = pl.repeat(None, n, dtype=pl.Int64, eager=True)
    for i in step_idx:
        head = rows[f"raw{i}"].str.split("/").list.first().str.strip_chars()
        as_float = head.cast(pl.Float64, strict=False)
        whole = pl.select(pl.when(as_float.is_finite() & (as_float == as_float.floor()))
                          .then(as_float.cast(pl.Int64, strict=False))).to_series()
        step = step.fill_null(head.cast(pl.Int64, strict=False).fill_null(whole))
    if t.rate_cell is not None:
        r = rows["rate"].struct
        tok = r.field("1").cast(pl.Float64, strict=False) * r.field("2").replace_strict(
            ["", "K", "M", "G"], [1.0, 1e3, 1e6, 1e9], default=None, return_dtype=pl.Float64)
        cols["tokens_per_s"] = cols["tokens_per_s"].fill_null(tok) if "tokens_per_s" in cols \
            else tok
        sink.names.setdefault("tokens_per_s", "(Ktok/s)")
    bad = pl.DataFrame(unread).select(pl.any_horizontal(pl.all())).to_series()
    train_names = [c for c in cols if not is_eval(c)]
    eval_names = [c for c in cols if is_eval(c)]
    meta = {"step": step, "line": lineno}
    if t.time is not None:
        meta["time"] = rows["time"]
    frame = pl.DataFrame({**meta, **cols}).filter(~bad)
    flags = frame.select(
        pl.any_horizontal([pl.col(c).is_not_null() for c in train_names if is_training_metric(c)]
                          or [pl.lit(False)]).alias("train"),
        pl.any_horizontal([pl.col(c).is_not_null() for c in eval_names] or [pl.lit(False)])
        .alias("eval"))
    sink.add(frame.filter(flags["train"]).select(list(meta) + train_names))
    if eval_names:
        extra = ["epoch"] if "epoch" in cols else []
        sink.add(frame.filter(flags["eval"]).select(list(meta) + eval_names + extra), evals=True)
    idle = frame.filter(~flags["train"] & ~flags["eval"])["line"]
    sink.idle_lines.extend(idle.to_list())
    return pending & bad


def parse_chunk(chunk: bytes, first_lineno: int, tpls: list[Template], sink: Sink,
                acc: Accounting, parser: LineParser) -> None:
    """Parse one chunk (whole lines) into ``sink`` and ``acc``."""
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
    lineno = pl.Series("line", np.arange(first_lineno, first_lineno + n, dtype=np.int64))
    pending = pl.Series(np.ones(n, dtype=bool))
    n_idle = len(sink.idle_lines)
    if cells is not None:
        n_rate = chunk.count(b"tok/s")
        for t in tpls:
            only = t.rate_cell is not None and n_rate == int(
                cells[f"c{t.rate_cell}"].str.contains("tok/s", literal=True).sum()) or n_rate == 0
            rows = _template_rows(cells, t, only)
            pending = _read_template(rows, t, lineno, sink, pending)
            if not pending.any():
                break
    acc.total += n
    acc.blank += int(blank.sum())
    idle = sink.idle_lines[n_idle:]
    acc.parsed += int((~pending).sum()) - len(idle)
    rest = pending & ~blank
    if not idle and not rest.any():
        return
    text = lines_of(chunk)
    for ln in idle:
        acc.skip("no training metric", ln, text[ln - first_lineno])
    for ln, line in zip(lineno.filter(rest).to_list(), text.filter(rest).to_list(), strict=True):
        if "\x00" in line:
            acc.skip("binary data", ln, line)
            continue
        reason = feed_line(parser, ln, line)
        if reason is None:
            acc.parsed += 1
        else:
            acc.skip(reason, ln, line)


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


def read(src: Source, fmt: Format, sink: Sink, acc: Accounting) -> None:
    """A key=value log, chunk by chunk: the template lines vectorised, odd lines per line."""
    parser = fmt.parser(sink)
    tpls: list[Template] | None = None
    for chunk in src.chunks():
        if tpls is None:
            sample = decode_lines(chunk[: 1 << 20])[: SAMPLE_LINES]
            tpls = templates(sample)
        parse_chunk(chunk, acc.total + 1, tpls, sink, acc, parser)
    parser.finish()
