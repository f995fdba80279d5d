"""Column-wise name/value fields of a chunk's lines, shared by the line formats' fast paths
(``rows`` of Megatron-LM, fairseq, torchtitan, modded-nanoGPT, OLMo): pairs split with polars'
string kernels into the per-key columns their per-line parsers would emit."""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import polars as pl

from losslens.logs.columnar import (
    ENGINE,
    any_of,
    first_reading,
    metric_columns,
    unit_of,
)
from losslens.logs.names import RESERVED, unreserved
from losslens.logs.sink import MAX_KEYS, Sink


def per_thousand(ms: pl.Series) -> pl.Series:
    """ms / 1000 exactly as Python divides: polars multiplies by the reciprocal (18079.4 / 1000
    would be 18.079400000000003, not 18.0794)."""
    seconds = pl.Series(ms.name, ms.to_numpy() / 1000.0, dtype=pl.Float64)
    return seconds if not ms.null_count() else pl.select(
        pl.when(pl.lit(ms).is_not_null()).then(pl.lit(seconds))).to_series()


def less_rows(rows: pl.Series | np.ndarray, out: pl.Series) -> pl.Series:
    """The chunk's ``rows`` without those ``out`` flags (a mask over ``rows``' own rows)."""
    keep = np.array(rows.to_numpy() if isinstance(rows, pl.Series) else rows, dtype=bool)
    keep[np.flatnonzero(keep)[out.to_numpy()]] = False
    return pl.Series(keep)


RESERVED_SORTED = sorted(RESERVED)  # a metric named like a frame column ('step', 'line') and its new name


UNRESERVED_SORTED = [unreserved(r) for r in RESERVED_SORTED]


def wide_columns(fields: pl.DataFrame, n: int, sink: Sink, named: bool = True) -> dict[str, pl.Series]:
    """(row, name, key, value) fields as one column per name over ``n`` rows, the last of a name
    on a row kept; each name's first key named in ``sink``, as the per-line parsers name them
    (unless not ``named``: the caller names them)."""
    fields = fields.with_columns(pl.col("name").replace(RESERVED_SORTED, UNRESERVED_SORTED))
    if named:
        for name, key in fields.group_by("name", maintain_order=True).agg(pl.col("key").first()).rows():
            sink.names.setdefault(name, key)
    rows = pl.DataFrame({"row": pl.int_range(0, n, eager=True)})
    wide = rows.join(fields.pivot(on="name", index="row", values="value", aggregate_function="last"),
                     on="row", how="left") if fields.height else rows
    return {c: wide[c] for c in wide.columns if c != "row"}


# characters Python's \w, \s and \d and the regex crate's classes may disagree on (Python takes
# \x1c-\x1f as space, and '²' as a word character): such lines are the per-line parser's
UNSURE = r"[^\x00-\x1b\x20-\x7e]"


def plain_text(text: pl.Series) -> bool:
    """No line holds a character of ``UNSURE`` (which a regex scan costs ten times as much to
    find as lengths: text whose bytes are its characters is ASCII)."""
    return text.str.len_bytes().sum() == text.str.len_chars().sum() and \
        not text.str.contains(r"[\x1c-\x1f\x7f]").any()


def sure_lines(text: pl.Series) -> pl.Series:
    """``text`` where the line holds no character of ``UNSURE``, else null."""
    return text if plain_text(text) else \
        pl.select(pl.when(~pl.lit(text).str.contains(UNSURE)).then(pl.lit(text))).to_series()


def key_columns(fields: pl.DataFrame, n: int, sink: Sink
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


def head_of(pattern: str) -> str:
    """``pattern`` without its '(.*)$' tail, for telling the lines it matches (the tail matches
    the rest of any line: '.' takes all but the newline a line does not hold), which the regex
    crate then does not scan to the end: ten times faster on fairseq's and Megatron's valid lines."""
    if not pattern.endswith("(.*)$"):
        raise ValueError(f"no '(.*)$' tail: {pattern}")
    return pattern.removesuffix("(.*)$")


KEY_WORD = re.compile(r"\w+", re.ASCII)  # FAIRSEQ_KV's key


Split = Callable[[pl.Expr], tuple[pl.Expr, pl.Expr]]  # a pair's text -> (its key, its value)


def same_keys(pairs: pl.Series, split: Split, sink: Sink
               ) -> tuple[pl.Series, dict[str, pl.Series], pl.Series] | None:
    """``key_columns`` of each row's pairs (a list of texts, each ``split`` into its key and its
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


def long_pairs(pairs: pl.Series, split: Split) -> pl.DataFrame:
    """Each row's pairs as (row#, key, value) rows for ``key_columns`` (a pair whose value is
    null left out)."""
    long = pl.DataFrame({"row#": pl.int_range(0, len(pairs), eager=True), "pair": pairs}).explode("pair")
    key, value = split(pl.col("pair"))
    return long.select("row#", key.alias("key"), value.alias("value")).filter(pl.col("value").is_not_null())
