"""The skeleton reader: one compiled pass reads any format whose records are one line each.

A trainer prints its records from one format string, so the lines of a log share a few
*skeletons*: the text with the numbers taken out (see ``skeleton_kernels``). The kernel hashes each
line's skeleton and reads its numbers. For each skeleton that many lines of a chunk share, the
format's own per-line parser reads a dozen of them (the *probe*), and the skeleton becomes a
template where every value the parser gave is one number of the line (as written, divided by 1000
or times a unit's scale, or a number written with thousands separators) and its time is the time
stamp written at one place. Where several numbers fit a value equally, the template keeps them
all and a row where they differ is the parser's. Every other line (noise, a skeleton too rare to
learn, a number not read exactly) goes to the per-line parser, and a chunk where many do is read
by the format's polars path instead. In every chunk two rows of each template are probed again;
a template whose row the parser reads otherwise is dropped, and its rows go to the parser.

Used by the formats marked ``line_records`` (their parser keeps no state from one line to the next)
on files the ``fast`` extra is used for (``fast.wanted``). The per-line parser is the oracle: the
tests read the bench's logs, clean and noisy, both ways and compare the frames.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import polars as pl

from losslens.logs.base import Format, LineParser, feed_ranked
from losslens.logs.columnar import (
    FEW_RANKED,
    account_line,
    count_skipped,
    most_ranked,
    ranked_feed,
    read_chunk,
    tagged,
    without_prefixes,
)
from losslens.logs.fast import compiled, line_bounds, wanted
from losslens.logs.names import MAGNITUDE, UNIT_SCALE
from losslens.logs.sink import Accounting, Sink

KERNELS = "losslens.logs.skeleton_kernels"
WIDTH = 32  # numbers a line may hold (a line with more is the parser's)
MIN_LINES = 4  # a skeleton fewer lines of a chunk share is not learned: its lines are the parser's
SAMPLES = 12  # lines of a skeleton the parser reads to learn it
CHECKS = 2  # rows of each template the parser reads again in every chunk
# the scales a parser applies to a number as written: a unit's (names.UNIT_SCALE, MAGNITUDE)
SCALES = sorted({*UNIT_SCALE.values(), *MAGNITUDE.values()} - {1.0})
EPOCH = datetime(1970, 1, 1)
META = ("step", "line", "time")  # a record's keys that are no metric


@dataclass(frozen=True)
class Rule:
    """How one value of a record follows from a line: ``kind`` 'number' (number ``at``, divided by
    ``by`` where ``op`` is '/', times it where '*'), 'thousands' (numbers ``at`` … ``at + groups``
    written '31,042'), 'time' (the stamp written where number ``at`` starts), 'line' (the line
    number) or 'none' (no value)."""
    kind: str
    at: int = -1
    op: str = ""
    by: float = 1.0
    groups: int = 0


@dataclass
class Template:
    """What the parser makes of a skeleton's lines: its records (train or eval, their keys in
    order), each value's candidate rules (all agreeing on the probed lines) and the metrics'
    original names."""
    records: list[tuple[str, tuple[str, ...]]]
    rules: dict[tuple[int, str], list[Rule]]
    names: dict[str, str]
    skip: str | None = None  # a skeleton whose lines the parser skips, all for this reason
    # numbers a key is named by ('aux loss 2'): a row holding another value there is the parser's
    pins: dict[int, float] = field(default_factory=dict)

    def signature(self) -> tuple[Any, ...]:
        """What the template reads, whatever skeleton it was learned from: two templates alike
        read their rows alike."""
        return (tuple(self.records), tuple(sorted((k, tuple(v)) for k, v in self.rules.items())),
                tuple(sorted(self.names.items())), self.skip, tuple(sorted(self.pins.items())))


@dataclass
class Scan:
    """A chunk as the kernel reads it (see ``skeleton_kernels.scan``)."""
    buf: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    hashes: np.ndarray
    counts: np.ndarray
    values: np.ndarray
    at: np.ndarray
    plain: np.ndarray
    usable: np.ndarray
    blank: np.ndarray
    ranked: np.ndarray
    strip: bool = False  # lines behind a capture's prefixes, which the probe cuts as the parser does

    def text(self, r: int) -> str:
        return self.buf[self.starts[r]:self.ends[r]].tobytes().decode("utf-8", "replace")


def skeleton_reader(fmt: Format, size: int | None) -> Callable[..., None] | None:
    """The skeleton reader of ``fmt``'s chunks where it reads one-line records and the file is
    read with the ``fast`` extra (``fast.wanted``); None otherwise."""
    if not fmt.one_line_records or fmt.rows is None or not wanted(size, KERNELS):
        return None
    return SkeletonReader(fmt, fmt.rows)


def _probe(fmt: Format, lineno: int, line: str, strip: bool = False, primer: str | None = None
           ) -> tuple[str | None, list[tuple[str, dict[str, Any]]], dict[str, str]] | None:
    """What a fresh parser of ``fmt`` makes of one line (``strip``: its capture prefix cut first,
    see ``base.feed_ranked``): its skip reason, its records (train first, then eval) and the
    names it learned; None where it did more than emit records. With ``primer`` (a line of a
    parser with state that is a record of its own), the line is read after it, and None where it
    changed the parser's state."""
    sink = Sink()
    parser = fmt.parser(sink)
    before: dict[str, Any] = {}
    if primer is not None:  # (the state a record of its own leaves the parser in)
        feed_ranked(parser, sink, lineno - 1, primer, strip)
        sink.train, sink.eval, named = [], [], dict(sink.names)
        before = copy.deepcopy(_state(parser))
    reason = feed_ranked(parser, sink, lineno, line, strip)
    if primer is not None and _state(parser) != before:
        return None
    parser.finish()
    if sink.frames or sink.eval_frames or sink.notes or sink.lost or sink.mixed or sink.idle_lines:
        return None
    names = sink.names if primer is None else {k: v for k, v in sink.names.items() if k not in named}
    return reason, [("train", r) for r in sink.train] + [("eval", r) for r in sink.eval], names


def _state(parser: LineParser) -> dict[str, Any]:
    """What a parser keeps from one line to the next (its attributes but its sink)."""
    return {k: v for k, v in vars(parser).items() if k != "sink"}


def _micros(t: Any) -> int | None:
    """A naive datetime as microseconds since 1970 (None for anything else)."""
    if not isinstance(t, datetime) or t.tzinfo is not None:
        return None
    return (t - EPOCH) // _US


_US = datetime(1970, 1, 1, 0, 0, 0, 1) - EPOCH


class Part:
    """Some rows of a scan, each number's column gathered once for every rule read on them."""

    def __init__(self, s: Scan, rows: np.ndarray) -> None:
        self.scan, self.rows = s, rows
        self.ends = s.ends[rows]
        self._got: dict[tuple[str, int], np.ndarray] = {}

    def col(self, what: str, at: int) -> np.ndarray:
        """Number ``at`` of each row: its value ('values'), whether it is a plain run of digits
        ('plain'), where it starts ('at')."""
        key = (what, at)
        if key not in self._got:
            self._got[key] = getattr(self.scan, what)[self.rows, at]
        return self._got[key]


def _value(rule: Rule, p: Part, stamps: Callable[..., Any]) -> tuple[np.ndarray, np.ndarray]:
    """What ``rule`` ('number', 'thousands' or 'time') gives on the rows of ``p``: the values
    (float64; int64 microseconds for a time) and where they are read exactly."""
    if rule.kind == "time":
        return stamps(p.scan.buf, p.col("at", rule.at), p.ends)
    v = p.col("values", rule.at)
    if rule.kind == "number":
        v = v / rule.by if rule.op == "/" else v * rule.by if rule.op == "*" else v
        return v, ~np.isnan(v)
    # thousands: every part a plain run of digits, the sign the first part's
    ok = p.col("plain", rule.at).copy()
    total = np.abs(v)
    for j in range(1, rule.groups + 1):
        total = total * 1000.0 + p.col("values", rule.at + j)
        ok &= p.col("plain", rule.at + j)
    total = np.where(np.signbit(v), -total, total)
    return total, ok & ~np.isnan(total)


def _candidates(key: str, got: list[Any], s: Scan, rows: np.ndarray, lines: list[int],
                stamps: Callable[..., Any]) -> list[Rule]:
    """The rules that give ``got`` (a value per probed row) on every probed row."""
    if key == "line":
        return [Rule("line")] if got == lines else []
    if all(g is None for g in got):
        return [Rule("none")]
    r0 = rows[:1]
    k = int(s.counts[rows[0]])
    if key == "time":
        want = [_micros(g) for g in got]
        if None in want:
            return []
        tries = [Rule("time", at) for at in range(k) if s.plain[rows[0], at]
                 and 1000 <= s.values[rows[0], at] <= 9999]
    else:
        if any(isinstance(g, bool) or not isinstance(g, int | float) for g in got):
            return []
        want = got
        tries = [Rule("number", at, op, by) for at in range(k)
                 for op, by in (("", 1.0), ("/", 1000.0), *(("*", x) for x in SCALES))]
        tries += [Rule("thousands", at, groups=g) for at in range(k) for g in (1, 2, 3)
                  if at + g < k and _grouped(s, rows[0], at, g)]
        if key == "step":  # a step is a whole number as written
            tries = [t for t in tries if t.kind == "thousands" or (t.op == "" and s.plain[rows[0], t.at])]
    out = []
    one, every = Part(s, r0), Part(s, rows)
    for t in tries:
        v, ok = _value(t, one, stamps)
        if not ok[0] or v[0] != want[0]:
            continue
        v, ok = _value(t, every, stamps)
        if ok.all() and all(x == w for x, w in zip(v.tolist(), want, strict=True)):
            out.append(t)
    return out


def _grouped(s: Scan, r: int, at: int, groups: int) -> bool:
    """Whether numbers ``at`` … ``at + groups`` of row ``r`` are written as one number with
    thousands separators: each next one three digits right after a ',' that ends the one before."""
    for j in range(1, groups + 1):
        start = int(s.at[r, at + j])
        prev = int(s.at[r, at + j - 1])
        if s.buf[start - 1] != 44 or not s.plain[r, at + j]:
            return False
        digits = s.buf[prev:start - 1]
        if j > 1 and len(digits) != 3:
            return False
        if not all(48 <= c <= 57 for c in digits[1:].tolist()) or \
                (len(digits) and not (48 <= digits[0] <= 57 or digits[0] in (43, 45))):
            return False
        end = start
        while end < s.ends[r] and 48 <= s.buf[end] <= 57:
            end += 1
        if end - start != 3:
            return False
    return True


def _spread(n: int, k: int) -> np.ndarray:
    """Up to ``k`` indices spread evenly over ``range(n)``, the first and the last among them."""
    return np.array(sorted({round(i * (n - 1) / max(k - 1, 1)) for i in range(k)}), dtype=np.int64)


def _learn(fmt: Format, s: Scan, rows: np.ndarray, first: int, stamps: Callable[..., Any],
           primer: str | None = None) -> Template | None:
    """The template of the skeleton whose lines are ``rows`` (row numbers in the chunk, the first
    line numbered ``first``), learned from up to SAMPLES of them; None where the parser does
    anything but make the same records from each, or a value follows from no rule. A parser
    with state (``Format.single_line``) is read only where its lines are records of their own,
    or lines it skips without a change to its state after ``primer``, one such record."""
    pick = rows[_spread(len(rows), SAMPLES)]
    lines = [first + int(r) for r in pick]
    texts = [s.text(int(r)) for r in pick]
    after = None
    if fmt.single_line is not None and not all(map(fmt.single_line, texts)):
        if primer is None:
            return None
        after = primer  # (skipped lines, or none of this skeleton's lines are read here)
    outs = [_probe(fmt, ln, text, s.strip, after) for ln, text in zip(lines, texts, strict=True)]
    if any(o is None for o in outs):
        return None
    reasons = {o[0] for o in outs if o is not None}
    if after is not None and (len(reasons) != 1 or None in reasons):
        return None
    if len(reasons) == 1 and None not in reasons and not any(o is not None and o[1] for o in outs):
        # (a parser may name a metric of a line it then skips: the names are kept)
        named = [o[2] for o in outs if o is not None]
        pins = _pins(s, pick, [*named[0], *named[0].values()])
        return Template([], {}, dict(named[0]), skip=reasons.pop(), pins=pins) \
            if all(x == named[0] for x in named) and pins is not None else None
    if any(o is None or o[0] is not None or not o[1] for o in outs):
        return None
    shapes = [[(kind, tuple(rec)) for kind, rec in o[1]] for o in outs if o is not None]
    names = outs[0][2] if outs[0] is not None else {}
    if any(x != shapes[0] for x in shapes) or any(o is not None and o[2] != names for o in outs):
        return None
    rules: dict[tuple[int, str], list[Rule]] = {}
    for i, (_, keys) in enumerate(shapes[0]):
        for key in keys:
            got = [o[1][i][1][key] for o in outs if o is not None]
            found = _candidates(key, got, s, pick, lines, stamps)
            if not found:
                return None
            rules[(i, key)] = found
    pins = _pins(s, pick, [*names, *names.values(), *(key for _, keys in shapes[0] for key in keys)])
    return None if pins is None else Template(shapes[0], rules, dict(names), pins=pins)


_DIGITS = re.compile(r"\d+")
_NUMBER_TEXT = re.compile(r"[-+]?(\d+)")


def _pins(s: Scan, pick: np.ndarray, words: list[str]) -> dict[int, float] | None:
    """The numbers of the sampled lines whose digits name a key or metric (``words``: 'loss/0',
    'aux loss 2'), pinned to their value: the same on every sample (else the keys would differ
    too), and a row holding another value there is the parser's. None where such a number is not
    read exactly."""
    digits = {d for w in words for d in _DIGITS.findall(w)}
    if not digits:
        return {}
    r0 = int(pick[0])
    text, base = s.text(r0), int(s.starts[r0])
    pins: dict[int, float] = {}
    for k in range(int(s.counts[r0])):
        m = _NUMBER_TEXT.match(text, int(s.at[r0, k]) - base)
        if m is None or m.group(1) not in digits:
            continue
        col = s.values[pick, k]
        if np.isnan(col).any():
            return None
        if (col == col[0]).all():
            pins[k] = float(col[0])
    return pins


@dataclass
class _Read:
    """A template's rows of one chunk, read: the row numbers, where all its rules agree and are
    exact, and each value's column."""
    rows: np.ndarray
    ok: np.ndarray
    columns: dict[tuple[int, str], np.ndarray] = field(default_factory=dict)


def _read(t: Template, s: Scan, rows: np.ndarray, stamps: Callable[..., Any],
          probe: Callable[[int], Any]) -> _Read:
    """The template's values on ``rows``. Where a value's candidate rules disagree on some rows,
    the parser reads a few of those (``probe``: a row's records) and the rules that gave
    otherwise are dropped for good (a template whose every rule for a value fails holds no
    row); a row where they still disagree, or a value is not read exactly, is not ok."""
    out = _Read(rows, np.ones(len(rows), dtype=np.bool_))
    part = Part(s, rows)
    for at, value in t.pins.items():
        out.ok &= part.col("values", at) == value
    for where, rules in t.rules.items():
        if rules[0].kind in ("none", "line"):
            continue
        if len(rules) > 1 and all(r.kind == "number" for r in rules) and \
                not any(part.col("values", a).any() for a in {r.at for r in rules}):
            out.columns[where] = part.col("values", rules[0].at)  # zero on every row, by any rule
            continue
        got = [_value(r, part, stamps) for r in rules]
        v, ok = _agreed(got)
        if len(rules) > 1 and not ok.all():
            keep = _settled(where, got, rows, ok, probe)
            if keep is not None:
                t.rules[where] = rules = [r for r, k in zip(rules, keep, strict=True) if k]
                got = [g for g, k in zip(got, keep, strict=True) if k]
                if not rules:
                    out.ok[:] = False
                    return out
                v, ok = _agreed(got)
        if where[1] == "step":
            ok &= v == np.floor(v)
        out.ok &= ok
        out.columns[where] = v
    return out


def _in_runs(read: list[tuple[Any, Template, _Read]], s: Scan) -> int:
    """For a parser with state (``Format.single_line``): a line of a template is read here only
    where, walking back over the chunk's lines (blank ones aside), a record of its own comes
    before any line that is neither such a record nor one skipped without a change to the
    parser's state; the first record of each run is the parser's, which closes any record it was
    assembling. Returns how many template lines were left so."""
    single = np.zeros(len(s.starts), dtype=np.bool_)
    neutral = np.zeros(len(s.starts), dtype=np.bool_)
    for _, t, got in read:
        neutral[got.rows[got.ok]] = True
        if t.skip is None:
            single[got.rows[got.ok]] = True
    filled = np.flatnonzero(~s.blank)
    at = np.arange(len(filled))
    # (the last record, and the last other line, strictly before each line)
    last_single = np.maximum.accumulate(np.where(single[filled], at, -1))
    last_other = np.maximum.accumulate(np.where(neutral[filled], -1, at))
    follows = np.zeros(len(s.starts), dtype=np.bool_)
    follows[filled[1:]] = last_single[:-1] > last_other[:-1]
    held = int(neutral.sum())
    for _, _, got in read:
        got.ok &= follows[got.rows]
    return held - sum(int(got.ok.sum()) for _, _, got in read)


def _agreed(got: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """The first rule's values, and the rows where every rule reads exactly and gives them."""
    v, ok = got[0]
    ok = ok.copy()
    for w, ok2 in got[1:]:
        ok &= ok2 & (w == v)
    return v, ok


def _settled(where: tuple[int, str], got: list[tuple[np.ndarray, np.ndarray]], rows: np.ndarray,
             ok: np.ndarray, probe: Callable[[int], Any]) -> list[bool] | None:
    """Which of a value's rules give what the parser gives on up to three rows where they
    disagree; None where the parser read none of them as a record of this shape."""
    keep = [True] * len(got)
    seen = False
    for j in np.flatnonzero(~ok)[:3].tolist():
        probed = probe(int(rows[j]))
        if probed is None or probed[0] is not None or len(probed[1]) <= where[0]:
            continue
        rec = probed[1][where[0]][1]
        if where[1] not in rec:
            continue
        want = rec[where[1]]
        want = _micros(want) if where[1] == "time" else want
        seen = True
        for i, (w, ok2) in enumerate(got):
            keep[i] = keep[i] and bool(ok2[j]) and want is not None and w[j] == want
    return keep if seen else None


def _frames(t: Template, got: _Read, first: int) -> list[tuple[str, pl.DataFrame]]:
    """The template's records on the rows read, as the per-line records' frames."""
    keep = got.ok
    lines = (got.rows[keep] + first).astype(np.int64)
    out = []
    for i, (kind, keys) in enumerate(t.records):
        cols: dict[str, pl.Series] = {}
        for key in keys:
            rule = t.rules[(i, key)][0]
            if rule.kind == "line":
                cols[key] = pl.Series(key, lines)
            elif rule.kind == "none":
                dtype = pl.Int64 if key == "step" else pl.Datetime("us") if key == "time" else pl.Float64
                cols[key] = pl.Series(key, [None] * len(lines), dtype=dtype)
            elif rule.kind == "time":
                cols[key] = pl.Series(key, got.columns[(i, key)][keep]).cast(pl.Datetime("us"))
            elif key == "step":
                cols[key] = pl.Series(key, got.columns[(i, key)][keep].astype(np.int64))
            else:
                cols[key] = pl.Series(key, got.columns[(i, key)][keep])
        out.append((kind, pl.DataFrame(cols)))
    return out


def _agrees(t: Template, got: _Read, frames: list[tuple[str, pl.DataFrame]], j: int,
            probed: tuple[str | None, list[tuple[str, dict[str, Any]]], dict[str, str]] | None) -> bool:
    """Whether the parser's reading of a template row (``probed``) is row ``j`` of its frames."""
    if probed is None or probed[0] != t.skip or len(probed[1]) != len(frames):
        return False
    for (kind, rec), (want_kind, frame) in zip(probed[1], frames, strict=True):
        if kind != want_kind or list(rec) != frame.columns:
            return False
        row = frame.row(j, named=True)
        if any(row[k] != v for k, v in rec.items()):
            return False
    return True


class SkeletonReader:
    """Reads a line format's chunks (see the module's text); the templates learned in one chunk
    are kept for the next. ``rows``: the format's polars path, for a chunk it does not take."""

    def __init__(self, fmt: Format, rows: Callable[..., Any]) -> None:
        self.fmt = fmt
        self.rows = rows
        self.templates: dict[int, Template | None] = {}
        self.kernels = compiled(KERNELS)
        self.uncut: bool | None = None  # whether chunks behind capture prefixes are read as filed
        self.primer: str | None = None  # a line a parser with state reads as a record of its own

    def __call__(self, chunk: bytes, first: int, sink: Sink, acc: Accounting, parser: LineParser,
                 strip: bool) -> None:
        if not self._read(chunk, first, sink, acc, parser, strip):
            read_chunk(chunk, first, sink, acc, parser, strip, self.rows)

    def _read(self, chunk: bytes, first: int, sink: Sink, acc: Accounting, parser: LineParser,
              strip: bool) -> bool:
        """The chunk read here; False where the polars path must read it (nothing was taken)."""
        k = self.kernels
        assert k is not None
        original: Sequence[str | None] | None = None

        def scanned(data: bytes) -> Scan:
            buf = np.frombuffer(data, dtype=np.uint8)
            starts, ends = line_bounds(buf)
            return Scan(buf, starts, ends, *k.scan(buf, starts, ends, WIDTH))

        def cut() -> Scan:
            """The chunk without a capture's prefixes and rank prefixes (their time and rank
            kept as ``sink.tags``), scanned; the lines as filed kept for the parser."""
            nonlocal original
            data, as_filed, _ = without_prefixes(chunk, first, strip, sink)
            original = None if as_filed is None else as_filed.to_list()
            return scanned(data)

        if strip and self.uncut is not False:
            # the lines as filed, their capture prefixes part of their skeletons: the probe cuts
            # them as the parser does (their time kept on the records), and the chunk needs no cut
            s = scanned(chunk)
            s.strip = True
            if self._take(s, None, first, sink, acc, parser, strip):
                self.uncut = True
                return True
            if self.uncut is None:  # (never again where it never read a chunk)
                self.uncut = False
        s = cut() if strip else scanned(chunk)
        # a few lines behind a rank prefix stay as they are: their skeletons are their own, and
        # the probe reads a line as the parser does (its rank cut and tagged); many are cut first
        if not strip and int(s.ranked.sum()) > most_ranked(len(s.starts)):
            s = cut()
        return self._take(s, original, first, sink, acc, parser, strip)

    def _take(self, s: Scan, original: Sequence[str | None] | None, first: int, sink: Sink,
              acc: Accounting, parser: LineParser, strip: bool) -> bool:
        """The scanned chunk ``s`` read (``original``: its lines as filed, where the scan's were
        cut); False where too many of its lines are left for the parser: nothing taken."""
        k = self.kernels
        assert k is not None
        n = len(s.starts)
        if original is not None:  # a line blank once its prefix is cut is the parser's ('[rank1]: ')
            for r in np.flatnonzero(s.blank).tolist():
                if (original[r] or "").strip():
                    s.blank[r] = False
        where = np.flatnonzero(s.usable & ~s.blank)
        hashes = s.hashes[where]
        order = np.argsort(hashes, kind="stable")  # each skeleton's rows together, in line order
        ordered = hashes[order]
        bounds = np.concatenate(([0], np.flatnonzero(ordered[1:] != ordered[:-1]) + 1, [len(order)])) \
            if len(order) else np.zeros(1, dtype=np.int64)
        keys, counts = ordered[bounds[:-1]], np.diff(bounds)

        def probe(r: int) -> Any:
            return _probe(self.fmt, first + r, s.text(r), s.strip)

        # skeletons whose templates read alike (a padded number's widths) are read as one
        alike: dict[tuple[Any, ...], tuple[Template, list[int], list[np.ndarray]]] = {}
        groups = [g for g in range(len(keys)) if counts[g] >= MIN_LINES]
        single = self.fmt.single_line
        stateful = single is not None
        if single is not None and self.primer is None:  # (records first: a skipped line is learned after one)
            groups.sort(key=lambda g: not single(s.text(int(where[order[bounds[g]]]))))
        for g in groups:
            h = int(keys[g])
            rows = where[order[bounds[g]:bounds[g + 1]]]
            if h not in self.templates:
                t = _learn(self.fmt, s, rows, first, k.stamps, self.primer)
                if t is None and stateful and self.primer is None:
                    continue  # (tried again once a record of its own gives the parser's state)
                self.templates[h] = t
                if stateful and self.primer is None and t is not None and t.skip is None:
                    self.primer = s.text(int(rows[0]))
            t = self.templates[h]
            if t is not None:
                group = alike.setdefault(t.signature(), (t, [], []))
                group[1].append(h)
                group[2].append(rows)
        read = [(hs, t, _read(t, s, np.sort(np.concatenate(rows)) if len(rows) > 1 else rows[0],
                              k.stamps, probe)) for t, hs, rows in alike.values()]
        # (a parser with state reads the first line of each run of records: as many lines as the
        # polars path gives it, no reason to hand it the chunk)
        run_starts = _in_runs(read, s) if stateful else 0
        taken = np.zeros(n, dtype=np.bool_)
        skipped: dict[str, list[np.ndarray]] = {}  # the rows the parser skips, by its reason
        made: list[tuple[int, Template, list[tuple[str, pl.DataFrame]]]] = []  # (its first row, …)
        for hs, t, got in read:
            frames = _frames(t, got, first)
            kept = np.flatnonzero(got.ok)
            checks = kept[_spread(len(kept), CHECKS + 2)[1:-1]] if len(kept) else kept
            if not all(_agrees(t, got, frames, int(np.searchsorted(kept, j)), probe(int(got.rows[j])))
                       for j in checks.tolist()):
                for h in hs:  # learned again from a later chunk
                    self.templates.pop(h)
                continue
            if t.skip is not None:
                rows_ok = got.rows[got.ok]
                skipped.setdefault(t.skip, []).append(rows_ok)
                if t.names and len(rows_ok):
                    made.append((int(rows_ok[0]), t, []))
            else:
                taken[got.rows[got.ok]] = True
                made.append((int(got.rows[got.ok][0]) if got.ok.any() else n, t, frames))
        passed = taken.copy()
        for row_sets in skipped.values():
            for rows in row_sets:
                passed[rows] = True
        left = np.flatnonzero(~passed & ~s.blank)
        if len(left) - run_starts > max(FEW_RANKED, n // 16):
            sink.tags = None
            return False
        parts: dict[str, list[pl.DataFrame]] = {"train": [], "eval": []}
        for _, _t, frames in made:
            for kind, frame in frames:
                if frame.height:
                    parts[kind].append(tagged(frame, sink))
        held = len(sink.train), len(sink.eval)
        acc.total += n
        acc.blank += int(s.blank.sum())
        acc.parsed += int(taken.sum())
        firsts = count_skipped([(reason, np.concatenate(sets)) for reason, sets in skipped.items()], acc)
        if firsts:
            left = np.union1d(left, np.array(sorted(firsts), dtype=np.int64))
        # the names a template's records bring, and their metrics' shape (a number, not a list),
        # are set where its first row stands among the lines the parser reads (the first line's)
        named = sorted(((r, t.names, [k for _, keys in t.records for k in keys if k not in META])
                        for r, t, _ in made), key=lambda x: x[0])
        if stateful:  # (the records read here, for a parser with state)
            stepped = [frames[0][1].select("line", "step") for _, _, frames in made if frames]
            both = pl.concat(stepped).sort("line") if stepped else None
            if both is not None and both.height:
                parser.read_elsewhere(both["line"].to_list(), both["step"].to_list(), [])  # type: ignore[attr-defined]
        self._per_line(left, firsts, named, s, first, original, sink, acc, parser, strip)
        # the chunk's records as one frame in line order, those the parser made among them (a
        # log's frames in line order are joined without a sort, which copies every column)
        for (kind, pieces), records, at in zip(parts.items(), (sink.train, sink.eval), held, strict=True):
            if len(records) > at:
                pieces.append(pl.from_dicts(records[at:], infer_schema_length=None))
                del records[at:]
            try:
                joined = [pl.concat(pieces, how="diagonal_relaxed").sort("line")] if len(pieces) > 1 \
                    else pieces
            except pl.exceptions.PolarsError:  # a list where a number was: each as it is
                joined = pieces
            for frame in joined:
                sink.add(frame, evals=kind == "eval")
        sink.tags = None
        return True

    def _per_line(self, left: np.ndarray, skipped: dict[int, str],
                  named: list[tuple[int, dict[str, str], list[str]]], s: Scan, first: int,
                  original: Sequence[str | None] | None, sink: Sink, acc: Accounting,
                  parser: LineParser, strip: bool) -> None:
        """The lines the templates did not take, as the file has them, in order: a skip
        template's first line of a reason (``skipped``: row -> reason) skipped for it, the others
        blank or the per-line parser's (``columnar.account_line``)."""
        def name_before(row: int) -> None:
            while named and named[0][0] < row:
                _, names, metrics = named.pop(0)
                for name, original_name in names.items():
                    sink.names.setdefault(name, original_name)
                for name in metrics:
                    sink.shapes.setdefault(name, False)

        if not len(left):
            name_before(len(s.starts))
            return
        texts = []
        for r in left.tolist():
            if original is not None:
                texts.append(original[r] or "")
            else:
                texts.append(s.text(r).rstrip("\r"))
        blank = (pl.Series(texts, dtype=pl.String).str.strip_chars().str.len_bytes() == 0).to_list()
        feed = ranked_feed(sink, strip)
        for r, line, empty in zip(left.tolist(), texts, blank, strict=True):
            ln = first + r
            name_before(r)
            if r in skipped:
                acc.skip(skipped[r], ln, line)
            elif empty:
                acc.blank += 1
            else:
                account_line(ln, line, acc, parser, feed)
        name_before(len(s.starts))
