"""PyTorch Lightning's progress bar on stdout (a run without a logger file)."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import polars as pl

from losslens.logs.base import (
    COMMON_NOISE,
    Format,
    LineParser,
    RegexLineParser,
    whole,
)
from losslens.logs.columnar import (
    ENGINE,
    add_rows,
    number_column,
)
from losslens.logs.names import STEP_KEYS, is_eval
from losslens.logs.sink import MAX_KEYS, Sink, Value

# --- PyTorch Lightning's progress bar (stdout of a run without a logger file) ---------------
# 'Epoch 3:  20%|██        | 20/100 [00:02<00:08,  9.50it/s, v_num=0, train_loss=2.340]', redrawn
# with '\r' on one physical line per epoch; validation bars have no postfix of their own
LIGHTNING_BAR = re.compile(r"Epoch (\d+):\s*\d+%\|[^|]*\|\s*(\d+)/(\d+) \[[^\]]*?(?:it/s|s/it)(?:, (.*))?\]")


LIGHTNING_PAIR = re.compile(r"([A-Za-z_][\w/.\-]*)=([^\s,\]]+)")
# LIGHTNING_PAIR for Python's engine: from the start of a run of key characters, past the digits,
# '.', '/' or '-' before its first letter, the key taken whole (LIGHTNING_PAIR tried one from each
# letter of a long run: quadratic). Its key is the same: a key from a later letter ends where the
# run does, and fails where the first does. A value ends before ',', ']' or a space, none of
# them a key's, so each match starts a run
_PAIR = re.compile(r"(?<![\w/.\-])(?:[^\WA-Za-z_]|[/.\-])*+([A-Za-z_][\w/.\-]*+)=([^\s,\]]++)")


class _LightningParser(RegexLineParser):
    """One record per training step seen in the bar (the last redraw of the step); an eval
    metric in the postfix ('val_loss=…', carried on every redraw) only when its value changes."""

    noise = COMMON_NOISE

    def __init__(self, sink: Sink):
        super().__init__(sink)
        self.held: tuple[int, int, dict[str, Value]] | None = None  # line, step, metrics
        self.last_eval: dict[str, Value] = {}

    def finish(self) -> None:
        if self.held is not None:
            lineno, step, metrics = self.held
            evals = {k: v for k, v in metrics.items() if is_eval(k)}
            if evals == self.last_eval:  # unchanged since last emitted: not a new evaluation
                metrics = {k: v for k, v in metrics.items() if not is_eval(k)}
            else:
                self.last_eval = evals
            self.sink.emit(lineno, step, metrics)
            self.held = None

    def feed(self, lineno: int, line: str) -> str | None:
        found = False
        for segment in line.split("\r"):
            m = LIGHTNING_BAR.search(segment)
            if not m or not m.group(4):
                continue
            epoch, done, total = whole(m.group(1)), whole(m.group(2)), whole(m.group(3))
            pairs = [(k, v) for k, v in _PAIR.findall(m.group(4)) if k != "v_num"]
            _, metrics = self.sink.metrics_from_pairs(pairs)
            if not metrics:
                continue
            metrics["epoch"] = float(epoch)
            step = epoch * total + done
            if self.held is not None and self.held[1] != step:
                self.finish()
            self.held = (lineno, step, metrics)
            found = True
        if found:
            return None
        return self.classify_noise(line.split("\r")[-1])



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


class Lightning(Format):
    """--format lightning: the progress bar's postfix values (train_loss=...) at each step it shows."""
    name = "lightning"
    title = "PyTorch Lightning progress bar on stdout (Epoch N: …| b/N [… train_loss=…]), '\\r' redraws"
    example = "Epoch 3:  20%|██        | 20/100 [00:02<00:08,  9.50it/s, v_num=0, train_loss=2.340]"
    rows = staticmethod(lightning_rows)  # column-wise for large files

    def sniff(self, lines: list[str]) -> int:
        return sum(1 for x in lines if any(m.group(4) for m in LIGHTNING_BAR.finditer(x)))

    def parser(self, sink: Sink) -> LineParser:
        return _LightningParser(sink)
