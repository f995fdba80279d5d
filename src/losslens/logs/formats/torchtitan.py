"""torchtitan console lines (ANSI colours stripped)."""

from __future__ import annotations

import re

import polars as pl

from losslens.logs.base import (
    ANSI,
    COMMON_NOISE,
    Format,
    LineParser,
    RegexLineParser,
    leading_time,
    whole,
)
from losslens.logs.columnar import (
    add_rows,
    leading_times,
    match_whole,
)
from losslens.logs.fields import (
    key_columns,
    less_rows,
    long_pairs,
    same_keys,
    sure_lines,
)
from losslens.logs.names import NONFINITE
from losslens.logs.sink import Sink

# --- torchtitan ------------------------------------------------------------------------------
TITAN = re.compile(r"step:\s*(\d+)\s+(loss:\s*\S+.*)$")


TITAN_PAIR = re.compile(rf"([a-z_ ()]+?):\s*({NONFINITE}(?![A-Za-z])|[-+\d.,eE]+)([A-Za-z%]*)"
                        r"(?:\([^)]*\))?")
_KEY_RUN = re.compile(r"[a-z_ ()]*+")


def titan_pairs(text: str) -> list[tuple[str, str, str]]:
    """TITAN_PAIR.findall(text), each run of key characters read once: findall tried a key from
    each character of a run (of spaces, say) that no ':' ends, to the end of the run: quadratic.
    A key from any character of a run ends where the run does (':' is not a key's character), so
    where the run's first character starts no pair, none of the others does."""
    pairs = []
    at = 0
    while at < len(text):
        m = TITAN_PAIR.match(text, at)
        if m:
            pairs.append((m.group(1), m.group(2), m.group(3)))
            at = m.end()
        else:
            at = max(_KEY_RUN.match(text, at).end(), at + 1)  # type: ignore[union-attr]
    return pairs


class _TitanParser(RegexLineParser):
    noise = COMMON_NOISE

    def feed(self, lineno: int, line: str) -> str | None:
        clean = ANSI.sub("", line)
        m = TITAN.search(clean)
        if not m:
            return self.classify_noise(clean)
        pairs = [(k.strip(), v + u) for k, v, u in titan_pairs(m.group(2))]
        _, metrics = self.sink.metrics_from_pairs(pairs)
        t = leading_time(clean.split("] ", 1)[-1]) or leading_time(clean)
        if not self.sink.emit(lineno, whole(m.group(1)), metrics, time=t):
            return "no training metric"
        return None



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
    sure = sure_lines(clean)
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
        hit, got = less_rows(hit, ahead), got.filter(~ahead)
    if not hit.any():
        return hit
    line = got["line"]
    pairs = got["rest"].str.extract_all(_TITAN_PAIR)
    _, cols, bad = same_keys(pairs, _titan_pair, sink) or \
        key_columns(long_pairs(pairs, _titan_pair), len(got), sink)
    after = line.str.splitn("] ", 2).struct.field("field_1").fill_null(line)  # as the parser
    when = leading_times(after)
    if when.null_count():  # (the line's own, where what follows a '] ' starts with none)
        at = when.is_null().arg_true()
        when = when.scatter(at, leading_times(line.gather(at)))
    add_rows(sink, {"step": got["step"], "line": lineno.filter(hit), "time": when}, cols, bad)
    return less_rows(hit, bad)


def _titan_pair(pair: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """A TITAN_PAIR match, 'key:', spaces, the value and its unit, then perhaps '(…)' (neither
    holds a ':' or a '(' before it): its key and its value."""
    cut = pair.str.splitn(":", 2)
    value = cut.struct.field("field_1").str.strip_chars_start(" \t\n\r\f\v").str.splitn("(", 2)
    return cut.struct.field("field_0").str.strip_chars(), value.struct.field("field_0")


class TorchTitan(Format):
    """--format torchtitan: 'step: N  loss: X  memory: ...  tps: ...' with the colours stripped."""
    name = "torchtitan"
    title = "torchtitan console (step: N  loss: X  memory: ...  tps: ...), ANSI colours stripped"
    example = ("[titan] 2025-01-08 10:00:00,000 - root - INFO - step: 10  loss:  7.6442  "
               "memory: 39.12GiB(41.18%)  tps: 6,581  mfu: 38.55%")
    rows = staticmethod(torchtitan_rows)  # column-wise for large files
    line_records = True

    def sniff(self, lines: list[str]) -> int:
        return sum(1 for x in lines if TITAN.search(ANSI.sub("", x)))

    def parser(self, sink: Sink) -> LineParser:
        return _TitanParser(sink)
