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

from losslens.errors import InputError
from losslens.logs.source import GZIP_MAGIC, MAX_LINE, UTF16_BOMS, line_text

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
MARK_BYTES = 1024  # the bytes just before the offset, kept to recognise it past its head


class Follower:
    """Yields complete lines of ``path`` as they are appended, across rotation and truncation.

    The file is known by its identity (device, inode), its size, its first bytes and the bytes
    just before the offset read (a restarted run that prints the same preamble keeps the first
    ones, never the others). A new identity at the path is a rotation: the old file is read to
    its end (it will not grow again), and a generation rotated away before it was ever opened (two
    rotations within one poll) is read whole from ``path.1`` when that is neither file. A size
    below the offset is a truncation (copytruncate): the bytes written between the last read and
    the copy are taken from ``path.1`` when it starts with the same bytes, and read again from 0
    otherwise; changed bytes at the same size or larger are a truncation followed by a larger
    rewrite. Every file is read at most ``read_size`` bytes a poll, a rotated one too: memory
    stays flat while a backlog is read. What cannot be recovered is said in ``notes`` (a
    possible loss), never dropped silently."""

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
        self.mark = b""  # the last bytes read (up to MARK_BYTES), ending at the offset
        self.backlog: list[Any] = []  # files to read to their end before ``file`` (rotated ones)
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
        self.file, self.ident, self.offset, self.head, self.mark = f, (st.st_dev, st.st_ino), 0, b"", b""
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
        self.mark = os.pread(fd, min(MARK_BYTES, start), start - min(MARK_BYTES, start))
        for pos in range(0, start, 1 << 20):
            self.passed += os.pread(fd, min(1 << 20, start - pos), pos).count(b"\n")

    def _drain(self, limit: int = -1) -> bytes:
        data = self.file.read(limit)
        if self.offset < HEAD_BYTES:
            self.head = (self.head + data)[:HEAD_BYTES]
        self.mark = (self.mark + data)[-MARK_BYTES:] if len(data) < MARK_BYTES else data[-MARK_BYTES:]
        self.offset += len(data)
        return data

    def _rewritten(self) -> bool:
        """The bytes read are no longer there: the first ones, or those just before the offset
        (truncated, then written past the offset: a restart printing the same preamble)."""
        fd = self.file.fileno()
        if self.head and os.pread(fd, len(self.head), 0) != self.head:
            return True
        return bool(self.mark) and os.pread(fd, len(self.mark), self.offset - len(self.mark)) != self.mark

    def _copy(self) -> str | None:
        """``path.1`` when it is a file not read yet (every file opened is in ``seen``)."""
        sibling = self.path + ".1"
        try:
            st = os.stat(sibling)
        except OSError:
            return None
        return sibling if (st.st_dev, st.st_ino) not in self.seen else None

    def _recover(self, why: str) -> None:
        """The bytes written between the last read and a truncation: from the rotated copy when it
        starts like the file read so far (read before the file again, a piece a poll), else a
        note that some lines may be missing."""
        copy = self._copy()
        if copy is not None and self.head:
            f = open(copy, "rb")  # noqa: SIM115 - read over the next polls, then closed
            if f.read(len(self.head)) == self.head:
                rest = os.fstat(f.fileno()).st_size - self.offset
                f.seek(self.offset)
                self.backlog.append(f)
                self.notes.append(f"{self.path} was {why} after line {self.lines:,}; the "
                                  f"{max(0, rest):,} bytes written before it are read from {copy}")
                return
            f.close()
        self.notes.append(f"{self.path} was {why} after line {self.lines:,}: lines written between "
                          "the last read and then may be missing (possible loss)")
        self._flush_partial([])

    def poll(self) -> list[str]:
        """Complete lines appended since the last poll (no waiting), at most ``read_size`` bytes
        of them."""
        if self.file is None and not self._open():
            return []
        if self.backlog:
            return self._read_backlog()
        try:
            st = os.stat(self.path)
            now: tuple[int, int] | None = (st.st_dev, st.st_ino)
        except OSError:
            now, st = None, None
        if now is not None and now != self.ident:
            # rotated or recreated: finish the old file (a piece a poll: it will not grow
            # again), then the new one from its top
            old = self.file
            self.events.append("rotated")
            if not self._open():
                self.file = old
                return self._read(self.read_size)
            self.backlog.append(old)
            missed = self._copy()
            if missed is not None:  # a generation rotated away before it was ever opened
                self.backlog.append(open(missed, "rb"))  # noqa: SIM115 - read, then closed
                self.events.append("generation")
                self.notes.append(f"{self.path} was rotated twice between two reads; the "
                                  f"generation in between is read whole from {missed}")
            return self._read_backlog()
        if st is not None and st.st_size < self.offset:
            self.events.append("truncated")
            self._restart("truncated (copytruncate)")
        elif st is not None and self._rewritten():
            self.events.append("rewritten")
            self._restart("truncated and rewritten")
        if self.backlog:
            return self._read_backlog()
        return self._read(self.read_size)

    def _restart(self, why: str) -> None:
        """Read the file again from its top (after what ``_recover`` finds of the bytes lost)."""
        self._recover(why)
        self.file.seek(0)
        self.offset, self.head, self.mark = 0, b"", b""

    def _read(self, size: int) -> list[str]:
        data = self._drain(size)
        self._grow(len(data) == size)
        return self._lines([data])

    def _read_backlog(self) -> list[str]:
        """A piece of the first file of the backlog; at its end, its last line is complete."""
        f = self.backlog[0]
        data = f.read(self.read_size)
        chunks = [data]
        if len(data) < self.read_size:
            f.close()
            self.backlog.pop(0)
            self._flush_partial(chunks)
        self._grow(True)
        return self._lines(chunks)

    def _grow(self, full: bool) -> None:
        # a backlog is read in larger pieces (the vectorised reader's cost is per piece)
        self.more = full
        self.read_size = min(2 * self.read_size, self.max_bytes) if full else BASE_READ

    def _lines(self, chunks: list[bytes]) -> list[str]:
        lines, self.partial = complete_lines(self.partial + b"".join(chunks))
        self.lines += len(lines)
        return [line_text(x) for x in lines]

    def _flush_partial(self, chunks: list[bytes]) -> None:
        # a last line without a newline in a file that gets no more is complete
        tail = self.partial + b"".join(chunks)
        if tail and not tail.endswith(b"\n"):
            if chunks:
                chunks.append(b"\n")
            else:
                self.partial += b"\n"

    def close(self) -> None:
        for f in [*self.backlog, self.file]:
            if f is not None:
                f.close()


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


Item = list[str] | None | Exception  # a batch of lines, the end of input, or why it cannot be read


def stdin_lines(q: queue.Queue[Item], fd: int | None = None) -> None:
    """Reader thread: standard input in batches of lines (see ``Splitter``); None at EOF. The
    queue is bounded: a writer faster than the parser is held back by the pipe (back-pressure),
    memory stays flat. Its first bytes say what it is, as ``check -`` reads it: gzip and UTF-16
    with a byte-order mark are decoded as they come; binary data (a NUL byte in the first
    block) is an InputError put on the queue, and so is a read that fails (EIO): the follower
    raises it, never a thread's traceback and a wait for lines that will not come."""
    fd = sys.stdin.fileno() if fd is None else fd
    split = Splitter()
    decode: Decoder | None = None
    try:
        first = True
        while chunk := os.read(fd, 1 << 16):  # what has arrived, not a full block
            if first:
                decode, first = stdin_decoder(chunk), False
            if decode is not None:
                chunk = decode(chunk, False)
            lines = [line_text(raw) for raw in split.feed(chunk)]
            if lines:
                q.put(lines)
        if decode is not None:
            lines = [line_text(raw) for raw in split.feed(decode(b"", True))]
            if lines:
                q.put(lines)
    except OSError as exc:
        q.put(InputError(f"cannot read standard input: {exc.strerror or exc}", source="<stdin>"))
        return
    except InputError as exc:
        q.put(exc)
        return
    rest = split.rest()
    if rest.rstrip(b"\r"):
        q.put([line_text(rest)])
    q.put(None)


Decoder = Callable[[bytes, bool], bytes]  # (raw bytes, the last of them) -> UTF-8 text's bytes


def stdin_decoder(first: bytes) -> Decoder | None:
    """How standard input's bytes become text, from its first block: None for UTF-8 text; a
    decoder for gzip and for UTF-16 with a byte-order mark; an InputError for binary data."""
    if first[:2] == GZIP_MAGIC:
        return _gunzip()
    if first[:2] in UTF16_BOMS:
        import codecs

        text = codecs.getincrementaldecoder("utf-16")(errors="replace")
        return lambda data, last: text.decode(data, final=last).encode("utf-8", "replace")
    at = first.find(b"\x00")
    if at >= 0:
        head = first[:512]
        utf16 = len(head) >= 8 and 2 * max(head[0::2].count(0), head[1::2].count(0)) >= 0.8 * len(head)
        hint = " (UTF-16 text without a byte-order mark? convert it to UTF-8)" if utf16 else ""
        raise InputError(f"binary data (NUL byte at offset {at}), not a text log{hint}", source="<stdin>")
    return None


def _gunzip() -> Decoder:
    """gzip members one after another; damaged data is an InputError, a stream that ends before
    its end marker keeps what came before (as ``check -`` reads it)."""
    import zlib

    state = {"z": zlib.decompressobj(31)}

    def decode(data: bytes, last: bool) -> bytes:
        out = bytearray()
        while data:
            try:
                out += state["z"].decompress(data)
            except zlib.error as exc:
                raise InputError(f"the gzip data is damaged ({exc})", source="<stdin>") from None
            if not state["z"].eof:
                break
            data = state["z"].unused_data
            state["z"] = zlib.decompressobj(31)
        return bytes(out)

    return decode


def lines_from(path: str, interval: float, stop: threading.Event, notes: list[str] | None = None,
               tail: int | None = None, on_passed: Callable[[int], None] | None = None
               ) -> Iterator[list[str] | None]:
    """Batches of new lines from a file (forever) or stdin (None at EOF); [] when idle. What the
    file's rotations and truncations may have cost goes into ``notes``. With ``tail``, a file is
    followed from its last ``tail`` lines (0: from its end); ``on_passed`` gets the count of the
    lines passed over, once."""
    if path == "-":
        q: queue.Queue[Item] = queue.Queue(maxsize=STDIN_QUEUE)
        threading.Thread(target=stdin_lines, args=(q,), daemon=True).start()
        while not stop.is_set():
            batch: list[str] = []
            deadline = time.monotonic() + interval
            while time.monotonic() < deadline and len(batch) < 50_000:
                try:
                    item = q.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                if isinstance(item, Exception):
                    raise item
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
