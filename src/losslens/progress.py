"""Progress of long work, for whoever is listening (the CLI draws a bar; the library is silent).

Readers and the analysis call ``report(phase, done, total)``; ``listening(fn)`` installs a
listener for the duration of a block. Nothing is drawn or printed here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

Listener = Callable[[str, int, int | None], None]
_listener: ContextVar[Listener | None] = ContextVar("losslens_progress", default=None)


def report(phase: str, done: int, total: int | None = None) -> None:
    """Tell the listener of this context how far ``phase`` has got (nothing when none listens)."""
    fn = _listener.get()
    if fn is not None:
        fn(phase, done, total)


@contextmanager
def listening(fn: Listener | None) -> Iterator[None]:
    """Within the block, ``report`` calls go to ``fn`` (a progress bar)."""
    token = _listener.set(fn)
    try:
        yield
    finally:
        _listener.reset(token)
