"""Spikes that runs reading the same data in the same order share: a bad batch.

Restarts, optimizer sweeps and runs that change the model's seed but not the data's read the same
batch at the same step. A batch that is bad (corrupted, mislabelled, out of distribution) lifts
every such run's loss at that step, whatever each run's noise: a coincidence the noise of
independent runs would almost never make. One run alone cannot tell a bad batch from a draw of
its heavy-tailed noise (``Spike`` says "likely a draw" then); two that spike together can.

The test, per step that two or more runs hold: each run's excursion above its own level (the
log-loss less its centred rolling median), and how rare that excursion is in the run (the share
of its records at least as far above their level). A step where several runs are each in their
own top ``rare`` share, each at least ``min_ratio`` times its level, and where fewer than
``alpha`` coincidences as rare are expected anywhere in the runs (counted on the runs' ranks,
for every pair of runs) is a shared spike: cause ``data``, a warning below 0.01 expected, else
information."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from itertools import combinations
from math import comb

import numpy as np

from losslens.detectors.base import fmt_number
from losslens.detectors.stats import rolling_median
from losslens.findings import Finding, Severity


@dataclass(frozen=True)
class Excursions:
    """One run's loss as the shared-spike test reads it: at each logged step, the value, its
    level (a centred rolling median) and the share of the run's records at least as far above
    their level (1/n for the largest excursion)."""

    name: str
    steps: np.ndarray
    values: np.ndarray
    level: np.ndarray
    rarity: np.ndarray

    @classmethod
    def of(cls, name: str, steps: np.ndarray, values: np.ndarray, window: int = 64) -> Excursions:
        ok = np.isfinite(values) & (values > 0)
        steps, values = steps[ok], values[ok]
        x = np.log(values)
        w = max(3, min(2 * (window // 2) + 1, 2 * (len(x) // 8) + 1))
        level = rolling_median(x, w, center=True) if len(x) else x
        e = np.nan_to_num(x - level, nan=0.0)
        order = np.argsort(-e, kind="stable")  # largest first: rank 1 is 1/n
        rarity = np.empty(len(e))
        rarity[order] = np.arange(1, len(e) + 1) / max(1, len(e))
        return cls(name, steps, values, np.exp(level), rarity)

    def at(self, step: int) -> int | None:
        i = int(np.searchsorted(self.steps, step))
        return i if i < len(self.steps) and self.steps[i] == step else None


@dataclass(frozen=True)
class SharedSpike:
    """A step at which ``runs`` (indices) spike together; ``chance``: the expected number of such
    coincidences anywhere in the runs were they independent."""

    step: int
    runs: tuple[int, ...]
    chance: float


def shared_spikes(runs: list[Excursions], rare: float = 0.02, min_ratio: float = 1.2,
                  alpha: float = 0.05) -> list[SharedSpike]:
    """The steps at which two or more of ``runs`` spike together with fewer than ``alpha`` such
    coincidences expected by chance."""
    if len(runs) < 2:
        return []
    candidates: dict[int, list[int]] = {}
    for r, run in enumerate(runs):
        if len(run.steps) < 20:  # too few records for a share of them to mean anything
            continue
        tops = np.flatnonzero((run.rarity <= rare) & (run.values >= min_ratio * run.level))
        for i in tops:
            candidates.setdefault(int(run.steps[i]), []).append(r)
    pairs = comb(len(runs), 2)
    out = []
    for step, members in sorted(candidates.items()):
        if len(members) < 2:
            continue
        # the rarest pair among them (more runs only add to it: this errs on the side of chance)
        chance = pairs * min(_pair_chance(runs[a], runs[b], step, rare)
                             for a, b in combinations(members, 2))
        if chance <= alpha:
            out.append(SharedSpike(step, tuple(members), chance))
    return out


def _pair_chance(a: Excursions, b: Excursions, step: int, rare: float) -> float:
    """The expected number of steps at which two independent runs would both have an excursion
    among their ``rare`` share and as rare together as ``a`` and ``b`` at ``step``: the steps
    both hold x the share of rank pairs (i, j), i <= rare * n_a, j <= rare * n_b, with
    (i / n_a)(j / n_b) at most theirs (each run's ranks are a uniform draw under independence)."""
    na, nb = len(a.steps), len(b.steps)
    x = float(a.rarity[a.at(step)] * b.rarity[b.at(step)])  # type: ignore[index]
    i = np.arange(1, int(rare * na) + 1)
    j = np.minimum(np.floor(x * na * nb / i + 1e-9), int(rare * nb))
    compared = len(np.intersect1d(a.steps, b.steps, assume_unique=True))
    return compared * float(j.sum()) / (na * nb)


def marked(findings: list[Finding], runs: list[Excursions], me: int, shared: list[SharedSpike],
           metric: str) -> list[Finding]:
    """Run ``me``'s findings with its shared spikes said as such: a spike finding at the step
    becomes (at least) a warning with cause ``data``; a step no finding named gets one."""
    out = list(findings)
    run = runs[me]
    for s in shared:
        if me not in s.runs:
            continue
        i = run.at(s.step)
        assert i is not None
        others = [runs[r] for r in s.runs if r != me]
        ratio = float(run.values[i] / run.level[i])
        elsewhere = "; ".join(f"{o.name}: {_ratio(o, s.step):.2f}×" for o in others)
        likely = "a bad batch" if s.chance <= 0.01 else "possibly a bad batch"
        summary = (f"{metric} spikes to {fmt_number(run.values[i])} at step {s.step}, {ratio:.2f}× "
                   f"its level {fmt_number(run.level[i])}, and so do {len(others)} other run(s) "
                   f"reading the same data at the same step ({elsewhere}): {likely} (cause: data; "
                   f"{s.chance:.2g} such coincidences expected by chance) — check the data at that step")
        evidence = {"cause": "data", "peak_step": s.step, "value": float(run.values[i]),
                    "local_level": float(run.level[i]), "ratio": round(ratio, 3),
                    "chance": float(f"{s.chance:.3g}"),
                    "shared_with": [{"run": o.name, "step": s.step, "ratio": round(_ratio(o, s.step), 3),
                                     "value": float(o.values[o.at(s.step)])}  # type: ignore[index]
                                    for o in others]}
        # fewer than 1 in 100 by chance: a warning; up to 1 in 20: information
        severity = Severity.WARNING if s.chance <= 0.01 else Severity.INFO
        at = next((k for k, f in enumerate(out) if f.kind == "spike" and f.metric == metric
                   and f.start_step <= s.step <= f.end_step), None)
        if at is None:
            out.append(Finding("spike", severity, metric, s.step, s.step, summary, evidence))
        else:
            f = out[at]
            kept = {k: v for k, v in f.evidence.items()
                    if k not in ("noise_draws_expected", "noise_tail_index")}
            out[at] = dataclasses.replace(f, severity=max(f.severity, severity),
                                          summary=summary, evidence={**kept, **evidence})
    return out


def _ratio(run: Excursions, step: int) -> float:
    i = run.at(step)
    assert i is not None
    return float(run.values[i] / run.level[i])
