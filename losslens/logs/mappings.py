"""Records that arrive as mappings (a JSON object, a Python dict): flattened to
"a/b" keys, values as the text a line reader would see, emitted into the sink."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from losslens.errors import FormatError
from losslens.logs.sink import MAX_KEYS, TOO_WIDE, Sink, TooWide

SUMMARY_KEYS = ("train_runtime", "total_flos")


def flatten(obj: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """A nested mapping as ('a/b', value) pairs."""
    out: list[tuple[str, Any]] = []
    for k, v in obj.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.extend(flatten(v, key + "/"))
        else:
            out.append((key, v))
    return out


def as_text(v: Any) -> str | None:
    """A JSON value as the text a line reader would see (NaN as 'nan', a numeric list as '[...]'), or
    None when it is not a metric."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, float):
        return "nan" if math.isnan(v) else repr(v)
    if isinstance(v, list):
        if all(isinstance(x, int | float) and not isinstance(x, bool) for x in v):
            return "[" + ", ".join(repr(float(x)) for x in v) + "]"
        return None
    return str(v)


def emit_mapping(sink: Sink, lineno: int, obj: dict[str, Any], step: int | None = None) -> str | None:
    """Emit one dict-shaped record; the skip reason when it holds none."""
    if any(k in obj for k in SUMMARY_KEYS):
        return "run summary"
    if len(obj) > MAX_KEYS:
        return TOO_WIDE
    pairs = [(k, t) for k, v in flatten(obj) if (t := as_text(v)) is not None]
    try:
        found, metrics = sink.metrics_from_pairs(pairs)
    except TooWide:
        return TOO_WIDE
    if not sink.emit(lineno, found if found is not None else step, metrics):
        return "no training metric"
    return None


# --- JSON Lines ------------------------------------------------------------------------------
@contextmanager
def json_errors(source: str) -> Iterator[None]:
    """Decoding errors as a FormatError naming the file (and line) — also for a document nested
    too deeply to decode or a number too long for Python's int."""
    try:
        yield
    except json.JSONDecodeError as exc:
        raise FormatError(f"invalid JSON: {exc.msg}", source=source, line=exc.lineno) from None
    except RecursionError:
        raise FormatError("invalid JSON: nested too deeply to read", source=source) from None
    except ValueError as exc:  # 'Exceeds the limit (4300 digits) for integer string conversion'
        raise FormatError(f"invalid JSON: {str(exc).split(';')[0]}", source=source) from None


def load_json(text: str, source: str) -> Any:
    """A whole JSON document, or a FormatError (see ``json_errors``)."""
    with json_errors(source):
        return json.loads(text)
