"""losslens: read training logs and say, with evidence, when the run is sick.

The public API::

    import losslens
    log = losslens.read_log("fixtures/seed004_dflash.log")  # LogData: polars frames + accounting
    report = losslens.analyze(log)               # Report: findings, loss column, skipped checks
    report.exit_code(losslens.Severity.ERROR)    # what `losslens check` exits with for it
    report                                       # in a notebook: the findings table (HTML)

``Finding``, ``Report``, ``Severity`` and ``ExitCode`` live in ``losslens.findings``; the
detectors in ``losslens.detectors.REGISTRY``; every error is a ``LossLensError``.
"""

from typing import TYPE_CHECKING, Any

from losslens.errors import LossLensError
from losslens.findings import ExitCode, Finding, Report, Severity

__version__ = "0.1.0"
__all__ = ["ExitCode", "Finding", "LogData", "LossLensError", "Report", "Severity", "__version__",
           "analyze", "read_log"]

if TYPE_CHECKING:
    from losslens.analysis import analyze
    from losslens.logs import LogData, read_log


def __getattr__(name: str) -> Any:
    # the readers (and polars) load on first use, so that `losslens --help` starts fast
    if name in ("LogData", "read_log"):
        from losslens import logs

        return getattr(logs, name)
    if name == "analyze":
        from losslens.analysis import analyze

        return analyze
    raise AttributeError(f"module 'losslens' has no attribute {name!r}")


def __dir__() -> list[str]:
    # the names loaded on first use are part of the API too (tab completion, dir())
    return sorted(set(globals()) | set(__all__))
