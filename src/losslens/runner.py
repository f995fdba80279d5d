"""The logs a command names, read and analysed: ``Options`` (settings and the options that shape
reading and analysis, checked when made) and ``results``, one ``Result`` per log found."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from losslens.discover import expand
from losslens.errors import LossLensError, NotALog, UsageError

if TYPE_CHECKING:
    from losslens.discover import Walk
    from losslens.findings import Report
    from losslens.logs import LogData


walk = expand  # the logs that files, globs and run folders name, and what was passed over (and why)


@dataclass(frozen=True)
class Options:
    """What every log command shares: settings and the options that shape reading and analysis."""

    settings: Any
    fmt: str
    ignore: frozenset[str]
    metrics: tuple[str, ...]
    quiet: bool = False
    verbose: bool = False
    skip_unreadable: bool = False
    jobs: int = 1  # processes reading and analysing logs (several logs only)

    @classmethod
    def make(cls, config: str | None, fmt: str | None, ignore: list[str] | str | None,
             metric: list[str] | None, quiet: bool = False, verbose: bool = False,
             skip_unreadable: bool = False, jobs: int | None = 1,
             select: list[str] | None = None) -> Options:
        """From the command's options; the settings file fills what they leave out."""
        from losslens.config import load
        from losslens.logs.registry import check_format

        settings = load(config)
        if quiet and verbose:
            raise UsageError("--quiet and --verbose disagree: pass one")
        fmt = fmt if fmt is not None else settings.format
        check_format(fmt)
        if jobs is not None and jobs < 1:
            raise UsageError(f"--jobs must be >= 1, got {jobs}")
        return cls(settings, fmt, left_out(select, ignore, settings), tuple(metric or settings.metric),
                   quiet, verbose, skip_unreadable, jobs or default_jobs())

    @property
    def format(self) -> str | None:
        """The format forced, None for 'auto'."""
        return None if self.fmt == "auto" else self.fmt


def kinds_named(values: list[str] | str | None, option: str) -> frozenset[str]:
    """Finding kinds as an option gives them (repeated, or comma-separated), each a known one."""
    from losslens.detectors import REGISTRY

    if values is None:
        return frozenset()
    given = [values] if isinstance(values, str) else values
    kinds = frozenset(k.strip() for v in given for k in v.split(",") if k.strip())
    known = {d.name for d in REGISTRY}
    unknown = sorted(kinds - known)
    if unknown:
        raise UsageError(f"unknown finding kind(s) for {option}: {', '.join(unknown)} "
                         f"(known: {', '.join(sorted(known))})")
    return kinds


def left_out(select: list[str] | None, ignore: list[str] | str | None, settings: Any) -> frozenset[str]:
    """The finding kinds not to run: all but ``--select`` (else the settings' ``select``; empty:
    all), and ``--ignore`` (else the settings' ``ignore``)."""
    from losslens.detectors import REGISTRY

    chosen = kinds_named(select if select is not None else settings.select, "--select")
    dropped = kinds_named(ignore if ignore is not None else settings.ignore, "--ignore")
    if chosen:
        dropped |= {d.name for d in REGISTRY} - chosen
    return frozenset(dropped)


@dataclass(frozen=True)
class Result:
    """One log: its data and report, or why it could not be read (``error``); ``skipped`` when
    --skip-unreadable passed over it; ``explicit`` when it was named, not found by a walk;
    ``usage`` when the error is the options' (a --metric the log lacks), not the log's."""

    source: str
    log: LogData | None
    report: Report | None
    error: str | None = None
    skipped: bool = False
    explicit: bool = True
    usage: bool = False
    seconds: float = 0.0  # the time its reading and analysis took


def default_jobs() -> int:
    """The cores this process may use."""
    import os

    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


# (data, report, None, None, seconds), or (None, None, why not, what kind of error, seconds): "not
# a log" for a file that is not a log by its content, "usage" for the options', "read" for the rest
Analysed = tuple["LogData | None", "Report | None", "str | None", "str | None", float]


def analyse_one(path: str, options: Options) -> Analysed:
    """One log read and analysed, or why it could not be. Runs in the calling process or in a
    worker (--jobs)."""
    import time

    from losslens.analysis import analyze_log
    from losslens.logs import read_log

    started = time.perf_counter()
    try:
        log, report = analyze_log(read_log(path, options.format), options.settings.registry(),
                                  options.ignore, options.metrics)
    except LossLensError as exc:
        kind = "not a log" if isinstance(exc, NotALog) else "usage" if isinstance(exc, UsageError) else "read"
        return None, None, str(exc), kind, time.perf_counter() - started
    return log, report, None, None, time.perf_counter() - started


def not_a_log(report: Report) -> str | None:
    """Why a log a folder walk found is not a run's log by its content, or None: it holds no
    training record and at most one evaluation (an evaluation summary such as eval_results.txt)."""
    if report.steps["count"] or report.eval_records > 1:
        return None
    return "a summary, not a log (no training records; at most one evaluation record)"


def _analysed(paths: list[str], options: Options) -> Iterator[Analysed]:
    """``analyse_one`` of each path, in order: in this process, or over ``options.jobs`` worker
    processes when there are several logs, each taking the logs in chunks."""
    jobs = min(options.jobs, len(paths))
    if jobs <= 1:
        yield from (analyse_one(p, options) for p in paths)
        return
    from functools import partial

    from losslens.workers import in_order

    chunk = max(1, min(64, len(paths) // (4 * jobs)))
    yield from in_order(partial(analyse_one, options=options), paths, jobs, chunk)


def results(found: Walk, options: Options, names: list[str]) -> Iterator[Result]:
    """Each log of the walk read and analysed, in the walk's order (over ``options.jobs``
    processes when there are several). A log that cannot be read is a Result with its error
    (``skipped`` with --skip-unreadable). A file the walk found that is not a log by its content
    (empty, prose, a summary) is added to ``found.ignored`` instead. A walk that finds no log, or
    none that could be read, is a UsageError."""
    if not found.targets and not found.unlisted:
        raise UsageError(f"no log files found in {', '.join(names)}{passed_over(found)}")
    read = 0
    for folder, cannot in found.unlisted:  # may hold logs: an error, as a log that cannot be read is
        yield Result(folder, None, None, f"{folder}: {cannot}", options.skip_unreadable, False)
    analysed = _analysed([t.path for t in found.targets], options)
    for t, (log, report, error, kind, seconds) in zip(found.targets, analysed, strict=True):
        if not t.explicit:
            why: str | None = None
            if kind == "not a log" and error is not None:
                why = error.removeprefix(f"{t.path}: ")
            elif report is not None:
                why = not_a_log(report)
            if why is not None:
                found.ignored.append((t.path, f"not a log by its content: {why}"))
                continue
        if error is not None:
            skipped = options.skip_unreadable and kind != "usage"
            read += not skipped
            yield Result(t.path, None, None, error, skipped, t.explicit, kind == "usage", seconds)
            continue
        read += 1
        yield Result(t.path, log, report, seconds=seconds)
    if read == 0:
        raise UsageError(f"no log could be read in {', '.join(names)}{passed_over(found)}")


def same_data(results: Iterator[Result]) -> Iterator[Result]:
    """``results`` read as runs sharing a data order (``analyze --same-data``): all of them first,
    then each with the spikes it shares with another said as such (``analysis.same_data``)."""
    import dataclasses

    from losslens.analysis import same_data as shared

    every = list(results)
    read = [r.report is not None and r.log is not None for r in every]
    reports = iter(shared([(r.log, r.report) for r, ok in zip(every, read, strict=True) if ok]))  # type: ignore[misc]
    for r, ok in zip(every, read, strict=True):
        yield dataclasses.replace(r, report=next(reports)) if ok else r


def passed_over(found: Walk) -> str:
    """' (3 file(s) passed over as not logs; --verbose lists them)', or '' when none was."""
    return (f" ({len(found.ignored)} file(s) passed over as not logs; --verbose lists them)"
            if found.ignored else "")


def unchecked_loss(result: Result, detectors: tuple[Any, ...]) -> str | None:
    """A note for ``check`` when most of the checks on the loss could not run because it has too
    few values (a pasted log of a few lines, or a loss read on a sliver of the records): an 'ok'
    then rests on the checks that did run, and the line says which."""
    report, log = result.report, result.log
    if report is None or report.loss is None:
        return None
    on_loss = [d.name for d in detectors if d.wants(["loss"])]
    times = Counter(s.detector for s in report.skipped if s.metric == "loss")
    skipped = {name for name, n in times.items() if n >= report.segments}  # in every segment
    if 2 * len(skipped & set(on_loss)) <= len(on_loss):
        return None
    ran = [name for name in on_loss if name not in skipped]
    values = (f"{log.train['loss'].count():,} loss value(s) in {log.train.height:,} records"
              if log is not None and "loss" in log.train.columns else "too few loss values")
    return (f"{values}: {len(on_loss) - len(ran)} of {len(on_loss)} checks on the loss need more "
            f"(--verbose says which); only {', '.join(ran) or 'none'} could run")
