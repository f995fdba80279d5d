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
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from losslens.analysis import analyze
from losslens.errors import LossLensError
from losslens.findings import Finding, Report, Severity
from losslens.logs import BY_NAME
from losslens.logs.base import Format
from losslens.logs.frame import assemble
from losslens.logs.names import canonical
from losslens.logs.sink import Accounting, Sink
from losslens.logs.stream import LineStream

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


class Watcher:
    """Lines in, events out. The same detectors as ``analyze``, on a bounded window."""

    def __init__(self, source: str, fmt: str | None, registry: tuple, ignore: frozenset[str],
                 window: int = 5000, confirm: int = 2, cooldown_s: float = 600.0,
                 metrics: tuple[str, ...] = ()):
        self.source = source
        self.metrics = metrics
        self.registry = registry
        self.by_kind = {d.name: d for d in registry}
        self.ignore = ignore
        self.confirm = confirm
        self.cooldown_s = cooldown_s
        # the lines: read by the same code as read_log's (the format chosen by its rules)
        self.stream = LineStream(os.path.basename(source), BY_NAME[fmt] if fmt else None)
        self.window = window
        self.train: deque[dict] = deque(maxlen=window)
        self.evals: deque[dict] = deque(maxlen=max(100, window // 10))
        self.active: dict[tuple, Active] = {}
        self.report: Report | None = None
        self.new_records = 0
        # every record passes the cheap check as it is read, whatever the backlog: a NaN that
        # scrolls out of the window before an analysis is still announced (metric → first/last)
        nonfinite = [d for d in registry if d.name == "nonfinite" and d.name not in ignore]
        self.watched = frozenset(nonfinite[0].metrics) | {canonical(m) for m in metrics} if nonfinite \
            else frozenset()
        self.nonfinite: dict[str, dict[str, Any]] = {}
        self.urgent = False  # a metric was read non-finite for the first time: analyse now

    @property
    def format(self) -> Format | None:
        """The log's format (None until the first lines chose it)."""
        return self.stream.format

    @property
    def acc(self) -> Accounting:
        """Every line so far: parsed, skipped with its reason, blank."""
        return self.stream.acc

    @property
    def notes(self) -> list[str]:
        """What following the file may have cost (rotations, truncations, a format changed)."""
        return self.stream.notes

    def pass_over(self, n: int) -> None:
        """``n`` lines before the start (``watch --tail``/``--from-end``): counted, not read."""
        self.stream.pass_over(n, PASSED)

    def feed(self, line: str) -> None:
        """One line as it comes."""
        self.stream.feed(line)
        self._take()

    def feed_batch(self, lines: list[str]) -> None:
        """Lines as they come (a large batch is read column-wise where the format has a way)."""
        self.stream.feed_lines(lines)
        self._take()

    def tick(self) -> None:
        """Called while idle: a slow log's few held lines get their format in time."""
        self.stream.tick()
        self._take()

    def hint(self, lines: list[str]) -> None:
        """The format from the file's first lines (``watch --tail`` starts past them)."""
        self.stream.hint(lines)

    def finish_input(self) -> None:
        """The end of the input: its last record closed (key=value where no format was found)."""
        self.stream.finish(fallback=BY_NAME["kv"])
        self._take()

    def _take(self) -> None:
        """The records read since the last call into the bounded window."""
        taken = self.stream.take()
        if taken is None:
            return
        if taken.restarted:  # the lines were read again with another format
            self.train.clear()
            self.evals.clear()
            self.nonfinite.clear()
            self.new_records = 0
        train, n_train = self._rows(taken.frames, taken.train)
        evals, _ = self._rows(taken.eval_frames, taken.eval)
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
                    names=dict(self.stream.names))
        acc = Accounting(total=self.acc.total, parsed=self.acc.parsed, blank=self.acc.blank)
        try:
            log = assemble(self.source, self.format.name if self.format else "?", sink, acc)
        except LossLensError:  # no record in the window yet: nothing to say
            return []
        return self._debounce(log, now, only)

    def analyse_log(self, log: Any, now: float | None = None) -> list[Event]:
        """Re-analyse a whole re-read log (event files, MLflow runs: records, not lines)."""
        now = time.time() if now is None else now
        self.stream.acc = log.lines
        self.stream.format = BY_NAME.get(log.format)
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
            key = self._event_key(f)
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

    def _event_key(self, f: Finding) -> tuple:
        """What makes two analyses' findings one event: its detector says (``same_event``)."""
        det = self.by_kind.get(f.kind)
        return det.same_event(f) if det is not None else (f.kind, f.metric, f.segment)

    def announced(self) -> list[Finding]:
        return [a.finding for a in self.active.values() if a.announced]
