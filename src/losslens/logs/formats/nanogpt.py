"""nanoGPT's console (iter N: loss X, time Yms) and modded-nanogpt / llm.c main.log lines."""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
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
    matched,
    number_column,
    number_expr,
    unit_of,
)
from losslens.logs.fields import (
    KEY_WORD,
    RESERVED_SORTED,
    UNRESERVED_SORTED,
    UNSURE,
    per_thousand,
    plain_text,
    wide_columns,
)
from losslens.logs.names import (
    WHOLE_NUMBER,
    WHOLE_NUMERIC,
    columnar,
    parse_number,
    unreserved,
)
from losslens.logs.sink import MAX_KEYS, Sink

# --- nanoGPT ---------------------------------------------------------------------------------
# (numbers taken whole, as in every pattern here: see names.WHOLE_NUMBER; polars reads
# `columnar` of them)
NANO_ITER = re.compile(
    rf"^iter (\d+): loss ({WHOLE_NUMERIC}), time ({WHOLE_NUMBER})ms(?:, mfu ({WHOLE_NUMBER})%)?",
    re.IGNORECASE)


NANO_EVAL = re.compile(rf"^step (\d+): train loss ({WHOLE_NUMERIC}), val loss ({WHOLE_NUMERIC})",
                       re.IGNORECASE)


class _NanoParser(RegexLineParser):
    noise = ((re.compile(r"^saving checkpoint"), "checkpoint message"), *COMMON_NOISE)

    def feed(self, lineno: int, line: str) -> str | None:
        m = NANO_ITER.match(line)
        if m:
            metrics: dict[str, float | None] = {"loss": parse_number(m.group(2)),
                                                "step_time_s": float(m.group(3)) / 1000}
            if m.group(4) is not None and float(m.group(4)) != -100.0:  # -100: nanoGPT's "unset"
                metrics["mfu"] = float(m.group(4))
            self.sink.names.update(loss="loss", step_time_s="time", mfu="mfu")
            self.sink.emit(lineno, whole(m.group(1)), metrics)
            return None
        m = NANO_EVAL.match(line)
        if m:
            self.sink.names.update(eval_loss="val loss", eval_train_loss="train loss")
            self.sink.emit(lineno, whole(m.group(1)), {"eval_train_loss": parse_number(m.group(2)),
                                                     "eval_loss": parse_number(m.group(3))})
            return None
        return self.classify_noise(line)



def _case_blind(pattern: str) -> str:
    return "(?i)" + pattern


def nanogpt_rows(text: pl.Series, lineno: pl.Series, sink: Sink, parser: object = None) -> pl.Series:
    """'iter N: loss X, time Yms, mfu Z%' and 'step N: train loss X, val loss Y' lines."""
    hit, g = matched(text, _case_blind(columnar(NANO_ITER)))
    if hit.any():
        mfu = g["4"].cast(pl.Float64)
        cols = {"loss": number_column(g["2"])[0], "step_time_s": per_thousand(g["3"].cast(pl.Float64)),
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


class NanoGPT(Format):
    """--format nanogpt: 'iter N: loss X, time Yms' and 'step N: train loss X, val loss Y'."""
    name = "nanogpt"
    rows = staticmethod(nanogpt_rows)  # column-wise for large files
    line_records = True
    title = "nanoGPT train.py stdout"
    example = "iter 425: loss nan, time 1431.27ms, mfu 0.01%"

    def sniff(self, lines: list[str]) -> int:
        return count_matching((NANO_ITER, NANO_EVAL), lines)

    def parser(self, sink: Sink) -> LineParser:
        return _NanoParser(sink)



# --- modded-nanogpt and llm.c ----------------------------------------------------------------
# (each pair taken whole: '(?:\w+:\S+\s*)+' split a token 'a:b:c…' into pairs every way before
# refusing the line, exponential: a damaged line with 'a:a' 22 times took 21 s)
MODDED = re.compile(r"^step:(\d+)/(\d+) ((?:\w++:\S++\s*+)+)$")


MODDED_PAIR = re.compile(r"(\w+):(\S+)")


LLMC = re.compile(rf"^s:(\d+) (trl|tel):({WHOLE_NUMERIC})\s*$")


LLMC_NEW = re.compile(
    rf"^step\s+(\d+)/(\d+) \| (?:train )?loss ({WHOLE_NUMERIC}) \| norm ({WHOLE_NUMERIC}) "
    rf"\| lr ({WHOLE_NUMBER})(?: \| ({WHOLE_NUMBER}) ms)?(?: \| ({WHOLE_NUMBER})% bf16 MFU)?"
    rf"(?: \| ({WHOLE_NUMBER}) tok/s)?")


class _ModdedParser(RegexLineParser):
    noise = COMMON_NOISE

    def feed(self, lineno: int, line: str) -> str | None:
        m = MODDED.match(line.strip())
        if m:
            pairs = MODDED_PAIR.findall(m.group(3))
            metrics: dict[str, float] = {}
            for key, raw in pairs:
                v = parse_number(raw)
                if v is None:
                    continue
                name = unreserved({"train_loss": "loss", "val_loss": "eval_loss",
                                   "train_time": "train_time_s", "step_avg": "step_avg_s"}.get(key, key))
                metrics[name] = v
                self.sink.names.setdefault(name, key)
            if not self.sink.emit(lineno, whole(m.group(1)), metrics):
                return "no training metric"
            return None
        m = LLMC.match(line.strip())
        if m:
            name = "loss" if m.group(2) == "trl" else "eval_loss"
            self.sink.names.setdefault(name, m.group(2))
            self.sink.emit(lineno, whole(m.group(1)), {name: parse_number(m.group(3))})
            return None
        m = LLMC_NEW.match(line.strip())
        if m:
            new: dict[str, float | None] = {"loss": parse_number(m.group(3)),
                                            "grad_norm": parse_number(m.group(4)),
                                            "lr": float(m.group(5))}
            if m.group(6):
                new["step_time_s"] = float(m.group(6)) / 1000
            if m.group(8):
                new["tokens_per_s"] = float(m.group(8))
            self.sink.emit(lineno, whole(m.group(1)), new)
            return None
        return self.classify_noise(line)



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
            and all(KEY_WORD.fullmatch(k) for k in keys)]


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
    if not plain_text(lines):  # (Python's \S and the regex crate's may differ there)
        ok = ok & ~pl.col("b").str.contains(UNSURE)
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
    # (as wide_columns names them: ``named`` takes them first)
    name = name.replace(RESERVED_SORTED, UNRESERVED_SORTED)
    value = number_column(cut.struct.field("field_1"))[0]
    fields = pl.DataFrame({"row": parts["row"], "name": name, "key": key, "value": value}).with_row_index(
        "at").filter(pl.col("key").is_not_null() & pl.col("value").is_not_null())
    for name, row, place, k in fields.group_by("name", maintain_order=True).agg(
            pl.col("row").first(), pl.col("at").first(), pl.col("key").first()).rows():
        named.append((int(at[row]), place, name, k))  # (a row is read one way only: any order on it)
    fields = fields.drop("at")
    return wide_columns(fields, len(body), sink, named=False)


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
                "lr": g["5"].cast(pl.Float64), "step_time_s": per_thousand(g["6"].cast(pl.Float64)),
                "tokens_per_s": g["8"].cast(pl.Float64)}
        add_rows(sink, {"step": g["1"].cast(pl.Int64, strict=False), "line": lineno.filter(new)},
                 cols, None, idle=False)
        done = done | new
    return done


class ModdedNanoGPT(Format):
    """--format modded-nanogpt: 'step:N/T train_loss:X ...' and llm.c's 's:N trl:X' lines."""
    name = "modded-nanogpt"
    rows = staticmethod(modded_rows)  # column-wise for large files
    line_records = True
    title = "modded-nanogpt / llm.c main.log (step:N/T train_loss:X, s:N trl:X)"
    example = "step:14257/19073 train_loss:6.2790 train_time:5586124ms step_avg:391.87ms"

    def sniff(self, lines: list[str]) -> int:
        return count_matching((MODDED, LLMC, LLMC_NEW), [x.strip() for x in lines])

    def parser(self, sink: Sink) -> LineParser:
        return _ModdedParser(sink)
