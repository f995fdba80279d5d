"""The detector interface: stateless, explicit parameters, a Skipped result when data is short."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from losslens.findings import Finding, Skipped


@dataclass(frozen=True)
class Series:
    """One metric of one segment: steps ascending, values as logged (NaN kept)."""

    metric: str
    steps: np.ndarray  # (n,) int64
    values: np.ndarray  # (n,) float64
    segment: int = 0
    context: Mapping[str, np.ndarray] | None = None  # other metrics of the segment, same steps

    def __len__(self) -> int:
        return len(self.steps)

    def own(self, name: str) -> np.ndarray | None:
        """The context column ``name`` as float64 values the caller may change in place (a new
        array: the context's own fresh copy where it makes one per read, ``fresh``, else a copy);
        None when the series has no such context."""
        if self.context is None or name not in self.context:
            return None
        fresh = getattr(self.context, "fresh", None)
        return fresh(name) if fresh is not None else np.array(self.context[name], dtype=np.float64)

    def finite(self, positive: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """(values, steps) where the value is finite (and > 0 with ``positive``): read-only
        views of the series' own arrays where every value is (a long run's detectors do not each
        copy it), else copies."""
        ok = np.isfinite(self.values)
        if positive:
            ok &= self.values > 0
        if not ok.all():
            return self.values[ok], self.steps[ok]
        v, steps = self.values.view(), self.steps.view()
        v.flags.writeable = steps.flags.writeable = False
        return v, steps


@dataclass(frozen=True)
class KindDoc:
    """What a finding kind means, as the documentation tables say it; the tables are generated
    from these (``losslens.doc_tables``), so a detector's documentation lives in its module.

    meaning: the README's findings table. severity, evidence: docs/findings.md (when each severity
    is given; the evidence keys). contract: docs/contract.md's row, the shared contract's words.
    extensions: rows later issues added to the contract, each (first cell, text); ``{kind}`` in
    the first cell stands for the kind's name."""

    meaning: str
    severity: str
    evidence: str
    contract: str
    extensions: tuple[tuple[str, str], ...] = ()


class Detector(ABC):
    """One kind of finding. ``name`` is the finding kind and the CLI's name for it; ``title`` its
    one line in ``losslens detectors``; ``doc`` its rows in the documentation's tables."""

    name: str = ""
    title: str = ""
    doc: ClassVar[KindDoc]
    metrics: tuple[str, ...] = ("loss",)  # the canonical metrics it looks at

    def wants(self, columns: list[str]) -> list[str]:
        """The metrics of this log to run on (default: ``metrics`` that the log has)."""
        return [m for m in self.metrics if m in columns]

    def too_short(self, series: Series, n: int, need: int) -> Skipped | None:
        """A Skipped result when ``n`` points are fewer than ``need``."""
        if n < need:
            return Skipped(self.name, series.metric, f"only {n} points; needs {need}")
        return None

    def explained(self, finding: Finding, findings: list[Finding]) -> bool:
        """True when another of ``findings`` (the analysis's, same log) already says what this
        detector's ``finding`` says: it is then left out of the report. None by default."""
        return False

    def reconsidered(self, finding: Finding, findings: list[Finding], evaluated: bool) -> Finding:
        """This detector's ``finding`` as the others of the analysis (``findings``, same log) make
        it read: another severity or cause, said in its summary (a loss's bands at the phases of
        the logged LR, an epoch pattern with the eval loss rising). ``evaluated``: the log holds
        an eval loss. The finding itself by default."""
        return finding

    def same_event(self, finding: Finding) -> tuple:
        """What makes this detector's findings of two analyses of a growing log one event
        (``watch`` announces it once): its kind, metric and segment by default."""
        return (finding.kind, finding.metric, finding.segment)

    @abstractmethod
    def detect(self, series: Series) -> list[Finding] | Skipped:
        """Findings on ``series`` (possibly none), or Skipped when it cannot judge."""


def fmt_number(x: float) -> str:
    """A number as a finding's summary writes it (4 significant digits)."""
    return f"{x:.4g}"


def fmt_times(ratio: float) -> str:
    """A ratio as a summary writes it: '2.14×', or '1.7e+30×' for a blow-up."""
    return f"{ratio:.2f}×" if abs(ratio) < 1e4 else f"{ratio:.2g}×"


def fmt_change(rise: float) -> str:
    """A relative change: '+35%', or '×1.7e+17' for a blow-up (a percentage of 20 digits helps
    no one)."""
    return f"{rise:+.0%}" if abs(rise) < 100 else f"×{1 + rise:.2g}"
