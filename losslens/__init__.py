"""losslens: read training logs and say, with evidence, when the run is sick."""

from losslens.errors import LossLensError
from losslens.logs import LogData, read_log

__version__ = "0.1.0"
__all__ = ["LogData", "LossLensError", "__version__", "read_log"]
