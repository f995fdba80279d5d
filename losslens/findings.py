"""Results: findings, skipped checks, the per-log report and the exit code it implies."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

SCHEMA = "losslens.report/1"


class Severity(IntEnum):
    """info < warning < error; ``check --fail-on`` compares against it."""
    INFO = 0
    WARNING = 1
    ERROR = 2

    @classmethod
    def parse(cls, text: str) -> Severity:
        try:
            return cls[text.strip().upper()]
        except KeyError:
            raise ValueError(f"unknown severity {text!r} (use info, warning or error)") from None

    def __str__(self) -> str:
        return self.name.lower()


class ExitCode(IntEnum):
    """The contract's exit codes: 0 clean, 1 findings at --fail-on, 2 bad input; 130/141/143 for Ctrl-C,
    a closed pipe, SIGTERM."""
    OK = 0
    FINDINGS = 1
    ERROR = 2
    INTERRUPTED = 130  # Ctrl-C
    BROKEN_PIPE = 141  # the reader of stdout went away (128 + SIGPIPE, as a shell reports it)
    TERMINATED = 143  # SIGTERM


@dataclass(frozen=True)
class Finding:
    """One thing found in one metric of one log.

    ``kind`` is the detector's name (the contract's vocabulary), ``severity`` info < warning <
    error, ``start_step``/``end_step`` the logged steps it covers, ``summary`` one sentence for a
    person with the numbers that matter, ``evidence`` the kind-specific numbers behind it (see
    docs/findings.md), ``segment`` the restart segment, ``line`` the log's line of the first
    record it covers (None for record-based logs such as event files). ``figures``: arrays a page
draws the finding with (a periodogram), which the JSON report leaves out."""

    kind: str
    severity: Severity
    metric: str
    start_step: int
    end_step: int
    summary: str
    evidence: dict[str, Any] = field(default_factory=dict)
    segment: int = 0
    line: int | None = None  # the log's line of the record at start_step (text logs only)
    figures: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "severity": str(self.severity), "metric": self.metric,
                "start_step": self.start_step, "end_step": self.end_step, "line": self.line,
                "summary": self.summary, "evidence": jsonable(self.evidence)}


@dataclass(frozen=True)
class Skipped:
    """A check that could not run (too little data, metric missing) — a result, not silence."""

    detector: str
    metric: str
    reason: str


@dataclass(frozen=True)
class Report:
    """What ``losslens.analyze`` returns for one log: what was read (``lines`` with their
    accounting, ``steps``, ``metrics``, ``segments``), which column was taken as the loss and why
    (``loss``), the ``findings`` (sorted: worst first, then by step), the checks that could not
    run (``skipped``) and the reader's ``notes``. ``exit_code(fail_on)`` is what `check` exits
    with; ``as_dict()`` is the contract's JSON. In a notebook it shows itself as the HTML page's
    head (``_repr_html_``)."""

    source: str
    format: str
    lines: dict[str, int]
    skipped_reasons: dict[str, int]
    steps: dict[str, int | None]
    eval_records: int
    segments: int
    metrics: list[str]
    findings: list[Finding]
    skipped: list[Skipped] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    loss: dict[str, str] | None = None  # {"column": as the log names it, "why": ...}

    def worst(self) -> Severity | None:
        return max((f.severity for f in self.findings), default=None)

    def exit_code(self, fail_on: Severity | None) -> ExitCode:
        if fail_on is None:
            return ExitCode.OK
        worst = self.worst()
        return ExitCode.FINDINGS if worst is not None and worst >= fail_on else ExitCode.OK

    def _repr_html_(self) -> str:
        from losslens.reporters.html import section

        style = (".losslens .error{color:#d62728;font-weight:600}.losslens .warning{color:#ff7f0e}"
                 ".losslens .info{color:#1f77b4}.losslens .meta{color:#555}")  # scoped: not the notebook's
        return f'<div class="losslens"><style>{style}</style>{section(self)}</div>'

    def as_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "source": self.source, "format": self.format,
                "lines": dict(self.lines), "steps": dict(self.steps),
                "eval_records": self.eval_records, "segments": self.segments,
                "metrics": list(self.metrics), "loss": self.loss,
                "findings": [f.as_dict() for f in self.findings],
                "skipped": [{"detector": k.detector, "metric": k.metric, "reason": k.reason}
                            for k in self.skipped],
                "notes": list(self.notes)}


def jsonable(obj: Any) -> Any:
    """Plain JSON types; NaN and infinities become None (JSON has no such numbers)."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [jsonable(v) for v in obj]
    if isinstance(obj, bool) or obj is None or isinstance(obj, str):
        return obj
    if isinstance(obj, int):
        return int(obj)
    try:
        f = float(obj)
    except (TypeError, ValueError):
        return str(obj)
    if not math.isfinite(f):
        return None
    return int(f) if hasattr(obj, "is_integer") and type(obj).__name__.startswith("int") else f
