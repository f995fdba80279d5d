"""The optional accelerator of large logs: numba kernels from the ``fast`` extra.

A column-wise reader may do its work in compiled passes over a chunk's bytes (key=value's template
reader, ``formats/kv/fast.py``; the skeleton reader of one-line records, ``skeleton.py``) where
numba is installed and the file is large enough for the compile (or the cached build's load) to
pay. The polars path stays the default and, with the per-line parser, the oracle.

numba compiles a kernel the first time it runs and keeps the build in ``$LOSSLENS_CACHE`` or
``$XDG_CACHE_HOME/losslens/numba`` (``~/.cache``), in a folder named by the kernels' sources; where
no cache folder can be written it compiles without one. ``LOSSLENS_FAST=off`` turns the
accelerator off, ``LOSSLENS_FAST=on`` uses it on a file of any size (the tests do).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
from pathlib import Path
from types import ModuleType

import numpy as np

MIN_BYTES = 64 << 20  # a file below this is read with polars alone (a cached build loads in ~0.3 s)
# every kernels module: numba's cache knows a function's own file only, and the skeleton kernels
# call key=value's, so the builds are kept in a folder named by all of their sources
KERNEL_MODULES = ("losslens.logs.formats.kv.kernels", "losslens.logs.skeleton_kernels")
_loaded: dict[str, ModuleType | None] = {}


def wanted(size: int | None, module: str) -> bool:
    """Whether a file of ``size`` bytes is read with the compiled kernels of ``module``:
    ``LOSSLENS_FAST`` ('on', 'off'), else a file of ``MIN_BYTES`` or more; and numba can load them."""
    return large(size) and compiled(module) is not None


def large(size: int | None) -> bool:
    """Whether ``LOSSLENS_FAST`` leaves a file of ``size`` bytes to the compiled kernels ('on':
    any size; 'off': none; unset: ``MIN_BYTES`` or more), before numba is looked for."""
    mode = os.environ.get("LOSSLENS_FAST", "").strip().lower()
    if mode in ("off", "0", "no", "false"):
        return False
    return mode in ("on", "1", "yes", "true") or (size is not None and size >= MIN_BYTES)


def cache_dir() -> Path | None:
    """A folder numba may keep its builds in, made if need be; None where none can be written."""
    base = os.environ.get("LOSSLENS_CACHE") or \
        os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "losslens")
    path = Path(base) / "numba"
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".probe{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError:
        return None
    return path


def compiled(module: str) -> ModuleType | None:
    """The kernels module ``module``, imported once with numba's cache folder set; None where
    numba is missing or fails."""
    if module in _loaded:
        return _loaded[module]
    try:
        where = cache_dir()
        if where is not None:
            os.environ.setdefault("NUMBA_CACHE_DIR", str(where / _sources_digest()))
        import numba  # noqa: F401  (the optional 'fast' extra)

        _loaded[module] = importlib.import_module(module)
    except Exception:  # numba missing, or its compile or cache failing: the polars path reads
        _loaded[module] = None
    return _loaded[module]


def _sources_digest() -> str:
    """A short digest of the kernels modules' sources (the name of their builds' folder)."""
    digest = hashlib.sha256()
    for name in KERNEL_MODULES:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin:
            digest.update(Path(spec.origin).read_bytes())
    return digest.hexdigest()[:16]


def line_bounds(buf: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each line of a chunk's bytes starts and ends (its newline, or the end of the last
    line where the chunk does not end with one); numpy finds the newlines on whole vectors."""
    nl = np.flatnonzero(buf == 10)
    end = len(buf)
    ends = nl if not end or buf[-1] == 10 else np.append(nl, end)
    starts = np.empty(len(ends), dtype=np.int64)
    if len(ends):
        starts[0] = 0
        starts[1:] = ends[:-1] + 1
    return starts, ends
