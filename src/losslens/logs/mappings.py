"""Records that arrive as mappings (a JSON object, a Python dict): flattened to
"a/b" keys, values as the text a line reader would see, emitted into the sink."""

from __future__ import annotations

import json
import math
import re
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


# A non-finite float printed bare by a writer that is not a JSON encoder ('loss': nan, inf, -inf,
# NAN): Python's repr, C++ streams, f-string "JSON"; a value, after ':', ',' or '[' and before
# ',', '}' or ']'
BARE_NONFINITE = re.compile(r"(?<=[:,\[])(\s*)([-+]?(?:nan|inf(?:inity)?))(?=\s*[,}\]])", re.IGNORECASE)
_JSON_STRING = re.compile(r'("(?:[^"\\]|\\.)*")')


def _as_json_constant(m: re.Match[str]) -> str:
    word = m.group(2).lower()
    constant = "NaN" if word.lstrip("+-") == "nan" else "-Infinity" if word[0] == "-" else "Infinity"
    return m.group(1) + constant


_SURROGATE = re.compile("[\ud800-\udfff]")


def no_surrogates(obj: Any) -> Any:
    """``obj`` with every lone surrogate in its strings and keys made U+FFFD: JSON's '\\ud800'
    escape (and Python's) decodes to one, which no output can encode (a key named so reached the
    terminal and the HTML page as a traceback)."""
    if isinstance(obj, str):
        return _SURROGATE.sub("\ufffd", obj)
    if isinstance(obj, dict):
        return {no_surrogates(k): no_surrogates(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [no_surrogates(v) for v in obj]
    return obj


def loads_object(text: str) -> Any:
    """``json.loads``, and where it fails, the same text with its bare non-finite values
    (``BARE_NONFINITE``, outside strings) read as JSON's NaN, Infinity and -Infinity: a NaN an
    f-string or C++ logger wrote ('{"loss": nan}') is a NaN, not a line skipped as no JSON.
    Raises ValueError (or RecursionError) where the text is still no JSON."""
    try:
        obj = json.loads(text)
    except ValueError:
        parts = _JSON_STRING.split(text)
        parts[::2] = [BARE_NONFINITE.sub(_as_json_constant, p) for p in parts[::2]]
        fixed = "".join(parts)
        if fixed == text:
            raise
        obj = json.loads(fixed)
    return no_surrogates(obj) if "\\u" in text else obj


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
        obj = json.loads(text)
    return no_surrogates(obj) if "\\u" in text else obj
