"""OLMo: "[step=N/T,epoch=E]" then indented "key=value" lines."""

from __future__ import annotations

import re

import numpy as np
import polars as pl

from losslens.logs.base import (
    COMMON_NOISE,
    Format,
    LineParser,
    RegexLineParser,
    leading_time,
    whole,
)
from losslens.logs.columnar import (
    add_rows,
    any_of,
    leading_times,
    metric_columns,
    number_column,
)
from losslens.logs.fields import (
    key_columns,
    plain_text,
)
from losslens.logs.names import STEP_KEYS, parse_number
from losslens.logs.sink import MAX_KEYS, Sink

# --- OLMo: "[step=N/T,epoch=E]" then indented "key=value" lines ------------------------------
OLMO_HEAD = re.compile(r"\[step=(\d+)(?:/\d+)?(?:,epoch=(\d+))?\]\s*$")


OLMO_FIELD = re.compile(r"^\s+([^=\s][^=]*?)=(\S+)\s*$")


class _OlmoParser(RegexLineParser):
    noise = COMMON_NOISE

    def __init__(self, sink: Sink):
        super().__init__(sink)
        self.pending: tuple[int, int, list[tuple[str, str]], object] | None = None

    def finish(self) -> None:
        if self.pending is not None:
            lineno, step, pairs, time = self.pending
            _, metrics = self.sink.metrics_from_pairs(pairs)
            self.sink.emit(lineno, step, metrics, time=time)  # type: ignore[arg-type]
            self.pending = None

    def feed(self, lineno: int, line: str) -> str | None:
        m = OLMO_HEAD.search(line)
        if m:
            self.finish()
            pairs = [("epoch", m.group(2))] if m.group(2) is not None else []
            self.pending = (lineno, whole(m.group(1)), pairs, leading_time(line))
            return None
        if self.pending is not None:
            f = OLMO_FIELD.match(line)
            if f and parse_number(f.group(2)) is not None:
                self.pending[2].append((f.group(1), f.group(2)))
                return None
        self.finish()
        return self.classify_noise(line.strip())



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
    if n == 0:
        return pl.Series(np.zeros(n, dtype=bool))
    blank = (text.is_null() | (text.str.strip_chars().str.len_bytes() == 0)).to_numpy()
    if not plain_text(text):  # lines Python's regexes may read otherwise than the regex crate's
        unsure = text.str.contains(_OLMO_UNSURE).fill_null(False)
        if (unsure & text.str.contains(r"[=\x1c-\x1f]")).any():
            # one may be a field, or blank to Python alone (it strips \x1c-\x1f): the parser's
            return pl.Series(np.zeros(n, dtype=bool))
        # without an '=' no pattern of the format reads a line (a progress bar's blocks): a break
        # to both readers, which the parser skips
    head_g = text.str.extract_groups(OLMO_HEAD.pattern)
    head = head_g.struct.field("1").is_not_null().to_numpy()
    field_g = _olmo_fields(text)
    value = number_column(field_g["2"])[0]
    field = (value.is_not_null() & ~pl.Series(head)).to_numpy()
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
    cols, bad = _olmo_columns(heads["2"], order, field_g.filter(mine), value.filter(mine),
                              np.flatnonzero(in_record & field), sink)
    add_rows(sink, {"step": heads["1"].cast(pl.Int64, strict=False), "line": lineno.gather(at),
                    "time": leading_times(text.gather(at))}, cols, bad, idle=False)
    return pl.Series(in_record & np.isin(seg, rec[~bad.to_numpy()]))  # (a record left out: the parser's)


def _olmo_columns(epoch: pl.Series, order: np.ndarray, fields: pl.DataFrame, value: pl.Series,
                  lines: np.ndarray, sink: Sink) -> tuple[dict[str, pl.Series], pl.Series]:
    """The records' metric columns and which are left to the parser: the records of the chunk's
    commonest shape read position by position, the few others (a warning printed inside a
    record, a field missing from one) in long form, then put back in line order. ``order``:
    each field's record; ``value``: the fields' readings; ``lines``: each field's line."""
    odd = _odd_records(order, fields["1"], len(epoch))
    if odd is None:
        got = _olmo_same_keys(epoch, order, fields, value, sink) or \
            _olmo_long(epoch, order, fields, lines, sink)
        return got[1], got[2]
    parts = []
    for common in (True, False):
        picked = ~odd if common else odd
        mine = picked[order]  # the picked records' fields
        renumbered = (np.cumsum(picked) - 1)[order[mine]]
        e, f, keep = epoch.filter(pl.Series(picked)), fields.filter(pl.Series(mine)), pl.Series(mine)
        got = (common and _olmo_same_keys(e, renumbered, f, value.filter(keep), sink)) or \
            _olmo_long(e, renumbered, f, lines[mine], sink)
        parts.append(pl.DataFrame({_AT: np.flatnonzero(picked), **got[1], _BAD: got[2]}))
    both = pl.concat(parts, how="diagonal_relaxed").sort(_AT)
    return {c: both[c] for c in both.columns if c not in (_AT, _BAD)}, both[_BAD]


_AT, _BAD = "\0record", "\0bad"  # (names no metric has)
ODD_SHARE = 0.10  # at most this share of a chunk's records read apart for their shape


def _odd_records(order: np.ndarray, keys: pl.Series, nrec: int) -> np.ndarray | None:
    """Which records (True) differ from the chunk's commonest shape (its field count, and the
    keys of its first record of that count, in order): a warning printed inside a record, a
    field missing from one; None where none does, or where more than ``ODD_SHARE`` do (then
    all are read in long form at once)."""
    counts = np.bincount(order, minlength=nrec)
    k = int(np.bincount(counts).argmax())
    odd = counts != k
    if k:
        first = int(np.argmax(~odd))  # the first record of the common count
        start = np.concatenate([[0], np.cumsum(counts)])
        at = np.minimum(np.arange(len(order)) - start[order], k - 1)  # (past k: odd already)
        expected = keys.slice(int(start[first]), k).gather(at)
        odd |= np.bincount(order, weights=(keys != expected).fill_null(True).to_numpy(),
                           minlength=nrec) > 0
    if not odd.any() or odd.sum() > ODD_SHARE * nrec:
        return None
    return odd


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
    ``key_columns``). ``order``: each field's record; ``lines``: each field's line."""
    nrec = len(epoch)
    epochs = pl.DataFrame({"row#": np.arange(nrec, dtype=np.int64), "key": "epoch", "value": epoch,
                           "at": np.zeros(nrec, dtype=np.int64)}).filter(pl.col("value").is_not_null())
    # (the head's epoch is the parser's first pair, then the fields in line order)
    long = pl.concat([epochs, pl.DataFrame({
        "row#": order.astype(np.int64), "key": fields["1"], "value": fields["2"],
        "at": lines.astype(np.int64) + 1})]).sort("row#", "at").drop("at")
    return key_columns(long, nrec, sink)


class Olmo(Format):
    """--format olmo: a '[step=N/T]' head line, then one indented key=value line per metric."""
    name = "olmo"
    title = "OLMo console: '[step=N/T,epoch=E]' followed by indented key=value lines"
    example = "2025-12-12 11:05:02.009\thost:0\tolmo.train:979\tINFO\t[step=1/15000,epoch=0]"
    rows = staticmethod(olmo_rows)  # column-wise for large files

    def sniff(self, lines: list[str]) -> int:
        n, inside = 0, False
        for x in lines:
            if OLMO_HEAD.search(x):
                n, inside = n + 1, True
            elif inside and OLMO_FIELD.match(x):
                n += 1
            else:
                inside = False
        return n

    def parser(self, sink: Sink) -> LineParser:
        return _OlmoParser(sink)
