"""The reader interface: every format sniffs a sample and parses lines into a Sink."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from datetime import datetime

from losslens.logs.records import Accounting, Sink

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
# the prefix torchrun puts on each rank's lines ('[rank3]: ', '[default3]: ' with --tee)
RANK_PREFIX = re.compile(r"^\s*\[(?:[A-Za-z_]+)?(\d+)\]:\s?")
TIMESTAMP = re.compile(
    r"^\[?(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d{1,6})?)(?:Z|[+-]\d\d:?\d\d)?\]?")


def leading_time(line: str) -> datetime | None:
    m = TIMESTAMP.match(line)
    if not m:
        return None
    try:
        return datetime.fromisoformat(m.group(1).replace(",", "."))
    except ValueError:
        return None


class LineParser(ABC):
    """State for one pass over one log. ``feed`` returns None when the line was understood
    (it produced or continued a record, or is part of the format's own structure) and a
    skip reason otherwise."""

    def __init__(self, sink: Sink):
        self.sink = sink

    @abstractmethod
    def feed(self, lineno: int, line: str) -> str | None:
        """Parse one line; None when understood, else the reason it was skipped."""

    def finish(self) -> None:
        """Flush a record still being assembled (multi-line formats)."""


class Format:
    """A log format: ``name`` for --format, a one-line ``title``, an ``example`` line."""

    name: str = ""
    title: str = ""
    example: str = ""
    whole_file: bool = False  # parsed as one document (JSON), not line by line
    # a catch-all that also reads other formats' lines ('key: value'): it is chosen only when no
    # specific format reads at least a quarter as many sample lines
    generic: bool = False
    keeps_records: bool = False  # its parser revisits records it emitted (never compacted)

    def sniff(self, lines: list[str]) -> int:
        """How many of these sample lines (non-blank, from the head) this format reads."""
        return 0

    def parser(self, sink: Sink) -> LineParser:
        """A fresh parser for one pass (line formats)."""
        raise TypeError(f"{self.name} is read as a whole document")

    def parse_text(self, text: str, lines: list[str], sink: Sink, acc: Accounting,
                   source: str) -> None:
        """Parse a whole document (whole-file formats)."""
        raise TypeError(f"{self.name} is read line by line")


class RegexLineParser(LineParser):
    """A parser whose lines each match one of a few patterns; subclasses map the groups."""

    noise: tuple[tuple[re.Pattern[str], str], ...] = ()

    def classify_noise(self, line: str) -> str:
        for pattern, reason in self.noise:
            if pattern.search(line):
                return reason
        return "unrecognised line"


COMMON_NOISE: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^\s*(Traceback \(most recent call last\)|File \"|\w*(Error|Exception|Warning)\b)"
                r"|\.py:\d+: \w*(Warning|Error)\b"  # warnings.warn: 'x.py:788: UserWarning: …'
                r"|\[(WARNING|ERROR)\]"),  # DeepSpeed's ' [WARNING] ' (ANSI colours around it)
     "traceback or warning"),
    # a PyTorch module's repr printed at start-up: '    (q_proj): Linear(in_features=512, …)'
    (re.compile(r"^\s+\([\w.]+\): \w+\(|^\s*\)$"), "model printout"),
    (re.compile(r"\d+%\|.*\|\s*\d+/\d+"), "progress bar"),
    # glog, as torch's C++ side, dynamo and torchrun write: 'W0530 14:48:26.433000 2622492 x.py:1233] …'
    # and TensorFlow's '2025-03-02 10:00:01.123456: I tensorflow/core/util/port.cc:113] …'
    (re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ \S+:\d+\]"
                r"|^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWEF] \S+:\d+\]"), "framework log line"),
)
