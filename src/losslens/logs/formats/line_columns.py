"""Column-wise readers for the regex line formats (nanoGPT, Megatron-LM, fairseq, torchtitan, OLMo):
each chunk's lines that the format's own pattern matches are read with polars' regex kernels into
the records its per-line parser would emit (``logs.columnar.read_columns`` gives the rest of the
lines to that parser). Tests check both paths give the same frame."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import polars as pl

from losslens.logs.base import ANSI
from losslens.logs.columnar import (
    ENGINE,
    add_rows,
    any_of,
    first_reading,
    leading_times,
    local_times,
    match_whole,
    matched,
    metric_columns,
    number_column,
    number_expr,
    unit_of,
)
from losslens.logs.formats.fairseq import FAIRSEQ_INNER, FAIRSEQ_KV, FAIRSEQ_PIPE, FAIRSEQ_VALID
from losslens.logs.formats.megatron import MEGA_NAMES, MEGA_VALID
from losslens.logs.formats.nanogpt import LLMC, LLMC_NEW, MODDED, MODDED_PAIR, NANO_EVAL, NANO_ITER
from losslens.logs.formats.olmo import OLMO_FIELD, OLMO_HEAD
from losslens.logs.formats.torchtitan import TITAN, TITAN_PAIR
from losslens.logs.names import RESERVED, STEP_KEYS, columnar, is_eval, unreserved
from losslens.logs.sink import MAX_KEYS, Sink

# megatron.MEGA_ITER up to the first '|' (the body, its '(.*)$', is the rest of the line)
ITER_HEAD = r"^(?<head>\s*iteration\s+(?<step>\d+)\s*/\s*\d+\s*\|)"


def _per_thousand(ms: pl.Series) -> pl.Series:
    """ms / 1000 exactly as Python divides: polars multiplies by the reciprocal (18079.4 / 1000
    would be 18.079400000000003, not 18.0794)."""
    seconds = pl.Series(ms.name, ms.to_numpy() / 1000.0, dtype=pl.Float64)
    return seconds if not ms.null_count() else pl.select(
        pl.when(pl.lit(ms).is_not_null()).then(pl.lit(seconds))).to_series()


def _less(rows: pl.Series | np.ndarray, out: pl.Series) -> pl.Series:
    """The chunk's ``rows`` without those ``out`` flags (a mask over ``rows``' own rows)."""
    keep = np.array(rows.to_numpy() if isinstance(rows, pl.Series) else rows, dtype=bool)
    keep[np.flatnonzero(keep)[out.to_numpy()]] = False
    return pl.Series(keep)


def _case_blind(pattern: str) -> str:
    return "(?i)" + pattern


def nanogpt_rows(text: pl.Series, lineno: pl.Series, sink: Sink, parser: object = None) -> pl.Series:
    """'iter N: loss X, time Yms, mfu Z%' and 'step N: train loss X, val loss Y' lines."""
    hit, g = matched(text, _case_blind(columnar(NANO_ITER)))
    if hit.any():
        mfu = g["4"].cast(pl.Float64)
        cols = {"loss": number_column(g["2"])[0], "step_time_s": _per_thousand(g["3"].cast(pl.Float64)),
                "mfu": pl.select(pl.when(mfu != -100.0).then(mfu)).to_series()}  # -100: unset
        sink.names.update(loss="loss", step_time_s="time", mfu="mfu")
        add_rows(sink, {"step": g["1"].cast(pl.Int64, strict=False), "line": lineno.filter(hit)}, cols, None,
                 idle=False)
    rest = ~hit & text.str.contains(_case_blind(columnar(NANO_EVAL))).fill_null(False)
    if rest.any():
        _, g = matched(text.filter(rest), _case_blind(columnar(NANO_EVAL)))
        sink.names.update(eval_loss="val loss", eval_train_loss="train loss")
        add_rows(sink, {"step": g["1"].cast(pl.Int64, strict=False), "line": lineno.filter(rest)},
                 {"eval_train_loss": number_column(g["2"])[0], "eval_loss": number_column(g["3"])[0]},
                 None, idle=False)
    return hit | rest


def _field_key(part: pl.Expr) -> pl.Expr:
    """A Megatron field's name: the text before its first ':', stripped."""
    return part.str.splitn(":", 2).struct.field("field_0").str.strip_chars()


def _same_fields(body: pl.Series, sink: Sink) -> dict[str, pl.Series] | None:
    """``_fields`` where every body's '|' parts hold the first body's names in the same order,
    each name of MEGA_NAMES once: read position by position, without the long form and its
    pivot; None where a body does not."""
    first = body[:1].str.split("|").explode()
    if not len(body) or first.is_null().any():
        return None
    keys = first.to_frame("p").select(_field_key(pl.col("p"))).to_series().to_list()
    named = [(j, MEGA_NAMES[k.lower()]) for j, k in enumerate(keys) if k.lower() in MEGA_NAMES]
    if not all(k.isascii() for k in keys) or len({n for _, n in named}) != len(named):
        return None  # (a name twice: the last value wins; polars' and Python's lower() differ past ASCII)
    parts = pl.col("parts")
    # in stages, as polars computes an expression again wherever a later one holds it: each part
    # cut at its first ':', then its name and word, then the checks, then a first reading of the
    # words as numbers (with the unit of the first body's)
    n = len(keys)
    cut = [parts.list.get(j, null_on_oob=True).str.splitn(":", 2).alias(f"p{j}") for j in range(n)]
    split = [pl.col(f"p{j}").struct.field("field_0").str.strip_chars().alias(f"k{j}") for j in range(n)]
    split += [pl.col(f"p{j}").struct.field("field_1").str.strip_chars().alias(f"w{j}") for j, _ in named]
    fits = [pl.col("n") == n] + [pl.col(f"k{j}") == k for j, k in enumerate(keys)]
    words = [pl.when((w.str.len_bytes() > 0) & ~w.str.contains(r"\s")).then(w).alias(f"w{j}")
             for j, w in ((j, pl.col(f"w{j}")) for j, _ in named)]
    units = [unit_of(p.partition(":")[2].strip()) for p in first.to_list()]
    out = body.to_frame("body").lazy().with_columns(pl.col("body").str.split("|").alias("parts")).select(
        parts.list.len().alias("n"), *cut).select("n", *split).select(
        pl.all_horizontal(fits).fill_null(False).alias("fit"), *words).with_columns(
        number_expr(pl.col(f"w{j}"), units[j]).alias(f"f{j}") for j, _ in named).collect(engine=ENGINE)
    if not out["fit"].all():
        return None
    cols: dict[str, pl.Series] = {}
    for j, name in named:
        value = number_column(out[f"w{j}"], first=out[f"f{j}"])[0]
        if name == "step_time_s":  # (numpy's division: polars' multiplies by the inverse)
            held = value.is_not_null().arg_true()
            value = value.scatter(held, value.gather(held).to_numpy() / 1000.0)
        if value.is_not_null().any():  # (as _wide: a name no row holds is no column)
            name = unreserved(name) if name in RESERVED else name
            sink.names.setdefault(name, keys[j])
            cols[name] = value.alias(name)
    return cols


def _fields(body: pl.Series, sink: Sink) -> dict[str, pl.Series]:
    """The 'name: value |' fields of Megatron lines' bodies as metric columns (one row per body):
    MEGA_NAMES' names, the last of a name on a line kept, as ``_MegatronParser._fields``."""
    same = _same_fields(body, sink)
    return same if same is not None else _long_fields(body, sink)


def _long_fields(body: pl.Series, sink: Sink) -> dict[str, pl.Series]:
    """``_fields`` through the long form: one row per (body, part), pivoted."""
    parts = pl.DataFrame({"row": pl.int_range(0, len(body), eager=True), "part": body.str.split("|")}
                         ).explode("part")
    # MEGA_FIELD without a regex: the name before the first ':', one word after it
    cut = parts["part"].str.splitn(":", 2)
    key = cut.struct.field("field_0").str.strip_chars()
    word = cut.struct.field("field_1").str.strip_chars()
    word = pl.select(pl.when((word.str.len_bytes() > 0) & ~word.str.contains(r"\s")).then(word)
                     ).to_series()
    name = key.str.to_lowercase().replace_strict(list(MEGA_NAMES), list(MEGA_NAMES.values()),
                                                 default=None, return_dtype=pl.String)
    value = number_column(word)[0]
    fields = pl.DataFrame({"row": parts["row"], "name": name, "key": key, "value": value}).filter(
        pl.col("name").is_not_null() & pl.col("value").is_not_null())
    ms = (fields["name"] == "step_time_s").to_numpy()
    seconds = fields["value"].to_numpy().copy()  # (no nulls here)
    seconds[ms] = seconds[ms] / 1000.0
    fields = fields.with_columns(pl.Series("value", seconds))
    return _wide(fields, len(body), sink)


_RESERVED = sorted(RESERVED)  # a metric named like a frame column ('step', 'line') and its new name
_UNRESERVED = [unreserved(r) for r in _RESERVED]


def _wide(fields: pl.DataFrame, n: int, sink: Sink, named: bool = True) -> dict[str, pl.Series]:
    """(row, name, key, value) fields as one column per name over ``n`` rows, the last of a name
    on a row kept; each name's first key named in ``sink``, as the per-line parsers name them
    (unless not ``named``: the caller names them)."""
    fields = fields.with_columns(pl.col("name").replace(_RESERVED, _UNRESERVED))
    if named:
        for name, key in fields.group_by("name", maintain_order=True).agg(pl.col("key").first()).rows():
            sink.names.setdefault(name, key)
    rows = pl.DataFrame({"row": pl.int_range(0, n, eager=True)})
    wide = rows.join(fields.pivot(on="name", index="row", values="value", aggregate_function="last"),
                     on="row", how="left") if fields.height else rows
    return {c: wide[c] for c in wide.columns if c != "row"}


def megatron_rows(text: pl.Series, lineno: pl.Series, sink: Sink, parser: object = None) -> pl.Series:
    """' iteration N/ M | name: value | …' lines and 'validation loss at iteration N | …' ones."""
    # MEGA_ITER, the body taken after the match, matched whole: the step is the digits between
    # 'iteration' and the '/'
    head = match_whole(text, ITER_HEAD)
    hit = head.is_not_null()
    if hit.any():
        h = pl.col("h")
        got = pl.DataFrame({"line": text.filter(hit), "h": head.filter(hit)}).select(
            pl.col("line").str.slice(h.str.len_chars()).alias("body"),
            h.str.splitn("/", 2).struct.field("field_0").str.strip_chars().str.strip_prefix("iteration")
            .str.strip_chars().cast(pl.Int64, strict=False).alias("step"))
        add_rows(sink, {"step": got["step"], "line": lineno.filter(hit)}, _fields(got["body"], sink), None)
    valid = MEGA_VALID.pattern
    rest = ~hit & text.str.contains(_head_of(valid)).fill_null(False)
    if rest.any():
        g = text.filter(rest).str.extract_groups(valid).struct.unnest()
        cols: dict[str, pl.Series] = {}
        clash: list[pl.Series] = []
        for k, v in _fields(g["2"], sink).items():  # as Sink.emit(kind="eval") names them
            name = k if is_eval(k) or k == "epoch" else "eval_" + k
            if name in cols:  # 'lm loss' and 'lm loss value' on one line: its order decides
                clash.append(cols[name].is_not_null() & v.is_not_null())
                v = cols[name].fill_null(v)
            cols[name] = v
        bad = any_of(clash, len(g)) if clash else None
        add_rows(sink, {"step": g["1"].cast(pl.Int64, strict=False), "line": lineno.filter(rest)},
                 cols, bad)
        if bad is not None:  # those rows are the per-line parser's
            rest = _less(rest, bad)
    return hit | rest


MODDED_NAMES = {"train_loss": "loss", "val_loss": "eval_loss", "train_time": "train_time_s",
                "step_avg": "step_avg_s"}
MODDED_SAMPLE = 500  # rows whose key sequences give a chunk's templates
MODDED_TEMPLATES = 3


def _modded_name(key: str) -> str:
    return unreserved(MODDED_NAMES.get(key, key))


def _modded_templates(lines: pl.Series) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    """The commonest key sequences of the MODDED lines among the first of ``lines`` ('step:N/T
    k1:v1 k2:v2 …', split at single spaces), each key a word and once in its row, with the unit
    each value was written with in the first row that has it ('ms')."""
    counts: Counter[tuple[str, ...]] = Counter()
    units: dict[tuple[str, ...], tuple[str, ...]] = {}
    for row in lines.head(MODDED_SAMPLE).to_list():
        if row is None or not MODDED.match(row):
            continue
        pairs = [p.partition(":") for p in row.split(" ")[1:]]
        keys = tuple(k for k, _, _ in pairs)
        counts[keys] += 1
        if keys not in units:
            units[keys] = tuple(unit_of(v) for _, _, v in pairs)
    return [(keys, units[keys]) for keys, _ in counts.most_common(MODDED_TEMPLATES)
            if 0 < len(keys) <= MAX_KEYS and len(set(keys)) == len(keys)
            and all(_WORD.fullmatch(k) for k in keys)]


Named = list[tuple[int, int, str, str]]  # (row, place on it, name, key): where a name is first held


def _modded_same(lines: pl.Series, sink: Sink, named: Named
                 ) -> tuple[list[tuple[np.ndarray, dict[str, pl.Series]]], np.ndarray, pl.Series]:
    """The ``lines`` (stripped) that are 'step:N/T' and then one of the chunk's commonest key
    sequences and nothing else (single spaces between the pairs, no other blank, ASCII: MODDED
    matches each of them): read position by position, each template's rows as one group of (the
    rows, their metric columns); returns the groups, the rows left (for MODDED and the long form)
    and the step of the rows read. ``named``: where each name is first held, for naming them in
    line order."""
    left = np.ones(len(lines), dtype=bool)
    templates = _modded_templates(lines)
    if not templates:
        return [], left, pl.repeat(None, len(lines), dtype=pl.Int64, eager=True)
    ok = ~pl.col("b").str.contains(r"[\t\n\x0b\x0c\r]")
    if not _plain(lines):  # (Python's \S and the regex crate's may differ there)
        ok = ok & ~pl.col("b").str.contains(_UNSURE)
    head = pl.col("parts").list.first()
    frame = lines.to_frame("b").with_columns(pl.col("b").str.split(" ").alias("parts")).with_columns(
        (ok & head.str.contains(r"^step:\d+/\d+$")).fill_null(False).alias("ok"),
        head.str.slice(5).str.splitn("/", 2).struct.field("field_0").cast(pl.Int64, strict=False)
        .alias("step"))
    groups = []
    for keys, units in templates:
        m = len(keys)
        cut = [pl.col("parts").list.get(j + 1, null_on_oob=True).str.splitn(":", 2) for j in range(m)]
        fits = [pl.col("ok"), pl.lit(pl.Series(left)), pl.col("parts").list.len() == m + 1]
        fits += [c.struct.field("field_0") == k for c, k in zip(cut, keys, strict=True)]
        values = [c.struct.field("field_1") for c in cut]
        out = frame.lazy().select(pl.all_horizontal(fits).fill_null(False).alias("fit"),
                                  *(v.alias(f"v{j}") for j, v in enumerate(values)),
                                  *(number_expr(v, u).alias(f"f{j}")
                                    for j, (v, u) in enumerate(zip(values, units, strict=True)))
                                  ).collect(engine=ENGINE)
        fit = out["fit"].to_numpy()
        if not fit.any():
            continue
        out = out.filter(out["fit"])
        at = np.flatnonzero(fit)
        read = [number_column(out[f"v{j}"], first=out[f"f{j}"])[0] for j in range(m)]
        cols: dict[str, pl.Series] = {}
        for name in dict.fromkeys(_modded_name(k) for k in keys):
            places = [j for j, k in enumerate(keys) if _modded_name(k) == name]
            held = [(int(at[r[0]]), j) for j in places if len(r := read[j].is_not_null().arg_true())]
            if not held:
                continue  # (a name no row holds is no column)
            row, j = min(held)
            named.append((row, j, name, keys[j]))
            # the last of the name on a line that reads wins, as the parser's dict
            cols[name] = pl.select(pl.coalesce([pl.lit(read[j]) for j in reversed(places)])).to_series()
        groups.append((fit, cols))
        left &= ~fit
        if not left.any():
            break
    return groups, left, frame["step"]


def _modded_long(body: pl.Series, sink: Sink, at: np.ndarray, named: Named) -> dict[str, pl.Series]:
    """The metric columns of ``body``'s rows from the long form of their MODDED_PAIR matches;
    ``at``: each row's place among the chunk's lines (for ``named``)."""
    parts = pl.DataFrame({"row": pl.int_range(0, len(body), eager=True),
                          "pair": body.str.replace(r"^step:\d+/\d+ ", "")  # MODDED's group 3
                          .str.extract_all(MODDED_PAIR.pattern)}).explode("pair")
    cut = parts["pair"].str.splitn(":", 2)
    key = cut.struct.field("field_0")
    name = key.replace_strict(list(MODDED_NAMES), list(MODDED_NAMES.values()), default=key)
    name = name.replace(_RESERVED, _UNRESERVED)  # (as _wide names them: ``named`` takes them first)
    value = number_column(cut.struct.field("field_1"))[0]
    fields = pl.DataFrame({"row": parts["row"], "name": name, "key": key, "value": value}).with_row_index(
        "at").filter(pl.col("key").is_not_null() & pl.col("value").is_not_null())
    for name, row, place, k in fields.group_by("name", maintain_order=True).agg(
            pl.col("row").first(), pl.col("at").first(), pl.col("key").first()).rows():
        named.append((int(at[row]), place, name, k))  # (a row is read one way only: any order on it)
    fields = fields.drop("at")
    return _wide(fields, len(body), sink, named=False)


def _gathered(name: str, groups: list[tuple[np.ndarray, dict[str, pl.Series]]], n: int) -> pl.Series:
    """One column over ``n`` rows from the groups' columns of ``name`` (each group: its rows, its
    columns)."""
    held = [(rows, cols[name]) for rows, cols in groups if name in cols]
    if len(held) == 1 and held[0][0].all():
        return held[0][1]
    out = pl.repeat(None, n, dtype=pl.Float64, eager=True).alias(name)
    for rows, col in held:
        out = out.scatter(np.flatnonzero(rows), col)
    return out


def modded_rows(text: pl.Series, lineno: pl.Series, sink: Sink, parser: object = None) -> pl.Series:
    """modded-nanogpt's 'step:N/T name:value …' lines and llm.c's 's:N trl:X' and
    'step N/T | loss X | norm X | lr X | …' ones (each line stripped, as the parser strips it)."""
    line = text.str.strip_chars()
    named: Named = []
    groups, left, step = _modded_same(line, sink, named)
    hit = ~left
    if left.any():  # the rest: MODDED's lines, through the long form
        where = np.flatnonzero(left)
        rest = line.gather(where)
        more = rest.str.contains(columnar(MODDED)).fill_null(False)
        if more.any():
            at = where[more.to_numpy()]
            body = rest.filter(more)
            mask = np.zeros(len(line), dtype=bool)
            mask[at] = hit[at] = True
            groups.append((mask, _modded_long(body, sink, at, named)))
            step = step.scatter(at, body.str.extract(r"^step:(\d+)/", 1).cast(pl.Int64, strict=False))
    done = pl.Series(hit)
    if done.any():
        cols: dict[str, pl.Series] = {}
        for _, _, name, key in sorted(named):  # in line order, as the parser names and adds them
            sink.names.setdefault(name, key)
            if name not in cols:
                cols[name] = _gathered(name, groups, len(line)).filter(done)
        add_rows(sink, {"step": step.filter(done), "line": lineno.filter(done)}, cols, None)
    old = ~done & line.str.contains(columnar(LLMC)).fill_null(False)
    if old.any():
        _, g = matched(line.filter(old), columnar(LLMC))
        value = number_column(g["3"])[0]
        cols = {}
        for tag, metric in (("trl", "loss"), ("tel", "eval_loss")):
            cols[metric] = pl.select(pl.when(pl.lit(g["2"]) == tag).then(pl.lit(value))).to_series()
            if (g["2"] == tag).any():
                sink.names.setdefault(metric, tag)
        add_rows(sink, {"step": g["1"].cast(pl.Int64, strict=False), "line": lineno.filter(old)},
                 cols, None, idle=False)
        done = done | old
    new = ~done & line.str.contains(columnar(LLMC_NEW)).fill_null(False)
    if new.any():
        _, g = matched(line.filter(new), columnar(LLMC_NEW))
        cols = {"loss": number_column(g["3"])[0], "grad_norm": number_column(g["4"])[0],
                "lr": g["5"].cast(pl.Float64), "step_time_s": _per_thousand(g["6"].cast(pl.Float64)),
                "tokens_per_s": g["8"].cast(pl.Float64)}
        add_rows(sink, {"step": g["1"].cast(pl.Int64, strict=False), "line": lineno.filter(new)},
                 cols, None, idle=False)
        done = done | new
    return done


# characters Python's \w, \s and \d and the regex crate's classes may disagree on (Python takes
# \x1c-\x1f as space, and '²' as a word character): such lines are the per-line parser's
_UNSURE = r"[^\x00-\x1b\x20-\x7e]"


def _plain(text: pl.Series) -> bool:
    """No line holds a character of ``_UNSURE`` (which a regex scan costs ten times as much to
    find as lengths: text whose bytes are its characters is ASCII)."""
    return text.str.len_bytes().sum() == text.str.len_chars().sum() and \
        not text.str.contains(r"[\x1c-\x1f\x7f]").any()


def _sure(text: pl.Series) -> pl.Series:
    """``text`` where the line holds no character of ``_UNSURE``, else null."""
    return text if _plain(text) else \
        pl.select(pl.when(~pl.lit(text).str.contains(_UNSURE)).then(pl.lit(text))).to_series()


def _key_columns(fields: pl.DataFrame, n: int, sink: Sink
                 ) -> tuple[pl.Series, dict[str, pl.Series], pl.Series]:
    """The (row#, key, value) pairs of ``n`` rows as ``Sink.metrics_from_pairs`` reads them: the
    step, the metric columns, and the rows left to the per-line parser (a key twice on a line, where
    the first that reads wins; too many keys; an empty value; text the columns cannot read)."""
    counts = fields.group_by("row#").agg(pl.len().alias("n"), pl.col("key").n_unique().alias("keys"),
                                         (pl.col("value") == "").any().alias("empty"))
    odd = counts.filter((pl.col("n") != pl.col("keys")) | (pl.col("n") > MAX_KEYS) | pl.col("empty"))["row#"]
    bad = pl.int_range(0, n, eager=True).is_in(odd.implode())
    fields = fields.filter(~pl.col("row#").is_in(odd.implode()))
    wide = pl.DataFrame({"row#": pl.int_range(0, n, eager=True)})
    if fields.height:
        wide = wide.join(fields.pivot(on="key", index="row#", values="value", aggregate_function="first"),
                         on="row#", how="left")
    keys = [c for c in wide.columns if c != "row#"]
    step, cols, unread = metric_columns(sink, keys, [wide[k] for k in keys], ordered=False, exact=True)
    return step, cols, any_of([bad, *unread], n)


def _head_of(pattern: str) -> str:
    """``pattern`` without its '(.*)$' tail, for telling the lines it matches (the tail matches
    the rest of any line: '.' takes all but the newline a line does not hold), which the regex
    crate then does not scan to the end: ten times faster on fairseq's and Megatron's valid lines."""
    if not pattern.endswith("(.*)$"):
        raise ValueError(f"no '(.*)$' tail: {pattern}")
    return pattern.removesuffix("(.*)$")


_INNER_HEAD = _head_of(FAIRSEQ_INNER.pattern)
_ENDS = [",", " ", "\t", "\n", "\x0b", "\x0c", "\r"]  # [,\s] on an ASCII line
_WORD = re.compile(r"\w+", re.ASCII)  # FAIRSEQ_KV's key


def _at_equals(pair: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """'key=value': the text before the first '=' and after it (ASCII lines: the byte offset of
    '=' is its place)."""
    at = pair.str.find("=", literal=True)
    return pair.str.slice(0, at), pair.str.slice(at + 1)


def _fairseq_pair(pair: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """A FAIRSEQ_KV match, 'key=value' and the character that ended the value (',', a space,
    none at the end): its key and its value."""
    key, value = _at_equals(pair)
    return key, pl.when(value.str.slice(-1).is_in(_ENDS)).then(value.str.head(-1)).otherwise(value)


def _fairseq_pairs(rest: pl.Series, sink: Sink) -> tuple[pl.Series, dict[str, pl.Series], pl.Series]:
    """FAIRSEQ_KV's pairs of each row's text as ``_key_columns`` reads them: ``_same_pairs``
    where it can, else the long form of FAIRSEQ_KV's matches."""
    return _same_pairs(rest, sink) or _fairseq_long(rest, sink)


def _fairseq_long(rest: pl.Series, sink: Sink) -> tuple[pl.Series, dict[str, pl.Series], pl.Series]:
    """FAIRSEQ_KV's matches of each row's text, in long form (see ``_key_columns``)."""
    return _key_columns(_long(rest.str.extract_all(FAIRSEQ_KV.pattern), _fairseq_pair), len(rest), sink)


def _same_pairs(rest: pl.Series, sink: Sink
                ) -> tuple[pl.Series, dict[str, pl.Series], pl.Series] | None:
    """``_fairseq_long`` where every row is 'k1=v1, k2=v2, …' with the first row's keys (words)
    in order and no ',' or space but the separators' (FAIRSEQ_KV finds exactly those pairs
    there): the parts of a split at ', ' read position by position (``_same_keys``: no pair
    regex, no long form); None where a row is not."""
    parts = rest.str.split(", ")
    n = parts.list.len() - 1
    plain = ((rest.str.count_matches(",", literal=True) == n)
             & (rest.str.count_matches(" ", literal=True) == n)
             & ~rest.str.contains(r"[\t\n\x0b\x0c\r]")).fill_null(False)
    first = parts[0] if len(parts) else None
    if not plain.all() or first is None or not all(_WORD.fullmatch(p.split("=", 1)[0]) for p in first):
        return None
    return _same_keys(parts, _at_equals, sink)  # (no value ends in a ',' or a space here)


Split = Callable[[pl.Expr], tuple[pl.Expr, pl.Expr]]  # a pair's text -> (its key, its value)


def _same_keys(pairs: pl.Series, split: Split, sink: Sink
               ) -> tuple[pl.Series, dict[str, pl.Series], pl.Series] | None:
    """``_key_columns`` of each row's pairs (a list of texts, each ``split`` into its key and its
    value) where every row holds the first row's keys in the same order, each value neither null
    nor empty: read position by position, without the long form and its pivot (the same keys,
    in the same order, give the same columns); None where a row does not."""
    first = pairs[0] if len(pairs) else None
    if first is None or not 0 < len(first) <= MAX_KEYS:
        return None
    key0, value0 = split(pl.col("p"))
    head = first.to_frame("p").select(key0.alias("key"), value0.fill_null("").alias("value"))
    keys, units = head["key"].to_list(), [unit_of(v) for v in head["value"].to_list()]
    if None in keys or len(set(keys)) != len(keys):
        return None
    # in stages, each part and each split once: a pair, its key and value, then their readings
    n = len(keys)
    split_at = [split(pl.col("pairs").list.get(j, null_on_oob=True)) for j in range(n)]
    fits = [pl.col("n") == n] + [(pl.col(f"k{j}") == key) & (pl.col(f"v{j}").str.len_bytes() > 0)
                                 for j, key in enumerate(keys)]
    # (and a first reading of each value as a number, with the unit of the first row: '39.12GiB')
    out = pairs.to_frame("pairs").lazy().select(
        pl.col("pairs").list.len().alias("n"),
        *(e for j, (k, v) in enumerate(split_at) for e in (k.alias(f"k{j}"), v.alias(f"v{j}")))
    ).select(pl.all_horizontal(fits).fill_null(False).alias("fit"),
             *(e for j, key in enumerate(keys)
               for e in (pl.col(f"v{j}"), first_reading(pl.col(f"v{j}"), key, units[j]).alias(f"first{j}")))
             ).collect(engine=ENGINE)
    if not out["fit"].all():
        return None
    step, cols, unread = metric_columns(sink, keys, [out[f"v{j}"] for j in range(n)], ordered=False,
                                        exact=True, first=[out[f"first{j}"] for j in range(n)])
    return step, cols, any_of(unread, len(pairs))


def fairseq_rows(text: pl.Series, lineno: pl.Series, sink: Sink, parser: object = None) -> pl.Series:
    """fairseq's '| train_inner | epoch E: N / M key=value, …' lines (the step the best step key
    among the pairs, the epoch the head's) and its '| valid | epoch E | name value | …' lines (eval
    records); the epoch summaries and the rest are the per-line parser's."""
    sure = _sure(text)
    head = match_whole(sure, _INNER_HEAD)
    hit = head.is_not_null()
    done = hit.to_numpy().copy()
    if hit.any():
        # the pairs: the rest of the line after the head (FAIRSEQ_INNER's '(.*)$', which costs the
        # regex crate three times the head's match), from where the head's text first stands
        # (where the leftmost match starts: ASCII lines, bytes are characters); the epoch, its
        # group 1, the digits between 'epoch ' and the ':' after them
        h, line = pl.col("h"), pl.col("line")
        got = pl.DataFrame({"line": sure.filter(hit), "h": head.filter(hit)}).select(
            line.str.slice(line.str.find(h, literal=True) + h.str.len_chars()).alias("rest"),
            h.str.splitn("epoch ", 2).struct.field("field_1").str.splitn(":", 2).struct.field("field_0")
            .alias("epoch"))
        step, cols, bad = _fairseq_pairs(got["rest"], sink)
        cols["epoch"] = got["epoch"].cast(pl.Float64)  # the head's over any 'epoch=' pair, as the parser
        add_rows(sink, {"step": step, "line": lineno.filter(hit), "time": leading_times(text.filter(hit))},
                 cols, bad)
        done = _less(done, bad).to_numpy()
    valid = (~hit & sure.str.contains(_head_of(FAIRSEQ_VALID.pattern)).fill_null(False)).to_numpy()
    if valid.any():
        rows = pl.Series(valid)
        _, g = matched(sure.filter(rows), FAIRSEQ_VALID.pattern)
        n = len(g)
        parts = pl.DataFrame({"row#": pl.int_range(0, n, eager=True), "part": g["2"].str.split("|")}
                             ).explode("part")
        kv = parts["part"].str.extract_groups(FAIRSEQ_PIPE.pattern).struct.unnest()
        fields = pl.DataFrame({"row#": parts["row#"], "key": kv["1"], "value": kv["2"]}).filter(
            pl.col("key").is_not_null())
        step, cols, bad = _key_columns(fields, n, sink)
        evals: dict[str, pl.Series] = {}
        clash = [bad]
        for name, col in cols.items():  # as the parser's removeprefix, then Sink.emit(kind="eval")
            k = unreserved(name.removeprefix("eval_"))
            k = k if is_eval(k) or k == "epoch" else "eval_" + k
            if k in evals:  # two on one line: the later one; the per-line parser decides
                clash.append(evals[k].is_not_null() & col.is_not_null())
                col = col.fill_null(evals[k])
            evals[k] = col
        bad = any_of(clash, n)
        add_rows(sink, {"step": step, "line": lineno.filter(rows), "time": leading_times(text.filter(rows))},
                 evals, bad)
        valid = _less(valid, bad).to_numpy()
    return pl.Series(done | valid)


# TITAN_PAIR as the regex crate takes it: without its look-ahead (a non-finite spelling not
# followed by a letter), which holds on every line that has no such spelling followed by a letter
# (those lines, and any 'info' or 'nano', are the per-line parser's)
_TITAN_PAIR = TITAN_PAIR.pattern.replace("(?![A-Za-z])", "")
_TITAN_AHEAD = r"(?i)(?:nan|inf)[A-Za-z]"
# TITAN is 'step:\s*(\d+)\s+(loss:\s*\S+.*)$': its tail matches wherever 'loss:\s*\S' does
_TITAN_HEAD = "(?<head>" + TITAN.pattern.removesuffix(r"(loss:\s*\S+.*)$") + r")loss:\s*\S"


def torchtitan_rows(text: pl.Series, lineno: pl.Series, sink: Sink, parser: object = None) -> pl.Series:
    """torchtitan's 'step: N  loss: X  memory: 9.12GiB(9.60%)  tps: 6,581  mfu: 1.55%' lines, ANSI
    colours stripped: the step the head's, each 'name: value' pair as the parser finds it."""
    clean = text.str.replace_all(ANSI.pattern, "")
    sure = _sure(clean)
    # TITAN's '(loss:\s*\S+.*)$' read as the rest of the line from 'loss:' (the regex crate's
    # capture of the tail costs three times the match of its head), the head matched whole: the
    # rest from where its text first stands and its first 'loss:' (ASCII lines: bytes are
    # characters), the step the digits between 'step:' and that
    match = match_whole(sure, _TITAN_HEAD)
    hit = match.is_not_null()
    m, line_ = pl.col("m"), pl.col("line")
    head = m.str.find("loss:", literal=True)
    got = pl.DataFrame({"line": clean.filter(hit), "m": match.filter(hit)}).select(
        "line", line_.str.slice(line_.str.find(m, literal=True) + head).alias("rest"),
        m.str.slice(5, head - 5).str.strip_chars().cast(pl.Int64, strict=False).alias("step"))
    ahead = got["rest"].str.contains(_TITAN_AHEAD)
    if ahead.any():  # the look-ahead decides there: the per-line parser's
        hit, got = _less(hit, ahead), got.filter(~ahead)
    if not hit.any():
        return hit
    line = got["line"]
    pairs = got["rest"].str.extract_all(_TITAN_PAIR)
    _, cols, bad = _same_keys(pairs, _titan_pair, sink) or \
        _key_columns(_long(pairs, _titan_pair), len(got), sink)
    after = line.str.splitn("] ", 2).struct.field("field_1").fill_null(line)  # as the parser
    when = leading_times(after)
    if when.null_count():  # (the line's own, where what follows a '] ' starts with none)
        at = when.is_null().arg_true()
        when = when.scatter(at, leading_times(line.gather(at)))
    add_rows(sink, {"step": got["step"], "line": lineno.filter(hit), "time": when}, cols, bad)
    return _less(hit, bad)


def _titan_pair(pair: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """A TITAN_PAIR match, 'key:', spaces, the value and its unit, then perhaps '(…)' (neither
    holds a ':' or a '(' before it): its key and its value."""
    cut = pair.str.splitn(":", 2)
    value = cut.struct.field("field_1").str.strip_chars_start(" \t\n\r\f\v").str.splitn("(", 2)
    return cut.struct.field("field_0").str.strip_chars(), value.struct.field("field_0")


def _long(pairs: pl.Series, split: Split) -> pl.DataFrame:
    """Each row's pairs as (row#, key, value) rows for ``_key_columns`` (a pair whose value is
    null left out)."""
    long = pl.DataFrame({"row#": pl.int_range(0, len(pairs), eager=True), "pair": pairs}).explode("pair")
    key, value = split(pl.col("pair"))
    return long.select("row#", key.alias("key"), value.alias("value")).filter(pl.col("value").is_not_null())


# a line whose start Python's \s and the regex crate's may read differently (a field line starts
# with spaces): \x1c-\x1f anywhere, or text past ASCII on a line not opened by a visible character
_OLMO_UNSURE = r"[\x1c-\x1f]|^[^!-~].*[^\x00-\x7e]"


def olmo_rows(text: pl.Series, lineno: pl.Series, sink: Sink, parser: object = None) -> pl.Series:
    """OLMo's records: a '[step=N/T,epoch=E]' head line, then indented 'name=value' lines (a value
    that is a number), read as the parser reads them: a record ends at the next line that is
    neither (blank lines aside). The lines before the chunk's first head are the parser's (they
    may continue its record from the chunk before), and so is a record still open at the chunk's
    end (the next chunk may continue it)."""
    n = len(text)
    if n == 0 or not _plain(text) and text.str.contains(_OLMO_UNSURE).fill_null(False).any():
        return pl.Series(np.zeros(n, dtype=bool))
    head_g = text.str.extract_groups(OLMO_HEAD.pattern)
    head = head_g.struct.field("1").is_not_null().to_numpy()
    field_g = _olmo_fields(text)
    value = number_column(field_g["2"])[0]
    field = (value.is_not_null() & ~pl.Series(head)).to_numpy()
    blank = (text.is_null() | (text.str.strip_chars().str.len_bytes() == 0)).to_numpy()
    brk = ~head & ~field & ~blank
    start = head | brk  # where a segment (a record, or lines after a break) begins
    seg = np.cumsum(start)  # 0: the lines before the first head or break
    opened_by_head = np.concatenate([[False], head[start]])  # per segment id
    in_record = opened_by_head[seg] & (head | field)
    in_record[seg == seg[-1]] &= ~opened_by_head[seg[-1]]  # a record open at the end: the parser's
    rec = seg[in_record & head]  # the records' segment ids, in order
    if not len(rec):
        return pl.Series(np.zeros(n, dtype=bool))
    at = np.flatnonzero(in_record & head)  # each record's head line
    order = np.searchsorted(rec, seg[in_record & field])  # each field line's record
    heads = head_g.struct.unnest().filter(pl.Series(in_record & head))
    mine = pl.Series(in_record & field)
    _, cols, bad = _olmo_same_keys(heads["2"], order, field_g.filter(mine), value.filter(mine), sink) or \
        _olmo_long(heads["2"], order, field_g.filter(mine), np.flatnonzero(in_record & field), sink)
    add_rows(sink, {"step": heads["1"].cast(pl.Int64, strict=False), "line": lineno.gather(at),
                    "time": leading_times(text.gather(at))}, cols, bad, idle=False)
    return pl.Series(in_record & np.isin(seg, rec[~bad.to_numpy()]))  # (a record left out: the parser's)


# OLMO_FIELD without its groups: the regex crate's captures cost six times the match; the key
# and the value are cut at the first '=' of the matched lines instead (their text is ASCII)
_OLMO_FIELD = OLMO_FIELD.pattern.replace("(", "").replace(")", "")


def _olmo_fields(text: pl.Series) -> pl.DataFrame:
    """OLMO_FIELD's groups "1" (the key) and "2" (the value) of each line, null where it does not
    match: the line's text from its first non-space up to the first '=', and after it, its
    trailing spaces cut (where OLMO_FIELD matches, the key holds no '=' and the value no space)."""
    bare = pl.col("t").str.strip_chars_start()
    at = bare.str.find("=", literal=True)
    ok = pl.col("t").str.contains(_OLMO_FIELD).fill_null(False)
    value = bare.str.slice(at + 1).str.strip_chars_end()
    return text.to_frame("t").select(pl.when(ok).then(bare.str.slice(0, at)).alias("1"),
                                     pl.when(ok).then(value).alias("2"))


def _olmo_same_keys(epoch: pl.Series, order: np.ndarray, fields: pl.DataFrame, value: pl.Series,
                    sink: Sink) -> tuple[pl.Series, dict[str, pl.Series], pl.Series] | None:
    """``_olmo_long`` where every record has the first record's field keys, in the same order and
    each once (and every head an epoch, or none): the fields read position by position, without
    the long form and its pivot; None where a record does not. ``value``: the fields' readings."""
    nrec = len(epoch)
    counts = np.bincount(order, minlength=nrec)
    k = int(counts[0])
    with_epoch = epoch.null_count() == 0
    if not k or (counts != k).any() or not (with_epoch or epoch.null_count() == nrec):
        return None
    keys = fields["1"].head(k).to_list()
    names = ["epoch", *keys] if with_epoch else keys
    if len(set(names)) != len(names) or len(names) > MAX_KEYS or \
            not (fields["1"] == pl.Series(keys).gather(np.arange(len(fields)) % k)).all():
        return None
    where = [np.arange(nrec) * k + j for j in range(k)]
    raws = [fields["2"].gather(w) for w in where]
    first = [None if key.strip().lower() in STEP_KEYS else value.gather(w)
             for key, w in zip(keys, where, strict=True)]
    if with_epoch:
        raws, first = [epoch, *raws], [None, *first]
    step, cols, unread = metric_columns(sink, names, raws, ordered=False, exact=True, first=first)
    return step, cols, any_of(unread, nrec)


def _olmo_long(epoch: pl.Series, order: np.ndarray, fields: pl.DataFrame, lines: np.ndarray, sink: Sink
               ) -> tuple[pl.Series, dict[str, pl.Series], pl.Series]:
    """Each record's pairs, its head's epoch then its fields in line order, in long form (see
    ``_key_columns``). ``order``: each field's record; ``lines``: each field's line."""
    nrec = len(epoch)
    epochs = pl.DataFrame({"row#": np.arange(nrec, dtype=np.int64), "key": "epoch", "value": epoch,
                           "at": np.zeros(nrec, dtype=np.int64)}).filter(pl.col("value").is_not_null())
    # (the head's epoch is the parser's first pair, then the fields in line order)
    long = pl.concat([epochs, pl.DataFrame({
        "row#": order.astype(np.int64), "key": fields["1"], "value": fields["2"],
        "at": lines.astype(np.int64) + 1})]).sort("row#", "at").drop("at")
    return _key_columns(long, nrec, sink)


# mlflow.MLFLOW_LINE as the columns read it: ASCII digits only (Python's \d takes any digit, and
# int() reads them), the line exactly that (the per-line parser strips it first)
_MLFLOW = (r"^(?<ts>[0-9]{10,13}) (?<value>[-+]?(?:[0-9]+\.?[0-9]*(?:[eE][-+]?[0-9]+)?|nan|inf|-inf|"
           r"NaN|Infinity))(?: (?<step>[0-9]+))?$")


def mlflow_rows(text: pl.Series, lineno: pl.Series, sink: Sink, parser: object = None) -> pl.Series:
    """An MLflow metric file's 'timestamp value step' lines: one metric, named by the file, at
    the local wall time (``columnar.local_times``) of the timestamp, in ms or s."""
    hit, g = matched(text, _MLFLOW)
    if not hit.any():
        return hit
    ts = g["ts"].cast(pl.Int64)
    ms = pl.select(pl.when(g["ts"].str.len_bytes() > 10).then(pl.lit(ts)).otherwise(pl.lit(ts) * 1000))
    when = local_times(ms.to_series())
    step = pl.select(pl.when(g["step"].is_null()).then(0).otherwise(g["step"].cast(pl.Int64, strict=False))
                     ).to_series()
    _, cols, unread = metric_columns(sink, [sink.source_name or "value"], [g["value"]], exact=True)
    bad = any_of(unread, len(g))
    add_rows(sink, {"step": step, "line": lineno.filter(hit), "time": when}, cols, bad)
    return _less(hit, bad)


COLON_SAMPLE = 500  # lines of a chunk whose shapes are counted
COLON_SHAPES = 4  # the commonest shapes read column-wise (each a regex pass over the chunk)


def colon_rows(text: pl.Series, lineno: pl.Series, sink: Sink, parser: object = None) -> pl.Series:
    """The 'key: value' reader's single-line records ('Step 100 | loss: 2.31 | lr: 1e-4'): the
    commonest line shapes among the chunk's first lines (``colon.shape``), each read by one regex
    into the pairs the per-line parser reads. The parser reads every other line (multi-line
    records, heads, evaluation lines) and the first record of each run of such lines (it closes
    any record being assembled, which takes that line's rank and capture time); it is told
    where the others stood (``read_elsewhere``)."""
    from collections import Counter

    from losslens.logs.formats.colon import DIGITS, Shape, shape

    # the commonest skeletons (the lines' text, digits aside), each shaped from its first line
    first: dict[str, str] = {}
    counts: Counter[str] = Counter()
    for line in text.head(COLON_SAMPLE).drop_nulls().to_list():
        skeleton = DIGITS.sub("0", line)
        first.setdefault(skeleton, line)
        counts[skeleton] += 1
    forms: list[Shape] = []
    for skeleton, seen in counts.most_common():
        if seen < 2 or len(forms) == COLON_SHAPES:
            break
        if (form := shape(first[skeleton])) is not None:
            forms.append(form)
    hits: list[np.ndarray] = []
    found: list[pl.DataFrame] = []
    simple = np.zeros(len(text), dtype=bool)
    for form in forms:
        groups = text.str.extract_groups(form.pattern).struct.unnest()
        hit = groups["v0"].is_not_null().fill_null(False).to_numpy() & ~simple
        simple |= hit
        hits.append(hit)
        found.append(groups)
    # a run's first record goes to the parser: the line before it (blank lines aside) is one of
    # the parser's, or in the chunk before
    filled = np.flatnonzero(~(text.is_null() | (text.str.strip_chars().str.len_bytes() == 0)).to_numpy())
    follows = np.zeros(len(text), dtype=bool)
    follows[filled[1:]] = simple[filled[:-1]]
    done = np.zeros(len(text), dtype=bool)
    read_lines: list[np.ndarray] = []
    read_steps: list[np.ndarray] = []
    names: list[tuple[int, str, str]] = []
    for form, hit, groups in zip(forms, hits, found, strict=True):
        hit &= follows
        if not hit.any():
            continue
        mask = pl.Series(hit)
        g = groups.filter(mask)
        raws = [g[f"v{i}"] + suffix if suffix else g[f"v{i}"] for i, suffix in enumerate(form.suffixes)]
        known = dict(sink.names)  # the names these rows give are the parser's to set, in line order
        step, cols, unread = metric_columns(sink, form.keys, raws, exact=True)
        if form.step_word:  # 'Step 100': where no pair gave a step
            step = step.fill_null(g["s"].cast(pl.Int64, strict=False))
        if form.epoch_word and "epoch" not in cols:
            cols["epoch"] = g["e"].cast(pl.Float64)
            sink.names.setdefault("epoch", "Epoch")
        given = [(n, k) for n, k in sink.names.items() if n not in known]
        sink.names = known
        bad = any_of([*unread, step.is_null()], len(g))
        lines = lineno.filter(mask)
        add_rows(sink, {"step": step, "line": lines, "time": leading_times(text.filter(mask))}, cols, bad)
        took = ~bad.to_numpy()
        if not took.any():
            continue
        done[np.flatnonzero(hit)[took]] = True
        read_lines.append(lines.to_numpy()[took])
        read_steps.append(step.to_numpy()[took])
        names += [(int(read_lines[-1][0]), n, k) for n, k in given]  # every row read names them all
    if read_lines and parser is not None:
        order_lines, order_steps = np.concatenate(read_lines), np.concatenate(read_steps)
        order = np.argsort(order_lines, kind="stable")
        parser.read_elsewhere(order_lines[order].tolist(), order_steps[order].tolist(),  # type: ignore[attr-defined]
                              names)
    return pl.Series(done)


# a redraw LIGHTNING_BAR matches from its first character to its last, the bracket holding no
# ']' but its own last (what bar_groups reads without the regex's groups)
_PLAIN_BAR = r"^Epoch \d+:\s*\d+%\|[^|]*\|\s*\d+/\d+ \[[^\]]*\]$"


def bar_groups(seg: pl.Series) -> pl.DataFrame:
    """LIGHTNING_BAR's groups in each redraw: epoch, done, total and postfix (null
    where it does not match). A redraw of the plain shape (``_PLAIN_BAR``) is cut with string
    operations instead of the regex's groups (the regex crate's captures cost six times its
    match): 'Epoch E:', the text after the second '|' up to ' [' as 'done/total', and in the
    bracket, its first 'it/s' or 's/it' (where the lazy regex stops), then either its ']' (no
    postfix) or ', ' and the postfix up to it; any other redraw goes through the groups."""
    from losslens.logs.formats.lightning import LIGHTNING_BAR

    f, col = pl.col("s"), pl.col
    # in stages, as polars computes an expression again wherever a later one holds it
    out = seg.to_frame("s").lazy().select(
        f.str.contains(_PLAIN_BAR).fill_null(False).alias("plain"),
        f.str.splitn(":", 2).struct.field("field_0").str.slice(6).alias("epoch"),
        f.str.splitn("|", 3).struct.field("field_2").str.strip_chars_start().str.splitn(" [", 2)
        .alias("after"),
    ).select("plain", "epoch", col("after").struct.field("field_0").str.splitn("/", 2).alias("count"),
             col("after").struct.field("field_1").str.head(-1).alias("inside"),  # (without its ']')
    ).select("plain", "epoch", "count", "inside", pl.min_horizontal(
        col("inside").str.find("it/s", literal=True), col("inside").str.find("s/it", literal=True)
    ).alias("unit"),
    ).select("plain", "epoch", "count", "unit", col("inside").str.slice(col("unit") + 4).alias("tail"),
    ).select(
        (col("plain") & col("unit").is_not_null() & ((col("tail") == "") | col("tail").str.starts_with(", ")))
        .fill_null(False).alias("plain"), "epoch",
        col("count").struct.field("field_0").alias("done"),
        col("count").struct.field("field_1").alias("total"),
        pl.when(col("tail") != "").then(col("tail").str.slice(2)).alias("postfix")).collect(engine=ENGINE)
    fast = out.drop_in_place("plain")
    out = out.select(pl.when(fast).then(pl.col(c)).alias(c) for c in out.columns)
    if not fast.all():
        at = (~fast).arg_true()
        groups = seg.gather(at).str.extract_groups(LIGHTNING_BAR.pattern).struct.unnest()
        groups.columns = out.columns
        out = pl.concat([out.with_row_index("i").filter(fast),
                         groups.with_columns(at.cast(pl.UInt32).alias("i")).select("i", *out.columns)]
                        ).sort("i").drop("i")
    return out


def lightning_rows(text: pl.Series, lineno: pl.Series, sink: Sink, parser: Any = None) -> pl.Series:
    """Lightning's bar, every '\\r' redraw of a line: one record per step (its last redraw), an
    eval metric kept only when it changed since the last record, as ``_LightningParser`` does;
    the record of the chunk's last step is left held by the parser (the next chunk may redraw
    it), and the one it held is dropped or emitted first. The whole chunk is the parser's when a
    redraw is one it reads otherwise (a number too long, too many pairs) or lines carry a
    capture's or rank's tags (a record takes the tags of the line that ends its step)."""
    none = pl.Series(np.zeros(len(text), dtype=bool))
    if parser is None or sink.tags is not None:
        return none
    segs = pl.DataFrame({"line": lineno, "seg": text.str.split("\r")}).with_row_index("row").explode("seg")
    bar = bar_groups(segs["seg"])
    segs = pl.concat([segs, bar], how="horizontal").with_row_index("at").filter(
        pl.col("postfix").str.len_bytes() > 0)
    if not segs.height:
        return none
    if (segs.select(pl.max_horizontal(pl.col("epoch", "done", "total").str.len_bytes().max())).item() > 9):
        return none  # (a step past int64 and the like: the parser's)
    same = _lightning_same(segs["at"], segs["postfix"])
    wide, named = same if same is not None else _lightning_long(segs)
    if wide is None or not wide.height:
        return none
    names = [c for c in wide.columns if c != "at"]
    rec = segs.select("at", "row", "line", "epoch", "done", "total").join(wide, on="at").sort("at")
    step = (rec["epoch"].cast(pl.Int64) * rec["total"].cast(pl.Int64) + rec["done"].cast(pl.Int64)).to_numpy()
    rec = rec.with_columns(pl.Series("step", step), rec["epoch"].cast(pl.Float64).alias("epoch"))
    metric_names = [c for c in names if c != "epoch"] + ["epoch"]
    for name, key in named:  # in the order the parser would set them (each name's first pair read)
        sink.names.setdefault(name, key.strip())
    # one record a step: the last redraw of each run of one step; the chunk's last run held
    if parser.held is not None and parser.held[1] != int(step[0]):
        parser.finish()  # (a held record of the chunk's first step is superseded: replaced below)
    last_of_run = np.append(step[1:] != step[:-1], False)
    tail = rec.row(len(rec) - 1, named=True)
    parser.held = (tail["line"], tail["step"], {k: tail[k] for k in metric_names if tail[k] is not None})
    out = rec.filter(pl.Series(last_of_run))
    if out.height:
        evals = [c for c in metric_names if is_eval(c)]
        out = _lightning_evals(out, evals, parser)
        add_rows(sink, {"step": out["step"], "line": out["line"]}, {c: out[c] for c in metric_names}, None,
                 idle=False)
    return pl.Series(np.isin(np.arange(len(text)), rec["row"].unique().to_numpy()))


def _lightning_long(segs: pl.DataFrame) -> tuple[pl.DataFrame | None, list[tuple[str, str]]]:
    """The redraws' postfix pairs (LIGHTNING_PAIR's matches) through the long form: one row per
    redraw that holds a metric, a column per name (a name's first pair on the redraw), and each
    name with its first key read (None where a redraw holds more pairs than the parser takes)."""
    from losslens.logs.formats.lightning import LIGHTNING_PAIR
    from losslens.logs.names import canonical

    pairs = (segs.select("at", pl.col("postfix").str.extract_all(LIGHTNING_PAIR.pattern).alias("pair"))
             .with_columns(pl.col("pair").list.len().alias("n")))
    if pairs["n"].max() > MAX_KEYS:  # type: ignore[operator]
        return None, []
    pairs = pairs.explode("pair").drop_nulls("pair").with_columns(
        pl.col("pair").str.splitn("=", 2).struct.rename_fields(["key", "raw"])).unnest("pair")
    pairs = pairs.with_row_index("order").filter(pl.col("key") != "v_num")
    keys = pairs["key"].unique().to_list()
    pairs = pairs.with_columns(
        pl.col("key").replace_strict(keys, list(map(canonical, keys)), return_dtype=pl.String).alias("name"),
        pl.col("key").str.strip_chars().str.to_lowercase().is_in(list(STEP_KEYS)).alias("is_step"))
    pairs = pairs.filter(~pl.col("is_step"))
    value, _ = number_column(pairs["raw"])
    pairs = pairs.with_columns(value.alias("value")).filter(pl.col("value").is_not_null())
    firsts = pairs.group_by("at", "name").agg(pl.col("value").first())  # (a name's first pair)
    if not firsts.height:
        return None, []
    wide = firsts.pivot(on="name", index="at", values="value")
    named = (pairs.group_by("name").agg(pl.col("key").sort_by("order").first(), pl.col("order").min())
             .sort("order").select("name", "key").rows())
    return wide, named


_LIGHTNING_KEY = re.compile(r"[A-Za-z_][\w/.\-]*", re.ASCII)  # LIGHTNING_PAIR's key


def _lightning_same(at: pl.Series, post: pl.Series
                    ) -> tuple[pl.DataFrame | None, list[tuple[str, str]]] | None:
    """``_lightning_long``'s result where every postfix is the first's 'key=value' parts, in its
    order, parted by ', ' (a Lightning run's usual bar): the parts read position by position in
    one query, without the pairs' long form and pivot; None where a postfix is not. A part is
    read as LIGHTNING_PAIR reads it where it is the key, '=', and a value that holds no space,
    ',' or ']' (then the pattern finds exactly those pairs in the postfix)."""
    from losslens.logs.names import canonical

    first = post[0].split(", ") if len(post) else []
    keys = [p.partition("=")[0] for p in first]
    if not 0 < len(keys) <= MAX_KEYS or not all("=" in p and _LIGHTNING_KEY.fullmatch(k)
                                                 for p, k in zip(first, keys, strict=True)):
        return None
    n = len(keys)
    parts = pl.col("parts")
    value = [pl.col(f"p{j}").str.slice(len(k) + 1) for j, k in enumerate(keys)]
    fits = [pl.col("n") == n] + [pl.col(f"p{j}").str.starts_with(k + "=") for j, k in enumerate(keys)]
    fits += [(v.str.len_bytes() > 0) & ~v.str.contains(r"[\s,\]]") for v in value]
    out = post.to_frame("post").lazy().select(pl.col("post").str.split(", ").alias("parts")).select(
        parts.list.len().alias("n"), *(parts.list.get(j, null_on_oob=True).alias(f"p{j}") for j in range(n))
    ).select(pl.all_horizontal(fits).fill_null(False).alias("fit"),
             *(v.alias(f"v{j}") for j, v in enumerate(value))).collect(engine=ENGINE)
    if not out["fit"].all():
        return None
    # as the long form: 'v_num' and step keys left out, each name's first pair that is a number
    kept = [(j, canonical(k)) for j, k in enumerate(keys)
            if k != "v_num" and k.strip().lower() not in STEP_KEYS]
    values = {j: number_column(out[f"v{j}"])[0] for j, _ in kept}
    cols: dict[str, pl.Series] = {}
    for j, name in kept:
        cols[name] = cols[name].fill_null(values[j]) if name in cols else values[j]
    frame = pl.DataFrame({"at": at, **{name: col.alias(name) for name, col in cols.items()}})
    held = [name for name, col in cols.items() if col.null_count() < len(col)]
    wide = frame.filter(pl.any_horizontal(pl.col(held).is_not_null())).select("at", *held) if held else \
        frame.clear().select("at")
    # each name's first pair read: its first redraw that holds it, the first of its keys there
    firsts = []
    for name in held:
        where = [(int(values[j].is_not_null().arg_true()[0]), j) for j, m in kept
                 if m == name and values[j].null_count() < len(post)]
        firsts.append((min(where), name, keys[min(where)[1]]))
    return wide, [(name, key) for _, name, key in sorted(firsts)]


def _lightning_evals(out: pl.DataFrame, evals: list[str], parser: Any) -> pl.DataFrame:
    """Records' eval metrics blanked where they equal the last record's (a NaN never does), from
    the parser's ``last_eval`` on; which is left as the last record's."""
    if not evals and not parser.last_eval:
        return out
    n = out.height
    same = np.ones(n, dtype=bool)
    for c in sorted(set(evals) | set(parser.last_eval)):
        col = out[c].to_numpy() if c in out.columns else np.full(n, np.nan)
        null = out[c].is_null().to_numpy() if c in out.columns else np.ones(n, dtype=bool)
        before = parser.last_eval.get(c)
        prev = np.concatenate([[np.nan if before is None else before], col[:-1]])
        prev_null = np.concatenate([[before is None], null[:-1]])
        same &= (null & prev_null) | (~null & ~prev_null & (col == prev))
    last = out.row(n - 1, named=True)
    parser.last_eval = {c: last[c] for c in evals if last[c] is not None}
    if same.any() and evals:
        keep = pl.Series(~same)
        out = out.with_columns([pl.when(keep).then(pl.col(c)).alias(c) for c in evals])
    return out
