"""A short Markdown summary for CI comments: a findings table and one line per finding."""

from __future__ import annotations

from typing import TYPE_CHECKING

from losslens.findings import Report, step_range, steps_text
from losslens.reporters.base import Context, Streaming

if TYPE_CHECKING:
    from losslens.runner import Result


def render(report: Report) -> str:
    """A short Markdown summary of one log (for a CI comment)."""
    s, lines = report.steps, report.lines
    out = [f"### losslens: `{report.source}`", "",
           f"{report.format}, {s['count']:,} records ({steps_text(s['first'], s['last'])}), "
           f"{lines['total']:,} lines ({lines['skipped']:,} skipped); "
           f"**{len(report.findings)} finding(s)**"
           + (f", worst **{report.worst()}**" if report.findings else ""),
           ""]
    out += [f"> note: {n}" for n in report.notes] + ([""] if report.notes else [])
    if report.findings:
        out += ["| severity | kind | metric | steps |", "|---|---|---|---|"]
        out += [f"| {f.severity} | {f.kind} | {f.metric} | {step_range(f.start_step, f.end_step)} |"
                for f in report.findings]
        out += [""] + [f"- **{f.kind}** ({f.severity}): {f.summary}" for f in report.findings]
    return "\n".join(out) + "\n"


class Markdown(Streaming):
    """``analyze --markdown``: the short summary per log read."""

    name = "markdown"

    def log(self, result: Result, ctx: Context) -> str | None:
        return None if result.report is None else render(result.report)
