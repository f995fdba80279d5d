"""The key=value template reader compiled with numba: the optional accelerator of large logs.

``kv.columns`` reads a chunk's template lines with polars (cells split at '=', a query per
template); this module does the same work in one compiled pass over the chunk's bytes, where the
``fast`` extra (numba) is installed and the file is large enough for the compile (or the cached
build's load) to pay. It reads only what it is sure of: a line with anything the template reader
would have to think about (a value that is no plain decimal number, 'nan', a list element that is
not, a time stamp out of range, a byte outside ASCII) is left to the per-line parser, which is
the oracle of both paths. Tests check its frames against the polars path and the parser.

numba compiles the kernels the first time they run (about 1.5 s) and caches the build; when the
kernels are used, and ``LOSSLENS_FAST``, are ``losslens.logs.fast``'s to say.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from losslens.logs import fast
from losslens.logs.fast import MIN_BYTES, cache_dir, compiled, line_bounds

__all__ = ["MIN_BYTES", "cache_dir", "kernels", "wanted", "split_lines", "template_rows"]
KERNELS = "losslens.logs.formats.kv.kernels"


def wanted(size: int | None) -> bool:
    """Whether a key=value file of ``size`` bytes is read with these kernels (``fast.wanted``)."""
    return fast.wanted(size, KERNELS)


def kernels() -> tuple[Any, Any, Any] | None:
    """The compiled (line index, template, list gathering) kernels, or None where numba is
    missing or fails."""
    k = compiled(KERNELS)
    return None if k is None else (k.blanks, k.read_template, k.dense_lists)


def _bytes_of(parts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Strings as one uint8 buffer and their offsets (n + 1)."""
    data = [p.encode("ascii", "replace") for p in parts]
    off = np.zeros(len(data) + 1, dtype=np.int64)
    off[1:] = np.cumsum([len(d) for d in data])
    return np.frombuffer(b"".join(data) or b"\0", dtype=np.uint8), off


class Lines:
    """A chunk's bytes, where its lines start and end (numpy finds the newlines: its compares run
    on whole vectors), which are blank and which start behind a torchrun rank prefix, found once
    for every template."""

    def __init__(self, buf: np.ndarray, blanks: Any) -> None:
        self.buf = buf
        self.starts, self.ends = line_bounds(buf)
        self.blank, self.unsure, self.ranked = blanks(buf, self.starts, self.ends)
        self._room: tuple[np.ndarray, int] | None = None

    def room(self) -> tuple[np.ndarray, int]:
        """Where each row's list values go in a flat array, and its size: a row's list holds at
        most one value more than the row has commas (made once, for templates with lists)."""
        if self._room is None:
            commas = np.flatnonzero(self.buf == 44)
            n = len(self.starts)
            self._room = np.searchsorted(commas, self.starts) + np.arange(n), len(commas) + n
        return self._room


def split_lines(chunk: bytes) -> Lines | None:
    """The chunk's lines (``Lines``); None where the polars path must read it (bytes the cells
    reader refuses, or a line whose blankness depends on Unicode whitespace)."""
    if b"\x1f" in chunk or b"\x00" in chunk or b"\x1b" in chunk or b"\r" in chunk:
        return None
    ks = kernels()
    assert ks is not None
    lines = Lines(np.frombuffer(chunk, dtype=np.uint8), ks[0])
    return None if lines.unsure else lines


def template_rows(lines: Lines, pending: np.ndarray, t: Any, check_rate: bool, steps: list[bool],
                  scales: list[float]) -> pl.DataFrame:
    """What ``kv.columns._template_rows`` gives for template ``t``, computed by the kernel: per
    row whether it follows ``t`` and is read here (``fit``), each key's first reading
    (``first{i}``: a step as an integer, a list, a number scaled by the template's unit), the
    token rate (``tok``) and the line's leading wall time (``time``); each ``raw{i}`` is its
    reading too (a row the kernel is unsure of is no fit, and goes to the per-line parser)."""
    ks = kernels()
    assert ks is not None
    m = len(t.keys)
    keys, key_off = _bytes_of(list(t.keys))
    fixed, fixed_off = _bytes_of([x.removeprefix("\x00") for x in t.lead])
    units, unit_off = _bytes_of(list(t.units))
    varying = np.array([x.startswith("\x00") for x in t.lead], dtype=np.bool_)
    lead_len = np.array([len(x) for x in t.lead], dtype=np.int64)
    before = m + 1 if t.rate_cell is None else t.rate_cell
    cap_off, capacity = lines.room() if any(t.lists) else (np.zeros(len(lines.starts), dtype=np.int64), 1)
    fit, values, flat, counts, tok, micros, timed = ks[1](
        lines.buf, lines.starts, lines.ends, pending, keys,
        key_off, fixed, fixed_off, varying, lead_len,
        np.array(t.lists, dtype=np.bool_), np.array(steps, dtype=np.bool_), units, unit_off,
        np.array(scales, dtype=np.float64), -1 if t.rate_cell is None else t.rate_cell,
        check_rate and before > 0, before, cap_off, capacity)
    fit_s = pl.Series("fit", fit)
    cols: dict[str, pl.Series] = {}
    li = 0
    for i in range(m):
        if t.lists[i]:
            col = _lists(flat[li], counts[li], cap_off, fit, ks[2])
            li += 1
        else:
            col = pl.Series(values[:, i], nan_to_null=True)
            col = col.cast(pl.Int64) if steps[i] else col
        # the reading is the value (metric_columns takes a typed column as read)
        cols[f"raw{i}"], cols[f"first{i}"] = col.alias(f"raw{i}"), col.alias(f"first{i}")
    if t.rate_cell is not None:
        cols["tok"] = pl.Series("tok", tok, nan_to_null=True)
    cols["fit"] = fit_s
    time = pl.Series("time", micros).cast(pl.Datetime("us"))
    if not timed.all():
        time = pl.select(pl.when(pl.lit(pl.Series(timed))).then(pl.lit(time))).to_series().alias("time")
    cols["time"] = time
    return pl.DataFrame(cols)


def _lists(flat: np.ndarray, counts: np.ndarray, at: np.ndarray, fit: np.ndarray, dense: Any) -> pl.Series:
    """A List(Float64) column of each fitting row's values (``counts[r]`` of them in ``flat`` from
    ``at[r]``); null on the other rows (every fitting row holds one value or more). ``dense``:
    the kernel that gathers them where every fitting row holds as many."""
    n = len(fit)
    wide = counts[fit]
    if len(wide) and (wide == wide[0]).all():
        col = pl.Series(dense(flat, at, fit, int(wide[0]))).cast(pl.List(pl.Float64))
    else:
        ends = np.cumsum(counts)
        where = np.arange(int(ends[-1]) if n else 0) + np.repeat(at - (ends - counts), counts)
        row = np.repeat(np.arange(n, dtype=np.int64), counts)
        grouped = pl.DataFrame({"row": row, "v": flat[where]}).group_by(
            "row", maintain_order=True).agg("v")
        col = pl.DataFrame({"row": np.arange(n, dtype=np.int64)}).join(
            grouped, on="row", how="left", maintain_order="left")["v"]
    if fit.all():
        return col
    return pl.select(pl.when(pl.lit(pl.Series(fit))).then(pl.lit(col))).to_series()
