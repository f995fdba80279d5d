"""A large log's columns held in a temporary file mapped into memory, not on the heap.

Once a log is held compact (more than ``COMPACT_RECORDS`` records, see compact.py), every frame
a reader adds has its fixed-width columns without nulls (steps, lines, times, segments, metric
values) written to one unnamed temporary file and mapped back read-only; polars reads them in
place (a numpy view of the mapping, which polars takes without a copy). Their pages are then
the page cache's, not the process's own: the kernel reads a column back when it is read and may
drop it when memory is short, and ``release`` drops every mapped page from the process at once
(the read does after each pass over the columns, the analysis after each series and detector),
so that the columns a 10M-line log holds (~0.9 GiB) are not held in memory beside what the
analysis works on. Columns with nulls, lists and text stay on the heap, and so does every frame
when the file cannot be written (no temporary folder, a full disk): memory then, as before, not
a failed read.

The file is in the temporary folder (``TMPDIR``), deleted as soon as it is made (POSIX: it is
gone from the folder at once, and its space is freed when the last column mapped from it is).
"""

from __future__ import annotations

import bisect
import mmap
import sys
import tempfile
from collections.abc import Callable
from functools import cache
from typing import IO

import numpy as np
import polars as pl

# the dtypes held: fixed width, one value a row (times as their int64 physical values)
_FIXED = (pl.Int64, pl.Int32, pl.Float64, pl.Float32, pl.Datetime, pl.Duration)


class Spill:
    """The temporary file a large log's columns are written to, and the mappings they are read
    from (see the module's note)."""

    def __init__(self) -> None:
        self.file: IO[bytes] | None = None
        self.size = 0  # bytes written
        self.maps: list[mmap.mmap] = []
        self.starts: list[int] = []  # each mapping's address, sorted, and its end
        self.ends: list[int] = []
        self.failed = False  # the file could not be written: frames stay on the heap
        self.held = 0  # bytes of columns held in the file

    def __getstate__(self) -> dict:
        """Nothing: a log sent to another process (``--jobs``) sends its columns' values, and
        there holds them on the heap."""
        return {}

    def __setstate__(self, state: dict) -> None:
        self.__init__()  # type: ignore[misc]

    def hold(self, frame: pl.DataFrame, whole: bool = False) -> pl.DataFrame:
        """``frame`` with its fixed-width columns without nulls read from the file (written there
        unless they already are); ``frame`` itself where the file cannot be written. ``whole``:
        each such column one array in the file (a column held in chunks is written again whole),
        so that its values are read without a copy (``to_numpy``)."""
        names = [c for c, t in frame.schema.items() if _fixed(t) and frame[c].null_count() == 0
                 and not (self._mapped(frame[c]) and (frame[c].n_chunks() == 1 or not whole))]
        if not names or self.failed or not frame.height:
            return frame
        try:
            start, offsets = self._write([frame[c] for c in names])
            view = mmap.mmap(self.file.fileno(), self.size - start, access=mmap.ACCESS_READ,  # type: ignore[union-attr]
                             offset=start)
        except (OSError, ValueError):
            self.failed = True
            self.close()
            return frame
        self.maps.append(view)
        self._remember(np.frombuffer(view, dtype=np.uint8))
        held = []
        for name, at in zip(names, offsets, strict=True):
            dtype = frame.schema[name]
            physical = frame[name].head(0).to_physical().to_numpy().dtype
            mapped = np.frombuffer(view, dtype=physical, count=frame.height, offset=at - start)
            held.append(pl.Series(name, mapped).cast(dtype))
            self.held += mapped.nbytes
        return frame.with_columns(held)

    def _write(self, columns: list[pl.Series]) -> tuple[int, list[int]]:
        """Append ``columns``' values, chunk by chunk (no copy of a column held in chunks), each
        column at an offset its item size divides, from a mapping boundary: the mapping's start
        and each column's offset in the file."""
        if self.file is None:
            self.file = tempfile.TemporaryFile(prefix="losslens-")
        pad = -self.size % mmap.ALLOCATIONGRANULARITY
        self.file.write(b"\0" * pad)
        start = self.size = self.size + pad
        offsets = []
        for column in columns:
            gap = -self.size % 8
            self.file.write(b"\0" * gap)
            self.size += gap
            offsets.append(self.size)
            for chunk in column.get_chunks():
                arr = np.ascontiguousarray(chunk.to_physical().to_numpy())
                self.file.write(arr.view(np.uint8).data)
                self.size += arr.nbytes
            if self._mapped(column):  # written again whole: the pages read for it, dropped
                self.release()
        self.file.flush()
        return start, offsets

    def _remember(self, arr: np.ndarray) -> None:
        """A mapping's address range (one per ``hold``, not one per column)."""
        at = arr.ctypes.data
        i = bisect.bisect(self.starts, at)
        self.starts.insert(i, at)
        self.ends.insert(i, at + arr.nbytes)

    def _mapped(self, s: pl.Series) -> bool:
        """Every chunk of ``s`` lies in a mapping of the file (its values, not a copy of them)."""
        if not self.starts:
            return False
        for chunk in s.get_chunks():
            arr = chunk.to_physical().to_numpy()
            at = arr.ctypes.data
            i = bisect.bisect(self.starts, at) - 1
            if not len(arr) or i < 0 or at + arr.nbytes > self.ends[i]:
                return False
        return True

    def release(self) -> None:
        """Drop the mapped pages from the process's memory (they stay in the file, and are read
        back from the page cache, or the disk, when a column is read again), and give the C
        heap's free pages back."""
        for view in self.maps:
            if hasattr(view, "madvise"):
                view.madvise(mmap.MADV_DONTNEED)
        trim_heap()

    def close(self) -> None:
        """Close the file (its mappings stay readable: each holds the file open)."""
        if self.file is not None:
            self.file.close()
            self.file = None


def _fixed(dtype: pl.DataType) -> bool:
    return any(dtype == t or isinstance(dtype, t) for t in _FIXED)


@cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, where the C library has it (not macOS, not musl)."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes  # (only for a read this long: not on a small log's start-up path)

    try:
        return ctypes.CDLL(None).malloc_trim  # type: ignore[no-any-return]
    except (OSError, AttributeError):
        return None


def trim_heap() -> None:
    """Give the C heap's free pages back to the system: the buffers a long read makes and frees a
    chunk at a time otherwise stay in the process, its heap cut up between the ones still held
    (0.15 GiB at 10M key=value lines read with the numba kernels). Nothing where the C library
    has no such call."""
    if (trim := _malloc_trim()) is not None:
        trim(0)
