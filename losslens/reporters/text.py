"""Human reports: a rich post-mortem for `analyze`, one line per finding for `check`."""

from __future__ import annotations

import numpy as np
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from losslens.findings import Report, Severity
from losslens.logs import LogData

STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}


def cells(*values: object) -> list[Text]:
    """Table cells as Text: log lines and names are shown as they are, never parsed as markup."""
    return [v if isinstance(v, Text) else Text(str(v)) for v in values]


def _n(x: int) -> str:
    return f"{x:,}"


def analyze_view(report: Report, log: LogData) -> RenderableType:
    lines = report.lines
    head = Text.assemble(
        (report.source, "bold"), f" — format {report.format}; {_n(lines['total'])} lines: ",
        f"{_n(lines['parsed'])} parsed, {_n(lines['skipped'])} skipped, {_n(lines['blank'])} blank")
    read = Table(show_header=False, box=None, pad_edge=False)
    read.add_column(style="dim")
    read.add_column()
    s = report.steps
    read.add_row(*cells("train records", f"{_n(s['count'])} (steps {s['first']}–{s['last']})"
                 if s["count"] else "0"))
    read.add_row(*cells("eval records", _n(report.eval_records)))
    read.add_row(*cells("metrics", ", ".join(_named(m, log) for m in report.metrics) or "—"))
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
    parts.append(findings_table(report))
    spark = loss_sparkline(report, log)
    if spark is not None:
        parts.append(spark)
    return Group(*parts)


BARS = "▁▂▃▄▅▆▇█"


def bar(v: float, lo: float, hi: float) -> str:
    """One sparkline character for ``v`` on the scale lo..hi."""
    return BARS[min(len(BARS) - 1, int((v - lo) / ((hi - lo) or 1.0) * (len(BARS) - 1)))]


def loss_sparkline(report: Report, log: LogData, width: int = 80) -> RenderableType | None:
    """The loss as a sparkline, with a marker under the columns where findings are."""
    if "loss" not in log.train.columns or log.train.height < 2:
        return None
    from losslens.reporters.html import minmax_downsample

    steps = log.train["step"].to_numpy().astype(float)
    loss = log.train["loss"].cast(float).to_numpy()
    x, y = minmax_downsample(steps, loss, width // 4)
    if len(x) < 2:
        return None
    lo, hi = float(x.min()), float(x.max())
    cols = np.minimum(((x - lo) / ((hi - lo) or 1) * (width - 1)).astype(int), width - 1)
    top = np.full(width, np.nan)
    for c, v in zip(cols, y, strict=True):
        top[c] = v if np.isnan(top[c]) else max(top[c], v)
    filled = np.isfinite(top)
    vmin, vmax = float(np.nanmin(top)), float(np.nanmax(top))
    line = "".join(bar(v, vmin, vmax) if ok else " " for v, ok in zip(top, filled, strict=True))
    marks = [" "] * width
    for f in report.findings:
        a = int((f.start_step - lo) / ((hi - lo) or 1) * (width - 1))
        b = int((f.end_step - lo) / ((hi - lo) or 1) * (width - 1))
        for c in range(max(0, a), min(width, b + 1)):
            marks[c] = "^" if f.severity >= Severity.WARNING else "·"
    return Group(Text(f"loss {line}  {vmin:.4g}–{vmax:.4g}", style="cyan"),
                 Text("     " + "".join(marks), style="red"))


def _named(metric: str, log: LogData) -> str:
    original = log.names.get(metric)
    return metric if original in (None, metric) else f"{metric} ({original})"


def findings_table(report: Report) -> RenderableType:
    if not report.findings:
        return Text("no findings", style="green")
    table = Table(title=f"{len(report.findings)} finding(s)", title_justify="left")
    for col in ("severity", "kind", "metric", "steps", "summary"):
        table.add_column(col, overflow="fold")
    for f in report.findings:
        table.add_row(*cells(Text(str(f.severity), style=STYLE[f.severity]), f.kind, f.metric,
                      f"{f.start_step}–{f.end_step}", f.summary))
    return table


def check_lines(report: Report) -> list[str]:
    """One terse line per finding: source:steps: severity kind metric: summary."""
    return [f"{report.source}:{f.start_step}-{f.end_step}: {f.severity} {f.kind} [{f.metric}] "
            f"{f.summary}" for f in report.findings]


def summary_table(rows: list[tuple[str, int | None, Severity | None, str]]) -> RenderableType:
    """check over many logs: one row per log, worst first."""
    table = Table(title=f"{len(rows)} logs", title_justify="left")
    for col in ("log", "findings", "worst", "result"):
        table.add_column(col, overflow="fold")
    order = {"ERROR": 0, "FAIL": 1, "ok": 2}
    for source, n, worst, result in sorted(rows, key=lambda r: (order[r[3]], r[0])):
        table.add_row(*cells(source, "—" if n is None else str(n), "—" if worst is None else str(worst),
                      Text(result, style="bold red" if result != "ok" else "green")))
    return table
