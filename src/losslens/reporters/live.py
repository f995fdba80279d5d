"""What `watch` shows: a live view for a person, or one JSON object per alert event."""

from __future__ import annotations

import sys
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from losslens.findings import step_range
from losslens.reporters.jsonl import dumps
from losslens.reporters.text import STYLE, bar, where
from losslens.reporters.text import cells as _cells
from losslens.watch.watcher import Event, Watcher


def sparkline(values: list[float], width: int = 60) -> str:
    """The last ``width`` values as block characters (NaN left out)."""
    vals = [v for v in values[-width:] if v == v]  # drop NaN
    if not vals:
        return ""
    lo, hi = min(vals), max(vals)
    return "".join(bar(v, lo, hi) for v in vals)


class View:
    """What watch shows: a live table on a terminal, else one line per event (text) or one JSON object
    per event; ``summary`` at the end."""
    def __init__(self, watcher: Watcher, json: bool, console: Console, err: Console, quiet: bool = False):
        self.w = watcher
        self.json = json
        self.out = console
        self.err = err
        self.quiet = quiet
        self.events = 0
        self.live: Live | None = None
        self.noted = 0  # the watcher's notes shown so far
        if not json and console.is_terminal:
            self.live = Live(self._render(), console=console, refresh_per_second=4, transient=False)
            self.live.start()

    def show(self, events: list[Event]) -> None:
        for ev in events:
            self.events += 1
            if self.json:
                print(dumps(ev.as_dict(self.w.source, self.w.acc)), flush=True)
            elif self.live is None:
                f = ev.finding
                print(f"{ev.event.upper()} {where(self.w.source, f)}: {f.severity} "
                      f"{f.kind} [{f.metric}] {f.summary}", flush=True)
        self.refresh()

    def notes(self) -> None:
        """New notes on following the file (a rotation, a truncation, a possible loss), on stderr."""
        for note in self.w.notes[self.noted:]:
            if not self.quiet:
                self.err.print(f"note: {note}", markup=False)
        self.noted = len(self.w.notes)

    def refresh(self) -> None:
        if self.live is not None:
            self.live.update(self._render())

    def _render(self) -> Any:
        w = self.w
        head = Text.assemble((w.source, "bold"), f" — {w.format.name if w.format else 'detecting format'}"
                             f"; {w.acc.total:,} lines: {w.acc.parsed:,} parsed, "
                             f"{w.acc.n_skipped:,} skipped, {w.acc.blank:,} blank")
        parts: list[Any] = [head]
        if w.train:
            last = w.train[-1]
            shown = {k: v for k, v in last.items() if k in ("step", "loss", "acc", "lr", "grad_norm",
                                                            "tokens_per_s") and v is not None}
            parts.append(Text("latest: " + "  ".join(f"{k}={v:.4g}" if isinstance(v, float) else
                                                     f"{k}={v}" for k, v in shown.items())))
            losses = [r["loss"] for r in w.train if isinstance(r.get("loss"), float)]
            parts.append(Text("loss  " + sparkline(losses), style="cyan"))
        active = w.announced()
        if active:
            table = Table(title=f"{len(active)} active finding(s)", title_justify="left")
            for col in ("severity", "kind", "steps", "summary"):
                table.add_column(col, overflow="fold")
            for f in sorted(active, key=lambda f: -int(f.severity)):
                table.add_row(*_cells(Text(str(f.severity), style=STYLE[f.severity]), f.kind,
                              step_range(f.start_step, f.end_step), f.summary))
            parts.append(table)
        else:
            parts.append(Text("no active findings", style="green"))
        return Group(*parts)

    def summary(self, interrupted: bool) -> None:
        if self.live is not None:
            self.live.stop()
        acc = self.w.acc
        active = self.w.announced()
        if self.json:
            print(dumps({"event": "summary", "source": self.w.source,
                                 "format": self.w.format.name if self.w.format else None,
                                 "interrupted": interrupted, "lines": acc.as_dict(),
                                 "skipped": dict(acc.skipped), "events": self.events,
                                 "active": [f.as_dict() for f in active], "notes": self.w.notes}),
                  flush=True)
        if self.quiet:
            sys.stdout.flush()
            return
        noted = f"; {len(self.w.notes)} note(s) on following the file" if self.w.notes else ""
        self.err.print(f"{self.w.source}: {acc.total:,} lines ({acc.parsed:,} parsed, "
                       f"{acc.n_skipped:,} skipped, {acc.blank:,} blank); {self.events} alert "
                       f"event(s); {len(active)} active finding(s)"
                       f"{'; interrupted' if interrupted else ''}{noted}", markup=False)
        sys.stdout.flush()
