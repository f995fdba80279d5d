"""losslens: read training logs and say, with evidence, when the run is sick."""

from typing import TYPE_CHECKING, Any

from losslens.errors import LossLensError

__version__ = "0.1.0"
__all__ = ["LogData", "LossLensError", "__version__", "read_log"]

if TYPE_CHECKING:
    from losslens.logs import LogData, read_log


def __getattr__(name: str) -> Any:
    # the readers (and polars) load on first use, so that `losslens --help` starts fast
    if name in ("LogData", "read_log"):
        from losslens import logs

        return getattr(logs, name)
    raise AttributeError(f"module 'losslens' has no attribute {name!r}")
