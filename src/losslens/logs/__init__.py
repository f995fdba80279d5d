"""Readers: every supported log format into one canonical frame."""

from losslens.logs.frame import LogData, Segment, assemble, from_arrays
from losslens.logs.reader import read_log, sniff
from losslens.logs.registry import BY_NAME, FORMATS

__all__ = ["BY_NAME", "FORMATS", "LogData", "Segment", "assemble", "from_arrays", "read_log", "sniff"]
