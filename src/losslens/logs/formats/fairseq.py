"""fairseq's train_inner / valid lines."""

from __future__ import annotations

import re

import polars as pl

from losslens.logs.base import (
    COMMON_NOISE,
    Format,
    LineParser,
    RegexLineParser,
    count_matching,
    leading_time,
)
from losslens.logs.columnar import (
    add_rows,
    any_of,
    leading_times,
    match_whole,
    matched,
)
from losslens.logs.fields import (
    KEY_WORD,
    head_of,
    key_columns,
    less_rows,
    long_pairs,
    same_keys,
    sure_lines,
)
from losslens.logs.names import is_eval, unreserved
from losslens.logs.sink import Sink

# --- fairseq ---------------------------------------------------------------------------------
FAIRSEQ_INNER = re.compile(r"\|\s*train_inner\s*\|\s*epoch (\d+):\s*(\d+)\s*/\s*(\d+)\s+(.*)$")


FAIRSEQ_VALID = re.compile(r"\|\s*valid\s*\|\s*epoch (\d+)\s*\|(.*)$")


FAIRSEQ_TRAIN = re.compile(r"\|\s*train\s*\|\s*epoch (\d+)\s*\|")


FAIRSEQ_KV = re.compile(r"(\w+)=(\S+?)(?:,|$|\s)")
# FAIRSEQ_KV for Python's engine: a key starts where a word does and is taken whole (FAIRSEQ_KV tried
# one from each character of a long word: quadratic). A match ends after a ',' or a space, so the
# next starts at a word's start anyway: the two find the same pairs
_KV = re.compile(r"(?<!\w)(\w++)=(\S+?)(?:,|$|\s)")


FAIRSEQ_PIPE = re.compile(r"^\s*(\w+) (\S+)\s*$")


FAIRSEQ_INFO = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \| \w+ \| [\w.]+ \|")


class _FairseqParser(RegexLineParser):
    noise = ((FAIRSEQ_TRAIN, "epoch summary"), (FAIRSEQ_INFO, "framework message"),
             *COMMON_NOISE)

    def feed(self, lineno: int, line: str) -> str | None:
        m = FAIRSEQ_INNER.search(line)
        if m:
            step, metrics = self.sink.metrics_from_pairs(_KV.findall(m.group(4)))
            metrics["epoch"] = float(m.group(1))
            if not self.sink.emit(lineno, step, metrics, time=leading_time(line)):
                return "no training metric"
            return None
        m = FAIRSEQ_VALID.search(line)
        if m:
            pairs = [(p.group(1), p.group(2)) for p in map(FAIRSEQ_PIPE.match, m.group(2).split("|")) if p]
            step, metrics = self.sink.metrics_from_pairs(pairs)
            metrics = {k.removeprefix("eval_"): v for k, v in metrics.items()}
            if not self.sink.emit(lineno, step, metrics, time=leading_time(line), kind="eval"):
                return "no training metric"
            return None
        return self.classify_noise(line)



_INNER_HEAD = head_of(FAIRSEQ_INNER.pattern)


_ENDS = [",", " ", "\t", "\n", "\x0b", "\x0c", "\r"]  # [,\s] on an ASCII line


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
    """FAIRSEQ_KV's pairs of each row's text as ``key_columns`` reads them: ``_same_pairs``
    where it can, else the long form of FAIRSEQ_KV's matches."""
    return _same_pairs(rest, sink) or _fairseq_long(rest, sink)


def _fairseq_long(rest: pl.Series, sink: Sink) -> tuple[pl.Series, dict[str, pl.Series], pl.Series]:
    """FAIRSEQ_KV's matches of each row's text, in long form (see ``key_columns``)."""
    return key_columns(long_pairs(rest.str.extract_all(FAIRSEQ_KV.pattern), _fairseq_pair), len(rest), sink)


def _same_pairs(rest: pl.Series, sink: Sink
                ) -> tuple[pl.Series, dict[str, pl.Series], pl.Series] | None:
    """``_fairseq_long`` where every row is 'k1=v1, k2=v2, …' with the first row's keys (words)
    in order and no ',' or space but the separators' (FAIRSEQ_KV finds exactly those pairs
    there): the parts of a split at ', ' read position by position (``same_keys``: no pair
    regex, no long form); None where a row is not."""
    parts = rest.str.split(", ")
    n = parts.list.len() - 1
    plain = ((rest.str.count_matches(",", literal=True) == n)
             & (rest.str.count_matches(" ", literal=True) == n)
             & ~rest.str.contains(r"[\t\n\x0b\x0c\r]")).fill_null(False)
    first = parts[0] if len(parts) else None
    if not plain.all() or first is None or not all(KEY_WORD.fullmatch(p.split("=", 1)[0]) for p in first):
        return None
    return same_keys(parts, _at_equals, sink)  # (no value ends in a ',' or a space here)


def fairseq_rows(text: pl.Series, lineno: pl.Series, sink: Sink, parser: object = None) -> pl.Series:
    """fairseq's '| train_inner | epoch E: N / M key=value, …' lines (the step the best step key
    among the pairs, the epoch the head's) and its '| valid | epoch E | name value | …' lines (eval
    records); the epoch summaries and the rest are the per-line parser's."""
    sure = sure_lines(text)
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
        done = less_rows(done, bad).to_numpy()
    valid = (~hit & sure.str.contains(head_of(FAIRSEQ_VALID.pattern)).fill_null(False)).to_numpy()
    if valid.any():
        rows = pl.Series(valid)
        _, g = matched(sure.filter(rows), FAIRSEQ_VALID.pattern)
        n = len(g)
        parts = pl.DataFrame({"row#": pl.int_range(0, n, eager=True), "part": g["2"].str.split("|")}
                             ).explode("part")
        kv = parts["part"].str.extract_groups(FAIRSEQ_PIPE.pattern).struct.unnest()
        fields = pl.DataFrame({"row#": parts["row#"], "key": kv["1"], "value": kv["2"]}).filter(
            pl.col("key").is_not_null())
        step, cols, bad = key_columns(fields, n, sink)
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
        valid = less_rows(valid, bad).to_numpy()
    return pl.Series(done | valid)


class Fairseq(Format):
    """--format fairseq: train_inner and valid lines."""
    name = "fairseq"
    title = "fairseq simple log (| train_inner | epoch 001: 100 / 1021 loss=..., num_updates=...)"
    example = ("2024-05-31 15:45:00 | INFO | train_inner | epoch 001:    100 / 1021 loss=12.835, "
               "nll_loss=12.704, ppl=6670.89, wps=27054.6, num_updates=100, lr=1.25e-05, gnorm=3.112")
    rows = staticmethod(fairseq_rows)  # column-wise for large files
    line_records = True

    def sniff(self, lines: list[str]) -> int:
        # preamble lines of fairseq (preprocess, Namespace) count too: they come first
        inner = count_matching((FAIRSEQ_INNER, FAIRSEQ_VALID), lines)
        return inner + (count_matching((FAIRSEQ_INFO,), lines) if inner else 0)

    def parser(self, sink: Sink) -> LineParser:
        return _FairseqParser(sink)
