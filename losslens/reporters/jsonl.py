"""JSON out, written in one place: the contract's report (one object per log, one line each),
watch's alert events and the replay report. Never NaN or Infinity (``jsonable`` makes them null)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from losslens.findings import Report, jsonable
from losslens.reporters.base import Context, Streaming

if TYPE_CHECKING:
    from losslens.runner import Result


def dumps(obj: Any, compact: bool = False) -> str:
    """One line of JSON; ``compact`` without spaces after separators (the analysis report)."""
    return json.dumps(jsonable(obj), allow_nan=False, separators=(",", ":") if compact else None)


def render(report: Report) -> str:
    return dumps(report.as_dict(), compact=True)


class Json(Streaming):
    """``--output-format json``: the contract's report, one line per log read."""

    name = "json"

    def log(self, result: Result, ctx: Context) -> str | None:
        return None if result.report is None else render(result.report) + "\n"
