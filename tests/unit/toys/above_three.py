"""The toy detector: the loss above a limit."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from losslens.detectors.base import Detector, KindDoc, Series
from losslens.findings import Finding, Severity, Skipped


@dataclass(frozen=True)
class AboveThree(Detector):
    """The loss above ``limit`` (limit: the level it must stay under)."""

    name = "above_three"
    title = "the loss above 3"
    doc = KindDoc(meaning="the loss went above 3", severity="error", evidence="`records`",
                  contract="the loss above a limit (evidence: records)")

    limit: float = 3.0

    def detect(self, series: Series) -> list[Finding] | Skipped:
        over = np.flatnonzero(series.values > self.limit)
        if not len(over):
            return []
        a, b = int(series.steps[over[0]]), int(series.steps[over[-1]])
        summary = f"{series.metric} above {self.limit} at {len(over)} record(s)"
        return [Finding(self.name, Severity.ERROR, series.metric, a, b, summary, {"records": len(over)})]
