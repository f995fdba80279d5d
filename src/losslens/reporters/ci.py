"""Machine formats that CI systems read: GitHub workflow annotations, JUnit XML, SARIF 2.1.0.

Each takes every log's result at once (JUnit and SARIF are one document for the whole run); a
result's ``report`` is None when the log could not be read (its ``error`` says why).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from losslens import __version__
from losslens.findings import Finding, Gate, Report, Severity, Word, jsonable, steps_text
from losslens.reporters.base import Context, Streaming
from losslens.reporters.jsonl import dumps

if TYPE_CHECKING:
    from losslens.runner import Result


class Outcome(Protocol):
    """A log's result as these formats need it (``runner.Result`` is one)."""

    @property
    def source(self) -> str: ...
    @property
    def report(self) -> Report | None: ...
    @property
    def error(self) -> str | None: ...
    @property
    def seconds(self) -> float: ...

GITHUB_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}
SARIF_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


def _gh_escape(text: str, prop: bool = False) -> str:
    """GitHub's workflow-command escaping (properties also escape ':' and ',')."""
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if prop else text


def github(outcomes: Sequence[Outcome], gate: Gate | None = None) -> str:
    """One `::error file=…,line=…,title=…::summary` line per finding, and one per log the gate
    could not judge (unreadable, read short, no loss column)."""
    gate = gate or Gate()
    out = []
    for o in outcomes:
        verdict = gate.judge(o.report, o.error)
        if verdict.word is Word.ERROR and (o.report is None or verdict.why is not None):
            title = "losslens: cannot read" if o.report is None else "losslens: cannot judge"
            out.append(f"::error file={_gh_escape(o.source, True)},title={title}::"
                       f"{_gh_escape(verdict.why or o.error or 'cannot read')}")
        for f in o.report.findings if o.report is not None else ():
            line = f",line={f.line}" if f.line is not None else ""
            title = _gh_escape(f"losslens {f.kind} [{f.metric}] {steps_text(f.start_step, f.end_step)}", True)
            out.append(f"::{GITHUB_LEVEL[f.severity]} file={_gh_escape(o.source, True)}{line},"
                       f"title={title}::{_gh_escape(f.summary)}")
    return "\n".join(out) + ("\n" if out else "")


def junit(outcomes: Sequence[Outcome], kinds: list[str], gate: Gate) -> str:
    """One <testsuite> per log (with its ``time``), one <testcase> per detector kind: a <failure>
    when that kind found something that fails the gate, <skipped> when it could not check any
    series; a log the gate could not judge (unreadable, read short, no loss column) adds a
    <testcase name="read"> with an <error>."""
    from xml.sax.saxutils import escape, quoteattr  # (here: it loads urllib, ssl: 40 ms of check)

    suites, totals = [], {"tests": 0, "failures": 0, "errors": 0, "skipped": 0, "time": 0.0}
    for o in outcomes:
        cases, n = [], {"failures": 0, "errors": 0, "skipped": 0}
        name = quoteattr(o.source)
        verdict = gate.judge(o.report, o.error)
        if verdict.word is Word.ERROR and (o.report is None or verdict.why is not None):
            message = verdict.why or o.error or ""
            cases.append(f'<testcase classname={name} name="read"><error message={quoteattr(message)}/>'
                         f'</testcase>')
            n["errors"] += 1
        if o.report is not None:
            failing = {id(f) for f in verdict.failing}
            by_kind: dict[str, list[Finding]] = {}
            for f in o.report.findings:
                by_kind.setdefault(f.kind, []).append(f)
            skipped_kinds = {s.detector for s in o.report.skipped}
            for kind in kinds + [k for k in by_kind if k not in kinds]:
                found = by_kind.get(kind, [])
                failed = [f for f in found if id(f) in failing]
                body = ""
                if failed:
                    n["failures"] += 1
                    text = "\n".join(f"{f.severity} {steps_text(f.start_step, f.end_step)} [{f.metric}]: "
                                     f"{f.summary}" for f in found)
                    body = (f'<failure message={quoteattr(failed[0].summary)} type="{kind}">'
                            f'{escape(text)}</failure>')
                elif found:
                    body = "<system-out>" + escape("\n".join(
                        f"{f.severity} {steps_text(f.start_step, f.end_step)}: {f.summary}"
                        for f in found)) + "</system-out>"
                elif kind in skipped_kinds:
                    n["skipped"] += 1
                    reasons = sorted({s.reason for s in o.report.skipped if s.detector == kind})
                    body = f'<skipped message={quoteattr("; ".join(reasons))}/>'
                cases.append(f'<testcase classname={name} name="{kind}" time="0">{body}</testcase>')
        seconds = float(getattr(o, "seconds", 0.0) or 0.0)
        totals["tests"] += len(cases)
        totals["time"] += seconds
        for k, v in n.items():
            totals[k] += v
        suites.append(f'<testsuite name={name} tests="{len(cases)}" failures="{n["failures"]}" '
                      f'errors="{n["errors"]}" skipped="{n["skipped"]}" time="{seconds:.3f}">'
                      + "".join(cases) + "</testsuite>")
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<testsuites name="losslens" tests="{totals["tests"]}" '
            f'failures="{totals["failures"]}" errors="{totals["errors"]}" skipped="{totals["skipped"]}" '
            f'time="{totals["time"]:.3f}">' + "".join(suites) + "</testsuites>\n")


def sarif(outcomes: Sequence[Outcome], rules: dict[str, str], gate: Gate | None = None,
          base: str | None = None) -> str:
    """SARIF 2.1.0: one rule per finding kind (``rules``: kind → description), one result per
    finding, located at the log's line where the finding starts when the log has lines. Paths
    are relative to ``base`` (default: the working folder), named by ``originalUriBaseIds`` as
    %SRCROOT%. A log the gate could not judge is a notification, and the run's
    ``executionSuccessful`` is then false."""
    import os
    from pathlib import Path

    gate = gate or Gate()
    root = os.path.abspath(base or os.getcwd())
    results: list[dict] = []
    notifications: list[dict] = []
    used = dict(rules)
    for o in outcomes:
        artifact = _artifact(o.source, root)
        verdict = gate.judge(o.report, o.error)
        if verdict.word is Word.ERROR and (o.report is None or verdict.why is not None):
            text = verdict.why or o.error or "cannot read"
            notifications.append({"level": "error", "message": {"text": text},
                                  "locations": [{"physicalLocation": {"artifactLocation": artifact}}]})
        for f in o.report.findings if o.report is not None else ():
            used.setdefault(f.kind, f.kind)
            location: dict = {"artifactLocation": artifact}
            if f.line is not None:
                location["region"] = {"startLine": f.line}
            results.append({
                "ruleId": f.kind, "level": SARIF_LEVEL[f.severity],
                "message": {"text": f.summary},
                "locations": [{"physicalLocation": location}],
                "properties": {"metric": f.metric, "start_step": f.start_step, "end_step": f.end_step,
                               "evidence": jsonable(f.evidence)}})
    doc = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json", "version": "2.1.0",
        "runs": [{"tool": {"driver": {
            "name": "losslens", "version": __version__,
            "rules": [{"id": k, "shortDescription": {"text": v}} for k, v in used.items()]}},
            "originalUriBaseIds": {"%SRCROOT%": {"uri": Path(root).as_uri() + "/"}},
            "results": results,
            "invocations": [{"executionSuccessful": not notifications,
                             "toolExecutionNotifications": notifications}]}]}
    return dumps(doc, indent=2) + "\n"


def _artifact(source: str, root: str) -> dict:
    """A log's artifactLocation: a URI relative to %SRCROOT% where the log is below it, else an
    absolute file URI (a URL or standard input as it is named)."""
    import os
    from pathlib import Path
    from urllib.parse import quote

    if source == "-" or source.startswith("<") or "://" in source:
        return {"uri": source}
    path = os.path.abspath(source)
    if path == root or path.startswith(root.rstrip(os.sep) + os.sep):
        rel = os.path.relpath(path, root).replace(os.sep, "/")
        return {"uri": quote(rel), "uriBaseId": "%SRCROOT%"}
    return {"uri": Path(path).as_uri()}


class GitHub(Streaming):
    """``--output-format github``: workflow annotations, printed per log as it is done."""

    name = "github"

    def log(self, result: Result, ctx: Context) -> str:
        return github([result], ctx.gate)


class JUnit:
    """--output-format junit: one XML document for the whole run, printed at the end."""
    name = "junit"

    def log(self, result: Result, ctx: Context) -> None:
        return None

    def close(self, results: list[Result], ctx: Context) -> str:
        from losslens.detectors import REGISTRY

        return junit(results, [d.name for d in REGISTRY], ctx.gate)


class Sarif:
    """--output-format sarif: one SARIF 2.1.0 document for the whole run, printed at the end."""
    name = "sarif"

    def log(self, result: Result, ctx: Context) -> None:
        return None

    def close(self, results: list[Result], ctx: Context) -> str:
        from losslens.detectors import REGISTRY

        return sarif(results, {d.name: d.title for d in REGISTRY}, ctx.gate)
