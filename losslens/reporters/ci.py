"""Machine formats that CI systems read: GitHub workflow annotations, JUnit XML, SARIF 2.1.0.

Each takes every log's result at once (JUnit and SARIF are one document for the whole run); a
result's ``report`` is None when the log could not be read (its ``error`` says why).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from losslens import __version__
from losslens.findings import Finding, Report, Severity, jsonable
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

GITHUB_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}
SARIF_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


def _gh_escape(text: str, prop: bool = False) -> str:
    """GitHub's workflow-command escaping (properties also escape ':' and ',')."""
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if prop else text


def github(outcomes: Sequence[Outcome]) -> str:
    """One `::error file=…,line=…,title=…::summary` line per finding (and per unreadable log)."""
    out = []
    for o in outcomes:
        if o.report is None:
            out.append(f"::error file={_gh_escape(o.source, True)},title=losslens: cannot read::"
                       f"{_gh_escape(o.error or 'cannot read')}")
            continue
        for f in o.report.findings:
            line = f",line={f.line}" if f.line is not None else ""
            title = _gh_escape(f"losslens {f.kind} [{f.metric}] steps {f.start_step}-{f.end_step}", True)
            out.append(f"::{GITHUB_LEVEL[f.severity]} file={_gh_escape(o.source, True)}{line},"
                       f"title={title}::{_gh_escape(f.summary)}")
    return "\n".join(out) + ("\n" if out else "")


def junit(outcomes: Sequence[Outcome], kinds: list[str], fail_on: Severity) -> str:
    """One <testsuite> per log, one <testcase> per detector kind: a <failure> when that kind found
    something at or above ``fail_on``, <skipped> when it could not check any series; a log that
    could not be read is one <testcase name="read"> with an <error>."""
    from xml.sax.saxutils import escape, quoteattr  # (here: it loads urllib, ssl: 40 ms of check)

    suites, total_tests, total_fail, total_err = [], 0, 0, 0
    for o in outcomes:
        cases, fails, errors = [], 0, 0
        name = quoteattr(o.source)
        if o.report is None:
            cases.append(f'<testcase classname={name} name="read"><error message={quoteattr(o.error or "")}/>'
                         f'</testcase>')
            errors = 1
        else:
            by_kind: dict[str, list[Finding]] = {}
            for f in o.report.findings:
                by_kind.setdefault(f.kind, []).append(f)
            skipped_kinds = {s.detector for s in o.report.skipped}
            for kind in kinds + [k for k in by_kind if k not in kinds]:
                found = by_kind.get(kind, [])
                failing = [f for f in found if f.severity >= fail_on]
                body = ""
                if failing:
                    fails += 1
                    text = "\n".join(f"{f.severity} steps {f.start_step}-{f.end_step} [{f.metric}]: "
                                     f"{f.summary}" for f in found)
                    body = (f'<failure message={quoteattr(failing[0].summary)} type="{kind}">'
                            f'{escape(text)}</failure>')
                elif found:
                    body = "<system-out>" + escape("\n".join(
                        f"{f.severity} steps {f.start_step}-{f.end_step}: {f.summary}" for f in found)) + \
                        "</system-out>"
                elif kind in skipped_kinds:
                    reasons = sorted({s.reason for s in o.report.skipped if s.detector == kind})
                    body = f'<skipped message={quoteattr("; ".join(reasons))}/>'
                cases.append(f'<testcase classname={name} name="{kind}">{body}</testcase>')
        total_tests += len(cases)
        total_fail += fails
        total_err += errors
        suites.append(f'<testsuite name={name} tests="{len(cases)}" failures="{fails}" errors="{errors}">'
                      + "".join(cases) + "</testsuite>")
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<testsuites name="losslens" tests="{total_tests}" '
            f'failures="{total_fail}" errors="{total_err}">' + "".join(suites) + "</testsuites>\n")


def sarif(outcomes: Sequence[Outcome], rules: dict[str, str]) -> str:
    """SARIF 2.1.0: one rule per finding kind (``rules``: kind → description), one result per
    finding, located at the log's line where the finding starts when the log has lines."""
    results: list[dict] = []
    notifications: list[dict] = []
    used = dict(rules)
    for o in outcomes:
        artifact = {"uri": o.source}
        if o.report is None:
            notifications.append({"level": "error", "message": {"text": o.error or "cannot read"},
                                  "locations": [{"physicalLocation": {"artifactLocation": artifact}}]})
            continue
        for f in o.report.findings:
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
            "results": results,
            "invocations": [{"executionSuccessful": not notifications,
                             "toolExecutionNotifications": notifications}]}]}
    return dumps(doc, indent=2) + "\n"


class GitHub(Streaming):
    """``--output-format github``: workflow annotations, printed per log as it is done."""

    name = "github"

    def log(self, result: Result, ctx: Context) -> str:
        return github([result])


class JUnit:
    """--output-format junit: one XML document for the whole run, printed at the end."""
    name = "junit"

    def log(self, result: Result, ctx: Context) -> None:
        return None

    def close(self, results: list[Result], ctx: Context) -> str:
        from losslens.detectors import REGISTRY

        return junit(results, [d.name for d in REGISTRY], ctx.fail_on)


class Sarif:
    """--output-format sarif: one SARIF 2.1.0 document for the whole run, printed at the end."""
    name = "sarif"

    def log(self, result: Result, ctx: Context) -> None:
        return None

    def close(self, results: list[Result], ctx: Context) -> str:
        from losslens.detectors import REGISTRY

        return sarif(results, {d.name: d.title for d in REGISTRY})
