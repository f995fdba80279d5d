"""Reading a growing log: the lines appended to a file (tail -F: a file that is missing, rotated,
truncated or rewritten) or arriving on standard input, in batches, none lost or doubled.

Follower: waits for a missing file, reads appended bytes, keeps a partial last line until its
newline arrives, and survives truncation (copytruncate), rename-rotation and delete+recreate.
"""

from __future__ import annotations

import os
import queue
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from losslens.logs.source import MAX_LINE, line_text

_BREAK = re.compile(rb"\r(?!\n)|\n")


def complete_lines(data: bytes) -> tuple[list[bytes], bytes]:
    """The complete lines of ``data`` and its unfinished rest. A line ends at '\n', and also at a
    '\r' that does not start '\r\n': a progress bar (Lightning, torchtune, tqdm) redraws itself
    with '\r' and writes its newline only at the end of an epoch, so `watch` takes each redraw as
    it comes. A '\r' at the very end waits: a '\n' may follow it."""
    lines, start = [], 0
    for m in _BREAK.finditer(data):
        if m.group() == b"\r" and m.end() == len(data):
            break
        lines.append(data[start:m.start()])
        start = m.end()
    return lines, data[start:]


READ_EVERY_S = 0.05  # how often a followed file is read (the analysis runs every interval_s)
BASE_READ = 1 << 20  # bytes read per poll; doubled (up to max_bytes) while a backlog lasts
HEAD_BYTES = 1024  # the file's first bytes, kept to recognise it (a rewrite changes them)


class Follower:
    """Yields complete lines of ``path`` as they are appended, across rotation and truncation.

    The file is known by its identity (device, inode), its size and its first bytes. A new
    identity at the path is a rotation: the old file is drained to its end (it will not grow
    again), and a generation rotated away before it was ever opened (two rotations within one
    poll) is read whole from ``path.1`` when that is neither file. A size below the offset read is
    a truncation (copytruncate): the bytes written between the last read and the copy are taken
    from ``path.1`` when it starts with the same bytes, and read again from 0 otherwise; changed
    first bytes at the same size or larger are a truncation followed by a larger rewrite. What
    cannot be recovered is said in ``notes`` (a possible loss), never dropped silently."""

    def __init__(self, path: str, interval: float = 0.5, max_bytes: int = 8 << 20,
                 notes: list[str] | None = None, tail: int | None = None):
        self.path = path
        self.tail = tail  # start at the last `tail` lines of the file there now (0: at its end)
        self.passed = 0  # lines passed over by `tail`, counted (not parsed)
        self.max_bytes = max_bytes  # read at most this much per poll: memory stays flat
        self.read_size = BASE_READ
        self.more = False  # the last poll stopped at max_bytes: poll again without waiting
        self.interval = interval
        self.file: Any = None
        self.ident: tuple[int, int] | None = None
        self.offset = 0
        self.head = b""  # the first bytes read (up to HEAD_BYTES)
        self.seen: list[tuple[int, int]] = []
        self.partial = b""
        self.lines = 0  # complete lines handed out, for the notes
        self.events: list[str] = []  # 'truncated', 'rotated', 'rewritten', 'generation'
        self.notes = notes if notes is not None else []

    def _open(self) -> bool:
        try:
            f = open(self.path, "rb")  # noqa: SIM115 - kept open across polls
        except OSError:
            return False
        st = os.fstat(f.fileno())
        self.file, self.ident, self.offset, self.head = f, (st.st_dev, st.st_ino), 0, b""
        self.seen = [*self.seen[-7:], self.ident]  # files read already (never a missed generation)
        if self.tail is not None:  # only the file there at the start; later ones from their top
            self._skip_to_tail(st.st_size, self.tail)
            self.tail = None
        return True

    def _skip_to_tail(self, size: int, keep: int) -> None:
        """Start after the newline that precedes the last ``keep`` complete lines (blocks read
        backwards from the end); the lines before are counted (a newline count), not parsed. An
        unfinished last line is read as it completes."""
        fd = self.file.fileno()
        self.head = os.pread(fd, HEAD_BYTES, 0)
        need, at, start = keep + 1, size, 0
        while at > 0:
            lo = max(0, at - (1 << 16))
            chunk = os.pread(fd, at - lo, lo)
            n = chunk.count(b"\n")
            if n >= need:
                pos = len(chunk)
                for _ in range(need):
                    pos = chunk.rindex(b"\n", 0, pos)
                start = lo + pos + 1
                break
            need -= n
            at = lo
        self.offset = start
        self.file.seek(start)
        for pos in range(0, start, 1 << 20):
            self.passed += os.pread(fd, min(1 << 20, start - pos), pos).count(b"\n")

    def _drain(self, limit: int = -1) -> bytes:
        data = self.file.read(limit)
        if self.offset < HEAD_BYTES:
            self.head = (self.head + data)[:HEAD_BYTES]
        self.offset += len(data)
        return data

    def _rewritten(self) -> bool:
        """The first bytes are no longer the ones read: truncated, then written past the offset."""
        if not self.head:
            return False
        return os.pread(self.file.fileno(), len(self.head), 0) != self.head

    def _copy(self) -> str | None:
        """``path.1`` when it is a file not read yet (every file opened is in ``seen``)."""
        sibling = self.path + ".1"
        try:
            st = os.stat(sibling)
        except OSError:
            return None
        return sibling if (st.st_dev, st.st_ino) not in self.seen else None

    def _recover(self, chunks: list[bytes], why: str) -> None:
        """The bytes written between the last read and a truncation: from the rotated copy when it
        starts like the file read so far, else a note that some lines may be missing."""
        copy = self._copy()
        if copy is not None and self.head:
            with open(copy, "rb") as f:
                if f.read(len(self.head)) == self.head:
                    f.seek(self.offset)
                    rest = f.read()
                    chunks.append(rest)
                    self._flush_partial(chunks)
                    self.notes.append(f"{self.path} was {why} after line {self.lines:,}; the "
                                      f"{len(rest):,} bytes written before it were read from {copy}")
                    return
        self.notes.append(f"{self.path} was {why} after line {self.lines:,}: lines written between "
                          "the last read and then may be missing (possible loss)")
        self._flush_partial(chunks)

    def poll(self) -> list[str]:
        """Complete lines appended since the last poll (no waiting)."""
        chunks: list[bytes] = []
        if self.file is None and not self._open():
            return []
        try:
            st = os.stat(self.path)
            now: tuple[int, int] | None = (st.st_dev, st.st_ino)
        except OSError:
            now, st = None, None
        if now is not None and now != self.ident:
            # rotated or recreated: finish the old file, then start the new one from its top
            chunks.append(self._drain())  # the old file's rest, whole: it will not grow again
            self._flush_partial(chunks)
            self.file.close()
            self.events.append("rotated")
            if not self._open():
                return self._lines(chunks)
            missed = self._copy()
            if missed is not None:  # a generation rotated away before it was ever opened
                with open(missed, "rb") as f:
                    chunks.append(f.read())
                self._flush_partial(chunks)
                self.events.append("generation")
                self.notes.append(f"{self.path} was rotated twice between two reads; the "
                                  f"generation in between was read whole from {missed}")
        elif st is not None and st.st_size < self.offset:
            self.events.append("truncated")
            self._recover(chunks, "truncated (copytruncate)")
            self.file.seek(0)
            self.offset, self.head = 0, b""
        elif st is not None and self._rewritten():
            self.events.append("rewritten")
            self._recover(chunks, "truncated and rewritten")
            self.file.seek(0)
            self.offset, self.head = 0, b""
        chunks.append(self._drain(self.read_size))
        self.more = len(chunks[-1]) == self.read_size
        # a backlog is read in larger pieces (the vectorised reader's cost is per piece)
        self.read_size = min(2 * self.read_size, self.max_bytes) if self.more else BASE_READ
        return self._lines(chunks)

    def _lines(self, chunks: list[bytes]) -> list[str]:
        lines, self.partial = complete_lines(self.partial + b"".join(chunks))
        self.lines += len(lines)
        return [line_text(x) for x in lines]

    def _flush_partial(self, chunks: list[bytes]) -> None:
        # a last line without a newline in a file that gets no more is complete
        tail = self.partial + b"".join(chunks)
        if tail and not tail.endswith(b"\n"):
            chunks.append(b"\n")

    def close(self) -> None:
        if self.file is not None:
            self.file.close()


class Splitter:
    """Bytes in, complete lines out (see ``complete_lines``), in time linear in the bytes: the
    unfinished rest is kept as pieces and joined only when a line end arrives, and a line is cut
    at MAX_LINE bytes (memory stays bounded on data without line ends)."""

    def __init__(self, max_line: int = MAX_LINE):
        self.max_line = max_line
        self.parts: list[bytes] = []
        self.size = 0
        self.cut = False

    def feed(self, data: bytes) -> list[bytes]:
        if b"\n" not in data and b"\r" not in data:
            self._keep(data)
            return []
        joined = b"".join(self.parts) + data
        self.parts, self.size = [], 0
        lines, rest = complete_lines(joined)
        mark = b" [line cut at %d bytes]" % self.max_line
        cut_first, self.cut = self.cut and bool(lines), self.cut and not lines
        lines = [x[:self.max_line] + mark if len(x) > self.max_line or (i == 0 and cut_first) else x
                 for i, x in enumerate(lines)]
        self._keep(rest)
        return lines

    def rest(self) -> bytes:
        return b"".join(self.parts)

    def _keep(self, data: bytes) -> None:
        room = self.max_line - self.size
        if len(data) > room:
            self.cut = True
            data = data[:max(0, room)]
        if data:
            self.parts.append(data)
            self.size += len(data)


STDIN_QUEUE = 64  # chunks of at most 64 KiB read ahead of the parser: then the pipe waits


def stdin_lines(q: queue.Queue[list[str] | None]) -> None:
    """Reader thread: standard input in batches of lines (see ``Splitter``); None at EOF. The
    queue is bounded: a writer faster than the parser is held back by the pipe (back-pressure),
    memory stays flat."""
    split = Splitter()
    while chunk := os.read(sys.stdin.fileno(), 1 << 16):  # what has arrived, not a full block
        lines = [line_text(raw) for raw in split.feed(chunk)]
        if lines:
            q.put(lines)
    rest = split.rest()
    if rest.rstrip(b"\r"):
        q.put([line_text(rest)])
    q.put(None)


def lines_from(path: str, interval: float, stop: threading.Event, notes: list[str] | None = None,
               tail: int | None = None, on_passed: Callable[[int], None] | None = None
               ) -> Iterator[list[str] | None]:
    """Batches of new lines from a file (forever) or stdin (None at EOF); [] when idle. What the
    file's rotations and truncations may have cost goes into ``notes``. With ``tail``, a file is
    followed from its last ``tail`` lines (0: from its end); ``on_passed`` gets the count of the
    lines passed over, once."""
    if path == "-":
        q: queue.Queue[list[str] | None] = queue.Queue(maxsize=STDIN_QUEUE)
        threading.Thread(target=stdin_lines, args=(q,), daemon=True).start()
        while not stop.is_set():
            batch: list[str] = []
            deadline = time.monotonic() + interval
            while time.monotonic() < deadline and len(batch) < 50_000:
                try:
                    item = q.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                if item is None:
                    yield batch
                    yield None
                    return
                batch.extend(item)
            yield batch
        return
    follower = Follower(path, interval, notes=notes, tail=tail)
    try:
        while not stop.is_set():
            batch = follower.poll()
            if follower.passed and on_passed is not None:
                on_passed(follower.passed)
                follower.passed = 0
            yield batch
            if not follower.more:
                # the file is read often (a stat and a read): what a writer truncates away without
                # a copy is lost only if it was never read; the analysis keeps its own interval
                stop.wait(min(interval, READ_EVERY_S))
    finally:
        follower.close()
