"""Reporters turn results into output; they never print, write files or exit (the CLI does).

Every output format is a ``Reporter`` (``base.py``: ``log(result, ctx)`` per log, ``close(results,
ctx)`` once) in ``REPORTERS`` (``registry.py``), which ``--output-format`` maps onto. Beside them:
``pages`` writes analyze's --html/--plot files, ``live`` is watch's view, ``replay_view`` the
replay's terminal table, ``chart`` the drawing numbers they share."""

from typing import Any

from losslens.reporters.base import Context, Reporter

__all__ = ["REPORTERS", "Context", "Reporter"]


def __getattr__(name: str) -> Any:  # the registry loads every reporter: on first use only
    if name == "REPORTERS":
        from losslens.reporters.registry import REPORTERS

        return REPORTERS
    raise AttributeError(f"module 'losslens.reporters' has no attribute {name!r}")
