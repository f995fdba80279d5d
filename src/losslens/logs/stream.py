"""One incremental reader for line logs: a file read whole and a growing log followed live go
through the same code. A ``LineStream`` takes lines (``feed``, ``feed_lines``) or a file's chunks
(``feed_chunk``), chooses the format from the lines it holds by ``read_log``'s rules
(``sniff.choose``) unless told it, feeds each line to the format's parser, or a batch of lines
column-wise where the format has a way, and accounts for every line (parsed, skipped with its
reason, blank). ``read_log`` leaves the records in its sink; ``watch`` takes those read since it
last asked (``take``)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import polars as pl

from losslens.logs.base import Format, LineParser, feed_ranked, finish_fed
from losslens.logs.columnar import read_chunk
from losslens.logs.fast import large
from losslens.logs.registry import BY_NAME
from losslens.logs.sink import Accounting, Sink
from losslens.logs.sniff import choose, strips
from losslens.logs.source import Source, decode_lines
from losslens.logs.spill import trim_heap

TRIM_CHUNKS = 8  # chunks read between two returns of the C heap's free pages (see trim_heap)
FAST_BATCH = 500  # a batch of this many lines is read column-wise where the format has a way
SNIFF_AFTER = 20  # non-blank lines held before a live log's format is first chosen
# lines held before a live log's format is known (about the 8 MiB read_log looks into: a real log
# can open with 5,000 lines of compiler warnings); then key=value is assumed
SNIFF_MAX = 1 << 16


@dataclass
class Taken:
    """The records read since the last ``take``: dicts (per-line parsing) and frames (column-wise
    batches), train and eval apart; ``restarted``: the lines were read again from the first with
    another format, and what was taken before is void."""
    train: list[dict[str, Any]] = field(default_factory=list)
    eval: list[dict[str, Any]] = field(default_factory=list)
    frames: list[pl.DataFrame] = field(default_factory=list)
    eval_frames: list[pl.DataFrame] = field(default_factory=list)
    restarted: bool = False


class LineStream:
    """A line log read as it comes. ``fmt``: the format, when known (``--format``, or chosen on a
    file's head); else it is chosen from the first lines, again as they double while none is
    found, and a generic format ('key: value', which also reads a preamble's lines) is held
    provisionally: its lines are kept and sniffed again as they double, and a specific format
    found in them reads them all again. ``strip``: feed lines without a capture's prefixes
    (decided with the format where None). ``columnar``: read batches column-wise where the format
    has a way (a small file is read line by line: the column-wise cost is per query)."""

    def __init__(self, source_name: str, fmt: Format | None = None, strip: bool | None = None,
                 sink: Sink | None = None, acc: Accounting | None = None, columnar: bool = True,
                 first_line: str | None = None, size: int | None = None):
        self.size = size  # the file's bytes, where known (a format may read a large file its own way)
        self.sink = sink if sink is not None else Sink(source_name=source_name)
        self.acc = acc if acc is not None else Accounting()
        self.format = fmt
        self.columnar = columnar
        self.strip = bool(strip)
        self.parser: LineParser | None = None
        self.chunks: Callable[..., None] | None = None  # the format's column-wise reader (see _ready)
        if fmt is not None and strip is not None and first_line is not None:
            self._ready(fmt, strip, first_line)
        self.pending: list[tuple[int, str]] = []  # lines held until the format is chosen
        self.next_sniff = SNIFF_AFTER
        self.first_pending = 0.0
        self.sniffed_at = 0.0
        self.provisional = False
        self.kept: list[tuple[int, str]] = []  # the lines read under a provisional format
        self.next_resniff = 0
        self.before = Accounting()  # the accounting before the provisional format read a line
        self.restarted = False
        self.notes: list[str] = []

    # --- lines in ------------------------------------------------------------------------------

    def feed(self, line: str) -> None:
        """One line, as it comes."""
        counted = self._counted(line)
        if counted is None:
            return
        line, lineno = counted, self.acc.total
        if self.parser is None:
            self.pending.append((lineno, line))
            if len(self.pending) == 1:
                self.first_pending = time.monotonic()
            if self.format is None and len(self.pending) < self.next_sniff and not self._due():
                return
            self._start()
            return
        if self.provisional:
            self.kept.append((lineno, line))
            if len(self.kept) >= self.next_resniff and self._resniff():
                return  # (this line too was read again)
        self._line(lineno, line)

    def feed_lines(self, lines: list[str]) -> None:
        """``feed`` for each line; a batch of ``FAST_BATCH`` or more (a backlog, a log followed from
        its top, a fast writer) is read column-wise where the format has a way, as ``read_log``
        reads a file's chunks."""
        i = 0
        while self.parser is None and i < len(lines):
            self.feed(lines[i])
            i += 1
        rest = lines[i:] if i else lines
        if len(rest) >= FAST_BATCH and self._has_columns() and not self.provisional:
            # (a provisional format's lines are kept to be read again: line by line)
            self._chunk("\n".join(rest).replace("\r", "").encode("utf-8", errors="replace") + b"\n")
            return
        for line in rest:
            self.feed(line)

    def feed_chunk(self, chunk: bytes) -> None:
        """A file's chunk of whole lines, the format known: column-wise where it has a way,
        else line by line, the records gathered so far turned into frames first (a dict per
        record costs ten times its columns)."""
        assert self.format is not None
        if self.parser is not None and self._has_columns():
            self._chunk(chunk)
            return
        if not self.format.keeps_records:
            self.sink.compact()
        for raw in decode_lines(chunk):
            if (line := self._counted(raw)) is None:
                continue
            if self.parser is None and "\x00" not in line:
                self._ready(self.format, self.strip, line)
            if self.parser is None:
                self.acc.skip("binary data", self.acc.total, line)
            else:
                self._line(self.acc.total, line)

    def pass_over(self, n: int, reason: str) -> None:
        """``n`` lines counted but not read (``watch --tail``: the lines before its start)."""
        self.acc.total += n
        self.acc.skipped[reason] += n

    def tick(self) -> None:
        """Called while no line comes: a slow log's few held lines get their format in time."""
        if self.parser is None and self.pending and self.format is None and self._due():
            self._start()

    def hint(self, lines: list[str]) -> None:
        """The format from the file's first lines (``watch --tail`` starts past them)."""
        if self.format is None and lines:
            fmt, _, _ = choose(lines)
            if fmt is not None and not fmt.whole_file:
                self.format = fmt
                self.provisional = fmt.generic

    def finish(self, fallback: Format | None = None) -> None:
        """The end of the input: the format chosen from the lines held (``fallback`` where none
        reads them), a provisional one checked a last time, the parser's last record closed."""
        if self.parser is None and self.pending:
            if self.format is None:
                fmt, _, _ = choose([x for _, x in self.pending], len(self.pending))
                self.format = fmt if fmt is not None and not fmt.whole_file else fallback
            if self.format is not None:
                self._start()
        if self.provisional and self.kept:
            self._resniff()  # (what the lines are is known now)
        self.provisional, self.kept = False, []
        if self.parser is not None:
            finish_fed(self.parser, self.sink)

    # --- records out ---------------------------------------------------------------------------

    @property
    def names(self) -> dict[str, str]:
        """The metrics' names as the log wrote them, by canonical name."""
        return self.sink.names

    def take(self) -> Taken | None:
        """The records read since the last call, moved out of the sink (None: none)."""
        s = self.sink
        if not (s.train or s.eval or s.frames or s.eval_frames or self.restarted):
            return None
        out = Taken(s.train[:], s.eval[:], s.frames[:], s.eval_frames[:], self.restarted)
        del s.train[:], s.eval[:], s.frames[:], s.eval_frames[:]
        self.restarted = False
        return out

    # --- inside --------------------------------------------------------------------------------

    def _counted(self, line: str) -> str | None:
        """A line counted: without its '\r', or None (counted blank) where it holds nothing."""
        self.acc.total += 1
        line = line.rstrip("\r")
        if not line.strip():
            self.acc.blank += 1
            return None
        return line

    def _has_columns(self) -> bool:
        return self.columnar and self.chunks is not None

    def _ready(self, fmt: Format, strip: bool, first_line: str) -> None:
        self.format, self.strip = fmt, strip
        self.parser = fmt.parser_for(self.sink, first_line)
        rows = fmt.rows
        self.chunks = fmt.chunk_reader(self.size)
        if self.chunks is None and fmt.one_line_records and large(self.size):
            from losslens.logs.skeleton import skeleton_reader  # (only for a large file)

            self.chunks = skeleton_reader(fmt, self.size)
        if self.chunks is None and rows is not None:
            self.chunks = partial(read_chunk, rows=rows)

    def _line(self, lineno: int, line: str) -> None:
        assert self.parser is not None
        if "\x00" in line:
            self.acc.skip("binary data", lineno, line)
            return
        reason = feed_ranked(self.parser, self.sink, lineno, line, self.strip)
        if reason is None:
            self.acc.parsed += 1
        else:
            self.acc.skip(reason, lineno, line)

    def _chunk(self, chunk: bytes) -> None:
        """A batch of whole lines, column-wise (see ``columnar.read_chunk``)."""
        assert self.chunks is not None and self.parser is not None
        self.chunks(chunk, self.acc.total + 1, self.sink, self.acc, self.parser, self.strip)
        del self.sink.idle_lines[:]  # (accounted by the chunk's reader)

    def _due(self) -> bool:
        """Choose now although fewer lines than planned are held: a slow live log (the first
        held line 2 s old), tried again at most once a second."""
        now = time.monotonic()
        return now - self.first_pending >= 2.0 and now - self.sniffed_at >= 1.0

    def _start(self) -> None:
        lines = [x for _, x in self.pending]
        if self.format is None:
            # every held line (a preamble of thousands of lines may come before the first record,
            # as read_log looks 8 MiB deep): chosen again as they double, the cost stays linear
            fmt, _, _ = choose(lines, len(lines))
            self.sniffed_at = time.monotonic()
            if fmt is None or fmt.whole_file:
                if len(self.pending) < SNIFF_MAX:
                    self.next_sniff = min(2 * len(self.pending), SNIFF_MAX)
                    return
                fmt = BY_NAME["kv"]
            self.format = fmt
            self.provisional = fmt.generic
        self._ready(self.format, strips(self.format, lines, limit=max(1, len(lines))), lines[0])
        pending, self.pending = self.pending, []
        if self.provisional:
            self.before = Accounting(parsed=self.acc.parsed, skipped=Counter(self.acc.skipped),
                                     examples=dict(self.acc.examples))
            self.kept = list(pending)
            self.next_resniff = 2 * len(pending)
        for lineno, line in pending:
            self._line(lineno, line)

    def _resniff(self) -> bool:
        """Choose again on the lines read under a provisional format; True when a specific format
        reads them better and has read them all again."""
        lines = [x for _, x in self.kept]
        fmt, _, _ = choose(lines, len(lines))
        self.next_resniff = 2 * len(lines)
        if fmt is not None and not fmt.generic and not fmt.whole_file:
            self._switch(fmt)
            return True
        if len(lines) >= SNIFF_MAX:
            self.provisional, self.kept = False, []
        return False

    def _switch(self, fmt: Format) -> None:
        """Read the kept lines again with ``fmt``, from the accounting before them."""
        kept, old = self.kept, self.format
        self.provisional, self.kept = False, []
        self.acc.parsed, self.acc.skipped = self.before.parsed, Counter(self.before.skipped)
        self.acc.examples = dict(self.before.examples)
        self.sink = Sink(source_name=self.sink.source_name)
        self.restarted = True
        lines = [x for _, x in kept]
        self._ready(fmt, strips(fmt, lines, limit=len(lines)), lines[0])
        self.notes.append(f"the first lines read as {old.name if old else '?'}, then as {fmt.name} once "
                          f"its lines came: {len(kept):,} lines read again")
        for lineno, line in kept:
            self._line(lineno, line)


def read_file(src: Source, fmt: Format, sink: Sink, acc: Accounting, strip: bool,
              first_line: str | None, columnar: bool) -> None:
    """A line log's file, chunk by chunk, with its format known (``read_log``)."""
    stream = LineStream(src.name, fmt, strip, sink, acc, columnar, first_line, src.size)
    for i, chunk in enumerate(src.chunks(), 1):
        stream.feed_chunk(chunk)
        if i % TRIM_CHUNKS == 0:
            trim_heap()
    stream.finish()
