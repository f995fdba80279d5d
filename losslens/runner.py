"""The logs a command names, read and analysed: ``Options`` (settings and the options that shape
reading and analysis, checked when made) and ``results``, one ``Result`` per log found."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from losslens.discover import expand
from losslens.errors import LossLensError, UsageError
from losslens.findings import ExitCode, Severity

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
    def make(cls, config: str | None, fmt: str | None, ignore: str | None, metric: list[str] | None,
             quiet: bool = False, verbose: bool = False, skip_unreadable: bool = False,
             jobs: int | None = 1) -> Options:
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
        return cls(settings, fmt, ignore_kinds(ignore, settings), tuple(metric or settings.metric),
                   quiet, verbose, skip_unreadable, jobs or default_jobs())

    @property
    def format(self) -> str | None:
        """The format forced, None for 'auto'."""
        return None if self.fmt == "auto" else self.fmt


def ignore_kinds(value: str | None, settings: Any) -> frozenset[str]:
    """``--ignore spike,plateau`` (else the settings' ``ignore``), each a known finding kind."""
    from losslens.detectors import REGISTRY

    given = settings.ignore if value is None else value.split(",")
    kinds = frozenset(k.strip() for k in given if k.strip())
    known = {d.name for d in REGISTRY}
    unknown = sorted(kinds - known)
    if unknown:
        raise UsageError(f"unknown finding kind(s) for --ignore: {', '.join(unknown)} "
                         f"(known: {', '.join(sorted(known))})")
    return kinds


@dataclass(frozen=True)
class Result:
    """One log: its data and report, or why it could not be read (``error``); ``skipped`` when
    --skip-unreadable passed over it; ``explicit`` when it was named, not found by a walk."""

    source: str
    log: LogData | None
    report: Report | None
    error: str | None = None
    skipped: bool = False
    explicit: bool = True


def default_jobs() -> int:
    """The cores this process may use."""
    import os

    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


Analysed = tuple["LogData | None", "Report | None", "str | None"]  # data, report, or why not


def analyse_one(path: str, options: Options) -> Analysed:
    """One log read and analysed: (its data, its report, None), or (None, None, why it could not
    be read). Runs in the calling process or in a worker (--jobs)."""
    from losslens.analysis import analyze_log
    from losslens.logs import read_log

    try:
        log, report = analyze_log(read_log(path, options.format), options.settings.registry(),
                                  options.ignore, options.metrics)
    except LossLensError as exc:
        return None, None, str(exc)
    return log, report, None


def _analysed(paths: list[str], options: Options) -> Iterator[Analysed]:
    """``analyse_one`` of each path, in order: in this process, or over ``options.jobs`` worker
    processes when there are several logs (spawned, not forked: polars' threads do not survive a
    fork), each taking the logs in chunks."""
    jobs = min(options.jobs, len(paths))
    if jobs <= 1:
        yield from (analyse_one(p, options) for p in paths)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from functools import partial

    chunk = max(1, min(64, len(paths) // (4 * jobs)))
    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        yield from pool.map(partial(analyse_one, options=options), paths, chunksize=chunk)


def results(found: Walk, options: Options, names: list[str]) -> Iterator[Result]:
    """Each log of the walk read and analysed, in the walk's order (over ``options.jobs``
    processes when there are several). A log that cannot be read is a Result with its error
    (``skipped`` with --skip-unreadable); a walk that finds no log, or none that could be read, is
    a UsageError."""
    if not found.targets and not found.unlisted:
        passed = (f" ({len(found.ignored)} file(s) passed over as not logs; --verbose lists them)"
                  if found.ignored else "")
        raise UsageError(f"no log files found in {', '.join(names)}{passed}")
    read = 0
    for folder, why in found.unlisted:  # may hold logs: an error, as a log that cannot be read is
        yield Result(folder, None, None, f"{folder}: {why}", options.skip_unreadable, False)
    for t, (log, report, error) in zip(found.targets, _analysed([t.path for t in found.targets], options),
                                       strict=True):
        if error is not None:
            skipped = options.skip_unreadable
            read += not skipped
            yield Result(t.path, None, None, error, skipped, t.explicit)
            continue
        read += 1
        yield Result(t.path, log, report)
    if read == 0:
        raise UsageError(f"no log could be read in {', '.join(names)}")


def gate(result: Result, fail_on: Severity, forced_metrics: bool = False) -> tuple[ExitCode, str | None]:
    """``check``'s exit code for one log, and why it is an error when that is not plain: a log
    that could not be read is 2; one whose loss could not be identified (and no --metric named
    it) is 2 with the no-loss finding's summary, unless a finding fails it anyway (a NaN grad
    norm found without a loss: 1); else 1 when a finding is at or above ``fail_on``."""
    report = result.report
    if report is None:
        return ExitCode.ERROR, None
    code = verdict(report.worst(), report.loss is not None or forced_metrics, fail_on)
    if report.loss is None and not forced_metrics:
        why = next(f.summary for f in report.findings if f.kind == "no_loss_metric")
        return code, f"{report.source}: {why}"
    return code, None


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


def verdict(worst: Severity | None, loss_known: bool, fail_on: Severity) -> ExitCode:
    """The gate's rule for a log that was read: 1 when its worst finding is at or above ``fail_on``;
    else 2 when its loss is not known (no loss-like column, and no --metric named one); else 0."""
    if worst is not None and worst >= fail_on:
        return ExitCode.FINDINGS
    return ExitCode.OK if loss_known else ExitCode.ERROR
