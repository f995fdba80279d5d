"""The contract's JSON report: one object per log, one line each."""

from __future__ import annotations

import json

from losslens.findings import Report


def render(report: Report) -> str:
    return json.dumps(report.as_dict(), allow_nan=False, separators=(",", ":"))
