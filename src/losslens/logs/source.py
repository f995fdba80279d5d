"""Open a log (path, .gz by its magic bytes, or '-' for stdin) and hand out its bytes."""

from __future__ import annotations

import io
import os
import re
import stat
import sys
import zlib
from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import Any, BinaryIO

from losslens import progress
from losslens.errors import InputError

HEAD_BYTES = 1 << 20  # enough to sniff logs that open with long start-up noise
MAX_LINE = 8 << 20  # a longer line is cut here (and still counted as one line)
CHUNK_BYTES = 1 << 22  # 4 MiB: keeps peak memory flat on very large logs
GZIP_MAGIC = b"\x1f\x8b"


class Source:
    """A log's byte stream, read once: ``head`` for sniffing, then ``chunks()``.

    Every chunk but the last ends just after a newline, so no line is split.
    """

    def __init__(self, name: str, stream: BinaryIO, size: int | None = None, fd: int | None = None):
        self.name = name
        self.size = size  # bytes on disk (None for stdin); progress is told bytes read of it
        self._stream = stream
        self._fd = fd  # a plain file's descriptor: checked at the end for a change under the read
        try:
            self.head = stream.read(HEAD_BYTES)
        except (OSError, EOFError, zlib.error) as exc:
            raise InputError(f"cannot read: {_reason(exc)}", source=name) from None
        self._first = self.head[:4096]
        # a capture of a progress bar whose lines all end in a lone '\r' (tqdm to a file): no
        # '\n' at all in the head, so '\r' is taken as the line end (or it is one 'line')
        self.cr_lines = b"\r" in self.head and b"\n" not in self.head
        if self.cr_lines:
            self.head = self.head.replace(b"\r", b"\n")
        self._raw_head = self.head  # as read; ``head`` is without the NUL runs that open lines
        self.head = without_holes(self.head)
        self.hole_bytes = 0  # NUL bytes passed over at line starts, counted as ``chunks`` reads
        self._consumed = False

    def extend_head(self, limit: int) -> bool:
        """Read more into ``head`` (up to ``limit`` bytes) for a second look; False at EOF."""
        if self._consumed or len(self._raw_head) >= limit:
            return False
        try:
            more = self._stream.read(limit - len(self._raw_head))
        except (OSError, EOFError, zlib.error) as exc:
            raise InputError(f"cannot read: {_reason(exc)}", source=self.name) from None
        self._raw_head += more.replace(b"\r", b"\n") if self.cr_lines else more
        self.head = without_holes(self._raw_head)
        return bool(more)

    @property
    def fd(self) -> int | None:
        """A plain file's descriptor (None for standard input and decoded streams)."""
        return self._fd

    @property
    def stopped(self) -> str | None:
        """Why a gzip log's data ended before its end (see ``Gunzip``), once read."""
        return getattr(self._stream, "stopped", None)

    @property
    def first_nul(self) -> int | None:
        """The offset of the first NUL byte in the head as read, or None."""
        at = self._raw_head.find(b"\x00")
        return None if at < 0 else at

    @property
    def looks_utf16(self) -> bool:
        """Mostly ASCII text in UTF-16 with no byte-order mark: a NUL at every other byte (one with
        a mark is read, see ``Utf16``)."""
        start = self._raw_head[:512]
        return len(start) >= 8 and 2 * max(start[0::2].count(0), start[1::2].count(0)) >= 0.8 * len(start)

    @property
    def is_binary(self) -> bool:
        """NUL bytes in the head, and fewer than half of its lines text: a binary file (or UTF-16),
        not a text log with a hole in it (see ``without_holes``)."""
        if self.first_nul is None:
            return False
        lines = [x for x in self.head.split(b"\n") if x.strip()]
        return 2 * sum(1 for x in lines if not _CONTROL.search(x)) < len(lines)

    def chunks(self, size: int = CHUNK_BYTES, max_line: int | None = MAX_LINE) -> Iterator[bytes]:
        """The file in pieces that end at a line end. A line longer than ``max_line`` bytes is
        cut there (marked, still one line): data without line ends cannot fill memory. The
        unfinished last line is kept in pieces, joined once (time linear in its length)."""
        if self._consumed:
            raise RuntimeError("a Source is read once")
        self._consumed = True
        for chunk in self._chunks(size, max_line):
            if b"\x00" in chunk:
                clean = without_holes(chunk)
                self.hole_bytes += chunk.count(b"\x00") - clean.count(b"\x00")
                chunk = clean
            yield chunk

    def _chunks(self, size: int, max_line: int | None) -> Iterator[bytes]:
        pending: list[bytes] = []  # the unfinished line, in pieces
        held, cut, done = 0, False, len(self._raw_head)
        mark = b" [line cut at %d bytes]" % (max_line or 0)
        more = self._raw_head
        while True:
            nl = more.rfind(b"\n") + 1
            if nl:
                first = more.find(b"\n")  # where the unfinished line ends
                whole = memoryview(more)[first if cut else 0:nl]  # (joined once: one copy)
                yield b"".join([*pending, mark, whole] if cut else [*pending, whole])
                pending, held, cut = [more[nl:]], len(more) - nl, False
            elif not cut:
                pending.append(more)
                held += len(more)
            if max_line is not None and not cut and held > max_line:
                pending, held, cut = [b"".join(pending)[:max_line]], max_line, True
            try:
                more = self._stream.read(size)
            except (OSError, EOFError, zlib.error) as exc:
                raise InputError(f"cannot read: {_reason(exc)}", source=self.name) from None
            if not more:
                self._unchanged(done)
                rest = b"".join(pending) + (mark if cut else b"")
                if rest:
                    yield rest
                return
            done += len(more)
            progress.report(f"reading {self.name}", done, self.size)
            if self.cr_lines:
                more = more.replace(b"\r", b"\n")

    def _unchanged(self, done: int) -> None:
        """A file truncated (or truncated and rewritten) while it was read gives a partial or mixed
        result: an error (exit 2), not an answer about a log that no longer exists as read. A file
        that grew is a live log: what was read is a consistent prefix."""
        if self._fd is None:
            return
        try:
            size = os.fstat(self._fd).st_size
            first = os.pread(self._fd, len(self._first), 0)
        except OSError:
            return
        if size < done:
            raise InputError(f"truncated while being read ({done:,} bytes read, {size:,} now): the "
                             "result would be partial; read it again", source=self.name)
        if first != self._first:
            raise InputError("rewritten while being read (its first bytes changed): the result "
                             "would mix two logs; read it again", source=self.name)

    def read_all(self) -> bytes:
        return b"".join(self.chunks(max_line=None))

    def close(self) -> None:
        if self._stream is not sys.stdin.buffer:
            self._stream.close()


_HOLE = re.compile(rb"^\x00+", re.MULTILINE)
_HOLE_LINE = re.compile(rb"^\x00+$", re.MULTILINE)
_CONTROL = re.compile(rb"[\x00-\x08\x0e-\x1a\x1c-\x1f\x7f]")  # (not \t \n \v \f \r or ESC)


def without_holes(chunk: bytes) -> bytes:
    """``chunk`` (whole lines) without the NUL bytes that open a line: a hole in the file (a crash
    before the disk caught up, or copytruncate rotating a log whose writer does not append) ends
    where writing resumed, at a line's start. A line that is all hole is a blank line (a last one
    without its newline still counts); a NUL inside a line stays (the line is damaged)."""
    return _HOLE.sub(b"", _HOLE_LINE.sub(b" ", chunk)) if b"\x00" in chunk else chunk


def line_text(raw: bytes) -> str:
    """One line's bytes as text, without a NUL run that opens it (see ``without_holes``)."""
    return (raw.lstrip(b"\x00") if raw[:1] == b"\x00" else raw).decode("utf-8", errors="replace")


def decode_lines(chunk: bytes) -> list[str]:
    """The lines of ``chunk`` (split at '\n' only, so tqdm's '\r' redraws stay in one line)."""
    lines = chunk.decode("utf-8", errors="replace").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def count_lines(chunk: bytes) -> int:
    """How many lines ``decode_lines`` finds: a last line without its newline counts."""
    return chunk.count(b"\n") + (0 if not chunk or chunk.endswith(b"\n") else 1)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    return str(exc) or type(exc).__name__


class _Decoded(ABC):
    """A stream that decodes its raw bytes a block at a time (``_step``, which sets ``_done`` at the
    end) into ``_out``, handed out by ``read``."""

    def __init__(self, raw: BinaryIO):
        self._raw = raw
        self._out = bytearray()
        self._done = False

    def read(self, n: int = -1) -> bytes:
        while not self._done and (n < 0 or len(self._out) < n):
            self._step()
        size = len(self._out) if n < 0 else min(n, len(self._out))
        out = bytes(self._out[:size])
        del self._out[:size]
        return out

    @abstractmethod
    def _step(self) -> None:
        """Decode the next block into ``_out``."""

    def close(self) -> None:
        self._raw.close()


class Gunzip(_Decoded):
    """A gzip stream read as far as it goes, members one after another (``cat a.gz b.gz``): where
    the data ends before a member's end marker (a file cut short: a full disk, a copy or a rotation
    interrupted) or stops being gzip, what came before is kept and ``stopped`` says why (the
    gzip module raises there, and what it had decompressed of the last block is lost)."""

    BLOCK = 1 << 14  # compressed bytes a step (at most ~16 MiB decompressed from one)

    def __init__(self, raw: BinaryIO):
        super().__init__(raw)
        self._z = zlib.decompressobj(31)
        self._fresh = True  # the current member has had no input yet
        self.compressed = 0
        self.stopped: str | None = None

    def _step(self) -> None:
        block = self._raw.read(self.BLOCK)
        if not block:
            if not self._fresh and not self._z.eof:
                self._out += self._z.flush()
                self.stopped = (f"the gzip data ends before its end marker, after {self.compressed:,} "
                                "compressed bytes (a file cut short)")
            self._done = True
            return
        self.compressed += len(block)
        data = block
        while data:
            if self._fresh and not data.strip(b"\x00"):
                return  # zeros after the last member (padding), as gzip(1) allows
            try:
                self._out += self._z.decompress(data)
            except zlib.error as exc:
                self.stopped = (f"the gzip data is damaged within its first {self.compressed:,} "
                                f"compressed bytes ({exc})")
                self._done = True
                return
            self._fresh = False
            if not self._z.eof:
                return
            data = self._z.unused_data  # the next member, if any
            self._z, self._fresh = zlib.decompressobj(31), True



UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


class Utf16(_Decoded):
    """A UTF-16 stream with a byte-order mark (Windows PowerShell 5's `python train.py > log.txt`
    writes one) handed out as UTF-8 bytes, decoded a block at a time (a character split between
    blocks is kept for the next; an unpaired surrogate becomes U+FFFD, as a damaged UTF-8 line
    does)."""

    BLOCK = 1 << 20

    def __init__(self, raw: BinaryIO):
        import codecs

        super().__init__(raw)
        self._decoder = codecs.getincrementaldecoder("utf-16")(errors="replace")

    def _step(self) -> None:
        block = self._raw.read(self.BLOCK)
        self._done = not block
        self._out += self._decoder.decode(block, final=self._done).encode("utf-8", "replace")


def _missing(name: str) -> str:
    """Why a path names no file: a link loop, a dangling link, or nothing there."""
    import errno

    try:
        os.stat(name)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "a link loop: the link leads back to itself, never to a file"
        if os.path.islink(name):
            return f"a dangling link: what it points to ({os.readlink(name)}) is not there"
        if exc.errno in (errno.EACCES, errno.EPERM):
            return f"cannot reach it: {exc.strerror}"
    return "no such file"


def special_kind(mode: int) -> str | None:
    """What a file that is not a regular file is (a FIFO, a socket, a device), or None."""
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return None


def _special_kind(path: str) -> str | None:
    try:
        return special_kind(os.stat(path).st_mode)
    except OSError:
        return None


def open_source(path: str | os.PathLike[str]) -> Source:
    """Open ``path`` ('-' is standard input); gzip is recognised by content, not suffix."""
    name = os.fspath(path)
    size = None
    if name == "-":
        raw: BinaryIO = sys.stdin.buffer
        display = "<stdin>"
    else:
        display = name
        if os.path.isdir(name):
            raise InputError("is a directory, not a log file", source=name)
        if not os.path.exists(name):
            raise InputError(_missing(name), source=name)
        kind = _special_kind(name)
        if kind is not None:  # (opening a FIFO with no writer waits for ever)
            raise InputError(f"{kind}, not a regular file: read it from standard input "
                             f"(`losslens check - < {name}`)", source=name)
        try:
            raw = open(name, "rb")  # noqa: SIM115 - closed by Source.close
            size = os.fstat(raw.fileno()).st_size
        except OSError as exc:
            raise InputError(f"cannot open: {_reason(exc)}", source=name) from None
    buffered: Any = raw if isinstance(raw, io.BufferedReader) else io.BufferedReader(raw)  # type: ignore[type-var]
    try:
        magic = buffered.peek(2)[:2]
    except OSError as exc:
        raise InputError(f"cannot read: {_reason(exc)}", source=display) from None
    stream: BinaryIO = buffered
    fd = raw.fileno() if size is not None else None
    if magic == GZIP_MAGIC:
        stream = Gunzip(buffered)  # type: ignore[assignment]
        size = fd = None  # the bytes read are uncompressed: no total to compare them with
    elif magic in UTF16_BOMS:
        stream = Utf16(buffered)  # type: ignore[assignment]
        size = fd = None  # (the bytes handed out are UTF-8: no total to compare them with)
    return Source(display, stream, size, fd)
