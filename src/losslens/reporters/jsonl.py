"""JSON out, written in one place: the contract's report (one object per log, one line each),
watch's alert events, the replay report and the SARIF document. Never NaN or Infinity
(``jsonable`` makes them null)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from losslens.findings import Report, jsonable
from losslens.reporters.base import Context, Streaming

if TYPE_CHECKING:
    from losslens.runner import Result


def dumps(obj: Any, compact: bool = False, indent: int | None = None) -> str:
    """JSON text: one line (``compact``: without spaces after separators, the analysis report),
    or a document indented by ``indent`` (SARIF)."""
    return json.dumps(jsonable(obj), allow_nan=False, indent=indent,
                      separators=(",", ":") if compact else None)


def render(report: Report) -> str:
    """The contract's JSON report of one log, on one line."""
    return dumps(report.as_dict(), compact=True)


class Json(Streaming):
    """``--output-format json``: the contract's report, one line per log read."""

    name = "json"

    def log(self, result: Result, ctx: Context) -> str | None:
        return None if result.report is None else render(result.report) + "\n"
