"""The watcher: lines in, alert events out. It parses lines as they come, keeps a bounded window
of records (memory stays flat), re-analyses it with the same detectors as ``analyze``, and
debounces: a finding is announced once it has been seen in ``confirm`` analyses in a row, again
when it changes (severity) or after a cool-down, and cleared when it has been gone for ``confirm``
analyses.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from losslens.analysis import analyze
from losslens.errors import LossLensError
from losslens.findings import Finding, Report, Severity
from losslens.logs import BY_NAME, sniff
from losslens.logs.base import Format, LineParser, feed_ranked, finish_fed
from losslens.logs.columnar import read_chunk
from losslens.logs.formats.kv import columns
from losslens.logs.frame import assemble
from losslens.logs.names import canonical
from losslens.logs.reader import strips
from losslens.logs.sink import Accounting, Sink

FAST_BATCH = 500  # a batch of this many kv lines is read vectorised
# lines held before the format is known (about the 8 MiB read_log sniffs: a real log can open
# with 5,000 lines of compiler warnings); then kv is assumed
SNIFF_MAX = 1 << 16
SNIFF_AFTER = 20  # non-blank lines before the format is guessed
PASSED = "before the start (--tail / --from-end)"


@dataclass
class Active:
    """A finding the watcher is tracking: how many analyses saw it or missed it in a row, and whether
    (and when, at which severity) it was announced."""
    finding: Finding
    seen: int = 0
    missing: int = 0
    announced: bool = False
    announced_at: float = 0.0
    severity: Severity = Severity.INFO


@dataclass
class Event:
    """An alert: a finding that appeared, changed severity, was repeated after the cool-down, or
    cleared."""
    event: str  # appeared | changed | repeated | cleared
    finding: Finding
    at: float = field(default_factory=time.time)

    @property
    def raised(self) -> Severity | None:
        """The severity this event announces (a finding that appeared or changed), else None."""
        return self.finding.severity if self.event in ("appeared", "changed") else None

    def as_dict(self, source: str, lines: Accounting) -> dict[str, Any]:
        return {"event": self.event, "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(self.at)),
                "source": source, "finding": self.finding.as_dict(), "lines": lines.as_dict()}


def flat(rec: dict[str, Any]) -> None:
    """A list value (``q_pre=[50, 46]``) becomes its min and mean, which are what is analysed (as
    the readers derive them): a window of dicts holding lists is slow to turn into a frame."""
    for key in [k for k, v in rec.items() if isinstance(v, list)]:
        v = [x for x in rec.pop(key) if x is not None]
        rec[f"{key}_min"] = min(v) if v else None
        rec[f"{key}_mean"] = sum(v) / len(v) if v else None


def identity(f: Finding) -> tuple:
    """What makes two analyses' findings the same event (spikes: their peak step)."""
    return (f.kind, f.metric, f.segment, f.evidence.get("peak_step") if f.kind == "spike" else None)


class Watcher:
    """Lines in, events out. The same detectors as ``analyze``, on a bounded window."""

    def __init__(self, source: str, fmt: str | None, registry: tuple, ignore: frozenset[str],
                 window: int = 5000, confirm: int = 2, cooldown_s: float = 600.0,
                 metrics: tuple[str, ...] = ()):
        self.source = source
        self.metrics = metrics
        self.format: Format | None = BY_NAME[fmt] if fmt else None
        self.registry = registry
        self.ignore = ignore
        self.confirm = confirm
        self.cooldown_s = cooldown_s
        self.sink = Sink(source_name=os.path.basename(source))
        self.window = window
        self.train: deque[dict] = deque(maxlen=window)
        self.evals: deque[dict] = deque(maxlen=max(100, window // 10))
        self.acc = Accounting()
        self.parser: LineParser | None = None
        self.strip = False  # feed lines without a capture's prefixes (decided with the format)
        self.pending: list[tuple[int, str]] = []
        self.next_sniff = SNIFF_AFTER
        self.sniffed_at = 0.0
        self.first_pending = 0.0
        self.active: dict[tuple, Active] = {}
        self.report: Report | None = None
        self.new_records = 0
        # every record passes the cheap check as it is read, whatever the backlog: a NaN that
        # scrolls out of the window before an analysis is still announced (metric → first/last)
        nonfinite = [d for d in registry if d.name == "nonfinite" and d.name not in ignore]
        self.watched = frozenset(nonfinite[0].metrics) | {canonical(m) for m in metrics} if nonfinite \
            else frozenset()
        self.nonfinite: dict[str, dict[str, Any]] = {}
        self.templates: list[columns.Template] | None = None  # for large batches of kv lines
        self.urgent = False  # a metric was read non-finite for the first time: analyse now
        self.notes: list[str] = []  # what following the file may have cost (rotations, truncations)
        # a generic format ('key: value') sniffed from the first lines may be a preamble's: its
        # lines are kept and sniffed again as they double, and a specific format found in them
        # re-reads them all (a HF Trainer log opens with 'CUDA version: 11.8' lines)
        self.provisional = False
        self.replay: list[tuple[int, str]] = []
        self.next_resniff = 0
        self.before = Accounting()  # the accounting before the provisional format read a line

    def pass_over(self, n: int) -> None:
        """``n`` lines before the start (``watch --tail``/``--from-end``): counted, not read."""
        self.acc.total += n
        self.acc.skipped[PASSED] += n

    def feed(self, line: str) -> None:
        self.acc.total += 1
        lineno = self.acc.total
        line = line.rstrip("\r")
        if not line.strip():
            self.acc.blank += 1
            return
        if self.parser is None:
            self.pending.append((lineno, line))
            if len(self.pending) == 1:
                self.first_pending = time.monotonic()
            if self.format is None and len(self.pending) < self.next_sniff and not self._due():
                return
            self._start()
            return
        if self.provisional:
            self.replay.append((lineno, line))
            if len(self.replay) >= self.next_resniff and self._resniff():
                return  # (this line too was read again)
        self._parse(lineno, line)

    def _due(self) -> bool:
        """Sniff now although fewer lines than planned are pending: a slow live log (the first
        pending line 2 s old), sniffed again at most once a second."""
        now = time.monotonic()
        return now - self.first_pending >= 2.0 and now - self.sniffed_at >= 1.0

    def tick(self) -> None:
        """Called while idle: a slow log's few pending lines get their format in time."""
        if self.parser is None and self.pending and self.format is None and self._due():
            self._start()

    def hint(self, lines: list[str]) -> None:
        """The format from the file's first lines (``watch --tail`` starts past them)."""
        if self.format is None and lines:
            fmt, _ = sniff(lines)
            if fmt is not None and not fmt.whole_file:
                self.format = fmt
                self.provisional = fmt.generic

    def _start(self) -> None:
        if self.format is None:
            # every pending line (a preamble of thousands of lines may come before the first
            # record, as read_log looks 8 MiB deep): the sniffs, at doubling counts, stay linear
            fmt, _ = sniff([x for _, x in self.pending], limit=len(self.pending))
            self.sniffed_at = time.monotonic()
            if fmt is None or fmt.whole_file:
                if len(self.pending) < SNIFF_MAX:
                    # sniff again when the pending lines have doubled: the cost stays linear in
                    # the lines read before the format is known (it sniffed at every line)
                    self.next_sniff = min(2 * len(self.pending), SNIFF_MAX)
                    return
                fmt = BY_NAME["kv"]
            self.format = fmt
            self.provisional = fmt.generic
        self.parser = self.format.parser(self.sink)
        self.strip = strips(self.format, [x for _, x in self.pending], limit=max(1, len(self.pending)))
        pending, self.pending = self.pending, []
        if self.provisional:
            self.before = Accounting(parsed=self.acc.parsed, skipped=Counter(self.acc.skipped),
                                     examples=dict(self.acc.examples))
            self.replay = list(pending)
            self.next_resniff = 2 * len(pending)
        for lineno, line in pending:
            self._parse(lineno, line)

    def _resniff(self) -> bool:
        """Sniff the lines read under a provisional format again; True when a specific format
        reads them better and has re-read them all."""
        lines = [x for _, x in self.replay]
        fmt, _ = sniff(lines, limit=len(lines))
        self.next_resniff = 2 * len(lines)
        if fmt is not None and not fmt.generic and not fmt.whole_file:
            self._switch(fmt)
            return True
        if len(lines) >= SNIFF_MAX:
            self.provisional, self.replay = False, []
        return False

    def _switch(self, fmt: Format) -> None:
        """Read the kept lines again with ``fmt``, from the accounting before them."""
        replay, old = self.replay, self.format
        self.provisional, self.replay = False, []
        self.acc.parsed, self.acc.skipped = self.before.parsed, Counter(self.before.skipped)
        self.acc.examples = dict(self.before.examples)
        self.sink = Sink(source_name=self.sink.source_name)
        self.train.clear()
        self.evals.clear()
        self.nonfinite.clear()
        self.new_records, self.templates = 0, None
        self.format = fmt
        self.parser = fmt.parser(self.sink)
        self.strip = strips(fmt, [x for _, x in replay], limit=len(replay))
        self.notes.append(f"the first lines read as {old.name if old else '?'}, then as {fmt.name} once "
                          f"its lines came: {len(replay):,} lines read again")
        for lineno, line in replay:
            self._parse(lineno, line)

    def feed_batch(self, lines: list[str]) -> None:
        """``feed`` for each line; a large batch of a key=value log (a backlog, a log followed
        from its top, a fast writer) is read vectorised, as ``read_log`` reads it."""
        i = 0
        while self.parser is None and i < len(lines):
            self.feed(lines[i])
            i += 1
        rest = lines[i:] if i else lines
        if len(rest) >= FAST_BATCH and self.format is not None and not self.provisional and \
                (self.format.name == "kv" or self.format.rows):  # (a guess's lines are kept to re-read)
            self._parse_fast(rest)
            return
        for line in rest:
            self.feed(line)

    def _parse_fast(self, lines: list[str]) -> None:
        assert self.parser is not None
        sink = self.sink
        chunk = "\n".join(lines).replace("\r", "").encode("utf-8", errors="replace") + b"\n"
        assert self.format is not None
        if self.format.name == "kv":
            self.templates = columns.read_chunk(chunk, self.acc.total + 1, self.templates, sink,
                                                self.acc, self.parser, self.strip)
        else:
            assert self.format.rows is not None  # (feed_batch's condition)
            read_chunk(chunk, self.acc.total + 1, sink, self.acc, self.parser, self.strip,
                       self.format.rows)
        del sink.idle_lines[:]  # accounted by read_chunk
        train, n_train = self._rows(sink.frames, sink.train)
        evals, _ = self._rows(sink.eval_frames, sink.eval)
        del sink.frames[:], sink.eval_frames[:], sink.train[:], sink.eval[:]
        self.train.extend(train)
        self.evals.extend(evals)
        self.new_records += n_train

    def _rows(self, frames: list[pl.DataFrame], records: list[dict]) -> tuple[list[dict], int]:
        """A batch's records as dicts in line order, the last ``window`` of them, and how many
        there were. The per-record check sees every one (on the columns, vectorised)."""
        keep = self.window
        out: list[dict] = []
        for frame in frames:
            watched = [c for c in frame.columns if c in self.watched]
            if watched:
                bad = frame.filter(pl.any_horizontal([~pl.col(c).is_finite() for c in watched]))
                self._check(bad.to_dicts())
            lists = [c for c, t in frame.schema.items() if isinstance(t, pl.List)]
            out += frame.tail(keep).drop(lists).to_dicts()
        self._arrived(records)
        n = len(records) + sum(f.height for f in frames)
        out += records
        if frames and records:
            out.sort(key=lambda r: r["line"])
        return out[-keep:], n

    def _parse(self, lineno: int, line: str) -> None:
        assert self.parser is not None
        n_train, n_eval = len(self.sink.train), len(self.sink.eval)
        reason = feed_ranked(self.parser, self.sink, lineno, line, self.strip)
        if reason is None:
            self.acc.parsed += 1
        else:
            self.acc.skip(reason, lineno, line)
        # move new records into the bounded window (the sink is only a mailbox)
        self._arrived(self.sink.train[n_train:])
        self._check(self.sink.eval[n_eval:])
        self.train.extend(self.sink.train[n_train:])
        self.evals.extend(self.sink.eval[n_eval:])
        self.new_records += len(self.sink.train) - n_train
        del self.sink.train[:], self.sink.eval[:]

    def finish_input(self) -> None:
        if self.parser is None and self.pending:
            if self.format is None:
                fmt, _ = sniff([x for _, x in self.pending], limit=len(self.pending))
                self.format = fmt if fmt is not None and not fmt.whole_file else BY_NAME["kv"]
            self._start()
        if self.provisional and self.replay:
            self._resniff()  # (the end of the input: what the lines are is known now)
        self.provisional, self.replay = False, []
        if self.parser is not None:
            n = len(self.sink.train)
            finish_fed(self.parser, self.sink)
            self._arrived(self.sink.train)
            self.train.extend(self.sink.train[:])
            self.new_records += len(self.sink.train) - n
            del self.sink.train[:]

    def _arrived(self, records: list[dict]) -> None:
        """New train records on their way into the window: the per-record check, then list
        values as their min and mean (see ``flat``)."""
        self._check(records)
        for rec in records:
            flat(rec)

    def _check(self, records: list[dict]) -> None:
        """The per-record check: a non-finite value of a watched metric is remembered (first and
        last step, line, value, count) however fast the window moves on."""
        if not self.watched:
            return
        for rec in records:
            for key in self.watched.intersection(rec):
                v = rec[key]
                if isinstance(v, float) and not math.isfinite(v):
                    self.urgent |= key not in self.nonfinite
                    seen = self.nonfinite.setdefault(key, {"first_step": rec.get("step"), "value": v,
                                                           "line": rec.get("line"), "count": 0})
                    seen["count"] += 1
                    seen["last_step"] = rec.get("step")

    def _missed(self, report: Report) -> list[Finding]:
        """Non-finite values the per-record check saw that the window's analysis no longer holds."""
        shown = {f.metric for f in report.findings if f.kind == "nonfinite"}
        out = []
        for metric, seen in self.nonfinite.items():
            if metric in shown:
                continue
            value = "NaN" if seen["value"] != seen["value"] else ("inf" if seen["value"] > 0 else "-inf")
            first, last = seen["first_step"] or 0, seen["last_step"] or 0
            out.append(Finding(
                "nonfinite", Severity.ERROR, metric, int(first), int(last),
                f"{metric} was {value} at step {first} ({seen['count']} record(s) in all, the last at step "
                f"{last}), seen as the log was read: training has blown up (lower the LR, check for bad "
                f"batches, fp16 overflow)",
                {"first_step": first, "last_step": last, "count": seen["count"], "values": [value],
                 "seen_by": "per-record check"}, line=seen["line"]))
        return out

    def analyse(self, now: float | None = None) -> list[Event]:
        """Re-analyse the window; the alert events this produces. With no new record since the
        last analysis, only the detectors with findings still to confirm run again (fast)."""
        now = time.time() if now is None else now
        self.urgent = False
        only = None
        if self.new_records == 0:
            only = {a.finding.kind for a in self.active.values() if not a.announced or a.missing}
        self.new_records = 0
        if not self.train and not self.evals:
            return []
        sink = Sink(train=[dict(r) for r in self.train], eval=[dict(r) for r in self.evals],
                    names=dict(self.sink.names))
        acc = Accounting(total=self.acc.total, parsed=self.acc.parsed, blank=self.acc.blank)
        try:
            log = assemble(self.source, self.format.name if self.format else "?", sink, acc)
        except LossLensError:  # no record in the window yet: nothing to say
            return []
        return self._debounce(log, now, only)

    def analyse_log(self, log: Any, now: float | None = None) -> list[Event]:
        """Re-analyse a whole re-read log (event files, MLflow runs: records, not lines)."""
        now = time.time() if now is None else now
        self.acc = log.lines
        self.format = BY_NAME.get(log.format)
        window = log.train.tail(self.window)
        self.train = deque(window.iter_rows(named=True), maxlen=self.window)
        return self._debounce(dataclasses.replace(log, train=window), now, None)

    def _debounce(self, log: Any, now: float, only: set[str] | None) -> list[Event]:
        registry = self.registry if only is None else tuple(d for d in self.registry if d.name in only)
        self.report = analyze(log, detectors=registry, ignore=self.ignore, metrics=self.metrics)
        missed = self._missed(self.report)
        if missed:
            self.report = dataclasses.replace(self.report, findings=missed + self.report.findings)
        events: list[Event] = []
        # findings of detectors that did not run this time are left as they were
        seen = {k for k, a in self.active.items() if only is not None and a.finding.kind not in only}
        for f in self.report.findings:
            key = identity(f)
            seen.add(key)
            a = self.active.setdefault(key, Active(f))
            a.finding, a.seen, a.missing = f, a.seen + 1, 0
            # a value read as NaN cannot flap: it is announced at once, the rest once confirmed
            if not a.announced and (a.seen >= self.confirm or f.kind == "nonfinite"):
                a.announced, a.announced_at, a.severity = True, now, f.severity
                events.append(Event("appeared", f, now))
            elif a.announced and f.severity != a.severity:
                a.severity, a.announced_at = f.severity, now
                events.append(Event("changed", f, now))
            elif a.announced and now - a.announced_at >= self.cooldown_s:
                a.announced_at = now
                events.append(Event("repeated", f, now))
        for key in list(self.active):
            if key in seen:
                continue
            a = self.active[key]
            a.missing += 1
            a.seen = 0
            if a.missing >= self.confirm:
                if a.announced:
                    events.append(Event("cleared", a.finding, now))
                del self.active[key]
        return events

    def announced(self) -> list[Finding]:
        return [a.finding for a in self.active.values() if a.announced]
