"""The reader interface: every format sniffs a sample and parses lines into a Sink."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from losslens.logs.sink import Accounting, Sink, feed_line
from losslens.logs.source import Source, decode_lines

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
# the prefix torchrun puts on each rank's lines ('[rank3]: ', '[default3]: ' with --tee)
RANK_PREFIX = re.compile(r"^\s*\[(?:[A-Za-z_]+)?(\d+)\]:\s?")
TIMESTAMP = re.compile(
    r"^\[?(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d{1,6})?)(?:Z|[+-]\d\d:?\d\d)?\]?")


# prefixes that whatever captured the log put before the trainer's own text, stripped in sniffing,
# every per-line reader and watch (one at a time, up to four deep):
# the wall time a capture's prefix holds: an ISO 8601 / RFC 3339 time or a month-first date
CAPTURE_TIME = (r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d{1,9})?|"
                r"\d\d/\d\d/\d{4} \d\d:\d\d:\d\d(?:[.,]\d{1,9})?")
PREFIXES = (
    re.compile(r"^>+ ?"),  # a log pasted into an issue or a mail as a quote
    # ISO 8601 / RFC 3339 time ('kubectl logs --timestamps', 'docker logs -t', 'ts -s %FT%T',
    # Python logging's asctime, '[2024-05-01 10:00:00]'), or the month-first date of Hugging Face's
    # example scripts ('12/01/2024 10:00:00 - INFO - __main__ - ', datefmt '%m/%d/%Y %H:%M:%S'),
    # then a space, ' - ' or ' | '
    re.compile(rf"^\[?({CAPTURE_TIME})(?:Z|[+-]\d\d:?\d\d)?\]?(?:\s+-\s+|\s*\|\s*|\s+)"),
    # syslog / journald / `ts`: 'Dec  1 10:00:00 ' (then 'host unit[pid]: ' for journald)
    re.compile(r"^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d(?:\.\d+)?\s+(?:[\w.-]+ [\w.@-]+\[\d+\]: )?"),
    # Slurm's task label ('srun --label': '0: ', ' 12: ')
    re.compile(r"^\s*\d{1,5}: "),
    # Python logging's level (and logger name): 'INFO:root:', 'INFO - ', '[INFO] ', '__main__ - INFO - ',
    # and a logger's name after the level, 'INFO - __main__ - ' (Hugging Face's example scripts) or
    # 'INFO - transformers.trainer - ': a dunder or dotted name only ('INFO - Validation - Loss: …'
    # is a message)
    re.compile(r"^(?:\[?(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\]?\s+-\s+"
               r"(?:__\w+__|[A-Za-z_]\w*(?:\.\w+)+)\s+-\s+|"
               r"(?:[\w.]+\s+-\s+)?\[?(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\]?"
               r"(?::[\w.<>]*:|\s+-\s+|\s*\|\s*|\s+))"),
    # loguru's default after its time and level: 'yolox.core.trainer:after_iter:246 - '
    re.compile(r"^[\w.<>]+:[\w<>]+:\d+ - "),
    # abseil / glog (JAX and TensorFlow trainers: MaxText, T5X): 'I1203 10:00:01.123456 139872
    # train.py:512] ' (no year: the time is not kept)
    re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d{6}\s+\d+ [^\s\]]+:\d+\] "),
)


def strip_prefixes(line: str) -> tuple[str, datetime | None]:
    """``line`` without the prefixes a capture put before it, and the time one of them held."""
    when = None
    for _ in range(4):
        for pattern in PREFIXES:
            m = pattern.match(line)
            if m and m.end() < len(line):
                if when is None and m.groups() and m.group(1):
                    when = _iso(m.group(1))
                line = line[m.end():]
                break
        else:
            break
    return line, when


def _iso(text: str) -> datetime | None:
    if text[2:3] == "/":  # '12/01/2024 10:00:00': month first (day first where it cannot be)
        month, day, rest = text[:2], text[3:5], text[6:]
        if int(month) > 12:
            month, day = day, month
        text = f"{rest[:4]}-{month}-{day}{rest[4:]}"
    text = text.replace(",", ".")
    if "." in text:  # nanoseconds (kubectl) are more than datetime holds
        head, frac = text.split(".", 1)
        text = f"{head}.{frac[:6]}"
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def whole(digits: str) -> int:
    """A run of digits (a regex group) as an int; past 19 digits 2**63, a number past int64 all
    the same (no step for the sink, no time), without int()'s 4,300-digit limit: a damaged line
    is never a traceback."""
    return int(digits) if len(digits) <= 19 else 2**63


def leading_time(line: str) -> datetime | None:
    """The wall time a line starts with (a capture's timestamp), or None."""
    m = TIMESTAMP.match(line)
    return _iso(m.group(1)) if m else None


SMALL_BYTES = 256 << 10  # below this the per-line parsers are faster than polars' per-query cost


def local_time(seconds: float) -> datetime | None:
    """A POSIX time as local wall time (``datetime.fromtimestamp``); None where there is no such
    time (a damaged timestamp: NaN, or past the year 9999): the record keeps its values."""
    try:
        return datetime.fromtimestamp(seconds)
    except (ValueError, OverflowError, OSError):
        return None


def local_time_ms(ms: int) -> datetime | None:
    """``local_time`` of a POSIX time in whole milliseconds, exactly (a float of seconds loses
    microseconds past the year 2300)."""
    at = local_time(ms // 1000)
    return None if at is None else at + timedelta(milliseconds=ms % 1000)


def small(src: Source) -> bool:
    """A file small enough to read line by line (the vectorised readers' cost is per query)."""
    return src.size is not None and src.size < SMALL_BYTES


def count_matching(patterns: tuple[re.Pattern[str], ...], lines: list[str]) -> int:
    """How many of ``lines`` one of ``patterns`` finds (a format's sniff score)."""
    searches = [p.search for p in patterns]
    n = 0
    for line in lines:  # (plain loops: this runs for most formats on every log sniffed)
        for search in searches:
            if search(line):
                n += 1
                break
    return n


# No line format but JSON writes a record this long on one line: 4,096 fields (the most a
# record may have, sink.MAX_KEYS) of 256 bytes each. A line as long (a dumped tensor, a blob, a
# line of one character) is skipped unread by the others, and the format is sniffed without it:
# their patterns took seconds on such a line, and it could be no record of theirs.
LONG_LINE = 1 << 20
TOO_LONG = (f"a line of {LONG_LINE >> 20} MiB or more, too long for a record of this format (a dumped "
            "tensor, a blob, more than 4,096 fields)")


class LineParser(ABC):
    """State for one pass over one log. ``feed`` returns None when the line was understood
    (it produced or continued a record, or is part of the format's own structure) and a
    skip reason otherwise."""

    long_lines = False  # reads records longer than LONG_LINE (a JSON line of histograms)

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
    long_lines: bool = False  # its records may be longer than LONG_LINE (JSON Lines)
    # a column-wise reader for large files, in the format's own module: (text, lineno, sink,
    # parser) -> the rows it read (``columnar.Rows``, run on each chunk by ``stream.LineStream``);
    # the parser reads the lines it leaves
    rows: Callable[..., Any] | None = None
    # each record is one line and the parser keeps nothing from one line for the next: a large
    # file may be read by the skeleton reader (``skeleton.py``, with the ``fast`` extra)
    line_records: bool = False
    # a parser that keeps state across lines (records over several lines), where some lines are
    # records of their own: whether a line is one, which the parser reads alone once the line
    # before it was one too and which leaves it only its step (the parser's ``read_elsewhere``
    # takes the lines and steps of those read for it). A large file may then be read by the
    # skeleton reader too.
    single_line: Callable[[str], bool] | None = None

    @property
    def one_line_records(self) -> bool:
        """Whether the skeleton reader may read this format's large files."""
        return self.line_records or self.single_line is not None

    def chunk_reader(self, size: int | None = None) -> Callable[..., None] | None:
        """A fresh column-wise reader of this format's chunks that keeps what it learns from one
        chunk for the next (key=value's templates): (chunk, first line number, sink, acc, parser,
        strip); None where ``rows`` is the format's column-wise path (or it has none). ``size``:
        the file's bytes, where known."""
        return None

    def sniff(self, lines: list[str]) -> int:
        """How many of these sample lines (non-blank, from the head) this format reads."""
        return 0

    def parser(self, sink: Sink) -> LineParser:
        """A fresh parser for one pass (line formats)."""
        raise TypeError(f"{self.name} is read as a whole document")

    def parser_for(self, sink: Sink, first_line: str) -> LineParser:
        """The parser for a log whose first non-blank line is ``first_line`` (a CSV's delimiter)."""
        return self.parser(sink)

    def read(self, src: Source, sink: Sink, acc: Accounting, strip: bool = False,
             head: list[str] | None = None) -> None:
        """Read a whole document into ``sink`` and ``acc`` (whole-file formats: a line format's
        lines are read by ``stream.LineStream``)."""
        if not self.whole_file:
            raise TypeError(f"{self.name} is read line by line (logs/stream.py)")
        data = src.read_all()
        text = data.decode("utf-8", errors="replace")
        lines = decode_lines(data)
        del data  # the text and its lines are what the format reads
        acc.total = len(lines)
        self.parse_text(text, lines, sink, acc, src.name)

    def parse_text(self, text: str, lines: list[str], sink: Sink, acc: Accounting,
                   source: str) -> None:
        """Parse a whole document (whole-file formats)."""
        raise TypeError(f"{self.name} is read line by line")


UNRECOGNISED = "unrecognised line"


class RegexLineParser(LineParser):
    """A parser whose lines each match one of a few patterns; subclasses map the groups."""

    noise: tuple[tuple[re.Pattern[str], str], ...] = ()

    def classify_noise(self, line: str) -> str:
        for pattern, reason in self.noise:
            if pattern.search(line):
                return reason
        return UNRECOGNISED


COMMON_NOISE: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^\s*(Traceback \(most recent call last\)|File \"|\w*(Error|Exception|Warning)\b)"
                r"|\.py:\d+: \w*(Warning|Error)\b"  # warnings.warn: 'x.py:788: UserWarning: …'
                r"|\[(WARNING|ERROR)\]"),  # DeepSpeed's ' [WARNING] ' (ANSI colours around it)
     "traceback or warning"),
    # a PyTorch module's repr printed at start-up: '    (q_proj): Linear(in_features=512, …)'
    (re.compile(r"^\s+\([\w.]+\): \w+\(|^\s*\)$"), "model printout"),
    # (a count taken whole from its first digit: a run of a million digits is scanned once)
    (re.compile(r"(?<!\d)\d++%\|.*\|\s*\d+/\d+"), "progress bar"),
    # glog, as torch's C++ side, dynamo and torchrun write: 'W0530 14:48:26.433000 2622492 x.py:1233] …'
    # and TensorFlow's '2025-03-02 10:00:01.123456: I tensorflow/core/util/port.cc:113] …'
    (re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ \S+:\d+\]"
                r"|^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWEF] \S+:\d+\]"), "framework log line"),
)


def feed_ranked(parser: LineParser, sink: Sink, lineno: int, line: str, strip: bool = False) -> str | None:
    """Feed one line to ``parser``. With ``strip`` (see ``reader.strips``), the prefixes a capture put
    before it (a timestamp, a logging level, a '> ' quote: see ``strip_prefixes``) are cut off,
    their time kept on the records the line completes; a torchrun rank prefix ('[rank3]: ') is
    cut off too and those records are tagged with that rank (see ``frame.assemble``)."""
    if len(line) >= LONG_LINE and not parser.long_lines:
        return TOO_LONG
    rest, when = strip_prefixes(line) if strip else (line, None)
    m = RANK_PREFIX.match(rest) if "]:" in rest[:32] else None
    if m is None and rest is line:
        return feed_line(parser, lineno, line)
    n_train, n_eval = len(sink.train), len(sink.eval)
    if when is not None:
        times = sink.line_times
        times[lineno] = when
        if len(times) > LINE_TIMES:  # (a dict keeps its order: the oldest half goes)
            for old in list(times)[:LINE_TIMES // 2]:
                del times[old]
    reason = feed_line(parser, lineno, rest[m.end():] if m else rest)
    if reason == UNRECOGNISED and rest is not line and isinstance(parser, RegexLineParser):
        reason = parser.classify_noise(line)  # its prefix may say what it is (a framework's glog line)
    for rec in sink.train[n_train:] + sink.eval[n_eval:]:
        if m:
            rec["rank"] = int(m.group(1))
        if when is not None and rec.get("time") is None:
            # the time of the line that opened the record ('Epoch 3/10' of a Keras epoch), as when
            # the parser reads the time itself or the column-wise path joins it on the line
            rec["time"] = sink.line_times.get(rec["line"], when)
    return reason


LINE_TIMES = 4096  # lines whose capture time is kept for a record that a later line completes


def finish_fed(parser: LineParser, sink: Sink) -> None:
    """``parser.finish()``, the record it completes timed as ``feed_ranked`` times one (by the
    capture's time of the line that opened it)."""
    n_train, n_eval = len(sink.train), len(sink.eval)
    parser.finish()
    for rec in sink.train[n_train:] + sink.eval[n_eval:]:
        if rec.get("time") is None and (when := sink.line_times.get(rec["line"])) is not None:
            rec["time"] = when
