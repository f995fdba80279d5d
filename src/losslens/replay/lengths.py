"""Per-sample lengths in: .npy, text (one per line), Parquet/Arrow/CSV column, or a Hugging Face
``save_to_disk`` folder read directly (no ``datasets`` dependency)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from losslens.errors import InputError

DEFAULT_COLUMN = "seq_len"


def load_lengths(path: str | Path, column: str = DEFAULT_COLUMN) -> np.ndarray:
    """Lengths as int64; InputError naming the file for a missing column or a bad length."""
    import polars as pl

    p = Path(path)
    name = str(p)
    values: Any
    if not p.exists():
        raise InputError("no such file or folder", source=name)
    try:
        if p.is_dir():
            values = _hf_folder(p, column)
        elif p.suffix == ".npy":
            values = np.load(p, allow_pickle=False)
        elif p.suffix in (".parquet", ".pq"):
            values = _column(pl.read_parquet(p), column, name)
        elif p.suffix in (".arrow", ".feather", ".ipc"):
            try:
                frame = pl.read_ipc(p)
            except pl.exceptions.PolarsError:
                frame = pl.read_ipc_stream(p)
            values = _column(frame, column, name)
        elif p.suffix == ".csv":
            values = _column(pl.read_csv(p), column, name)
        else:  # plain text, one length per line
            raw = pl.read_csv(p, has_header=False, new_columns=["v"], infer_schema_length=0)["v"]
            numbers = raw.str.strip_chars().cast(pl.Int64, strict=False)
            bad = numbers.is_null()
            if bad.any():
                at = int(bad.arg_true()[0])
                raise InputError(f"not a whole number: {p.read_text().splitlines()[at]!r}",
                                 source=name, line=at + 1)
            values = numbers.to_numpy()
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read lengths: {exc}", source=name) from None
    except pl.exceptions.PolarsError as exc:
        raise InputError(f"cannot read lengths: {str(exc).splitlines()[0]}", source=name) from None
    arr: np.ndarray = np.asarray(values)
    if arr.ndim != 1 or arr.size == 0:
        raise InputError("expected a non-empty 1-D list of lengths", source=name)
    if not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
        raise InputError(f"lengths must be real numbers, got {arr.dtype}", source=name)
    nonpositive = np.flatnonzero(~(arr > 0))
    if nonpositive.size:
        first = int(nonpositive[0])
        raise InputError(f"length {arr[first]} at sample {first} is not positive "
                         f"({nonpositive.size} such samples)", source=name)
    too_long = np.flatnonzero(~(arr <= MAX_LENGTH))  # inf, 1e30, uint64 past int64: never wrap
    if too_long.size:
        first = int(too_long[0])
        raise InputError(f"length {arr[first]} at sample {first} is not a token count (over "
                         f"{MAX_LENGTH:,}; {too_long.size} such samples)", source=name)
    fractional = np.flatnonzero(arr != np.floor(arr))
    if fractional.size:
        first = int(fractional[0])
        raise InputError(f"length {arr[first]} at sample {first} is not a whole number of tokens "
                         f"({fractional.size} such samples)", source=name)
    return arr.astype(np.int64)


MAX_LENGTH = 1 << 40  # far past any context length, far below int64's end


def _column(frame, column: str, name: str) -> np.ndarray:
    if column not in frame.columns:
        raise InputError(f"no column {column!r} (found: {', '.join(frame.columns)}); pass --column",
                         source=name)
    return frame[column].to_numpy()


def _hf_folder(folder: Path, column: str) -> np.ndarray:
    """A `datasets` save_to_disk folder: state.json names Arrow stream files."""
    import polars as pl

    state = folder / "state.json"
    files = sorted(folder.glob("data-*.arrow"))
    if state.exists():
        try:
            doc = json.loads(state.read_text())
        except (ValueError, RecursionError) as exc:
            raise InputError(f"state.json is not valid JSON: {str(exc)[:80]}", source=str(folder)) from None
        entries = doc.get("_data_files", []) if isinstance(doc, dict) else None
        if not isinstance(entries, list) or not all(isinstance(f, dict) and isinstance(f.get("filename"), str)
                                                    for f in entries):
            raise InputError("state.json has no '_data_files' list of {'filename': ...}: not a Hugging "
                             "Face save_to_disk folder", source=str(folder))
        root = folder.resolve()
        named = [(folder / f["filename"]).resolve() for f in entries]
        outside = [str(n) for n in named if root not in n.parents]
        if outside:  # a data file outside the dataset folder ('../../etc/passwd') is never opened
            raise InputError(f"state.json names a data file outside the folder: {outside[0]}",
                             source=str(folder))
        files = named or files
    if not files:
        raise InputError("no data-*.arrow files: not a Hugging Face save_to_disk folder",
                         source=str(folder))
    parts = [_column(pl.read_ipc_stream(f, columns=None), column, str(f)) for f in files]
    return np.concatenate(parts)
