"""Human reports: a rich post-mortem for `analyze`, one line per finding for `check`."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
from rich.console import Group, RenderableType
from rich.text import Text

from losslens.findings import Finding, Report, Severity, step_range, steps_text
from losslens.logs import LogData
from losslens.reporters.base import Context, Streaming

if TYPE_CHECKING:
    from losslens.runner import Result

STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}


def cells(*values: object) -> list[Text]:
    """Table cells as Text: log lines and names are shown as they are, never parsed as markup."""
    return [v if isinstance(v, Text) else Text(str(v)) for v in values]


def reflowed(title: str, columns: list[str], rows: list[list[str]], width: int) -> RenderableType:
    """A table where its rows fit ``width`` columns whole; else each row stacked: its first cell,
    then 'column value' pairs wrapped below it (a narrow terminal never breaks a word in two)."""
    need = sum(max(len(c), *(len(r[i]) for r in rows)) if rows else len(c)
               for i, c in enumerate(columns)) + 3 * len(columns) + 1
    if need <= width:
        from rich.table import Table

        table = Table(title=title, title_justify="left")
        for c in columns:
            table.add_column(c, no_wrap=True)
        for r in rows:
            table.add_row(*cells(*r))
        return table
    from rich.padding import Padding

    parts: list[RenderableType] = [Text(title, style="italic")]
    for r in rows:
        parts.append(Text(r[0], style="bold"))
        pairs = ", ".join(f"{c} {v}" for c, v in zip(columns[1:], r[1:], strict=True))
        parts.append(Padding(Text(pairs), (0, 0, 0, 4)))
    return Group(*parts)


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
            f"{step_range(min(f.start_step for f in rest), max(f.end_step for f in rest))}; --all lists "
            "every one")


def analyze_view(report: Report, log: LogData, width: int = 100, show_all: bool = False,
                 verbose: bool = False) -> RenderableType:
    """`analyze` on a terminal: what was read (lines, records, metrics, the loss column, segments, skip
    reasons), notes, the findings table and a loss sparkline."""
    lines = report.lines
    read_as = (f"format {report.format}; {_n(lines['total'])} lines: {_n(lines['parsed'])} parsed, "
               f"{_n(lines['skipped'])} skipped, {_n(lines['blank'])} blank")
    # the path whole (never broken inside, even where longer than the terminal), the rest after
    # it where it fits, else on the next line
    if len(report.source) + 3 + len(read_as) <= width:
        head: RenderableType = Text.assemble((report.source, "bold"), f" — {read_as}")
    else:
        head = Group(Text(report.source, style="bold", no_wrap=True, overflow="ignore"), Text(read_as))
    from rich.table import Table  # (a one-line check needs no table: its import kept off it)

    read = Table(show_header=False, box=None, pad_edge=False)
    read.add_column(style="dim")
    read.add_column()
    s = report.steps
    read.add_row(*cells("train records", f"{_n(s['count'])} ({steps_text(s['first'], s['last'])})"
                 if s["count"] else "0"))
    read.add_row(*cells("eval records", _n(report.eval_records)))
    read.add_row(*cells("metrics", ", ".join(_named(m, log) for m in report.metrics) or "—"))
    read.add_row(*cells("loss", f"column {report.loss['column']!r} ({report.loss['why']})" if report.loss
                        else "none found (pass --metric NAME)"))
    if len(log.segments) > 1:
        segs = "; ".join(f"#{g.index}: {steps_text(g.first_step, g.last_step)} ({_n(g.records)} records, "
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
    label = f"  {vmin:.4g} to {vmax:.4g}"
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
    """'tokens_per_s (Ktok/s)': the metric and, where the log names it otherwise, its own name."""
    original = log.names.get(metric)
    if original in (None, metric):
        return metric
    bare = original.strip()
    if bare.startswith("(") and bare.endswith(")"):
        bare = bare[1:-1]
    return f"{metric} ({bare})"


def findings_table(report: Report, show_all: bool = False) -> RenderableType:
    """The findings, worst first (floods grouped unless ``show_all``), a finding a block: its
    severity, kind, metric and steps on one line, its summary below, indented and wrapped at
    the terminal's width (never a table cell that breaks its words)."""
    if not report.findings:
        return Text("no findings", style="green")
    from rich.padding import Padding

    parts: list[RenderableType] = [Text(f"{len(report.findings)} finding(s)", style="bold")]
    for f in grouped(report.findings, show_all):
        if isinstance(f, tuple):
            kind, metric, rest = f
            span = steps_text(min(g.start_step for g in rest), max(g.end_step for g in rest))
            parts.append(Text(f"{kind} [{metric}] {span}"))
            parts.append(Padding(Text(group_line(kind, metric, rest)), (0, 0, 0, 4)))
            continue
        parts.append(Text.assemble((str(f.severity), STYLE[f.severity]),
                                   f" {f.kind} [{f.metric}] {steps_text(f.start_step, f.end_step)}"))
        parts.append(Padding(Text(f.summary), (0, 0, 0, 4)))
    return Group(*parts)


def where(source: str, f: Finding) -> str:
    """'run.log:144: steps 144-349' — the line (when the log has lines) reads as a position to
    editors and CI problem matchers; the steps follow it in words."""
    line = f":{f.line}" if f.line is not None else ""
    return f"{source}{line}: {steps_text(f.start_step, f.end_step)}"


def check_lines(report: Report, show_all: bool = False) -> list[str]:
    """One terse line per finding: 'source:LINE: steps A-B: severity kind [metric] summary'; a
    flood of one kind is its worst few and one line for the rest."""
    out = []
    for f in grouped(report.findings, show_all):
        if isinstance(f, tuple):
            out.append(f"{report.source}: {group_line(*f)}")
        else:
            out.append(f"{where(report.source, f)}: {f.severity} {f.kind} [{f.metric}] {f.summary}")
    return out


class TextReporter(Streaming):
    """The terminal: ``analyze`` shows what was read and the findings with a loss sparkline;
    ``check`` one line per finding (``file:LINE: steps A-B: severity kind [metric] summary``)."""

    name = "text"

    def log(self, result: Result, ctx: Context) -> RenderableType | str | None:
        if result.report is None or result.log is None:
            return None
        if ctx.command == "check":
            lines = check_lines(result.report, ctx.show_all)
            if not lines:
                return None
            # each line whole (never wrapped: editors and CI problem matchers read it), its
            # severity coloured where colour is shown
            styled = []
            for line in lines:
                text = Text(line, no_wrap=True, overflow="ignore")
                for sev, style in STYLE.items():
                    at = line.find(f": {sev} ")
                    if at >= 0:
                        text.stylize(style, at + 2, at + 2 + len(str(sev)))
                        break
                styled.append(text)
            return Group(*styled)
        return analyze_view(result.report, result.log, ctx.width, ctx.show_all, ctx.verbose)
