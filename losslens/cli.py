"""The command line: parse options → one library call → render → exit. Nothing else lives here."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum, StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from losslens import __version__
from losslens.errors import LossLensError, MissingExtra, UsageError
from losslens.findings import ExitCode, Severity

if TYPE_CHECKING:
    from losslens.findings import Report
    from losslens.logs import LogData

app = typer.Typer(add_completion=True, no_args_is_help=True, rich_markup_mode=None,
                  context_settings={"help_option_names": ["-h", "--help"]},
                  help="Read training logs and say, with evidence, when the run is sick.")
out = Console(soft_wrap=False)
err = Console(stderr=True, highlight=False, soft_wrap=True)

# choices shown by --help; the names are kept here so that --help loads no reader (a test checks
# them against the registries)
FORMAT_NAMES = ("auto", "trainer-state", "json-records", "jsonl", "csv", "hf", "megatron", "fairseq",
                "nanogpt", "modded-nanogpt", "torchtitan", "lightning", "olmo", "mlflow", "kv", "colon",
                "tensorboard")
STRATEGY_NAMES = ("static-sorted", "random", "bucketed-shuffle", "stride-interleave", "hf-group-by-length")


class OutputFormat(StrEnum):
    text = "text"
    json = "json"
    github = "github"
    junit = "junit"
    sarif = "sarif"


class Level(StrEnum):
    info = "info"
    warning = "warning"
    error = "error"


LogFormat = Enum("LogFormat", {n: n for n in FORMAT_NAMES}, type=str)  # type: ignore[misc]
Strategy = Enum("Strategy", {n: n for n in STRATEGY_NAMES}, type=str)  # type: ignore[misc]
DEFAULT_STRATEGY = Strategy("bucketed-shuffle")


class Device(StrEnum):
    auto = "auto"
    cpu = "cpu"
    cuda = "cuda"


class BsFrom(StrEnum):
    bound = "bound"
    max = "max"

FormatOpt = Annotated[LogFormat | None, typer.Option(  # type: ignore[valid-type]
    "--format", "-f", help="Log format, or 'auto' to detect it from the content (see `losslens formats`).")]
ConfigOpt = Annotated[str | None, typer.Option("--config", help="Settings file (TOML); default "
                                               "./losslens.toml, else [tool.losslens] in ./pyproject.toml.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Same as --output-format json.")]
OutputOpt = Annotated[OutputFormat | None, typer.Option(
    "--output-format", "-o", help="text (default), json (one report per line), github (workflow "
    "annotations), junit (XML, a test case per log and detector), sarif (code scanning).")]
IgnoreOpt = Annotated[str | None, typer.Option("--ignore", help="Finding kinds to leave out, "
                                               "comma-separated (e.g. spike,plateau).")]
MetricOpt = Annotated[list[str] | None, typer.Option(
    "--metric", "-m", help="The column to analyse as the loss (repeatable: the first is the loss, "
    "the others are analysed like it). Default: found by name.")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="Only results and errors: no summaries, "
                                        "progress or notices on stderr.")]
VerboseOpt = Annotated[bool, typer.Option("--verbose", "-v", help="Also list the files a folder walk "
                                          "passed over and the checks that could not run.")]
SkipOpt = Annotated[bool, typer.Option("--skip-unreadable", help="Pass over logs that cannot be read "
                                       "(still named on stderr) instead of exiting 2.")]
AllOpt = Annotated[bool, typer.Option("--all", help="List every finding (many of one kind are "
                                      "otherwise grouped: the worst few and a count).")]
Logs = Annotated[list[str], typer.Argument(help="Log files, globs or run folders ('-' reads standard "
                                           "input; .gz is read transparently).", metavar="LOG...")]


class Terminated(Exception):
    """SIGTERM, raised where the program is, so that it ends like Ctrl-C: with its summary."""


def _on_sigterm(signum: int, frame: Any) -> None:
    raise Terminated()


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
    except OSError as exc:  # e.g. an output file that could not be written after all
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
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
    if value is None:
        return None
    try:
        return Severity.parse(value.value if isinstance(value, Level) else value)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _ignore(value: str | None, settings) -> frozenset[str]:
    from losslens.detectors import REGISTRY

    given = settings.ignore if value is None else value.split(",")
    kinds = frozenset(k.strip() for k in given if k.strip())
    known = {d.name for d in REGISTRY}
    unknown = sorted(kinds - known)
    if unknown:
        raise UsageError(f"unknown finding kind(s) for --ignore: {', '.join(unknown)} "
                         f"(known: {', '.join(sorted(known))})")
    return kinds


def _output(output_format: OutputFormat | None, json: bool) -> OutputFormat:
    if json and output_format not in (None, OutputFormat.json):
        raise UsageError(f"--json and --output-format {output_format.value} disagree: pass one")
    return OutputFormat.json if json else (output_format or OutputFormat.text)


@dataclass(frozen=True)
class Run:
    """What every log command shares: settings and the options that shape reading and analysis."""

    settings: Any
    fmt: str
    ignore: frozenset[str]
    metrics: tuple[str, ...]
    quiet: bool = False
    verbose: bool = False
    skip_unreadable: bool = False

    @classmethod
    def make(cls, config: str | None, format: Any, ignore: str | None, metric: list[str] | None,
             quiet: bool = False, verbose: bool = False, skip_unreadable: bool = False) -> Run:
        from losslens.config import load

        settings = load(config)
        if quiet and verbose:
            raise UsageError("--quiet and --verbose disagree: pass one")
        fmt = format.value if format is not None else settings.format
        from losslens.logs.registry import check_format

        check_format(fmt)
        return cls(settings, fmt, _ignore(ignore, settings), tuple(metric or settings.metric),
                   quiet, verbose, skip_unreadable)


@dataclass(frozen=True)
class Result:
    source: str
    log: LogData | None
    report: Report | None
    error: str | None = None


def _results(logs: list[str], run: Run) -> Iterator[Result]:
    """Each log read and analysed in turn. A log that cannot be read is one line on stderr and a
    Result without a report (exit 2), or, with --skip-unreadable, a line that says it was skipped;
    a walk that leaves nothing to read is a UsageError."""
    # polars, numpy and the detectors load here, not at start-up (`--help` stays fast)
    from losslens import progress
    from losslens.analysis import analyze_log
    from losslens.discover import expand
    from losslens.logs import read_log

    walk = expand(logs)
    if run.verbose:
        for path, why in walk.ignored:
            err.print(f"losslens: passed over {path}: {why}", markup=False)
    if not walk.targets:
        passed = (f" ({len(walk.ignored)} file(s) passed over as not logs; --verbose lists them)"
                  if walk.ignored else "")
        raise UsageError(f"no log files found in {', '.join(logs)}{passed}")
    registry, read = run.settings.registry(), 0
    with _progress_bar(run) as listener, progress.listening(listener):
        for t in walk.targets:
            try:
                log, report = analyze_log(read_log(t.path, None if run.fmt == "auto" else run.fmt),
                                          registry, run.ignore, run.metrics)
            except LossLensError as exc:
                if run.skip_unreadable:
                    if not run.quiet:
                        err.print(f"losslens: skipped: {exc}", markup=False)
                    continue
                hint = "" if t.explicit else " (--skip-unreadable passes over logs that cannot be read)"
                err.print(f"losslens: error: {exc}{hint}", markup=False)
                yield Result(t.path, None, None, str(exc))
                read += 1
                continue
            read += 1
            yield Result(t.path, log, report)
    if read == 0:
        raise UsageError(f"no log could be read in {', '.join(logs)}")


@contextmanager
def _progress_bar(run: Run) -> Iterator[Any]:
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


def _emit(fmt: OutputFormat, result: Result, text_lines: list[str] | None = None) -> None:
    """Per-log output for the streaming formats (text lines, JSON, GitHub annotations)."""
    from losslens.reporters import ci, jsonl

    if fmt is OutputFormat.json and result.report is not None:
        print(jsonl.render(result.report), flush=True)
    elif fmt is OutputFormat.github:
        print(ci.github([ci.Outcome(result.source, result.report, result.error)]), end="", flush=True)
    elif fmt is OutputFormat.text and text_lines:
        print("\n".join(text_lines), flush=True)


def _close(fmt: OutputFormat, results: list[Result], fail_on: Severity) -> None:
    """The whole-run documents (JUnit, SARIF), printed once every log is done."""
    if fmt not in (OutputFormat.junit, OutputFormat.sarif):
        return
    from losslens.detectors import REGISTRY
    from losslens.reporters import ci

    outcomes = [ci.Outcome(r.source, r.report, r.error) for r in results]
    if fmt is OutputFormat.junit:
        print(ci.junit(outcomes, [d.name for d in REGISTRY], fail_on), end="")
    else:
        print(ci.sarif(outcomes, {d.name: d.title for d in REGISTRY}), end="")


def _no_loss(result: Result, run: Run) -> bool:
    """check: a log whose loss could not be identified is never 'ok' (exit 2, one line)."""
    if result.report is None or result.report.loss is not None or run.metrics:
        return False
    found = next(f.summary for f in result.report.findings if f.kind == "no_loss_metric")
    err.print(f"losslens: error: {result.report.source}: {found}", markup=False)
    return True


@app.command()
def analyze(
    logs: Logs,
    format: FormatOpt = None,
    output_format: OutputOpt = None,
    json: JsonOpt = False,
    fail_on: Annotated[Level | None, typer.Option("--fail-on", help="Exit 1 when a finding is at "
                                                  "or above this severity.")] = None,
    ignore: IgnoreOpt = None,
    metric: MetricOpt = None,
    config: ConfigOpt = None,
    pick: Annotated[bool, typer.Option("--pick", help="Of the logs found, report only the one with "
                                       "the most records (a run folder's main log).")] = False,
    html_out: Annotated[str | None, typer.Option("--html", help="Write a self-contained HTML "
                                                 "post-mortem page (several logs: an index page "
                                                 "linking one page per log).")] = None,
    plot: Annotated[str | None, typer.Option("--plot", help="Write the main panels as a PNG "
                                             "(needs the plot extra).")] = None,
    markdown: Annotated[bool, typer.Option("--markdown", help="A short Markdown summary (for CI "
                                           "comments) instead of the terminal report.")] = False,
    show_all: AllOpt = False,
    skip_unreadable: SkipOpt = False,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Post-mortem report: what was read, and the findings with steps, numbers and a likely cause."""
    from losslens.reporters import text

    with user_errors():
        run = Run.make(config, format, ignore, metric, quiet, verbose, skip_unreadable)
        fmt, threshold = _output(output_format, json), _severity(fail_on)
        _writable(html_out, plot)
        if plot:
            if not plot.lower().endswith(PLOT_SUFFIXES):
                raise UsageError(f"--plot {plot}: name a .png, .svg or .pdf file")
            _needs("matplotlib", "--plot draws with matplotlib", "plot")
        results = list(_results(logs, run))
        if pick:
            ok = [r for r in results if r.report is not None]
            results = [max(ok, key=lambda r: int(r.report.steps["count"] or 0) if r.report else 0)] \
                if ok else results
        code = ExitCode.OK
        for r in results:
            if r.report is None or r.log is None:
                code = ExitCode.ERROR
            elif fmt is OutputFormat.text and markdown:
                from losslens.reporters import markdown as md

                print(md.render(r.report), end="")
            elif fmt is OutputFormat.text:
                out.print(text.analyze_view(r.report, r.log, out.width, show_all, run.verbose))
            if fmt is not OutputFormat.text:
                _emit(fmt, r)
            if r.report is not None:
                code = max(code, r.report.exit_code(threshold))
        _close(fmt, results, threshold or Severity.parse(run.settings.fail_on))
        _write_pages([r for r in results if r.report is not None], html_out, plot, run.quiet)
    raise typer.Exit(code)


@app.command()
def check(
    logs: Logs,
    format: FormatOpt = None,
    output_format: OutputOpt = None,
    json: JsonOpt = False,
    fail_on: Annotated[Level | None, typer.Option("--fail-on", help="Exit 1 when a finding is at or "
                                                  "above this severity (default error).")] = None,
    ignore: IgnoreOpt = None,
    metric: MetricOpt = None,
    config: ConfigOpt = None,
    show_all: AllOpt = False,
    skip_unreadable: SkipOpt = False,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """The gate: one line per finding, a summary on stderr; exit 0 clean, 1 findings, 2 error
    (a log that cannot be read, or whose loss cannot be found, is never 'ok')."""
    from losslens.reporters import text

    with user_errors():
        run = Run.make(config, format, ignore, metric, quiet, verbose, skip_unreadable)
        fmt = _output(output_format, json)
        threshold = _severity(fail_on) or Severity.parse(run.settings.fail_on)
        code = ExitCode.OK
        rows: list[tuple[str, int | None, Severity | None, str]] = []
        results = []
        for r in _results(logs, run):
            results.append(r)
            report = r.report
            if report is None:
                code = ExitCode.ERROR
                rows.append((r.source, None, None, "ERROR"))
                _emit(fmt, r)
                continue
            _emit(fmt, r, text.check_lines(report, show_all))
            result = report.exit_code(threshold)
            if _no_loss(r, run) and result != ExitCode.FINDINGS:
                result = ExitCode.ERROR  # (a NaN grad norm found without a loss still fails: 1)
            worst = report.worst()
            verdict = {ExitCode.OK: "ok", ExitCode.FINDINGS: "FAIL"}.get(result, "ERROR")
            if not run.quiet:
                err.print(f"{report.source}: {len(report.findings)} finding(s)"
                          f"{f', worst {worst}' if worst is not None else ''}; "
                          f"{report.steps['count']} records; {verdict} (--fail-on {threshold})", markup=False)
            if run.verbose:
                for sk in report.skipped:
                    err.print(f"{report.source}: could not check {sk.detector} on {sk.metric}: "
                              f"{sk.reason}", markup=False)
            rows.append((report.source, len(report.findings), worst, verdict))
            code = max(code, result)
        _close(fmt, results, threshold)
        if len(rows) > 1 and not run.quiet:
            err.print(text.summary_table(rows))
    raise typer.Exit(code)


@app.command()
def watch(
    log: Annotated[str, typer.Argument(help="The log to follow ('-' reads standard input; a run "
                                       "folder: the log in it with the most records).",
                                       metavar="LOG|-")],
    format: FormatOpt = None,
    output_format: Annotated[OutputFormat | None, typer.Option(
        "--output-format", "-o", help="text (a live view) or json (one object per alert event).")] = None,
    json: Annotated[bool, typer.Option("--json", help="Same as --output-format json.")] = False,
    exit_on: Annotated[Level | None, typer.Option(
        "--exit-on", help="Exit 1 at the first announced finding at or above this severity "
        "(default: [watch] exit_on in the config; else follow until stopped).")] = None,
    fail_on: Annotated[Level | None, typer.Option(
        "--fail-on", help="At the end (end of stdin), exit 1 if a finding at or above this severity "
        "was announced (default error).")] = None,
    tail: Annotated[int | None, typer.Option(
        "--tail", "-n", min=0, help="Start at the last N lines of the file there now (as `tail -n`); "
        "the lines before are counted, not read. Default: the whole file.")] = None,
    from_end: Annotated[bool, typer.Option(
        "--from-end", help="Start at the end of the file there now (same as --tail 0).")] = False,
    ignore: IgnoreOpt = None,
    metric: MetricOpt = None,
    config: ConfigOpt = None,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Follow a live log (tail -F: waits for it, survives rotation and truncation) and alert."""
    from losslens.reporters import live
    from losslens.watch import Watcher

    with user_errors():
        run = Run.make(config, format, ignore, metric, quiet, verbose)
        fmt = _output(output_format, json)
        if fmt not in (OutputFormat.text, OutputFormat.json):
            raise UsageError("watch writes text or json (--output-format text|json)")
        w = run.settings.watch
        exit_at = _severity(exit_on) or _severity(w["exit_on"] or None)
        fail_at = _severity(fail_on) or Severity.parse(run.settings.fail_on)
        if log != "-" and os.path.isdir(log):
            log = _folder_log(log, run)
        _followable(log, run.fmt)
        start = 0 if from_end else tail
        if start is not None and log == "-":
            raise UsageError("--tail and --from-end start inside a file; standard input has no end "
                             "to start from")
        watcher = Watcher("<stdin>" if log == "-" else log, None if run.fmt == "auto" else run.fmt,
                          run.settings.registry(), run.ignore, window=w["window"],
                          confirm=w["confirm"], cooldown_s=w["cooldown_s"], metrics=run.metrics)
        view = live.View(watcher, json=fmt is OutputFormat.json, console=out, err=err, quiet=run.quiet)
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        with user_errors():
            code = _follow(log, watcher, view, exit_at, w["interval_s"], w["confirm"], start)
    except (KeyboardInterrupt, Terminated) as exc:
        view.summary(interrupted=True)
        raise typer.Exit(ExitCode.TERMINATED if isinstance(exc, Terminated)
                         else ExitCode.INTERRUPTED) from None
    finally:
        signal.signal(signal.SIGTERM, previous)
    view.summary(interrupted=False)
    if code == ExitCode.OK and view.worst is not None and view.worst >= fail_at:
        code = ExitCode.FINDINGS
    raise typer.Exit(code)


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


def _follow(log: str, watcher, view, exit_at: Severity | None, interval: float, confirm: int,
            tail: int | None = None) -> ExitCode:
    """Feed the watcher until stdin ends or a finding at ``exit_at`` is announced."""
    import threading

    from losslens.watch import lines_from

    if log != "-" and _record_source(log):
        if tail is not None:
            raise UsageError("--tail and --from-end start inside a line log; this one is re-read "
                             "whole when it changes", source=log)
        return _watch_records(log, watcher, view, exit_at, interval)
    if tail is not None and log != "-" and os.path.isfile(log):
        from losslens.logs.source import decode_lines

        with open(log, "rb") as f:  # the format from the file's top, which --tail starts past
            head = f.read(1 << 18)
        watcher.hint(decode_lines(head)[:-1])
    stop = threading.Event()
    code, last, cost = ExitCode.OK, 0.0, 0.0
    try:
        for batch in lines_from(log, interval, stop, watcher.notes, tail, watcher.pass_over):
            if batch is None:  # end of standard input: settle and stop
                watcher.finish_input()
                for _ in range(max(1, confirm)):
                    code = max(code, view.show(watcher.analyse(), exit_at))
                break
            watcher.feed_batch(batch)
            watcher.tick()
            due = watcher.new_records or any(not a.announced for a in watcher.active.values())
            # analyses take at most about a quarter of the time: a backlog is read at speed
            if watcher.urgent or (due and time.monotonic() - last >= max(interval, 3 * cost)):
                last = time.monotonic()
                code = max(code, view.show(watcher.analyse(), exit_at))
                cost = time.monotonic() - last
            view.notes()
            view.refresh()
            _stdout_gone()
            if code == ExitCode.FINDINGS:
                break
    finally:
        stop.set()
    return code


def _followable(log: str, fmt: str) -> None:
    """What watch cannot follow is one line and exit 2, before it starts: a whole-document format
    on stdin (it is re-read whole when it changes), a FIFO or a device, an unreadable file. A
    missing file is fine: watch waits for it, as tail -F does."""
    import stat

    from losslens.logs.registry import BY_NAME

    if log == "-":
        if fmt != "auto" and BY_NAME[fmt].whole_file:
            raise UsageError(f"watch reads --format {fmt} from a file, which it re-reads whole when it "
                             "changes; it cannot follow it on standard input")
        return
    try:
        mode = os.stat(log).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise UsageError(f"cannot follow: {exc.strerror}", source=log) from None
    if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        raise UsageError("cannot follow: not a regular file (a FIFO or a device); pipe it into "
                         "`losslens watch -` instead", source=log)
    if not os.access(log, os.R_OK):
        raise UsageError("cannot follow: permission denied", source=log)
    if stat.S_ISREG(mode):
        with open(log, "rb") as f:
            if f.read(2) == b"\x1f\x8b":
                raise UsageError("cannot follow a gzip-compressed log (it does not grow as text): "
                                 "`losslens check` or `analyze` read it whole", source=log)


def _folder_log(folder: str, run: Run) -> str:
    """watch DIR: the log the folder walk would pick (the one with the most records), said on
    stderr; a folder with none is a UsageError."""
    from losslens.discover import main_log

    path, candidates = main_log(folder, None if run.fmt == "auto" else run.fmt)
    if not run.quiet:
        err.print(f"losslens: watching {path} (of {candidates} log(s) in {folder}: the one with the most "
                  "records)", markup=False)
    return path


PLOT_SUFFIXES = (".png", ".svg", ".pdf")
SEED_BOUNDS = "0,770,1216,1728,2432,3296,8193"


MAX_REPLAYED = 200_000_000  # samples × epochs
MAX_OPTIMIZED_BUCKETS = 64  # the bound search is O(K · distinct lengths²)


def _needs(module: str, what: str, extra: str) -> None:
    """A missing optional extra is one line (what needs it, how to install it) and exit 2."""
    import importlib.util

    if importlib.util.find_spec(module) is None:  # (also None when sys.modules holds None for it)
        hint = (" (the CPU build: install torch first from PyTorch's CPU wheel index, see README)"
                if extra == "replay" else "")
        raise MissingExtra(f"{what}, which is not installed: pip install 'losslens[{extra}]'{hint}")


@app.command()
def replay(
    lengths: Annotated[str, typer.Option("--lengths", help="Per-sample lengths: .npy, text (one per "
                                         "line), Parquet/Arrow/CSV column, or a HF save_to_disk folder.")],
    bounds: Annotated[str, typer.Option("--bounds", help="Bucket edges, exclusive upper bounds: "
                                        "bucket k holds b_k <= length < b_k+1.")] = SEED_BOUNDS,
    token_budget: Annotated[int, typer.Option("--token-budget")] = 49152,
    max_batch_size: Annotated[int, typer.Option("--max-batch-size")] = 64,
    max_seq_len: Annotated[int, typer.Option("--max-seq-len")] = 8192,
    bs_from: Annotated[BsFrom, typer.Option("--bs-from", help="Batch size per bucket from budget // "
                                            "exclusive bound ('bound', 49152//8193=5) or // (bound-1) "
                                            "('max', 49152//8192=6).")] = BsFrom.bound,
    strategy: Annotated[Strategy, typer.Option("--strategy")] = DEFAULT_STRATEGY,  # type: ignore[valid-type]
    seed: Annotated[int, typer.Option("--seed")] = 0,
    epochs: Annotated[int, typer.Option("--epochs")] = 1,
    grad_accum: Annotated[int, typer.Option("--grad-accum")] = 1,
    world_size: Annotated[int, typer.Option("--world-size", help="Data-parallel ranks (batch j "
                                            "goes to rank j mod W).")] = 1,
    column: Annotated[str, typer.Option("--column")] = "seq_len",
    log: Annotated[str | None, typer.Option("--log", help="Correlate the loss of this log with "
                                            "the replayed batch composition.")] = None,
    step_offset: Annotated[int, typer.Option("--step-offset", help="Logged step of replayed step 0.")] = 0,
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
        strategy_name = strategy.value if isinstance(strategy, Enum) else str(strategy)
        if quiet and verbose:
            raise UsageError("--quiet and --verbose disagree: pass one")
        try:
            edges = tuple(int(x) for x in bounds.split(","))
        except ValueError:
            raise UsageError(f"--bounds must be comma-separated integers, got {bounds!r}") from None
        if len(edges) < 2 or any(b <= a for a, b in zip(edges, edges[1:], strict=False)):
            raise UsageError(f"--bounds must increase: {bounds}")
        if edges[-1] <= max_seq_len:
            raise UsageError(f"the last bound ({edges[-1]}) must exceed --max-seq-len ({max_seq_len}): "
                             "bounds are exclusive")
        if not 0 <= seed < 1 << 63:
            raise UsageError(f"--seed takes 0 to 2**63-1, got {seed}")
        counts = {"--max-seq-len": max_seq_len, "--token-budget": token_budget,
                  "--max-batch-size": max_batch_size, "--epochs": epochs,
                  "--grad-accum": grad_accum, "--world-size": world_size, "--null-seeds": null_seeds}
        for option, value in counts.items():
            if value < 1:
                raise UsageError(f"{option} must be >= 1, got {value}")
        if optimize_bounds is not None and not 1 <= optimize_bounds <= MAX_OPTIMIZED_BUCKETS:
            raise UsageError(f"--optimize-bounds K takes 1 to {MAX_OPTIMIZED_BUCKETS} buckets, got "
                             f"{optimize_bounds}")
        if html_out and log is None:
            raise UsageError("--html needs --log (the page shows the replay under the log's loss)")
        _writable(out_file, steps_out, html_out)
        _needs("torch", "replay rebuilds batches with torch", "replay")
        from losslens.replay import Plan, batch_table, load_lengths, steps_frame
        from losslens.replay import replay as run_replay
        from losslens.reporters import replay_view

        lens = load_lengths(lengths, column)
        if len(lens) * epochs > MAX_REPLAYED:  # each replayed sample costs ~40 bytes per epoch
            raise UsageError(f"--epochs {epochs} × {len(lens):,} samples = {len(lens) * epochs:,} replayed "
                             f"samples, over the {MAX_REPLAYED:,} that fit in memory (~8 GB): replay fewer "
                             "epochs (the statistics settle within a few)")
        steps = loss = None
        if log is not None:
            from losslens.logs import read_log

            data = read_log(log)
            if "loss" not in data.train.columns:
                raise UsageError("no loss metric in this log", source=log)
            steps, loss = data.train["step"].to_numpy(), data.train["loss"].cast(float).to_numpy()
        plan = Plan(edges, token_budget, max_batch_size, max_seq_len, str(bs_from))
        from rich.progress import Progress

        with Progress(console=err, transient=True, disable=json or quiet or not err.is_terminal) as bar:
            phases: dict[str, object] = {}

            def progress(phase: str, done: int, total: int) -> None:
                if phase not in phases:
                    phases[phase] = bar.add_task(phase, total=total)
                bar.update(phases[phase], completed=done)  # type: ignore[arg-type]

            report, eps = run_replay(lens, plan, strategy_name, seed, epochs, grad_accum, world_size,
                                     str(device), compare, optimize_bounds, steps, loss, step_offset,
                                     null_seeds, progress)
        if log is not None and "correlation" in report:
            from losslens.analysis import analyze as run_analysis
            from losslens.replay.correlate import attribute

            analysed = run_analysis(data)
            found = attribute(analysed.findings, report["correlation"])
            report["findings"] = [f.as_dict() for f in found]
            if html_out:
                import dataclasses

                import numpy as np

                from losslens.replay.correlate import step_table
                from losslens.reporters import html

                _, step_bucket = step_table(eps, grad_accum, world_size)
                page = html.render(dataclasses.replace(analysed, findings=found), data,
                                   np.arange(len(step_bucket)) + step_offset, step_bucket,
                                   report["correlation"])
                with open(html_out, "w", encoding="utf-8") as f:
                    f.write(page)
                if not quiet:
                    err.print(f"losslens: wrote {html_out}", markup=False)
        if out_file or steps_out:
            table = batch_table(eps, grad_accum, world_size)
            if out_file:
                _write_frame(table, out_file)
            if steps_out:
                _write_frame(steps_frame(table), steps_out)
        if json:
            import json as jsonlib

            from losslens.findings import jsonable

            print(jsonlib.dumps(jsonable(report), allow_nan=False))
        else:
            out.print(replay_view.render(report))


def _write_frame(frame, path: str) -> None:
    frame.write_parquet(path) if path.endswith(".parquet") else frame.write_csv(path)


def _write_pages(results: list[Result], html_out: str | None, plot: str | None, quiet: bool) -> None:
    """--html / --plot. One log: the page at the path given. Several: one page per log next to
    it (named after the log) and, at the path given, an index page linking them; said on stderr."""
    if not results or not (html_out or plot):
        return
    several = len(results) > 1

    def name(path: str, source: str) -> str:
        if not several:
            return path
        stem, dot, ext = path.rpartition(".")
        tag = os.path.basename(source).replace(".", "_")
        return f"{stem}-{tag}.{ext}" if dot else f"{path}-{tag}"

    written: list[tuple[Report, str]] = []
    for r in results:
        assert r.report is not None and r.log is not None
        if html_out:
            from losslens.reporters import html

            page = name(html_out, r.report.source)
            with open(page, "w", encoding="utf-8") as f:
                f.write(html.render(r.report, r.log))
            written.append((r.report, page))
        if plot:
            from losslens.reporters import png

            png.write(r.report, r.log, name(plot, r.report.source))
            if not quiet:
                err.print(f"losslens: wrote {name(plot, r.report.source)}", markup=False)
    if html_out and several:
        from losslens.reporters import html

        with open(html_out, "w", encoding="utf-8") as f:
            f.write(html.index(written, os.path.dirname(os.path.abspath(html_out))))
    if html_out and not quiet:
        pages = f" (an index of {len(written)} pages: {', '.join(p for _, p in written)})" if several else ""
        err.print(f"losslens: wrote {html_out}{pages}", markup=False)


def _record_source(path: str) -> bool:
    from pathlib import Path

    from losslens.logs.runs import is_event_file, is_mlflow_run

    if is_mlflow_run(Path(path)):
        return True
    if not os.path.isfile(path):
        return False
    if is_event_file(path):
        return True
    with open(path, "rb") as f:  # whole JSON documents (trainer_state.json, history dumps)
        head = f.read(1 << 16)
    return b'"log_history"' in head or head.lstrip().startswith(b"[{")


UNREADABLE_FOR_S = 10.0  # watch: a whole document unreadable this long is an error


def _watch_records(path: str, watcher, view, exit_at: Severity | None, interval: float) -> ExitCode:
    """Event files, MLflow run folders and whole JSON documents (trainer_state.json): re-read when
    they change, analyse, alert. Runs until a finding at ``exit_at`` or an interrupt."""
    from pathlib import Path

    from losslens.logs import read_log

    def signature() -> tuple:
        p = Path(path)
        files = [p] if p.is_file() else sorted(x for x in (p / "metrics").rglob("*") if x.is_file())
        return tuple((str(f), f.stat().st_size) for f in files)

    code, last, data, failures = ExitCode.OK, None, None, 0
    while True:
        sig = signature()
        unsettled = any(not a.announced or a.missing for a in watcher.active.values())
        if sig != last or (unsettled and data is not None):
            if sig != last:
                try:
                    data = read_log(path)
                except LossLensError:
                    # Hugging Face rewrites trainer_state.json in place: a read can catch it half
                    # written. Try again at the next poll; only a file that stays unreadable fails.
                    failures += 1
                    if failures * interval >= UNREADABLE_FOR_S:
                        raise
                    time.sleep(interval)
                    continue
                failures, last = 0, sig
            code = max(code, view.show(watcher.analyse_log(data), exit_at))
            if code == ExitCode.FINDINGS:
                return code
        _stdout_gone()
        time.sleep(interval)


@app.command()
def formats() -> None:
    """List the log formats losslens reads, with one example line each."""
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
    except BrokenPipeError:
        # the reader of stdout went away (`| head -1`): end quietly, as `yes | head -1` does
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(ExitCode.BROKEN_PIPE)
