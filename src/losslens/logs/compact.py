"""Compact columns for large logs: metric values held as 32-bit floats where that loses nothing.

A log's numbers are printed decimals (``loss=3.0063``, ``lr=2.52e-07``), and a decimal with at
most six significant digits survives a trip through float32: rounding the float32 back to six
significant digits gives the very float64 that parsing the text gave. A column is narrowed only
when that holds for every value in it (integers and other values float32 holds exactly count
too); anything else (a token counter at 1e12, a value printed with ten digits) stays float64.
``widen`` undoes it exactly, so the detectors see the numbers they would have seen.

Above ``COMPACT_RECORDS`` records the readers also replace a list column (``q_pre=[50, 50,
46]``) by its derived ``_min`` and ``_mean`` columns, which are what is analysed.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import polars as pl

COMPACT_RECORDS = 1_000_000  # a log with more records than this is held compact
SIGNIFICANT = 6
NARROW_NOTE = ("values held as 32-bit floats where that is exact (printed with at most "
               f"{SIGNIFICANT} significant digits), list columns as their min and mean, "
               "to bound memory")


BLOCK = 1 << 18  # values widened at a time: the temporaries stay a few MiB at any length


def widen(x: np.ndarray) -> np.ndarray:
    """float32 → the float64 each value was parsed as (see the module's note); float64 as is."""
    if x.dtype != np.float32:
        return x.astype(np.float64, copy=False)
    out = np.empty(len(x), dtype=np.float64)
    for i in range(0, len(x), BLOCK):
        part = x[i:i + BLOCK]
        y = part.astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            mag = np.floor(np.log10(np.abs(y)))
            scale = np.power(10.0, np.where(np.isfinite(mag), SIGNIFICANT - 1 - mag, 0.0))
            rounded = np.rint(y * scale) / scale
            keep = np.isfinite(rounded) & (rounded.astype(np.float32) == part)
        out[i:i + BLOCK] = np.where(keep, rounded, y)
    return out


def narrow(x: np.ndarray) -> np.ndarray | None:
    """``x`` (float64) as float32 when ``widen`` gives every value back exactly, else None."""
    with np.errstate(over="ignore"):
        x32 = x.astype(np.float32)
    back = widen(x32)
    same = (back == x) | (np.isnan(back) & np.isnan(x))
    return x32 if bool(same.all()) else None


def canonical_types(df: pl.DataFrame) -> pl.DataFrame:
    """step/line Int64, metrics Float64 or List(Float64); only columns not so already change."""
    casts = []
    for name, dtype in df.schema.items():
        want: pl.DataType | None = None
        if name in ("step", "line"):
            want = pl.Int64()
        elif name == "time":
            continue
        elif isinstance(dtype, pl.List):
            want = pl.List(pl.Float64)
        elif dtype == pl.Null or dtype.is_numeric():
            want = pl.Float64()
        if want is not None and dtype != want:
            casts.append(pl.col(name).cast(want))
    return df.with_columns(casts) if casts else df


def normalised(df: pl.DataFrame) -> pl.DataFrame:
    """Canonical types, and each list column's derived min and mean (once)."""
    df = canonical_types(df)
    derived = [e for name, dtype in df.schema.items()
               if isinstance(dtype, pl.List) and f"{name}_min" not in df.columns
               for e in (pl.col(name).list.min().alias(f"{name}_min"),
                         pl.col(name).list.mean().alias(f"{name}_mean"))]
    return df.with_columns(derived) if derived else df


def narrowable(s: pl.Series) -> bool:
    """A float64 column whose every value float32 holds exactly (see ``narrow``)."""
    return s.dtype == pl.Float64 and s.null_count() < s.len() and \
        narrow(s.drop_nulls().to_numpy()) is not None


def values_of(s: pl.Series) -> np.ndarray:
    """A metric column as float64 values (nulls as NaN), widened exactly where narrowed."""
    if s.dtype == pl.Float32:
        return widen(s.to_numpy())
    return s.cast(pl.Float64).to_numpy()


class Compactor:
    """Narrows the frames of a large log chunk by chunk, every chunk the same way: a column that
    one chunk cannot narrow is float64 in all of them (the chunks narrowed before are widened
    back), so that the chunks concatenate without a copy. ``hold``: applied to each frame it
    makes (a chunk, or one widened back), as ``Spill.hold`` keeps their columns in a file."""

    def __init__(self, hold: Callable[[pl.DataFrame], pl.DataFrame] | None = None) -> None:
        self.wide: set[str] = set()  # columns that stay float64
        self.lists: dict[str, None] = {}  # list columns replaced by their min and mean
        self.hold = hold or (lambda df: df)

    def frame(self, df: pl.DataFrame, done: list[pl.DataFrame]) -> pl.DataFrame:
        """``df`` compacted; ``done`` (chunks compacted before) is updated in place when a column
        has to go back to float64."""
        lists = [c for c, t in df.schema.items() if isinstance(t, pl.List)]
        for name in lists:
            self.lists.setdefault(name)
        if lists:  # the derived columns take the list's place
            order = [x for c in df.columns
                     for x in ((f"{c}_min", f"{c}_mean") if c in lists else (c,))
                     if x in df.columns]
            df = df.select(list(dict.fromkeys(order)))
        casts = []
        for name, dtype in df.schema.items():
            if name in ("step", "line", "time", "segment", "rank") or dtype != pl.Float64:
                continue
            if name in self.wide:
                continue
            if narrowable(df[name]):
                casts.append(pl.col(name).cast(pl.Float32))
                continue
            self.wide.add(name)
            for i, part in enumerate(done):
                if part.schema.get(name) == pl.Float32:
                    done[i] = self.hold(part.with_columns(pl.Series(name, values_of(part[name]))))
        return self.hold(df.with_columns(casts) if casts else df)
