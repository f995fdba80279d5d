"""Following one log from start to end: what can be followed, and the events of each analysis
while it is (``follow``). The CLI renders the events; nothing here writes to the terminal."""

from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path

from losslens.errors import LossLensError, UsageError
from losslens.findings import Gate, Judgement, Report, Severity, Word
from losslens.logs import read_log
from losslens.logs.reader import whole_document
from losslens.logs.registry import BY_NAME
from losslens.logs.source import decode_lines
from losslens.watch.follower import lines_from
from losslens.watch.watcher import Event, Watcher

UNREADABLE_FOR_S = 10.0  # a whole document unreadable this long is an error


@dataclass
class Verdict:
    """watch's exit code: 1 at the first announced finding at or above ``exit_at`` (it stops
    there), or at the end when one that fails the gate (at or above its fail_on, not in its
    baseline) was announced; else 0."""

    exit_at: Severity | None
    gate: Gate
    source: str = ""  # the log followed (as the baseline names it)
    worst: Severity | None = None  # the worst severity announced (appeared or changed)
    stop: bool = False
    failed: bool = False

    def see(self, events: list[Event]) -> bool:
        """Take in an analysis's events; True when watch should stop (``exit_at`` reached)."""
        for ev in events:
            if (s := ev.raised) is not None:
                self.worst = s if self.worst is None else max(self.worst, s)
                self.stop |= self.exit_at is not None and s >= self.exit_at
                self.failed |= bool(self.gate.failing(self.source, [ev.finding]))
        return self.stop

    def final(self, report: Report | None, lines: int) -> Judgement:
        """The verdict when watch ends by itself (at the end of standard input, or at --exit-on):
        FAIL when a finding that fails the gate was announced; else the gate's verdict on the
        last analysis (ERROR when nothing could be read, or no loss column); else ok."""
        if self.stop or self.failed:
            return Judgement(Word.FAIL)
        if report is None:
            return Judgement(Word.ERROR, f"{self.source}: no records read in {lines:,} lines")
        return self.gate.judge_parts(self.source, [], report.loss is not None, report.read_errors)


def followable(log: str, fmt: str, tail: int | None = None, wait: bool = True) -> None:
    """What watch cannot follow is a UsageError before it starts: a whole-document format on
    stdin (it is re-read whole when it changes), a FIFO or a device, an unreadable file, a
    gzip file, a start inside standard input, and a missing file unless ``wait`` (then watch
    waits for it, as tail -F does)."""
    if log == "-":
        if tail is not None:
            raise UsageError("--tail and --from-end start inside a file; standard input has no end "
                             "to start from")
        if fmt != "auto" and BY_NAME[fmt].whole_file:
            raise UsageError(f"watch reads --format {fmt} from a file, which it re-reads whole when it "
                             "changes; it cannot follow it on standard input")
        return
    try:
        mode = os.stat(log).st_mode
    except FileNotFoundError:
        if wait:
            return
        why = "a dangling link" if os.path.islink(log) else "no such file"
        raise UsageError(f"{why} (--wait waits for it to appear, as `tail -F` does)", source=log) from None
    except OSError as exc:
        raise UsageError(f"cannot follow: {exc.strerror}", source=log) from None
    if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        raise UsageError("cannot follow: not a regular file (a FIFO or a device); pipe it into "
                         "`losslens watch -` instead", source=log)
    if not os.access(log, os.R_OK):
        raise UsageError("cannot follow: permission denied", source=log)
    if stat.S_ISREG(mode):
        with open(log, "rb") as f:
            if f.read(2) == b"\x1f\x8b":
                raise UsageError("cannot follow a gzip-compressed log (it does not grow as text): "
                                 "`losslens check` or `analyze` read it whole", source=log)


def follow(log: str, watcher: Watcher, interval: float, confirm: int = 2,
           tail: int | None = None) -> Generator[list[Event], None, None]:
    """The events of each analysis while ``log`` is followed ('-': standard input), an empty list
    between analyses (a moment to refresh a view and show new ``watcher.notes``). Ends at the end
    of standard input, after ``confirm`` settling analyses; a file is followed until the caller
    stops asking. ``tail``: start at the file's last ``tail`` lines (0: its end)."""
    if log != "-" and whole_document(log):
        if tail is not None:
            raise UsageError("--tail and --from-end start inside a line log; this one is re-read "
                             "whole when it changes", source=log)
        yield from _records(log, watcher, interval)
        return
    if tail is not None and os.path.isfile(log):
        with open(log, "rb") as f:  # the format from the file's top, which --tail starts past
            head = f.read(1 << 18)
        watcher.hint(decode_lines(head)[:-1])
    stop = threading.Event()
    last, cost = 0.0, 0.0
    try:
        for batch in lines_from(log, interval, stop, watcher.notes, tail, watcher.pass_over):
            if batch is None:  # end of standard input: settle and stop
                watcher.finish_input()
                for _ in range(max(1, confirm)):
                    yield watcher.analyse()
                return
            watcher.feed_batch(batch)
            watcher.tick()
            due = watcher.new_records or any(not a.announced for a in watcher.active.values())
            # analyses take at most about a quarter of the time: a backlog is read at speed
            if watcher.urgent or (due and time.monotonic() - last >= max(interval, 3 * cost)):
                last = time.monotonic()
                events = watcher.analyse()
                cost = time.monotonic() - last
                yield events
            else:
                yield []
    finally:
        stop.set()


def _records(path: str, watcher: Watcher, interval: float) -> Iterator[list[Event]]:
    """Event files, MLflow run folders and whole JSON documents: re-read when they change."""

    def signature() -> tuple:
        p = Path(path)
        files = [p] if p.is_file() else sorted(x for x in (p / "metrics").rglob("*") if x.is_file())
        return tuple((str(f), f.stat().st_size) for f in files)

    last, data, failures = None, None, 0
    while True:
        sig = signature()
        unsettled = any(not a.announced or a.missing for a in watcher.active.values())
        if sig != last or (unsettled and data is not None):
            if sig != last:
                try:
                    fresh = read_log(path)
                except LossLensError:
                    fresh = None
                    if (failures + 1) * interval >= UNREADABLE_FOR_S:
                        raise
                if fresh is None or (fresh.lost and (failures + 1) * interval < UNREADABLE_FOR_S):
                    # Hugging Face rewrites trainer_state.json in place: a read can catch it half
                    # written (unreadable, or read in part). Try again at the next poll; only a
                    # file that stays so fails (or, read in part, is taken as it is).
                    failures += 1
                    time.sleep(interval)
                    continue
                data, failures, last = fresh, 0, sig
            yield watcher.analyse_log(data)
        else:
            yield []
        time.sleep(interval)
