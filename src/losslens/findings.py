"""Results: findings, skipped checks, the per-log report, and the gate's verdict on them.

The verdict is owned here, in one place: from what was read and found, and the options that
judge it, to an exit code and the word a person reads (``ok``, ``FAIL``, ``ERROR``). Every
command that judges logs asks a ``Gate``: ``check``, ``analyze --fail-on``, ``scan``,
``watch``, the CI reporters (JUnit, SARIF, GitHub) and ``Report.exit_code``. A rule changed
here is changed for all of them.

The rules, in order, for one log:

1. It could not be read: ``ERROR`` (2).
2. It was read short (records lost to a damaged or cut file) and partial reads are not allowed:
   ``ERROR`` (2), as a log that could not be read; its findings are still reported.
3. A finding at or above ``fail_on`` that the baseline does not accept: ``FAIL`` (1).
4. No column could be taken as the loss, and ``--metric`` named none: ``ERROR`` (2).
5. Otherwise ``ok`` (0).

Over several logs the exit code is the worst of theirs; a log passed over with
``--skip-unreadable`` counts for nothing. ``--exit-zero`` turns a ``FAIL`` into exit 0 (the
report is unchanged) but never an ``ERROR``: input that could not be read is never a pass.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import IntEnum, StrEnum
from typing import Any, Protocol

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

    def __bool__(self) -> bool:
        # INFO's value is 0: without this, `given or default` would drop it as "not given"
        return True


class ExitCode(IntEnum):
    """The contract's exit codes: 0 clean, 1 findings at --fail-on, 2 bad input; 129/130/141/143 for
    SIGHUP, Ctrl-C, a closed pipe, SIGTERM."""
    OK = 0
    FINDINGS = 1
    ERROR = 2
    HANGUP = 129  # SIGHUP (the terminal or the supervisor went away)
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
    segment: int = 0  # the restart segment of the series it could not check


@dataclass(frozen=True)
class Report:
    """What ``losslens.analyze`` returns for one log: what was read (``lines`` with their
    accounting, ``steps``, ``metrics``, ``segments``), which column was taken as the loss and why
    (``loss``), the ``findings`` (sorted: worst first, then by step), the checks that could not
    run (``skipped``), the reader's ``notes`` and, among them, ``read_errors``: what the read
    could not take (records lost to a damaged or cut file). ``exit_code(fail_on)`` is what
    ``losslens check --fail-on`` exits with for this log alone; ``as_dict()`` is the contract's
    JSON. In a notebook it shows itself as the HTML page's head (``_repr_html_``)."""

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
    read_errors: list[str] = field(default_factory=list)

    def worst(self) -> Severity | None:
        return max((f.severity for f in self.findings), default=None)

    def exit_code(self, fail_on: Severity = Severity.ERROR, forced_metrics: bool = False) -> ExitCode:
        """What ``losslens check --fail-on LEVEL`` exits with for this log (``forced_metrics``: as
        with ``--metric``); the gate's rules are in ``losslens.verdict``."""
        return Gate(fail_on, forced_metrics).judge(self).code

    def _repr_html_(self) -> str:
        style = (".losslens .error{color:#d62728;font-weight:600}.losslens .warning{color:#ff7f0e}"
                 ".losslens .info{color:#1f77b4}.losslens .meta{color:#555}")  # scoped: not the notebook's
        return f'<div class="losslens"><style>{style}</style>{self.html_head()}</div>'

    def html_head(self) -> str:
        """The HTML page's head for this log: what was read, notes, and the findings table (also
        what a Report shows in a notebook)."""
        rows = "".join(
            f'<tr><td class="{f.severity}">{f.severity}</td><td>{html.escape(f.kind)}</td>'
            f'<td>{html.escape(f.metric)}</td><td>{step_range(f.start_step, f.end_step)}</td>'
            f'<td>{html.escape(f.summary)}</td></tr>' for f in self.findings)
        table = (f'<table id="findings"><tr><th>severity</th><th>kind</th><th>metric</th><th>steps</th>'
                 f'<th>summary</th></tr>{rows}</table>' if rows else '<p id="findings">no findings</p>')
        lines = self.lines
        meta = (f'format {self.format}; {lines["total"]:,} lines ({lines["parsed"]:,} parsed, '
                f'{lines["skipped"]:,} skipped, {lines["blank"]:,} blank); {self.steps["count"]:,} train '
                f'records, {steps_text(self.steps["first"], self.steps["last"])}; {self.eval_records} eval '
                f'records; {self.segments} segment(s)')
        if self.loss:
            meta += f'; loss: column {self.loss["column"]!r} ({self.loss["why"]})'
        skipped = "; ".join(f"{n:,} {reason}" for reason, n in sorted(self.skipped_reasons.items(),
                                                                       key=lambda kv: -kv[1]))
        said = [f"skipped lines: {skipped}"] if skipped else []
        said += [f"note: {n}" for n in self.notes]
        notes = "".join(f'<div class="meta">{html.escape(x)}</div>' for x in said)
        return (f'<h1>{html.escape(self.source)}</h1><div class="meta">{html.escape(meta)}</div>'
                f'{notes}{table}')

    def as_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "source": self.source, "format": self.format,
                "lines": dict(self.lines), "steps": dict(self.steps),
                "eval_records": self.eval_records, "segments": self.segments,
                "metrics": list(self.metrics), "loss": self.loss,
                "findings": [f.as_dict() for f in self.findings],
                "skipped": [{"detector": k.detector, "metric": k.metric, "reason": k.reason}
                            for k in self.skipped],
                "notes": list(self.notes), "read_errors": list(self.read_errors)}


def steps_text(first: int | None, last: int | None) -> str:
    """'step 14257', or 'steps 144-349' (a plain '-', as grep users type it; a single step once)."""
    if first is None or last is None:
        return "no steps"
    return f"step {first}" if first == last else f"steps {first}-{last}"


def step_range(first: int | None, last: int | None) -> str:
    """'14257' or '144-349': the steps of a range without the word."""
    if first is None or last is None:
        return "-"
    return f"{first}" if first == last else f"{first}-{last}"


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


class Known(Protocol):
    """Findings accepted as known (``losslens.baseline.Baseline`` is one): they do not fail."""

    path: str

    def accepts(self, source: str, f: Finding) -> bool: ...


class Word(StrEnum):
    """What a person reads for one log."""

    OK = "ok"
    FAIL = "FAIL"
    ERROR = "ERROR"

    @property
    def code(self) -> ExitCode:
        return {Word.OK: ExitCode.OK, Word.FAIL: ExitCode.FINDINGS, Word.ERROR: ExitCode.ERROR}[self]


@dataclass(frozen=True)
class Judgement:
    """One log's verdict: its word, and why when it is an ERROR of a log that was read (no loss
    column, read short), as a line for stderr. ``failing``: the findings that failed it."""

    word: Word
    why: str | None = None
    failing: tuple[Finding, ...] = ()

    @property
    def code(self) -> ExitCode:
        return self.word.code


@dataclass(frozen=True)
class Gate:
    """The options that judge a log.

    ``fail_on``: the least severity that fails (None: nothing fails, as ``analyze`` without
    ``--fail-on``, which still says ERROR for a log it could not read). ``forced_metrics``:
    ``--metric`` named the loss. ``allow_partial``: a log read short is judged on what was read
    (``--skip-unreadable`` allows it too). ``exit_zero``: findings never make the exit code 1.
    ``baseline``: findings it accepts do not fail."""

    fail_on: Severity | None = Severity.ERROR
    forced_metrics: bool = False
    allow_partial: bool = False
    skip_unreadable: bool = False
    exit_zero: bool = False
    baseline: Known | None = None

    def fails(self, severity: Severity | None) -> bool:
        """A finding of this severity fails the gate (before the baseline)."""
        return severity is not None and self.fail_on is not None and severity >= self.fail_on

    def failing(self, source: str, findings: Iterable[Finding]) -> tuple[Finding, ...]:
        """The findings of ``source`` that fail the gate: at or above ``fail_on``, and not
        accepted by the baseline."""
        # (no loss column is the log's ERROR below, not a finding that fails it)
        out = [f for f in findings if self.fails(f.severity) and f.kind != "no_loss_metric"]
        if self.baseline is not None:
            out = [f for f in out if not self.baseline.accepts(source, f)]
        return tuple(out)

    def judge(self, report: Report | None, error: str | None = None) -> Judgement:
        """One log's verdict: ``report`` None when it could not be read (``error`` says why)."""
        if report is None:
            return Judgement(Word.ERROR, error)
        return self.judge_parts(report.source, report.findings, report.loss is not None,
                                report.read_errors)

    def judge_parts(self, source: str, findings: Sequence[Finding], loss_known: bool,
                    read_errors: Sequence[str] = ()) -> Judgement:
        """``judge`` from a log's parts (``scan`` keeps rows, not reports)."""
        failing = self.failing(source, findings)
        if read_errors and not (self.allow_partial or self.skip_unreadable):
            # as a log that could not be read: what it holds past the damage is not known
            return Judgement(Word.ERROR, f"{source}: read short: {read_errors[0]} (the records read "
                             "were analysed; --allow-partial judges them alone)", failing)
        if failing:
            return Judgement(Word.FAIL, None, failing)
        if not loss_known and not self.forced_metrics and self.fail_on is not None:
            why = next((f.summary for f in findings if f.kind == "no_loss_metric"),
                       "no loss metric found; pass --metric NAME to choose the loss")
            return Judgement(Word.ERROR, f"{source}: {why}")
        return Judgement(Word.OK)

    def exit_code(self, judgements: Iterable[Judgement | None]) -> ExitCode:
        """The exit code over several logs (None: a log passed over with --skip-unreadable)."""
        code = ExitCode.OK
        for j in judgements:
            if j is None:
                continue
            c = j.code
            if c is ExitCode.FINDINGS and self.exit_zero:
                c = ExitCode.OK
            code = max(code, c)
        return ExitCode(code)

    def describe(self) -> str:
        """The gate's settings as the closing line says them: '--fail-on warning, 3 baselined'."""
        parts = [f"--fail-on {self.fail_on}" if self.fail_on is not None else "no --fail-on"]
        if self.exit_zero:
            parts.append("--exit-zero")
        if self.baseline is not None:
            parts.append(f"baseline {self.baseline.path}")
        return ", ".join(parts)
