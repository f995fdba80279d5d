"""The command line: parse options → one library call → render → exit. Nothing else lives here."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from enum import Enum, StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.text import Text

from losslens import __version__
from losslens.errors import LossLensError, MissingExtra, UsageError
from losslens.findings import ExitCode, Severity

if TYPE_CHECKING:
    from losslens.runner import Options, Result

app = typer.Typer(add_completion=True, no_args_is_help=True, rich_markup_mode=None,
                  context_settings={"help_option_names": ["-h", "--help"]},
                  help="Read training logs and say, with evidence, when the run is sick.")
# (no emoji codes: a log named 'run:fire:.log' is printed as it is named)
out = Console(soft_wrap=False, emoji=False)
err = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)

# choices shown by --help; the names are kept here so that --help loads no reader (a test checks
# them against the registries)
FORMAT_NAMES = ("auto", "trainer-state", "json-records", "jsonl", "csv", "hf", "megatron", "fairseq",
                "nanogpt", "modded-nanogpt", "torchtitan", "lightning", "olmo", "table", "cyclegan", "sb3",
                "marian", "boosting", "darknet", "mlflow", "kv", "colon", "tensorboard")
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


LogFormat = Enum("LogFormat", {n: n for n in FORMAT_NAMES}, type=str)  # type: ignore[misc]
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
JobsOpt = Annotated[int | None, typer.Option(
    "--jobs", "-j", help="Processes that read and analyse logs when there are several (default: "
    "the CPU count); the output keeps the order of the logs.")]
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


def _output(output_format: OutputFormat | None, json: bool) -> OutputFormat:
    if json and output_format not in (None, OutputFormat.json):
        raise UsageError(f"--json and --output-format {output_format.value} disagree: pass one")
    return OutputFormat.json if json else (output_format or OutputFormat.text)


def _options(config: str | None, format: Any, ignore: str | None, metric: list[str] | None,
             quiet: bool = False, verbose: bool = False, skip_unreadable: bool = False,
             jobs: int | None = 1) -> Options:
    from losslens.runner import Options

    return Options.make(config, format.value if format is not None else None, ignore, metric,
                        quiet, verbose, skip_unreadable, jobs)


def _results(logs: list[str], run: Options) -> Iterator[Result]:
    """Each log read and analysed in turn (``runner.results``); one that cannot be read is one
    line on stderr, or with --skip-unreadable a line that says it was skipped."""
    # polars, numpy and the detectors load here, not at start-up (`--help` stays fast)
    from losslens import progress, runner

    walk = runner.walk(logs)
    if run.verbose:
        for path, why in walk.ignored:
            err.print(f"losslens: passed over {path}: {why}", markup=False)
    with _progress_bar(run) as listener, progress.listening(listener):
        for r in runner.results(walk, run, logs):
            if r.skipped:
                if not run.quiet:
                    err.print(f"losslens: skipped: {r.error}", markup=False)
                continue
            if r.error is not None:
                hint = "" if r.explicit else " (--skip-unreadable passes over logs that cannot be read)"
                err.print(f"losslens: error: {r.error}{hint}", markup=False)
            yield r


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


def _print(output: Any) -> None:
    """A reporter's output: a string as is (it carries its line ends), a rich renderable through
    the console; None is nothing."""
    if output is None:
        return
    if isinstance(output, str):
        print(output, end="", flush=True)
    else:
        out.print(output)


def _reporter(fmt: OutputFormat, markdown: bool = False) -> Any:
    from losslens.reporters.registry import REPORTERS

    return REPORTERS["markdown" if markdown and fmt is OutputFormat.text else fmt.value]


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
    jobs: JobsOpt = None,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Post-mortem report: what was read, and the findings with steps, numbers and a likely cause."""
    from losslens.reporters import pages
    from losslens.reporters.base import Context

    with user_errors():
        run = _options(config, format, ignore, metric, quiet, verbose, skip_unreadable, jobs)
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
        reporter = _reporter(fmt, markdown)
        ctx = Context("analyze", out.width, show_all, run.verbose,
                      threshold or Severity.parse(run.settings.fail_on))
        code = ExitCode.OK
        for r in results:
            code = max(code, ExitCode.ERROR if r.report is None else r.report.exit_code(threshold))
            _print(reporter.log(r, ctx))
        _print(reporter.close(results, ctx))
        for line in pages.write([r for r in results if r.report is not None], html_out, plot):
            if not run.quiet:
                err.print(f"losslens: wrote {line}", markup=False)
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
    jobs: JobsOpt = None,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """The gate: one line per finding, a summary on stderr; exit 0 clean, 1 findings, 2 error
    (a log that cannot be read, or whose loss cannot be found, is never 'ok')."""
    from losslens.reporters import text
    from losslens.reporters.base import Context
    from losslens.runner import gate, unchecked_loss

    with user_errors():
        run = _options(config, format, ignore, metric, quiet, verbose, skip_unreadable, jobs)
        fmt = _output(output_format, json)
        threshold = _severity(fail_on) or Severity.parse(run.settings.fail_on)
        reporter, ctx = _reporter(fmt), Context("check", out.width, show_all, run.verbose, threshold)
        code = ExitCode.OK
        rows: list[tuple[str, int | None, Severity | None, str]] = []
        results = []
        for r in _results(logs, run):
            results.append(r)
            _print(reporter.log(r, ctx))
            result, why = gate(r, threshold, bool(run.metrics))
            code = max(code, result)
            if why is not None:
                err.print(f"losslens: error: {why}", markup=False)
            verdict = {ExitCode.OK: "ok", ExitCode.FINDINGS: "FAIL"}.get(result, "ERROR")
            if (report := r.report) is None:
                rows.append((r.source, None, None, verdict))
                continue
            worst = report.worst()
            if not run.quiet:
                err.print(f"{report.source}: {len(report.findings)} finding(s)"
                          f"{f', worst {worst}' if worst is not None else ''}; "
                          f"{report.steps['count']} records; {verdict} (--fail-on {threshold})", markup=False)
                for note in r.log.lost if r.log is not None else ():  # the answer is on part of it
                    err.print(f"{report.source}: note: {note}", markup=False)
                if (thin := unchecked_loss(r, run.settings.registry())) is not None:
                    err.print(f"{report.source}: note: {thin}", markup=False)
            if run.verbose:
                for sk in report.skipped:
                    err.print(f"{report.source}: could not check {sk.detector} on {sk.metric}: "
                              f"{sk.reason}", markup=False)
            rows.append((report.source, len(report.findings), worst, verdict))
        _print(reporter.close(results, ctx))
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
    from losslens.watch import Verdict, Watcher, follow, followable

    with user_errors():
        run = _options(config, format, ignore, metric, quiet, verbose)
        fmt = _output(output_format, json)
        if fmt not in (OutputFormat.text, OutputFormat.json):
            raise UsageError("watch writes text or json (--output-format text|json)")
        w = run.settings.watch
        exit_at = _severity(exit_on) or _severity(w["exit_on"] or None)
        fail_at = _severity(fail_on) or Severity.parse(run.settings.fail_on)
        if log != "-" and os.path.isdir(log):
            log = _folder_log(log, run)
        start = 0 if from_end else tail
        followable(log, run.fmt, start)
        watcher = Watcher("<stdin>" if log == "-" else log, run.format,
                          run.settings.registry(), run.ignore, window=w["window"],
                          confirm=w["confirm"], cooldown_s=w["cooldown_s"], metrics=run.metrics)
        view = live.View(watcher, json=fmt is OutputFormat.json, console=out, err=err, quiet=run.quiet)
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    verdict = Verdict(exit_at, fail_at)
    try:
        with user_errors():
            with closing(follow(log, watcher, w["interval_s"], w["confirm"], start)) as analyses:
                for events in analyses:
                    view.show(events)
                    view.notes()
                    _stdout_gone()
                    if verdict.see(events):
                        break
    except (KeyboardInterrupt, Terminated) as exc:
        view.summary(interrupted=True)
        raise typer.Exit(ExitCode.TERMINATED if isinstance(exc, Terminated)
                         else ExitCode.INTERRUPTED) from None
    finally:
        signal.signal(signal.SIGTERM, previous)
    view.summary(interrupted=False)
    raise typer.Exit(verdict.code)


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
    step_offset: Annotated[int, typer.Option("--step-offset", help="Logged step of replayed step 0.")] = 0,
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
            lhotse_buffer=lhotse_buffer, bucket_shuffle=bucket_shuffle, log=log,
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
            out.print(replay_view.render(result.summary))


def _write_frame(frame, path: str) -> None:
    frame.write_parquet(path) if path.endswith(".parquet") else frame.write_csv(path)


@app.command()
def scan(
    roots: Annotated[list[str], typer.Argument(help="Folders of run folders (each run's logs below "
                                               "it), or URLs (s3://, gs://, file://) with fsspec's "
                                               "backend installed.", metavar="ROOT...")],
    out_path: Annotated[str, typer.Option("--out", help="The table, a row per log and per finding "
                                          "(.parquet; a .csv twin beside it; the state in "
                                          "NAME.scan-state.jsonl).")] = "findings.parquet",
    since: Annotated[str | None, typer.Option("--since", help="Only logs modified in this last "
                                              "while: 7d, 12h, 30m, 2w.")] = None,
    fail_on: Annotated[Level | None, typer.Option("--fail-on", help="Exit 1 when a finding is at or "
                                                  "above this severity (default error).")] = None,
    dask: Annotated[str | None, typer.Option("--dask", help="Run on a Dask cluster: a scheduler "
                                             "address (tcp://host:8786), or 'local' for a local "
                                             "cluster of --jobs workers (needs the fleet extra).")] = None,
    rescan: Annotated[bool, typer.Option("--rescan", help="Read every log again, whatever the state "
                                         "file says.")] = False,
    format: FormatOpt = None,
    ignore: IgnoreOpt = None,
    metric: MetricOpt = None,
    config: ConfigOpt = None,
    skip_unreadable: Annotated[bool, typer.Option("--skip-unreadable", help="Logs that cannot be read "
                                                  "stay rows with their error but do not make the "
                                                  "exit code 2.")] = False,
    jobs: JobsOpt = None,
    json: Annotated[bool, typer.Option("--json", help="The summary as one JSON object on stdout (the "
                                       "rows are in the table).")] = False,
    quiet: QuietOpt = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="List every log that could not be "
                                          "read (the summary shows the first 5).")] = False,
) -> None:
    """A fleet of run folders -> one table of logs and findings (Parquet and CSV), with an exit
    code like check's; a re-run reads only the logs that changed (or were not finished)."""
    from losslens import scan as fleet
    from losslens.reporters import scan_view

    with user_errors():
        run = _options(config, format, ignore, metric, quiet, verbose, skip_unreadable, jobs)
        threshold = _severity(fail_on) or Severity.parse(run.settings.fail_on)
        where = fleet.outputs(out_path)
        os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)  # (a nightly job's folder)
        _writable(*(str(p) for p in where.values()))
        if dask is not None:
            _needs("distributed", "--dask runs on a Dask cluster", "fleet")
        progress = _scan_progress(run)
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
        try:
            result = fleet.scan(roots, run, out_path, threshold, fleet.parse_since(since), dask, rescan,
                                on_row=progress)
        except (KeyboardInterrupt, Terminated) as exc:
            err.print(f"losslens: interrupted: the logs scanned so far are kept in {where['state']}; "
                      "the same command goes on from there", markup=False)
            raise typer.Exit(ExitCode.TERMINATED if isinstance(exc, Terminated)
                             else ExitCode.INTERRUPTED) from None
        finally:
            signal.signal(signal.SIGTERM, previous)
        if json:
            from losslens.reporters.jsonl import dumps

            print(dumps(scan_view.summary(result)))
        elif not run.quiet:
            out.print(scan_view.render(result, run.verbose))
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
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
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
