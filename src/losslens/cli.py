"""The command line: parse options → one library call → render → exit. Nothing else lives here."""

from __future__ import annotations

import dataclasses
import io
import os
import signal
import sys
import time
from collections.abc import Generator, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from enum import Enum, StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.text import Text

from losslens import __version__
from losslens.errors import LossLensError, MissingExtra, UsageError
from losslens.findings import ExitCode, Severity, Word

if TYPE_CHECKING:
    from losslens.discover import Walk
    from losslens.findings import Gate, Judgement, Report
    from losslens.runner import Options, Result

app = typer.Typer(add_completion=True, no_args_is_help=True, rich_markup_mode=None,
                  context_settings={"help_option_names": ["-h", "--help"]},
                  help="Read training logs and say, with evidence, when the run is sick.")


class Color(StrEnum):
    """--color: when to colour the output."""
    auto = "auto"
    always = "always"
    never = "never"


def _make_consoles(color: Color = Color.auto) -> tuple[Console, Console]:
    """Standard output's and standard error's consoles, their width read now (COLUMNS, else the
    terminal's). auto: colour on terminals, as NO_COLOR and FORCE_COLOR say; no emoji codes (a log
    named 'run:fire:.log' is printed as it is named)."""
    style: dict[str, Any] = {}
    if color is Color.always:
        style = {"force_terminal": True, "no_color": False}  # (the option over NO_COLOR)
    elif color is Color.never:
        style = {"color_system": None}
    return (Console(soft_wrap=False, emoji=False, **style),
            Console(stderr=True, highlight=False, soft_wrap=True, emoji=False, **style))


out, err = _make_consoles()


def _consoles(color: Color = Color.auto) -> None:
    """The consoles for the command now starting (its --color, the width now)."""
    global out, err
    out, err = _make_consoles(color)

# choices shown by --help; the names are kept here so that --help loads no replay code (a test
# checks them against the registry). Format names are checked when a command runs (the registry's
# check_format), so that --help loads no reader.
STRATEGY_NAMES = ("static-sorted", "random", "bucketed-shuffle", "stride-interleave", "hf-group-by-length",
                  "hf-random", "torch-distributed", "fairseq", "lhotse")


class OutputFormat(StrEnum):
    """--output-format: the reporters a log command can print with."""
    text = "text"
    json = "json"
    github = "github"
    junit = "junit"
    sarif = "sarif"


class Level(StrEnum):
    """A severity as the options take it (--fail-on, --exit-on)."""
    info = "info"
    warning = "warning"
    error = "error"


Strategy = Enum("Strategy", {n: n for n in STRATEGY_NAMES}, type=str)  # type: ignore[misc]
DEFAULT_STRATEGY = Strategy("bucketed-shuffle")


class Device(StrEnum):
    """replay --device: where torch runs."""
    auto = "auto"
    cpu = "cpu"
    cuda = "cuda"


class BsFrom(StrEnum):
    """replay --bs-from: how a bucket's batch size follows from the token budget."""
    bound = "bound"
    max = "max"


class LoggedLoss(StrEnum):
    """replay --logged-loss: what each logged loss covers."""
    mean = "mean"
    last = "last"

def _format_names(incomplete: str = "") -> list[str]:
    """The registry's format names (and 'auto') that start with ``incomplete``."""
    from losslens.logs.registry import BY_NAME

    return [n for n in ("auto", *BY_NAME) if n.startswith(incomplete)]


try:  # typer 0.26 and later carry their own copy of click, and take its parameter types
    from typer._click.types import ParamType
except ImportError:  # pragma: no cover (older typer: click itself)
    from click import ParamType  # type: ignore[assignment]


class _FormatName(ParamType):
    """--format's value: any text here (the registry's check_format judges it when the command
    runs, as for a settings file's format); the registry's names in the help and in completion,
    loaded only when they are shown."""

    name = "format"

    def convert(self, value: Any, param: Any, ctx: Any) -> str:
        return str(value)

    def get_metavar(self, param: Any, ctx: Any = None) -> str:
        return "<" + "|".join(_format_names()) + ">"

    def shell_complete(self, ctx: Any, param: Any, incomplete: str) -> list[Any]:
        return [self.completion(n) for n in _format_names(incomplete)]

    @staticmethod
    def completion(name: str) -> Any:
        try:
            from typer._click.shell_completion import CompletionItem
        except ImportError:  # pragma: no cover
            from click.shell_completion import CompletionItem  # type: ignore[assignment]
        return CompletionItem(name)


FormatOpt = Annotated[str | None, typer.Option(
    "--format", "-f", click_type=_FormatName(),
    help="Log format, or 'auto' to detect it from the content (see `losslens formats`).")]
ConfigOpt = Annotated[str | None, typer.Option("--config", help="Settings file (TOML); default "
                                               "./losslens.toml, else [tool.losslens] in ./pyproject.toml.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Same as --output-format json.")]
OutputOpt = Annotated[OutputFormat | None, typer.Option(
    "--output-format", help="text (default), json (one report per line), github (workflow "
    "annotations), junit (XML, a test case per log and detector), sarif (code scanning).")]
OutputFileOpt = Annotated[str | None, typer.Option(
    "--output-file", "-o", help="Write the report to this file instead of standard output.")]
FailOnOpt = Annotated[Level | None, typer.Option(
    "--fail-on", help="Exit 1 when a finding is at or above this severity (default: the config's "
    "fail_on, else error).")]
ExitZeroOpt = Annotated[bool, typer.Option(
    "--exit-zero", help="Exit 0 even when findings fail the gate (a log that cannot be read is still 2).")]
SelectOpt = Annotated[list[str] | None, typer.Option(
    "--select", help="Run only these finding kinds (repeatable, or comma-separated; see `losslens "
    "detectors`).")]
IgnoreOpt = Annotated[list[str] | None, typer.Option(
    "--ignore", help="Finding kinds to leave out (repeatable, or comma-separated: spike,plateau).")]
MinSeverityOpt = Annotated[Level | None, typer.Option(
    "--min-severity", help="Show only findings at or above this severity (the gate still judges "
    "every finding).")]
StatisticsOpt = Annotated[bool, typer.Option(
    "--statistics", help="Count the findings by kind instead of listing them.")]
BaselineOpt = Annotated[str | None, typer.Option(
    "--baseline", help="Known findings (a file --write-baseline wrote): they no longer fail the "
    "gate; a new one does.")]
WriteBaselineOpt = Annotated[str | None, typer.Option(
    "--write-baseline", help="Write every finding to this file as the baseline (then judge "
    "against it).")]
AllowPartialOpt = Annotated[bool, typer.Option(
    "--allow-partial", help="Judge a log read short (records lost to a damaged or cut file) on the "
    "records read, instead of exiting 2.")]
ShowSettingsOpt = Annotated[bool, typer.Option(
    "--show-settings", help="Print the settings in effect and where each came from, then exit.")]
ColorOpt = Annotated[Color, typer.Option(
    "--color", help="auto: on terminals only (NO_COLOR and FORCE_COLOR honoured); always; never.")]
MetricOpt = Annotated[list[str] | None, typer.Option(
    "--metric", "-m", help="The column to analyse as the loss (repeatable: the first is the loss, "
    "the others are analysed like it). Default: found by name.")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="Only results and errors: no summaries, "
                                        "progress or notices on stderr.")]
VerboseOpt = Annotated[bool, typer.Option("--verbose", "-v", help="Also each log's verdict, the files "
                                          "a folder walk passed over and the checks that could not run.")]
SkipOpt = Annotated[bool, typer.Option("--skip-unreadable", help="Pass over logs that cannot be read "
                                       "(still named on stderr) instead of exiting 2.")]
JobsOpt = Annotated[int | None, typer.Option(
    "--jobs", "-j", help="Processes that read and analyse logs when there are several (default: "
    "the CPU count); the output keeps the order of the logs.")]
AllOpt = Annotated[bool, typer.Option("--all", help="List every finding (many of one kind are "
                                      "otherwise grouped: the worst few and a count).")]
Logs = Annotated[list[str] | None, typer.Argument(
    help="Log files, globs or run folders ('-' reads standard input; .gz is read transparently).",
    metavar="LOG...", show_default=False)]


class Terminated(Exception):
    """SIGTERM or SIGHUP, raised where the program is, so that it ends like Ctrl-C: with its
    summary, its worker processes stopped (``code``: 143 or 129)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.code = ExitCode.HANGUP if signum == signal.SIGHUP else ExitCode.TERMINATED


def _on_signal(signum: int, frame: Any) -> None:
    raise Terminated(signum)


@contextmanager
def supervised() -> Iterator[None]:
    """SIGTERM and SIGHUP, as a supervisor or a closed terminal sends them to this process, end
    the command as Ctrl-C does (``Terminated``); the handlers before are restored after."""
    previous = {sig: signal.signal(sig, _on_signal) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _stopped(exc: BaseException) -> ExitCode:
    """The exit code of a command stopped by Ctrl-C (130), SIGTERM (143) or SIGHUP (129)."""
    return exc.code if isinstance(exc, Terminated) else ExitCode.INTERRUPTED


@contextmanager
def user_errors() -> Iterator[None]:
    """Library errors become one line on stderr and exit code 2 — never a traceback."""
    try:
        yield
    except LossLensError as exc:
        err.print(f"losslens: error: {exc}", markup=False)
        raise typer.Exit(ExitCode.ERROR) from None
    except BrokenPipeError:
        # the reader of stdout went away (`| head -1`): end quietly, as `yes | head -1` does
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        raise typer.Exit(ExitCode.BROKEN_PIPE) from None
    except OSError as exc:  # an output file that could not be written after all, a full disk
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else "cannot write the output: "
        err.print(f"losslens: error: {where}{exc.strerror or exc}", markup=False)
        raise typer.Exit(ExitCode.ERROR) from None


def _writable(*paths: str | None) -> None:
    """Output files are checked before the work starts: a bad path costs one line, not a run."""
    for path in paths:
        if not path:
            continue
        folder = os.path.dirname(os.path.abspath(path))
        if os.path.isdir(path):
            raise UsageError(f"cannot write {path}: it is a folder")
        if not os.path.isdir(folder):
            raise UsageError(f"cannot write {path}: no folder {folder}")
        if not os.access(folder, os.W_OK):
            raise UsageError(f"cannot write {path}: the folder {folder} is not writable")


def _severity(value: Level | str | None) -> Severity | None:
    """An option's severity; None when it was not given (never a falsy INFO)."""
    if value is None:
        return None
    try:
        return Severity.parse(value.value if isinstance(value, Level) else value)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _output(output_format: OutputFormat | None, json: bool) -> OutputFormat:
    if json and output_format not in (None, OutputFormat.json):
        raise UsageError(f"--json and --output-format {output_format.value} disagree: pass one")
    return OutputFormat.json if json else (output_format or OutputFormat.text)


def _options(config: str | None, format: Any, ignore: list[str] | None, metric: list[str] | None,
             quiet: bool = False, verbose: bool = False, skip_unreadable: bool = False,
             jobs: int | None = 1, select: list[str] | None = None) -> Options:
    from losslens.runner import Options

    return Options.make(config, format, ignore, metric,
                        quiet, verbose, skip_unreadable, jobs, select)


def _gate(run: Options, fail_on: Level | None, *, default: bool = True, exit_zero: bool = False,
          allow_partial: bool = False, baseline: str | None = None) -> Gate:
    """The gate a command judges with: ``--fail-on``, else (``default``) the config's fail_on
    (analyze fails nothing unless --fail-on is given)."""
    from losslens.baseline import Baseline
    from losslens.findings import Gate

    level = _severity(fail_on)
    if level is None and default:
        level = Severity.parse(run.settings.fail_on)
    return Gate(level, bool(run.metrics), allow_partial, run.skip_unreadable, exit_zero,
                Baseline.load(baseline) if baseline is not None else None)


def _show_settings(run: Options, format: Any, fail_on: Level | None, select: list[str] | None,
                   ignore: list[str] | None, metric: list[str] | None, **more: Any) -> None:
    """--show-settings: every setting in effect and where it came from (ruff's habit), then exit
    0. The options given on the command line are named by their settings key."""
    from losslens.config import effective

    given = {"format": format, "fail_on": _value(fail_on),
             "select": select, "ignore": ignore, "metric": metric, **more}
    rows = effective(run.settings, {k: v for k, v in given.items() if v is not None})
    width = max(len(k) for k, _, _ in rows)
    text = "".join(f"{k:<{width}} = {_toml(v)}  # {where}\n" for k, v, where in rows)
    print(text, end="", flush=True)
    raise typer.Exit(ExitCode.OK)


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return repr(value)


def _named_logs(logs: list[str] | None) -> list[str]:
    if not logs:
        raise UsageError("name at least one log, glob or run folder ('-' reads standard input)")
    return logs


def _results(logs: list[str], run: Options, walk: Walk) -> Iterator[Result]:
    """Each log read and analysed in turn (``runner.results``); one that cannot be read is one
    line on stderr, or with --skip-unreadable a line that says it was skipped."""
    # polars, numpy and the detectors load here, not at start-up (`--help` stays fast)
    from losslens import progress, runner

    with _progress_bar(run) as listener, progress.listening(listener):
        for r in runner.results(walk, run, logs):
            if r.skipped:
                if not run.quiet:
                    err.print(f"losslens: skipped: {r.error}", markup=False)
                continue
            if r.error is not None:
                hint = ("" if r.explicit or r.usage
                        else " (--skip-unreadable passes over logs that cannot be read)")
                err.print(f"losslens: error: {r.error}{hint}", markup=False)
            yield r
    from losslens.discover import LINKED_OUT

    for path, why in walk.ignored:  # a link out of the folder is named always: skipped, never unseen
        if run.verbose or (why == LINKED_OUT and not run.quiet):
            err.print(f"losslens: passed over {path}: {why}", markup=False)


@contextmanager
def _progress_bar(run: Options) -> Iterator[Any]:
    """A transient bar on stderr for a log over 50 MB and for detectors over 1M records (terminals
    only, never with --quiet); it appears only once such work starts."""
    if run.quiet or not err.is_terminal:
        yield None
        return
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[detail]}"),
                   TimeElapsedColumn(), console=err, transient=True)
    tasks: dict[str, Any] = {}
    started = time.monotonic()

    def listen(phase: str, done: int, total: int | None) -> None:
        reading = phase.startswith("reading ")
        if phase not in tasks:
            if reading and (total is None or total < 50 << 20):
                return
            if not tasks:
                bar.start()
            tasks[phase] = bar.add_task(phase, total=total, detail="")
        rate = done / max(1e-6, time.monotonic() - started)
        detail = (f"{done / 1e6:,.0f} of {(total or 0) / 1e6:,.0f} MB, {rate / 1e6:,.0f} MB/s" if reading
                  else f"{done} of {total} detectors")
        bar.update(tasks[phase], completed=done, detail=detail)

    try:
        yield listen
    finally:
        if tasks:
            bar.stop()


class Printer:
    """Where a command's report goes: standard output, or the --output-file. A string is written
    as it is (it carries its line ends); a rich renderable through a console, without the spaces
    that pad a table's lines where no terminal shows them. Once the reader of standard output has
    gone (`| head -1`), the rest is dropped: the command still ends with its verdict."""

    def __init__(self, path: str | None = None):
        self.path = path
        self.file: Any = open(path, "w", encoding="utf-8") if path else None  # noqa: SIM115
        self.gone = False

    def __call__(self, output: Any) -> None:
        if output is None or self.gone:
            return
        if not isinstance(output, str):
            output = _rendered(output, out if self.file is None else None)
        try:
            if self.file is not None:
                self.file.write(output)
            else:
                sys.stdout.write(output)
                sys.stdout.flush()
        except BrokenPipeError:
            self.gone = True
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())

    def close(self) -> None:
        if self.file is not None:
            self.file.close()


def _rendered(renderable: Any, console: Console | None) -> str:
    """A renderable as text: as a terminal shows it (colour and all) on a terminal, else plain,
    each line without its trailing spaces."""
    if console is not None and console.is_terminal:
        with console.capture() as cap:
            console.print(renderable, crop=False)
        return cap.get()
    plain = Console(width=out.width, no_color=True, color_system=None, emoji=False, soft_wrap=False,
                    highlight=False, force_terminal=False, file=io.StringIO())
    with plain.capture() as cap:
        plain.print(renderable, crop=False)
    return "".join(line.rstrip() + "\n" for line in cap.get().splitlines())


def _reporter(fmt: OutputFormat, markdown: bool = False) -> Any:
    from losslens.reporters.registry import REPORTERS

    return REPORTERS["markdown" if markdown and fmt is OutputFormat.text else fmt.value]


@dataclass
class Verdicts:
    """What the logs of one command came to: each log's judgement, findings by kind (for
    --statistics and the closing line) and the reports (for --write-baseline)."""

    gate: Gate
    judgements: list[tuple[Result, Judgement]] = field(default_factory=list)

    def add(self, r: Result) -> Judgement:
        j = self.gate.judge(r.report, r.error)
        self.judgements.append((r, j))
        return j

    @property
    def code(self) -> ExitCode:
        return self.gate.exit_code(j for _, j in self.judgements)

    def statistics(self) -> list[tuple[str, int, Severity, int]]:
        """(kind, findings, worst severity, logs), most findings first."""
        by: dict[str, list] = {}
        for r, _ in self.judgements:
            for f in r.report.findings if r.report is not None else ():
                n, worst, logs = by.get(f.kind, (0, f.severity, set()))
                by[f.kind] = [n + 1, max(worst, f.severity), logs | {r.source}]
        return sorted(((k, n, w, len(logs)) for k, (n, w, logs) in by.items()),
                      key=lambda x: (-x[1], x[0]))

    def closing(self, walk: Walk, stopped: ExitCode | None = None) -> str:
        """The one line a run over several logs ends with: counts, findings by severity, why
        it exits as it does (``stopped``: the code of a run stopped by a signal)."""
        words = {w: sum(j.word is w for _, j in self.judgements) for w in Word}
        severities = [f.severity for r, _ in self.judgements if r.report is not None
                      for f in r.report.findings]
        counts = ", ".join(f"{severities.count(s)} {s}" for s in (Severity.ERROR, Severity.WARNING,
                                                                   Severity.INFO))
        code = self.code
        reason = {ExitCode.OK: "ok", ExitCode.FINDINGS: f"FAIL: a finding at or above {self.gate.describe()}",
                  ExitCode.ERROR: "ERROR: a log could not be judged"}[code]
        if code is ExitCode.OK and words[Word.FAIL]:
            reason = "ok (--exit-zero)"
        if stopped is not None:
            reason = f"stopped after {len(self.judgements)} of {len(walk.targets)}"
            code = stopped
        passed = f"; {len(walk.ignored)} passed over (--verbose lists them)" if walk.ignored else ""
        n = len(self.judgements)
        return (f"{n} log{'s' if n != 1 else ''}: {words[Word.OK]} ok, {words[Word.FAIL]} FAIL, "
                f"{words[Word.ERROR]} ERROR{passed}; findings: {counts}; exit {int(code)} ({reason})")


def _statistics(verdicts: Verdicts, fmt: OutputFormat) -> str:
    """--statistics: one line per finding kind (ruff's layout), or one JSON object per kind."""
    rows = verdicts.statistics()
    if fmt is OutputFormat.json:
        from losslens.reporters.jsonl import dumps

        return "".join(dumps({"kind": k, "count": n, "worst": str(w), "logs": logs}) + "\n"
                       for k, n, w, logs in rows)
    width = max((len(f"{n}") for _, n, _, _ in rows), default=1)
    return "".join(f"{n:>{width}}  {k:<16} worst {w!s:<8} in {logs} log(s)\n" for k, n, w, logs in rows)


def _shown(r: Result, floor: Severity | None) -> Result:
    """The result as it is shown: findings below --min-severity left out (the gate judged them)."""
    if floor is None or r.report is None:
        return r
    report = dataclasses.replace(r.report, findings=[f for f in r.report.findings if f.severity >= floor])
    return dataclasses.replace(r, report=report)


def _judge_logs(command: str, logs: list[str], walk: Walk, run: Options, gate: Gate, fmt: OutputFormat,
                printer: Printer, *, show_all: bool, markdown: bool = False,
                min_severity: Severity | None = None, statistics: bool = False,
                write_baseline: str | None = None, each: Any = None,
                same_data: bool = False) -> tuple[Verdicts, list[Result]]:
    """Read, analyse, judge and report every log that ``logs`` name (check's and analyze's
    shared course). ``each(result, judgement)``: what the command says of a log on stderr."""
    from losslens.reporters.base import Context

    if statistics and fmt not in (OutputFormat.text, OutputFormat.json):
        raise UsageError("--statistics prints text or json (--output-format text|json)")
    found: Iterator[Result] = _results(logs, run, walk)
    if same_data:
        from losslens.runner import same_data as shared

        found = shared(found)
    if write_baseline is not None:  # every report first: the logs are judged against it
        from losslens.baseline import Baseline

        every = list(found)
        base = Baseline.of(write_baseline, [r.report for r in every if r.report is not None])
        base.write()
        gate = dataclasses.replace(gate, baseline=base)
        if not run.quiet:
            err.print(f"losslens: wrote {write_baseline} ({base.count()} finding(s) of "
                      f"{len(base.logs)} log(s))", markup=False)
        found = iter(every)
    verdicts = Verdicts(gate)
    reporter = _reporter(fmt, markdown)
    ctx = Context(command, out.width, show_all, run.verbose, gate)
    shown: list[Result] = []
    try:
        with supervised():
            for r in found:
                judgement = verdicts.add(r)
                s = _shown(r, min_severity)
                shown.append(s)
                if not statistics:
                    printer(reporter.log(s, ctx))
                if each is not None:
                    each(r, judgement, gate)
    except (KeyboardInterrupt, Terminated) as exc:
        if isinstance(found, Generator):
            found.close()  # the worker processes are stopped now, not at the interpreter's end
        if not run.quiet:
            err.print(f"interrupted: {verdicts.closing(walk, _stopped(exc))}", markup=False)
        raise typer.Exit(_stopped(exc)) from None
    printer(_statistics(verdicts, fmt) if statistics else reporter.close(shown, ctx))
    if walk.several and not run.quiet:
        err.print(verdicts.closing(walk), markup=False)
    return verdicts, shown


@app.command()
def analyze(
    logs: Logs = None,
    format: FormatOpt = None,
    output_format: OutputOpt = None,
    json: JsonOpt = False,
    output_file: OutputFileOpt = None,
    fail_on: FailOnOpt = None,
    exit_zero: ExitZeroOpt = False,
    select: SelectOpt = None,
    ignore: IgnoreOpt = None,
    metric: MetricOpt = None,
    config: ConfigOpt = None,
    min_severity: MinSeverityOpt = None,
    statistics: StatisticsOpt = False,
    baseline: BaselineOpt = None,
    write_baseline: WriteBaselineOpt = None,
    pick: Annotated[bool, typer.Option("--pick", help="Of the logs found, report only the one with "
                                       "the most records (a run folder's main log).")] = False,
    html_out: Annotated[str | None, typer.Option("--html", help="Write a self-contained HTML "
                                                 "post-mortem page (several logs: an index page "
                                                 "linking one page per log).")] = None,
    plot: Annotated[str | None, typer.Option("--plot", help="Write the main panels as a PNG "
                                             "(needs the plot extra).")] = None,
    markdown: Annotated[bool, typer.Option("--markdown", help="A short Markdown summary (for CI "
                                           "comments) instead of the terminal report.")] = False,
    same_data: Annotated[bool, typer.Option("--same-data", help="The logs are runs that read the "
                                            "same data in the same order (restarts, optimizer or "
                                            "model-seed sweeps): spikes they share at a step are "
                                            "a bad batch (cause data).")] = False,
    show_all: AllOpt = False,
    skip_unreadable: SkipOpt = False,
    allow_partial: AllowPartialOpt = False,
    jobs: JobsOpt = None,
    show_settings: ShowSettingsOpt = False,
    color: ColorOpt = Color.auto,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Post-mortem report: what was read, and the findings with steps, numbers and a likely cause
    (exit 1 only with --fail-on)."""
    from losslens.reporters import pages
    from losslens.runner import walk

    _consoles(color)
    with user_errors():
        run = _options(config, format, ignore, metric, quiet, verbose, skip_unreadable, jobs, select)
        if show_settings:
            _show_settings(run, format, fail_on, select, ignore, metric)
        logs = _named_logs(logs)
        fmt = _output(output_format, json)
        gate = _gate(run, fail_on, default=False, exit_zero=exit_zero, allow_partial=allow_partial,
                     baseline=baseline)
        _writable(html_out, plot, output_file, write_baseline)
        if plot:
            if not plot.lower().endswith(PLOT_SUFFIXES):
                raise UsageError(f"--plot {plot}: name a .png, .svg or .pdf file")
            _needs("matplotlib", "--plot draws with matplotlib", "plot")
        if pick and same_data:
            raise UsageError("--pick reports one log and --same-data compares several: pass one")
        printer = Printer(output_file)
        try:
            if pick:
                gate, verdicts, results = _picked(logs, run, gate, fmt, printer, show_all, markdown,
                                                  _severity(min_severity))
            else:
                verdicts, results = _judge_logs(
                    "analyze", logs, walk(logs), run, gate, fmt, printer, show_all=show_all,
                    markdown=markdown, min_severity=_severity(min_severity), statistics=statistics,
                    write_baseline=write_baseline, same_data=same_data)
        finally:
            printer.close()
        for r, j in verdicts.judgements:
            if j.why is not None and r.report is not None:
                err.print(f"losslens: error: {j.why}", markup=False)
        for line in pages.write([r for r in results if r.report is not None], html_out, plot):
            if not run.quiet:
                err.print(f"losslens: wrote {line}", markup=False)
    raise typer.Exit(verdicts.code)


def _picked(logs: list[str], run: Options, gate: Gate, fmt: OutputFormat, printer: Printer,
            show_all: bool, markdown: bool, floor: Severity | None) -> tuple[Gate, Verdicts, list[Result]]:
    """analyze --pick: of the logs found, the one with the most records, reported alone."""
    from losslens import runner
    from losslens.reporters.base import Context

    walk = runner.walk(logs)
    results = list(_results(logs, run, walk))
    ok = [r for r in results if r.report is not None]
    if ok:
        results = [max(ok, key=lambda r: int(r.report.steps["count"] or 0) if r.report else 0)]
    verdicts = Verdicts(gate)
    reporter, ctx = _reporter(fmt, markdown), Context("analyze", out.width, show_all, run.verbose, gate)
    shown = []
    for r in results:
        verdicts.add(r)
        shown.append(_shown(r, floor))
        printer(reporter.log(shown[-1], ctx))
    printer(reporter.close(shown, ctx))
    return gate, verdicts, shown


def _value(level: Level | None) -> str | None:
    return None if level is None else level.value


@app.command()
def check(
    logs: Logs = None,
    format: FormatOpt = None,
    output_format: OutputOpt = None,
    json: JsonOpt = False,
    output_file: OutputFileOpt = None,
    fail_on: FailOnOpt = None,
    exit_zero: ExitZeroOpt = False,
    select: SelectOpt = None,
    ignore: IgnoreOpt = None,
    metric: MetricOpt = None,
    config: ConfigOpt = None,
    min_severity: MinSeverityOpt = None,
    statistics: StatisticsOpt = False,
    baseline: BaselineOpt = None,
    write_baseline: WriteBaselineOpt = None,
    show_all: AllOpt = False,
    skip_unreadable: SkipOpt = False,
    allow_partial: AllowPartialOpt = False,
    jobs: JobsOpt = None,
    show_settings: ShowSettingsOpt = False,
    color: ColorOpt = Color.auto,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """The gate: one line per finding, a verdict on stderr; exit 0 clean, 1 findings, 2 error
    (a log that cannot be read, read short, or whose loss cannot be found, is never 'ok')."""
    from losslens import runner
    from losslens.runner import unchecked_loss

    _consoles(color)
    with user_errors():
        run = _options(config, format, ignore, metric, quiet, verbose, skip_unreadable, jobs, select)
        if show_settings:
            _show_settings(run, format, fail_on, select, ignore, metric)
        logs = _named_logs(logs)
        fmt = _output(output_format, json)
        gate = _gate(run, fail_on, exit_zero=exit_zero, allow_partial=allow_partial, baseline=baseline)
        _writable(output_file, write_baseline)
        walk = runner.walk(logs)

        def each(r: Result, j: Judgement, gate: Gate) -> None:
            """A log's verdict on stderr: always for one log; for several, those not ok (all of
            them with --verbose)."""
            if j.why is not None and r.report is not None:
                err.print(f"losslens: error: {j.why}", markup=False)
            if (report := r.report) is None or run.quiet or (walk.several and j.word is Word.OK
                                                              and not run.verbose):
                return
            worst = report.worst()
            err.print(f"{report.source}: {len(report.findings)} finding(s)"
                      f"{f', worst {worst}' if worst is not None else ''}; "
                      f"{report.steps['count']} records; {j.word} ({gate.describe()})", markup=False)
            for note in report.read_errors if j.why is None else ():  # judged on part of it
                err.print(f"{report.source}: note: {note}", markup=False)
            if (thin := unchecked_loss(r, run.settings.registry())) is not None:
                err.print(f"{report.source}: note: {thin}", markup=False)
            if run.verbose:
                for line in _could_not_check(report):
                    err.print(f"{report.source}: {line}", markup=False)

        printer = Printer(output_file)
        try:
            verdicts, _ = _judge_logs("check", logs, walk, run, gate, fmt, printer, show_all=show_all,
                                      min_severity=_severity(min_severity), statistics=statistics,
                                      write_baseline=write_baseline, each=each)
        finally:
            printer.close()
    raise typer.Exit(verdicts.code)


def _could_not_check(report: Report) -> list[str]:
    """The checks that could not run, each once (with its segment where the log has several)."""
    seen: dict[str, None] = {}
    for sk in report.skipped:
        where = f" in segment {sk.segment}" if report.segments > 1 else ""
        seen.setdefault(f"could not check {sk.detector} on {sk.metric}{where}: {sk.reason}")
    return list(seen)


class WatchFormat(StrEnum):
    """watch --output-format: a live view, or one JSON object per alert event."""
    text = "text"
    json = "json"


@app.command()
def watch(
    log: Annotated[str, typer.Argument(help="The log to follow ('-' reads standard input; a run "
                                       "folder: the log in it with the most records).",
                                       metavar="LOG|-")],
    format: FormatOpt = None,
    output_format: Annotated[WatchFormat | None, typer.Option(
        "--output-format", help="text (a live view) or json (one object per alert event).")] = None,
    json: Annotated[bool, typer.Option("--json", help="Same as --output-format json.")] = False,
    exit_on: Annotated[Level | None, typer.Option(
        "--exit-on", help="Exit 1 at the first announced finding at or above this severity "
        "(default: [watch] exit_on in the config; else follow until stopped).")] = None,
    fail_on: Annotated[Level | None, typer.Option(
        "--fail-on", help="At the end (end of stdin), exit 1 if a finding at or above this severity "
        "was announced (default: the config's fail_on, else error).")] = None,
    wait: Annotated[bool, typer.Option(
        "--wait", "-F", help="Wait for a log that is not there yet, as `tail -F` (without it, a "
        "missing log is an error at once).")] = False,
    tail: Annotated[int | None, typer.Option(
        "--tail", "-n", min=0, help="Start at the last N lines of the file there now (as `tail -n`); "
        "the lines before are counted, not read. Default: the whole file.")] = None,
    from_end: Annotated[bool, typer.Option(
        "--from-end", help="Start at the end of the file there now (same as --tail 0).")] = False,
    select: SelectOpt = None,
    ignore: IgnoreOpt = None,
    metric: MetricOpt = None,
    config: ConfigOpt = None,
    show_settings: ShowSettingsOpt = False,
    color: ColorOpt = Color.auto,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Follow a live log (tail -F: survives rotation and truncation; --wait waits for it) and alert."""
    from losslens.reporters import live
    from losslens.watch import Verdict, Watcher, follow, followable

    _consoles(color)
    with user_errors():
        run = _options(config, format, ignore, metric, quiet, verbose, select=select)
        if show_settings:
            _show_settings(run, format, fail_on, select, ignore, metric, **{"watch.exit_on": _value(exit_on)})
        fmt = WatchFormat.json if json else (output_format or WatchFormat.text)
        if json and output_format is WatchFormat.text:
            raise UsageError("--json and --output-format text disagree: pass one")
        w = run.settings.watch
        exit_at = _severity(exit_on)
        if exit_at is None:
            exit_at = _severity(w["exit_on"] or None)
        gate = _gate(run, fail_on)
        if log != "-" and os.path.isdir(log):
            log = _folder_log(log, run)
        start = 0 if from_end else tail
        followable(log, run.fmt, start, wait)
        watcher = Watcher("<stdin>" if log == "-" else log, run.format,
                          run.settings.registry(), run.ignore, window=w["window"],
                          confirm=w["confirm"], cooldown_s=w["cooldown_s"], metrics=run.metrics)
        view = live.View(watcher, json=fmt is WatchFormat.json, console=out, err=err, quiet=run.quiet)
    verdict = Verdict(exit_at, gate, watcher.source)
    try:
        with supervised(), user_errors():
            with closing(follow(log, watcher, w["interval_s"], w["confirm"], start)) as analyses:
                for events in analyses:
                    view.show(events)
                    view.notes()
                    _stdout_gone()
                    if verdict.see(events):
                        break
    except (KeyboardInterrupt, Terminated) as exc:
        watcher.finish_input()  # the lines still waiting for their format: read, so all are accounted
        view.summary(interrupted=True)
        raise typer.Exit(_stopped(exc)) from None
    watcher.finish_input()
    view.summary(interrupted=False)
    final = verdict.final(watcher.report, watcher.acc.total)
    if final.why is not None:
        err.print(f"losslens: error: {final.why}", markup=False)
    raise typer.Exit(verdict.gate.exit_code([final]))


def _stdout_gone() -> None:
    """BrokenPipeError when the reader of stdout has gone (`watch --json LOG | head -1`): a
    follower that is idle writes nothing, so it would never find out otherwise."""
    import select

    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        events = poller.poll(0)
    except (OSError, ValueError, AttributeError):  # not a real file (tests), or no poll here
        return
    if any(ev & select.POLLERR for _, ev in events):
        raise BrokenPipeError()


def _folder_log(folder: str, run: Options) -> str:
    """watch DIR: the log the folder walk would pick (the one with the most records), said on
    stderr; a folder with none is a UsageError."""
    from losslens.discover import main_log

    path, candidates = main_log(folder, run.format)
    if not run.quiet:
        err.print(f"losslens: watching {path} (of {candidates} log(s) in {folder}: the one with the most "
                  "records)", markup=False)
    return path


PLOT_SUFFIXES = (".png", ".svg", ".pdf")
SEED_BOUNDS = "0,770,1216,1728,2432,3296,8193"  # replay.request.SEED_BOUNDS (kept literal: --help)


def _needs(module: str, what: str, extra: str) -> None:
    """A missing optional extra is one line (what needs it, how to install it) and exit 2."""
    import importlib.util

    if importlib.util.find_spec(module) is None:  # (also None when sys.modules holds None for it)
        hint = (" (the CPU build: install torch first from PyTorch's CPU wheel index, see README)"
                if extra == "replay" else "")
        raise MissingExtra(f"{what}, which is not installed: pip install 'losslens[{extra}]'{hint}")


@app.command()
def replay(
    lengths: Annotated[str | None, typer.Option(
        "--lengths", help="Per-sample lengths: .npy, text (one per line), Parquet/Arrow/CSV column, or a HF "
        "save_to_disk folder.")] = None,
    batches: Annotated[str | None, typer.Option(
        "--batches", help="What the run fed, recorded per optimizer step (.jsonl {\"step\", \"lengths\"}, "
        "or a step,length .csv/.parquet/.npz): with --log, the exact answer, no sampler replayed "
        "(see README).")] = None,
    bounds: Annotated[str, typer.Option("--bounds", help="Bucket edges, exclusive upper bounds: "
                                        "bucket k holds b_k <= length < b_k+1.")] = SEED_BOUNDS,
    token_budget: Annotated[int, typer.Option("--token-budget", help="Tokens per batch (the batch size of "
                                              "a bucket is the budget over its bound; fairseq: "
                                              "--max-tokens).")] = 49152,
    max_batch_size: Annotated[int, typer.Option("--max-batch-size", help="Most samples in a batch (fairseq: "
                                                "its --batch-size, max_sentences).")] = 64,
    per_device_batch: Annotated[int | None, typer.Option(
        "--per-device-batch", help="Samples per micro-batch of the fixed-count samplers (hf-*, "
        "torch-distributed: per_device_train_batch_size); default --max-batch-size.")] = None,
    batch_multiple: Annotated[int, typer.Option(
        "--batch-multiple", help="fairseq's --required-batch-size-multiple.")] = 8,
    lhotse_buckets: Annotated[int, typer.Option(
        "--lhotse-buckets", help="Lhotse's num_buckets (bins of equal total length).")] = 10,
    lhotse_buffer: Annotated[int, typer.Option("--lhotse-buffer", help="Lhotse's buffer_size.")] = 20_000,
    bucket_shuffle: Annotated[bool, typer.Option(
        "--bucket-shuffle", help="Lhotse's shuffle=True: the order inside a bucket is random.")] = False,
    loader_draws: Annotated[int, typer.Option(
        "--loader-draws", help="hf-group-by-length: draws torch's DataLoader makes from the global "
        "generator before each epoch's permutation (1: the HF Trainer; 0: the sampler iterated "
        "alone).")] = 1,
    max_seq_len: Annotated[int, typer.Option("--max-seq-len", help="Longer samples are counted truncated "
                                             "to this.")] = 8192,
    bs_from: Annotated[BsFrom, typer.Option("--bs-from", help="Batch size per bucket from budget // "
                                            "exclusive bound ('bound', 49152//8193=5) or // (bound-1) "
                                            "('max', 49152//8192=6).")] = BsFrom.bound,
    strategy: Annotated[Strategy, typer.Option(  # type: ignore[valid-type]
        "--strategy", help="The batching strategy to replay (see README: what each one "
        "emulates).")] = DEFAULT_STRATEGY,
    seed: Annotated[int, typer.Option("--seed", help="The strategy's random seed.")] = 0,
    epochs: Annotated[int, typer.Option("--epochs", help="Epochs replayed (each reshuffled with seed + "
                                        "epoch).")] = 1,
    grad_accum: Annotated[int, typer.Option("--grad-accum", help="Batches per optimizer step and rank.")] = 1,
    world_size: Annotated[int, typer.Option("--world-size", help="Data-parallel ranks (batch j "
                                            "goes to rank j mod W).")] = 1,
    column: Annotated[str, typer.Option("--column", help="The length column of a table or "
                                        "dataset.")] = "seq_len",
    log: Annotated[str | None, typer.Option("--log", help="Correlate the loss of this log with "
                                            "the replayed batch composition.")] = None,
    step_offset: Annotated[int | None, typer.Option(
        "--step-offset", help="Logged step of replayed step 0 (default: 1 for the HF Trainer's logs, "
        "which count from 1; else 0).")] = None,
    allow_misalignment: Annotated[bool, typer.Option(
        "--allow-misalignment", help="Correlate even when the log's steps (per epoch, or in all) do not "
        "match the replay's; the report then carries the mismatch as a warning.")] = False,
    order_free: Annotated[bool, typer.Option(
        "--order-free", help="With --log: the run's order is unknown; test the loss's bands and period "
        "against what the strategy predicts from the lengths and parameters alone.")] = False,
    logged_loss: Annotated[LoggedLoss, typer.Option(
        "--logged-loss", help="Each logged loss is the mean over the logging interval (HF Trainer, "
        "Megatron, fairseq) or the logged step's own (last: nanoGPT-style prints).")] = LoggedLoss.mean,
    null_seeds: Annotated[int, typer.Option("--null-seeds", help="Seeds for the Monte-Carlo p-value.")] = 99,
    compare: Annotated[bool, typer.Option("--compare", help="Run every strategy on the same "
                                          "lengths.")] = False,
    optimize_bounds: Annotated[int | None, typer.Option(
        "--optimize-bounds", metavar="K", help="Find K bucket bounds maximising padding efficiency.")] = None,
    device: Annotated[Device, typer.Option("--device", help="Where torch runs (auto: CUDA when "
                                           "present).")] = Device.auto,
    out_file: Annotated[str | None, typer.Option("--out", help="Per-batch table (.parquet or .csv).")] = None,
    steps_out: Annotated[str | None, typer.Option("--steps-out", help="Per-optimizer-step table "
                                                  "(.parquet or .csv).")] = None,
    html_out: Annotated[str | None, typer.Option(
        "--html", help="With --log: the post-mortem page, the replayed bucket of each step under the "
        "loss.")] = None,
    json: JsonOpt = False,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Rebuild the batch/bucket sequence a batching strategy fed the model; correlate, compare."""
    with user_errors():
        from losslens.replay.request import ReplayRequest, parse_bounds

        if quiet and verbose:
            raise UsageError("--quiet and --verbose disagree: pass one")
        request = ReplayRequest(
            lengths=lengths, batches=batches, column=column, bounds=parse_bounds(bounds),
            token_budget=token_budget,
            max_batch_size=max_batch_size, max_seq_len=max_seq_len, bs_from=str(bs_from),
            strategy=strategy.value if isinstance(strategy, Enum) else str(strategy), seed=seed,
            epochs=epochs, grad_accum=grad_accum, world_size=world_size,
            per_device_batch=per_device_batch, batch_multiple=batch_multiple, lhotse_buckets=lhotse_buckets,
            lhotse_buffer=lhotse_buffer, bucket_shuffle=bucket_shuffle, loader_draws=loader_draws, log=log,
            step_offset=step_offset, allow_misalignment=allow_misalignment,
            logged_loss=str(logged_loss.value), order_free=order_free, null_seeds=null_seeds,
            compare=compare,
            optimize_bounds=optimize_bounds, device=str(device), page=html_out is not None)
        _writable(out_file, steps_out, html_out)
        if batches is not None and (out_file or steps_out):
            raise UsageError("--out and --steps-out write the batches rebuilt from --lengths; with "
                             "--batches the run's own record is the table")
        if batches is None:
            _needs("torch", "replay rebuilds batches with torch", "replay")
        from rich.progress import Progress

        from losslens.replay.request import run
        from losslens.reporters import replay_view

        with Progress(console=err, transient=True, disable=json or quiet or not err.is_terminal) as bar:
            phases: dict[str, object] = {}

            def progress(phase: str, done: int, total: int) -> None:
                if phase not in phases:
                    phases[phase] = bar.add_task(phase, total=total)
                bar.update(phases[phase], completed=done)  # type: ignore[arg-type]

            result = run(request, progress)
        if html_out and result.analysed is not None:
            from losslens.reporters import html

            with open(html_out, "w", encoding="utf-8") as f:
                f.write(html.replay_page(result))
            if not quiet:
                err.print(f"losslens: wrote {html_out}", markup=False)
        if out_file:
            _write_frame(result.batches(), out_file)
        if steps_out:
            _write_frame(result.steps(), steps_out)
        if json:
            from losslens.reporters import jsonl

            print(jsonl.dumps(result.summary))
        else:
            Printer()(replay_view.render(result.summary, out.width))


def _write_frame(frame, path: str) -> None:
    frame.write_parquet(path) if path.endswith(".parquet") else frame.write_csv(path)


@app.command()
def scan(
    roots: Annotated[list[str] | None, typer.Argument(
        help="Folders of run folders (each run's logs below it), or URLs (s3://, gs://, file://) with "
        "fsspec's backend installed.", metavar="ROOT...", show_default=False)] = None,
    out_path: Annotated[str, typer.Option("--out", help="The table, a row per log and per finding "
                                          "(.parquet; a .csv twin beside it; the state in "
                                          "NAME.scan-state.jsonl).")] = "findings.parquet",
    since: Annotated[str | None, typer.Option("--since", help="Only logs modified in this last "
                                              "while: 7d, 12h, 30m, 2w.")] = None,
    fail_on: FailOnOpt = None,
    exit_zero: ExitZeroOpt = False,
    dask: Annotated[str | None, typer.Option("--dask", help="Run on a Dask cluster: a scheduler "
                                             "address (tcp://host:8786), or 'local' for a local "
                                             "cluster of --jobs workers (needs the fleet extra).")] = None,
    same_data: Annotated[bool, typer.Option(
        "--same-data", help="Runs in sibling folders (a sweep's: sweep/a, sweep/b) read the same "
        "data in the same order: the spikes they share at a step are a bad batch (cause data).")] = False,
    rescan: Annotated[bool, typer.Option("--rescan", help="Read every log again, whatever the state "
                                         "file says.")] = False,
    format: FormatOpt = None,
    select: SelectOpt = None,
    ignore: IgnoreOpt = None,
    metric: MetricOpt = None,
    config: ConfigOpt = None,
    baseline: BaselineOpt = None,
    skip_unreadable: Annotated[bool, typer.Option("--skip-unreadable", help="Logs that cannot be read "
                                                  "stay rows with their error but do not make the "
                                                  "exit code 2.")] = False,
    allow_partial: AllowPartialOpt = False,
    jobs: JobsOpt = None,
    output_format: OutputOpt = None,
    json: Annotated[bool, typer.Option("--json", help="The summary as one JSON object on stdout (the "
                                       "rows are in the table); same as --output-format json.")] = False,
    output_file: OutputFileOpt = None,
    show_settings: ShowSettingsOpt = False,
    color: ColorOpt = Color.auto,
    quiet: QuietOpt = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="List every log that could not be "
                                          "read (the summary shows the first 5).")] = False,
) -> None:
    """A fleet of run folders -> one table of logs and findings (Parquet and CSV), with an exit
    code like check's; a re-run reads only the logs that changed (or were not finished)."""
    from losslens import scan as fleet
    from losslens.reporters import scan_view

    _consoles(color)
    with user_errors():
        run = _options(config, format, ignore, metric, quiet, verbose, skip_unreadable, jobs, select)
        if show_settings:
            _show_settings(run, format, fail_on, select, ignore, metric)
        if not roots:
            raise UsageError("name at least one folder of runs (or a URL)")
        fmt = _output(output_format, json)
        gate = _gate(run, fail_on, exit_zero=exit_zero, allow_partial=allow_partial, baseline=baseline)
        where = fleet.outputs(out_path)
        os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)  # (a nightly job's folder)
        _writable(*(str(p) for p in where.values()), output_file)
        if dask is not None:
            _needs("distributed", "--dask runs on a Dask cluster", "fleet")
        progress = _scan_progress(run)
        try:
            with supervised():
                result = fleet.scan(roots, run, out_path, gate, fleet.parse_since(since), dask, rescan,
                                    on_row=progress, same_data=same_data)
        except (KeyboardInterrupt, Terminated) as exc:
            err.print(f"losslens: interrupted: the logs scanned so far are kept in {where['state']}; "
                      "the same command goes on from there", markup=False)
            raise typer.Exit(_stopped(exc)) from None
        printer = Printer(output_file)
        try:
            if fmt is OutputFormat.json:
                from losslens.reporters.jsonl import dumps

                printer(dumps(scan_view.summary(result)) + "\n")
            elif fmt is OutputFormat.text:
                if not run.quiet or output_file:
                    printer(scan_view.render(result, run.verbose))
            else:
                from losslens.reporters.base import Context

                reporter, ctx = _reporter(fmt), Context("scan", out.width, False, run.verbose, gate)
                found = fleet.outcomes(result)
                for o in found:
                    printer(reporter.log(o, ctx))
                printer(reporter.close(found, ctx))
        finally:
            printer.close()
    raise typer.Exit(result.exit_code)


def _scan_progress(run: Options) -> Any:
    """A line on stderr every few seconds (terminals only, never with --quiet)."""
    if run.quiet or not err.is_terminal:
        return None
    state = {"n": 0, "at": time.monotonic()}

    def tick(entry: Any, rows: Any, reused: bool) -> None:
        state["n"] += 1
        if time.monotonic() - state["at"] >= 5:
            state["at"] = time.monotonic()
            err.print(f"losslens: scanned {state['n']:,} logs", markup=False)

    return tick


@app.command()
def formats() -> None:
    """List the log formats losslens reads, with one example line each."""
    from rich.table import Table

    from losslens.logs.registry import FORMATS

    table = Table(show_lines=False)
    table.add_column("--format")
    table.add_column("what")
    table.add_column("example line", overflow="fold")
    for f in FORMATS:  # Text: a '[titan]' in an example is not rich markup
        table.add_row(Text(f.name), Text(f.title), Text(f.example))
    out.print(table)


@app.command()
def detectors(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Also each detector's parameters "
                                          "and defaults (settable under [detectors.KIND]).")] = False,
) -> None:
    """List the detectors (finding kinds) that analyze and check run."""
    from rich.table import Table

    from losslens.detectors import REGISTRY

    if not REGISTRY:
        out.print("no detectors registered yet: analyze and check report what was read")
        return
    table = Table()
    for col in ("kind", "metrics", "what it finds") + (("parameters",) if verbose else ()):
        table.add_column(col, overflow="fold")
    params = {}
    if verbose:
        from losslens.config import detector_parameters

        params = detector_parameters()
    for d in REGISTRY:
        row = [Text(d.name), Text(", ".join(d.metrics)), Text(d.title)]
        if verbose:
            row.append(Text(", ".join(f"{k}={v!r}" for k, v in params[d.name].items())))
        table.add_row(*row)
    out.print(table)


def _version(value: bool) -> None:
    if value:
        print(f"losslens {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    version: Annotated[bool, typer.Option("--version", "-V", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """Read training logs and say, with evidence, when the run is sick."""


def _only_the_command_named(argv: list[str]) -> None:
    """Keep only the command named on the line: typer builds every registered command's
    parameters from its signature at each start (19 ms of the gate's start-up for six commands
    unused). --help, a mistyped name and shell completion keep them all."""
    if any(k.endswith("_COMPLETE") for k in os.environ):
        return
    named = next((a for a in argv[1:] if not a.startswith("-")), None)
    by_name = {c.name or (c.callback.__name__ if c.callback else ""): c for c in app.registered_commands}
    if named in by_name:
        app.registered_commands = [by_name[named]]


def main() -> None:
    """The `losslens` entry point: Ctrl-C is exit 130, a closed stdout exit 141, never a traceback."""
    _only_the_command_named(sys.argv)
    for stream in (sys.stdout, sys.stderr):  # text no encoding can write (a lone surrogate) escaped
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    try:
        app()
    except KeyboardInterrupt:
        err.print("interrupted", markup=False)
        sys.exit(ExitCode.INTERRUPTED)
    except BrokenPipeError:
        # the reader of stdout went away (`| head -1`): end quietly, as `yes | head -1` does
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(ExitCode.BROKEN_PIPE)
    except OSError as exc:  # the output cannot be written (a full disk, /dev/full): one line, exit 2
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # (what is still buffered is dropped, not raised again)
        sys.stdout = os.fdopen(os.dup(devnull), "w")
        try:
            sys.stderr.write(f"losslens: error: cannot write the output: {exc.strerror or exc}\n")
            sys.stderr.flush()
        except OSError:
            pass
        sys.exit(ExitCode.ERROR)
