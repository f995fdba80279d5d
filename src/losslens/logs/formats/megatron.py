"""Megatron-LM / Megatron-DeepSpeed console: ' iteration N/ M | ... | lm loss: X | ...'."""

from __future__ import annotations

import re

import polars as pl

from losslens.logs.base import (
    COMMON_NOISE,
    Format,
    LineParser,
    RegexLineParser,
    count_matching,
    whole,
)
from losslens.logs.columnar import (
    ENGINE,
    add_rows,
    any_of,
    match_whole,
    number_column,
    number_expr,
    unit_of,
)
from losslens.logs.fields import (
    head_of,
    less_rows,
    wide_columns,
)
from losslens.logs.names import RESERVED, is_eval, parse_number, unreserved
from losslens.logs.sink import Sink

# --- Megatron / Megatron-DeepSpeed -----------------------------------------------------------
MEGA_ITER = re.compile(r"^\s*iteration\s+(\d+)\s*/\s*(\d+)\s*\|(.*)$")


MEGA_VALID = re.compile(r"validation loss at iteration\s+(\d+)\s*(?:on \w+ set)?\s*\|(.*)$")


# a field 'name: value' (the name with its trailing spaces: the reader strips it; it was a lazy
# '[^:|]+?' between two '\s*', which tried every split of a run of spaces: 'Loss:' after 1,600
# spaces took seconds)
MEGA_FIELD = re.compile(r"^\s*+([^:|]++)\s*:\s*+(\S++)\s*+$")


MEGA_NAMES = {
    "lm loss": "loss", "learning rate": "lr", "grad norm": "grad_norm", "loss scale": "loss_scale",
    "elapsed time per iteration (ms)": "step_time_s", "global batch size": "global_batch_size",
    "consumed samples": "consumed_samples", "consumed tokens": "consumed_tokens",
    "samples per second": "samples_per_s", "tokens per gpu per second (tgs)": "tokens_per_gpu_s",
    "tflops": "tflops", "number of skipped iterations": "skipped_iterations",
    "number of nan iterations": "nan_iterations", "num zeros": "num_zeros",
    "actual seqlen": "seq_len", "lm loss value": "eval_loss", "lm loss ppl": "eval_ppl",
}


class _MegatronParser(RegexLineParser):
    noise = ((re.compile(r"^-{10,}$"), "separator"), *COMMON_NOISE)

    def _fields(self, body: str) -> dict[str, float]:
        metrics: dict[str, float] = {}
        for part in body.split("|"):
            m = MEGA_FIELD.match(part)
            if not m:
                continue  # a field cut short by the line's width
            key = m.group(1).strip().lower()
            name = MEGA_NAMES.get(key)
            value = parse_number(m.group(2))
            if name is None or value is None:
                continue
            if name == "step_time_s":
                value /= 1000.0
            metrics[name] = value
            self.sink.names.setdefault(name, m.group(1).strip())
        return metrics

    def feed(self, lineno: int, line: str) -> str | None:
        m = MEGA_ITER.match(line)  # (a '[default7]: ' rank prefix is cut off by the reader)
        if m:
            if not self.sink.emit(lineno, whole(m.group(1)), self._fields(m.group(3))):
                return "no training metric"
            return None
        m = MEGA_VALID.search(line)
        if m:
            if not self.sink.emit(lineno, whole(m.group(1)), self._fields(m.group(2)), kind="eval"):
                return "no training metric"
            return None
        return self.classify_noise(line.strip())



# megatron.MEGA_ITER up to the first '|' (the body, its '(.*)$', is the rest of the line)
ITER_HEAD = r"^(?<head>\s*iteration\s+(?<step>\d+)\s*/\s*\d+\s*\|)"


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
        if value.is_not_null().any():  # (as wide_columns: a name no row holds is no column)
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
    return wide_columns(fields, len(body), sink)


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
    rest = ~hit & text.str.contains(head_of(valid)).fill_null(False)
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
            rest = less_rows(rest, bad)
    return hit | rest


class Megatron(Format):
    """--format megatron: ' iteration N/ M | lm loss: X | ...' and validation lines."""
    name = "megatron"
    rows = staticmethod(megatron_rows)  # column-wise for large files
    line_records = True
    title = "Megatron-LM / Megatron-DeepSpeed console ( iteration N/ M | ... | lm loss: X | ...)"
    example = (" iteration    29050/  311541 | consumed samples:     10728784 | elapsed time per "
               "iteration (ms): 22148.5 | learning rate: 9.849E-05 | lm loss: 7.343709E+00 | "
               "loss scale: 8192.0 | grad norm: 0.000 |")

    def sniff(self, lines: list[str]) -> int:
        return count_matching((MEGA_ITER, MEGA_VALID), lines)

    def parser(self, sink: Sink) -> LineParser:
        return _MegatronParser(sink)

