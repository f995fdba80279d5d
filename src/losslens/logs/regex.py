"""Regular expressions compiled when first used.

Python compiles a pattern in Python code (~0.1 ms each, 1 ms for a long alternation): the ~130
patterns of the formats cost ~16 ms of every start, though a log needs those of the formats it is
sniffed as and read by. A module whose patterns serve one format's parsing (the generic
'key: value' reader's two dozen) or one rare use (masking secrets in a quoted line) makes them with
``lazy`` instead of ``re.compile``: the pattern is compiled at its first use, and each later use
finds the compiled pattern's method on the object itself, as fast as on a compiled pattern.

A lazy pattern is not a ``re.Pattern`` to ``isinstance`` or to ``re.sub(PATTERN, ...)``: call its
own methods (``PATTERN.sub(...)``), as this code does."""

from __future__ import annotations

import re
from typing import Any, cast

# what a compiled pattern offers: each is set on the lazy one at its first use
_ATTRIBUTES = ("search", "match", "fullmatch", "finditer", "findall", "sub", "subn", "split",
               "scanner", "pattern", "flags", "groups", "groupindex")


class _Lazy:
    def __init__(self, pattern: str, flags: int) -> None:
        self._args = (pattern, flags)

    def __getattr__(self, name: str) -> Any:  # only for what the object does not hold yet
        if name.startswith("__"):
            raise AttributeError(name)
        compiled = re.compile(*self._args)
        for attr in _ATTRIBUTES:
            setattr(self, attr, getattr(compiled, attr))
        return getattr(compiled, name)

    def __repr__(self) -> str:
        return f"lazy({self._args[0]!r})"


def lazy(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """``re.compile(pattern, flags)`` at the first use of what it returns."""
    return cast("re.Pattern[str]", _Lazy(pattern, flags))
