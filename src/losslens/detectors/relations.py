"""What one finding says about another of the same series: the helpers detectors use to declare
which findings already explain theirs (``Detector.explained``)."""

from __future__ import annotations

from losslens.findings import Finding

STRUCTURES = ("ladder", "multimodal")


def same_series(a: Finding, b: Finding) -> bool:
    """Two findings of the same metric in the same restart segment."""
    return a.metric == b.metric and a.segment == b.segment


def structures(f: Finding, findings: list[Finding]) -> list[Finding]:
    """The structure findings of ``f``'s series: ladders, bands, the cycles of a short log."""
    return [g for g in findings if same_series(f, g)
            and (g.kind in STRUCTURES or "cycle_top" in g.evidence)]


def top(f: Finding) -> float | None:
    """The highest level a structure finding accounts for: a ladder's highest rung, the top band."""
    if f.kind == "ladder":
        return max((max(e["values"]) for e in f.evidence.get("clearest", [])), default=None)
    if f.kind == "multimodal":
        return max(f.evidence.get("modes", []), default=None)
    return f.evidence.get("cycle_top")  # the cycles of a short log


def at_cycle_peak(spike: Finding, cycles: Finding) -> bool:
    """A spike at (within a record of) the peak of a cycle found in a short log."""
    peaks = cycles.evidence.get("cycle_peaks")
    if not peaks:
        return False
    record = cycles.evidence["period_steps"] / cycles.evidence["period_records"]
    at = spike.evidence.get("peak_step", spike.start_step)
    return any(abs(at - p) <= 1.01 * record for p in peaks)


def ladder_periods(f: Finding) -> list[float]:
    """The periods a ladder repeats at: the median distance from one episode's start to the next,
    and that of episodes found one after the other, which is shorter where some episodes were
    missed (lost records, skipped rungs) or runs of climbs are separated by gaps."""
    return [p for p in (f.evidence.get("recurrence_steps"), f.evidence.get("consecutive_steps")) if p]


def blows_up_into_nan(f: Finding, findings: list[Finding]) -> bool:
    """``f`` (a spike or a rise) ends right where its series turns non-finite for good: it is
    the blow-up of the values before the NaN, which the ``nonfinite`` finding reports (its last
    finite value), not an event of its own."""
    reach = max(1, (f.end_step - f.start_step) // 2 + 1)
    return any(g.kind == "nonfinite" and same_series(f, g) and g.evidence.get("to_end")
               and 0 < g.start_step - f.end_step <= reach for g in findings)
