"""Readers: every supported log format into one canonical frame."""

from losslens.logs.reader import LogData, Segment, from_arrays, read_log, sniff
from losslens.logs.registry import BY_NAME, FORMATS

__all__ = ["BY_NAME", "FORMATS", "LogData", "Segment", "from_arrays", "read_log", "sniff"]
