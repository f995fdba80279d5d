"""The command line: parse options → one library call → render → exit. Nothing else lives here."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

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

FormatOpt = Annotated[str | None, typer.Option("--format", "-f", help="Log format, or 'auto' to "
                                               "detect it from the content (see `losslens formats`).")]
ConfigOpt = Annotated[str | None, typer.Option("--config", help="Settings file (TOML); default "
                                               "./losslens.toml, else [tool.losslens] in ./pyproject.toml.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="JSON Lines on stdout: one report per log.")]
IgnoreOpt = Annotated[str | None, typer.Option("--ignore", help="Finding kinds to leave out, "
                                        "comma-separated (e.g. spike,plateau).")]
Logs = Annotated[list[str], typer.Argument(help="Log files, globs or run folders ('-' reads standard "
                                           "input; .gz is read transparently).", metavar="LOG...")]


@contextmanager
def user_errors() -> Iterator[None]:
    """Library errors become one line on stderr and exit code 2 — never a traceback."""
    try:
        yield
    except LossLensError as exc:
        err.print(f"losslens: error: {exc}", markup=False)
        raise typer.Exit(ExitCode.ERROR) from None
    except BrokenPipeError:
        raise
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


def _severity(value: str | None) -> Severity | None:
    if value is None:
        return None
    try:
        return Severity.parse(value)
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


def _settings(config: str | None):
    from losslens.config import load

    return load(config)


def _reports(logs: list[str], fmt: str, ignore: frozenset[str], settings) -> Iterator[
        tuple[str, LogData | None, Report | None]]:
    # polars, numpy and the detectors load here, not at start-up (`--help` stays fast)
    from losslens.analyze import analyze as run_analysis
    from losslens.discover import expand
    from losslens.logs import read_log

    registry = settings.registry()
    targets = expand(logs)
    if not targets:
        raise UsageError(f"no log files found in {', '.join(logs)}")
    for t in targets:
        try:
            log = read_log(t.path, None if fmt == "auto" else fmt)
        except LossLensError as exc:
            if t.explicit:
                err.print(f"losslens: error: {exc}", markup=False)
                yield t.path, None, None
            continue  # a file in a run folder that is not a log: passed over
        yield t.path, log, run_analysis(log, detectors=registry, ignore=ignore)


@app.command()
def analyze(
    logs: Logs,
    format: FormatOpt = None,
    json: JsonOpt = False,
    fail_on: Annotated[str | None, typer.Option("--fail-on", help="Exit 1 when a finding is at "
                                                "or above this severity (info|warning|error).")] = None,
    ignore: IgnoreOpt = None,
    config: ConfigOpt = None,
    pick: Annotated[bool, typer.Option("--pick", help="Of the logs found, report only the one with "
                                       "the most records (a run folder's main log).")] = False,
    html_out: Annotated[str | None, typer.Option("--html", help="Write a self-contained HTML "
                                                 "post-mortem page.")] = None,
    plot: Annotated[str | None, typer.Option("--plot", help="Write the main panels as a PNG "
                                             "(needs the plot extra).")] = None,
    markdown: Annotated[bool, typer.Option("--markdown", help="A short Markdown summary (for CI "
                                           "comments) instead of the terminal report.")] = False,
) -> None:
    """Post-mortem report: what was read, and the findings with steps, numbers and a likely cause."""
    from losslens.reporters import jsonl, text

    with user_errors():
        settings = _settings(config)
        threshold, kinds = _severity(fail_on), _ignore(ignore, settings)
        _writable(html_out, plot)
        code = ExitCode.OK
        results = list(_reports(logs, format or settings.format, kinds, settings))
        if pick:
            ok = [r for r in results if r[2] is not None]
            results = [max(ok, key=lambda r: int(r[2].steps["count"] or 0) if r[2] else 0)] \
                if ok else results
        for _, log, report in results:
            if report is None or log is None:
                code = ExitCode.ERROR
                continue
            if json:
                print(jsonl.render(report), flush=True)
            elif markdown:
                from losslens.reporters import markdown as md

                print(md.render(report), end="")
            else:
                out.print(text.analyze_view(report, log))
            if html_out or plot:
                _write_pages(report, log, html_out, plot, len(results) > 1)
            code = max(code, report.exit_code(threshold))
    raise typer.Exit(code)


@app.command()
def check(
    logs: Logs,
    format: FormatOpt = None,
    json: JsonOpt = False,
    fail_on: Annotated[str | None, typer.Option("--fail-on", help="Exit 1 when a finding is at or "
                                                "above this severity (info|warning|error; default "
                                                "error).")] = None,
    ignore: IgnoreOpt = None,
    config: ConfigOpt = None,
) -> None:
    """The gate: one line per finding, a summary on stderr; exit 0 clean, 1 findings, 2 error."""
    from losslens.reporters import jsonl, text

    with user_errors():
        settings = _settings(config)
        threshold = _severity(fail_on or settings.fail_on)
        kinds = _ignore(ignore, settings)
        code = ExitCode.OK
        rows: list[tuple[str, int | None, Severity | None, str]] = []
        for path, _, report in _reports(logs, format or settings.format, kinds, settings):
            if report is None:
                code = ExitCode.ERROR
                rows.append((path, None, None, "ERROR"))
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
            rows.append((report.source, len(report.findings), worst, "FAIL" if result else "ok"))
            code = max(code, result)
        if len(rows) > 1:
            err.print(text.summary_table(rows))
    raise typer.Exit(code)


@app.command()
def watch(
    log: Annotated[str, typer.Argument(help="The log to follow ('-' reads standard input).",
                                       metavar="LOG|-")],
    format: FormatOpt = None,
    json: Annotated[bool, typer.Option("--json", help="One JSON object per alert event (appeared/"
                                       "changed/repeated/cleared) instead of the live view.")] = False,
    exit_on: Annotated[str | None, typer.Option("--exit-on", help="Exit 1 at the first announced "
                                                "finding at or above this severity (warning|error).")] = None,
    ignore: IgnoreOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Follow a live log (tail -F: waits for it, survives rotation and truncation) and alert."""
    import threading

    from losslens.reporters import live
    from losslens.watch import Watcher, lines_from

    with user_errors():
        settings = _settings(config)
        fmt = format or settings.format
        threshold = _severity(exit_on)
        from losslens.logs.registry import check_format

        check_format(fmt)
        w = settings.watch
        watcher = Watcher("<stdin>" if log == "-" else log, None if fmt == "auto" else fmt,
                          settings.registry(), _ignore(ignore, settings), window=w["window"],
                          confirm=w["confirm"], cooldown_s=w["cooldown_s"])
    view = live.View(watcher, json=json, console=out, err=err)
    stop = threading.Event()
    code = ExitCode.OK
    if log != "-" and _record_source(log):
        _watch_records(log, watcher, view, threshold, w["interval_s"])
    try:
        last = 0.0
        for batch in lines_from(log, w["interval_s"], stop):
            if batch is None:  # end of standard input: settle and stop
                watcher.finish_input()
                for _ in range(max(1, w["confirm"])):
                    code = max(code, view.show(watcher.analyse(), threshold))
                break
            for line in batch:
                watcher.feed(line)
            due = watcher.new_records or any(not a.announced for a in watcher.active.values())
            if due and time.monotonic() - last >= w["interval_s"]:
                last = time.monotonic()
                code = max(code, view.show(watcher.analyse(), threshold))
            view.refresh()
            if code == ExitCode.FINDINGS:
                break
    except KeyboardInterrupt:
        stop.set()
        view.summary(interrupted=True)
        raise typer.Exit(ExitCode.INTERRUPTED) from None
    view.summary(interrupted=False)
    raise typer.Exit(code)


SEED_BOUNDS = "0,770,1216,1728,2432,3296,8193"


MAX_OPTIMIZED_BUCKETS = 64  # the bound search is O(K · distinct lengths²)


@app.command()
def replay(
    lengths: Annotated[str, typer.Option("--lengths", help="Per-sample lengths: .npy, text (one per "
                                         "line), Parquet/Arrow/CSV column, or a HF save_to_disk folder.")],
    bounds: Annotated[str, typer.Option("--bounds", help="Bucket edges, exclusive upper bounds: "
                                        "bucket k holds b_k <= length < b_k+1.")] = SEED_BOUNDS,
    token_budget: Annotated[int, typer.Option("--token-budget")] = 49152,
    max_batch_size: Annotated[int, typer.Option("--max-batch-size")] = 64,
    max_seq_len: Annotated[int, typer.Option("--max-seq-len")] = 8192,
    bs_from: Annotated[str, typer.Option("--bs-from", help="Batch size per bucket from budget // "
                                         "exclusive bound ('bound', 49152//8193=5) or // (bound-1) "
                                         "('max', 49152//8192=6).")] = "bound",
    strategy: Annotated[str, typer.Option("--strategy")] = "bucketed-shuffle",
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
    device: Annotated[str, typer.Option("--device", help="auto|cpu|cuda")] = "auto",
    out_file: Annotated[str | None, typer.Option("--out", help="Per-batch table (.parquet or .csv).")] = None,
    steps_out: Annotated[str | None, typer.Option("--steps-out", help="Per-optimizer-step table "
                                                  "(.parquet or .csv).")] = None,
    html_out: Annotated[str | None, typer.Option(
        "--html", help="With --log: the post-mortem page, the replayed bucket of each step under the "
        "loss.")] = None,
    json: JsonOpt = False,
) -> None:
    """Rebuild the batch/bucket sequence a batching strategy fed the model; correlate, compare."""
    with user_errors():
        from losslens.replay import STRATEGIES, Plan, batch_table, load_lengths, steps_frame
        from losslens.replay import replay as run_replay
        from losslens.reporters import replay_view

        if strategy not in STRATEGIES:
            raise UsageError(f"unknown strategy {strategy!r} (known: {', '.join(STRATEGIES)})")
        if device not in ("auto", "cpu", "cuda") or bs_from not in ("bound", "max"):
            raise UsageError("--device is auto, cpu or cuda; --bs-from is bound or max")
        try:
            edges = tuple(int(x) for x in bounds.split(","))
        except ValueError:
            raise UsageError(f"--bounds must be comma-separated integers, got {bounds!r}") from None
        if len(edges) < 2 or any(b <= a for a, b in zip(edges, edges[1:], strict=False)):
            raise UsageError(f"--bounds must increase: {bounds}")
        if edges[-1] <= max_seq_len:
            raise UsageError(f"the last bound ({edges[-1]}) must exceed --max-seq-len ({max_seq_len}): "
                             "bounds are exclusive")
        counts = {"--token-budget": token_budget, "--max-batch-size": max_batch_size, "--epochs": epochs,
                  "--grad-accum": grad_accum, "--world-size": world_size, "--null-seeds": null_seeds}
        for option, value in counts.items():
            if value < 1:
                raise UsageError(f"{option} must be >= 1, got {value}")
        if optimize_bounds is not None and not 1 <= optimize_bounds <= MAX_OPTIMIZED_BUCKETS:
            raise UsageError(f"--optimize-bounds K takes 1 to {MAX_OPTIMIZED_BUCKETS} buckets, got "
                             f"{optimize_bounds}")
        _writable(out_file, steps_out, html_out)
        lens = load_lengths(lengths, column)
        steps = loss = None
        if log is not None:
            from losslens.logs import read_log

            data = read_log(log)
            if "loss" not in data.train.columns:
                raise UsageError("no loss metric in this log", source=log)
            steps, loss = data.train["step"].to_numpy(), data.train["loss"].cast(float).to_numpy()
        plan = Plan(edges, token_budget, max_batch_size, max_seq_len, bs_from)
        from rich.progress import Progress

        with Progress(console=err, transient=True, disable=json or not err.is_terminal) as bar:
            phases: dict[str, object] = {}

            def progress(phase: str, done: int, total: int) -> None:
                if phase not in phases:
                    phases[phase] = bar.add_task(phase, total=total)
                bar.update(phases[phase], completed=done)  # type: ignore[arg-type]

            report, eps = run_replay(lens, plan, strategy, seed, epochs, grad_accum, world_size,
                                     device, compare, optimize_bounds, steps, loss, step_offset,
                                     null_seeds, progress)
        if log is not None and "correlation" in report:
            from losslens.analyze import analyze as run_analysis
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
        elif html_out:
            raise UsageError("--html needs --log (the page shows the replay under the log's loss)")
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


def _write_pages(report, log, html_out: str | None, plot: str | None, several: bool) -> None:
    """--html / --plot; with several logs the file names get the log's name."""
    def name(path: str) -> str:
        if not several:
            return path
        stem, dot, ext = path.rpartition(".")
        tag = os.path.basename(report.source).replace(".", "_")
        return f"{stem}-{tag}.{ext}" if dot else f"{path}-{tag}"

    if html_out:
        from losslens.reporters import html

        with open(name(html_out), "w", encoding="utf-8") as f:
            f.write(html.render(report, log))
    if plot:
        from losslens.reporters import png

        png.write(report, log, name(plot))


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


def _watch_records(path: str, watcher, view, threshold, interval: float) -> None:
    """Event files, MLflow run folders and whole JSON documents (trainer_state.json): re-read when
    they change, analyse, alert."""
    from pathlib import Path

    from losslens.logs import read_log

    def signature() -> tuple:
        p = Path(path)
        files = [p] if p.is_file() else sorted(x for x in (p / "metrics").rglob("*") if x.is_file())
        return tuple((str(f), f.stat().st_size) for f in files)

    code, last, data = ExitCode.OK, None, None
    try:
        while True:
            sig = signature()
            unsettled = any(not a.announced or a.missing for a in watcher.active.values())
            if sig != last or (unsettled and data is not None):
                if sig != last:
                    with user_errors():
                        data = read_log(path)
                    last = sig
                code = max(code, view.show(watcher.analyse_log(data), threshold))
                if code == ExitCode.FINDINGS:
                    break
            time.sleep(interval)
    except KeyboardInterrupt:
        view.summary(interrupted=True)
        raise typer.Exit(ExitCode.INTERRUPTED) from None
    view.summary(interrupted=False)
    raise typer.Exit(code)


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
        table.add_row(Text(d.name), Text(", ".join(d.metrics)), Text(d.title))
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
