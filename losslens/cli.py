"""The command line: parse options → one library call → render → exit. Nothing else lives here."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from losslens import __version__
from losslens.errors import LossLensError, UsageError
from losslens.findings import ExitCode, Severity

if TYPE_CHECKING:
    from losslens.findings import Report
    from losslens.logs import LogData

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  help="Read training logs and say, with evidence, when the run is sick.")
out = Console(soft_wrap=False)
err = Console(stderr=True, highlight=False, soft_wrap=True)

FormatOpt = Annotated[str, typer.Option("--format", "-f", help="Log format, or 'auto' to detect "
                                        "it from the content (see `losslens formats`).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="JSON Lines on stdout: one report per log.")]
IgnoreOpt = Annotated[str, typer.Option("--ignore", help="Finding kinds to leave out, "
                                        "comma-separated (e.g. spike,plateau).")]
Logs = Annotated[list[str], typer.Argument(help="Log files ('-' reads standard input; .gz is read "
                                           "transparently).", metavar="LOG...")]


@contextmanager
def user_errors() -> Iterator[None]:
    """Library errors become one line on stderr and exit code 2 — never a traceback."""
    try:
        yield
    except LossLensError as exc:
        err.print(f"losslens: error: {exc}", markup=False)
        raise typer.Exit(ExitCode.ERROR) from None


def _severity(value: str | None) -> Severity | None:
    if value is None:
        return None
    try:
        return Severity.parse(value)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _ignore(value: str) -> frozenset[str]:
    from losslens.detectors import REGISTRY

    kinds = frozenset(k.strip() for k in value.split(",") if k.strip())
    known = {d.name for d in REGISTRY}
    unknown = sorted(kinds - known) if known else []
    if unknown:
        raise UsageError(f"unknown finding kind(s) for --ignore: {', '.join(unknown)} "
                         f"(known: {', '.join(sorted(known))})")
    return kinds


def _reports(logs: list[str], fmt: str, ignore: frozenset[str]) -> Iterator[
        tuple[str, LogData | None, Report | None]]:
    # polars, numpy and the detectors load here, not at start-up (`--help` stays fast)
    from losslens.analyze import analyze as run_analysis
    from losslens.logs import read_log

    for path in logs:
        try:
            log = read_log(path, None if fmt == "auto" else fmt)
        except LossLensError as exc:
            err.print(f"losslens: error: {exc}", markup=False)
            yield path, None, None
            continue
        yield path, log, run_analysis(log, ignore=ignore)


@app.command()
def analyze(
    logs: Logs,
    format: FormatOpt = "auto",
    json: JsonOpt = False,
    fail_on: Annotated[str | None, typer.Option("--fail-on", help="Exit 1 when a finding is at "
                                                "or above this severity (info|warning|error).")] = None,
    ignore: IgnoreOpt = "",
) -> None:
    """Post-mortem report: what was read, and the findings with steps, numbers and a likely cause."""
    from losslens.reporters import jsonl, text

    with user_errors():
        threshold, kinds = _severity(fail_on), _ignore(ignore)
        code = ExitCode.OK
        for _, log, report in _reports(logs, format, kinds):
            if report is None or log is None:
                code = ExitCode.ERROR
                continue
            if json:
                print(jsonl.render(report), flush=True)
            else:
                out.print(text.analyze_view(report, log))
            code = max(code, report.exit_code(threshold))
    raise typer.Exit(code)


@app.command()
def check(
    logs: Logs,
    format: FormatOpt = "auto",
    json: JsonOpt = False,
    fail_on: Annotated[str, typer.Option("--fail-on", help="Exit 1 when a finding is at or above "
                                         "this severity (info|warning|error).")] = "error",
    ignore: IgnoreOpt = "",
) -> None:
    """The gate: one line per finding, a summary on stderr; exit 0 clean, 1 findings, 2 error."""
    from losslens.reporters import jsonl, text

    with user_errors():
        threshold, kinds = _severity(fail_on), _ignore(ignore)
        code = ExitCode.OK
        for _, _, report in _reports(logs, format, kinds):
            if report is None:
                code = ExitCode.ERROR
                continue
            if json:
                print(jsonl.render(report), flush=True)
            else:
                for line in text.check_lines(report):
                    print(line)
            result = report.exit_code(threshold)
            worst = report.worst()
            err.print(f"{report.source}: {len(report.findings)} finding(s)"
                      f"{f', worst {worst}' if worst is not None else ''}; "
                      f"{report.steps['count']} records; "
                      f"{'FAIL' if result else 'ok'} (--fail-on {threshold})", markup=False)
            code = max(code, result)
    raise typer.Exit(code)


@app.command()
def formats() -> None:
    """List the log formats losslens reads, with one example line each."""
    from losslens.logs.registry import FORMATS

    table = Table(show_lines=False)
    table.add_column("--format")
    table.add_column("what")
    table.add_column("example line", overflow="fold")
    for f in FORMATS:
        table.add_row(f.name, f.title, f.example)
    out.print(table)


@app.command()
def detectors() -> None:
    """List the detectors (finding kinds) that analyze and check run."""
    from losslens.detectors import REGISTRY

    if not REGISTRY:
        out.print("no detectors registered yet: analyze and check report what was read")
        return
    table = Table()
    for col in ("kind", "metrics", "what it finds"):
        table.add_column(col)
    for d in REGISTRY:
        table.add_row(d.name, ", ".join(d.metrics), d.title)
    out.print(table)


def _version(value: bool) -> None:
    if value:
        print(f"losslens {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """Read training logs and say, with evidence, when the run is sick."""


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        err.print("interrupted", markup=False)
        sys.exit(ExitCode.INTERRUPTED)
