"""Human reports: a rich post-mortem for `analyze`, one line per finding for `check`."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
from rich.console import Group, RenderableType
from rich.text import Text

from losslens.findings import Finding, Report, Severity
from losslens.logs import LogData
from losslens.reporters.base import Context, Streaming

if TYPE_CHECKING:
    from losslens.runner import Result

STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}


def cells(*values: object) -> list[Text]:
    """Table cells as Text: log lines and names are shown as they are, never parsed as markup."""
    return [v if isinstance(v, Text) else Text(str(v)) for v in values]


def _n(x: int) -> str:
    return f"{x:,}"


GROUP_AT = 6  # more findings than this of one kind and metric are shown as a group
SHOWN = 3  # the worst few of a group listed


Flood = tuple[str, str, list[Finding]]  # (kind, metric, the findings not listed one by one)


def grouped(findings: list[Finding], show_all: bool = False) -> list[Finding | Flood]:
    """Findings in report order, where a kind with more than GROUP_AT findings on one metric
    keeps its SHOWN worst (severity, then size of the excursion) and the rest become one group
    entry ``(kind, metric, rest)``, placed after them."""
    if show_all:
        return list(findings)
    by: dict[tuple[str, str], list[Finding]] = {}
    for f in findings:
        by.setdefault((f.kind, f.metric), []).append(f)
    keep: set[int] = set()
    rest: dict[tuple[str, str], list[Finding]] = {}
    for key, group in by.items():
        if len(group) <= GROUP_AT:
            keep.update(id(f) for f in group)
            continue
        ranked = sorted(group, key=lambda f: (-int(f.severity), -_size(f), f.start_step))
        keep.update(id(f) for f in ranked[:SHOWN])
        rest[key] = sorted(ranked[SHOWN:], key=lambda f: f.start_step)
    last = {(f.kind, f.metric): id(f) for f in findings if id(f) in keep}  # the group goes after it
    out: list[Finding | Flood] = []
    for f in findings:
        if id(f) in keep:
            out.append(f)
            key = (f.kind, f.metric)
            if key in rest and last[key] == id(f):
                out.append((key[0], key[1], rest.pop(key)))
    return out


def _size(f: Finding) -> float:
    for key in ("ratio", "excess", "rise", "drop"):
        value = f.evidence.get(key)
        if isinstance(value, int | float):
            return float(value)
    return 0.0


def group_line(kind: str, metric: str, rest: list[Finding]) -> str:
    """The line that stands for the rest of a flood of one kind."""
    worst = max(f.severity for f in rest)
    return (f"… {len(rest)} more {kind} finding(s) on {metric} (worst {worst}), steps "
            f"{min(f.start_step for f in rest)}–{max(f.end_step for f in rest)}; --all lists every one")


def analyze_view(report: Report, log: LogData, width: int = 100, show_all: bool = False,
                 verbose: bool = False) -> RenderableType:
    """`analyze` on a terminal: what was read (lines, records, metrics, the loss column, segments, skip
    reasons), notes, the findings table and a loss sparkline."""
    lines = report.lines
    head = Text.assemble(
        (report.source, "bold"), f" — format {report.format}; {_n(lines['total'])} lines: ",
        f"{_n(lines['parsed'])} parsed, {_n(lines['skipped'])} skipped, {_n(lines['blank'])} blank")
    from rich.table import Table  # (a one-line check needs no table: its import kept off it)

    read = Table(show_header=False, box=None, pad_edge=False)
    read.add_column(style="dim")
    read.add_column()
    s = report.steps
    read.add_row(*cells("train records", f"{_n(s['count'])} (steps {s['first']}–{s['last']})"
                 if s["count"] else "0"))
    read.add_row(*cells("eval records", _n(report.eval_records)))
    read.add_row(*cells("metrics", ", ".join(_named(m, log) for m in report.metrics) or "—"))
    read.add_row(*cells("loss", f"column {report.loss['column']!r} ({report.loss['why']})" if report.loss
                        else "none found (pass --metric NAME)"))
    if len(log.segments) > 1:
        segs = "; ".join(f"#{g.index}: steps {g.first_step}–{g.last_step} ({_n(g.records)} records, "
                         f"from line {g.first_line})" for g in log.segments)
        read.add_row(*cells("segments", f"{len(log.segments)} (restarts) — {segs}"))
    else:
        read.add_row(*cells("segments", "1"))
    for reason, count in sorted(report.skipped_reasons.items(), key=lambda kv: -kv[1]):
        lineno, text = log.lines.examples[reason]
        read.add_row(*cells(f"skipped: {reason}", f"{_n(count)} (first at line {lineno}: {text[:60]!r})"))
    parts: list[RenderableType] = [head, read]
    for note in report.notes:
        parts.append(Text(f"note: {note}", style="dim"))
    if verbose:
        for sk in report.skipped:
            parts.append(Text(f"could not check {sk.detector} on {sk.metric}: {sk.reason}", style="dim"))
    parts.append(findings_table(report, show_all))
    spark = loss_sparkline(report, log, width)
    if spark is not None:
        parts.append(spark)
    return Group(*parts)


BARS = "▁▂▃▄▅▆▇█"


def bar(v: float, lo: float, hi: float) -> str:
    """One sparkline character for ``v`` on the scale lo..hi."""
    return BARS[min(len(BARS) - 1, int((v - lo) / ((hi - lo) or 1.0) * (len(BARS) - 1)))]


def loss_sparkline(report: Report, log: LogData, columns: int = 80) -> RenderableType | None:
    """The loss as a sparkline fitted to ``columns`` terminal columns (label and range included),
    with a marker under the columns where findings are."""
    from losslens.reporters.chart import blocks

    if "loss" not in log.train.columns or log.train.height < 2:
        return None
    # a block of records at a time (a long run's loss is never turned into float64 arrays whole):
    # the loss's finite range, and the range and number of the records drawn
    vmin, vmax, finite, n, lo, hi = math.inf, -math.inf, 0, 0, math.inf, -math.inf
    for steps, loss in blocks(log.train, "step", "loss"):
        f = loss[np.isfinite(loss)]
        if len(f):
            vmin, vmax, finite = min(vmin, float(f.min())), max(vmax, float(f.max())), finite + len(f)
        x = steps[np.isfinite(loss) & np.isfinite(steps)]
        if len(x):
            lo, hi, n = min(lo, float(x.min())), max(hi, float(x.max())), n + len(x)
    if finite < 2:
        return None
    label = f"  {vmin:.4g}–{vmax:.4g}"
    if n < 2:
        return None
    # a column per step at most: more columns than steps would leave holes between them (runs
    # restarted at step 1 share their steps; counted only where few records could leave holes)
    room = min(160, columns - len("loss ") - len(label))
    if n <= 4 * room:
        drawn = np.concatenate([s[np.isfinite(v) & np.isfinite(s)]
                                for s, v in blocks(log.train, "step", "loss")])
        width = max(2, min(room, len(np.unique(drawn))))
    else:
        width = max(2, min(room, n))
    top = np.full(width, -np.inf)
    for steps, loss in blocks(log.train, "step", "loss"):
        ok = np.isfinite(loss) & np.isfinite(steps)
        x, y = steps[ok], loss[ok]
        cols = np.minimum(((x - lo) / ((hi - lo) or 1) * (width - 1)).astype(int), width - 1)
        np.maximum.at(top, cols, y)  # the highest value in each column: a spike survives
    filled = np.isfinite(top)  # (the label's range is the bars' scale)
    line = "".join(bar(v, vmin, vmax) if ok else " " for v, ok in zip(top, filled, strict=True))
    marks = [" "] * width
    for f in report.findings:
        a = int((f.start_step - lo) / ((hi - lo) or 1) * (width - 1))
        b = int((f.end_step - lo) / ((hi - lo) or 1) * (width - 1))
        for c in range(max(0, a), min(width, b + 1)):
            marks[c] = "^" if f.severity >= Severity.WARNING else "·"
    return Group(Text(f"loss {line}{label}", style="cyan", no_wrap=True),
                 Text("     " + "".join(marks).rstrip(), style="red", no_wrap=True))


def _named(metric: str, log: LogData) -> str:
    original = log.names.get(metric)
    return metric if original in (None, metric) else f"{metric} ({original})"


def findings_table(report: Report, show_all: bool = False) -> RenderableType:
    """The findings as a table, worst first (floods grouped unless ``show_all``)."""
    if not report.findings:
        return Text("no findings", style="green")
    from rich.table import Table

    table = Table(title=f"{len(report.findings)} finding(s)", title_justify="left")
    for col in ("severity", "kind", "metric", "steps", "summary"):
        table.add_column(col, overflow="fold")
    for f in grouped(report.findings, show_all):
        if isinstance(f, tuple):
            kind, metric, rest = f
            table.add_row(*cells("", kind, metric, f"{min(g.start_step for g in rest)}–"
                                 f"{max(g.end_step for g in rest)}", group_line(kind, metric, rest)))
            continue
        table.add_row(*cells(Text(str(f.severity), style=STYLE[f.severity]), f.kind, f.metric,
                      f"{f.start_step}–{f.end_step}", f.summary))
    return table


def where(source: str, f: Finding) -> str:
    """'run.log:144: steps 144–349' — the line (when the log has lines) reads as a position to
    editors and CI problem matchers; the steps follow it in words."""
    line = f":{f.line}" if f.line is not None else ""
    steps = f"step {f.start_step}" if f.start_step == f.end_step else f"steps {f.start_step}–{f.end_step}"
    return f"{source}{line}: {steps}"


def check_lines(report: Report, show_all: bool = False) -> list[str]:
    """One terse line per finding: 'source:LINE: steps A–B: severity kind [metric] summary'; a
    flood of one kind is its worst few and one line for the rest."""
    out = []
    for f in grouped(report.findings, show_all):
        if isinstance(f, tuple):
            out.append(f"{report.source}: {group_line(*f)}")
        else:
            out.append(f"{where(report.source, f)}: {f.severity} {f.kind} [{f.metric}] {f.summary}")
    return out


def summary_table(rows: list[tuple[str, int | None, Severity | None, str]]) -> RenderableType:
    """check over many logs: one row per log, worst first."""
    from rich.table import Table

    table = Table(title=f"{len(rows)} logs", title_justify="left")
    for col in ("log", "findings", "worst", "result"):
        table.add_column(col, overflow="fold")
    order = {"ERROR": 0, "FAIL": 1, "ok": 2}
    for source, n, worst, result in sorted(rows, key=lambda r: (order[r[3]], r[0])):
        table.add_row(*cells(source, "—" if n is None else str(n), "—" if worst is None else str(worst),
                      Text(result, style="bold red" if result != "ok" else "green")))
    return table


class TextReporter(Streaming):
    """The terminal: ``analyze`` shows what was read and the findings with a loss sparkline;
    ``check`` one line per finding (``file:LINE: steps A–B: severity kind [metric] summary``)."""

    name = "text"

    def log(self, result: Result, ctx: Context) -> RenderableType | str | None:
        if result.report is None or result.log is None:
            return None
        if ctx.command == "check":
            lines = check_lines(result.report, ctx.show_all)
            return "\n".join(lines) + "\n" if lines else None
        return analyze_view(result.report, result.log, ctx.width, ctx.show_all, ctx.verbose)
