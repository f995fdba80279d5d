"""Ladder: the metric climbs through several near-equal increments, then drops back (resets).

The seed incident's signature: 0.82 → 1.56 → 2.40 → 3.23 → 4.09 → reset, again and again.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from losslens.detectors.base import Detector, KindDoc, Series
from losslens.detectors.relations import structures
from losslens.detectors.stats import detrend
from losslens.findings import Finding, Severity, Skipped, steps_text


@dataclass(frozen=True)
class Episode:
    """One climb of a ladder: where it starts and peaks, and its regular increments."""
    start: int  # index of the low point the climb starts from
    peak: int  # index of the top of the climb
    increments: np.ndarray  # the regular core of the climb's increments

    @property
    def increment(self) -> float:
        return float(np.median(self.increments))

    @property
    def cv(self) -> float:
        return float(np.std(self.increments) / np.mean(self.increments))


def rungs(x: np.ndarray, tolerance: float = 0.25) -> np.ndarray | None:
    """The accumulation count k of each value of a climb, when the values are whole multiples of
    the climb's own first rung: k = 1 at the start and strictly increasing (a lost record skips a
    rung), each value within ``tolerance``·sqrt(k) rungs of k × the unit (a sum of k noisy
    per-step losses spreads as sqrt(k)); the unit is refitted by least squares as rungs are
    assigned, so that a noisy first rung does not throw off the high ones. Scale-free: every
    climb has its own unit (a decaying level under the ladder is fine); a last value short of the
    next rung is a partial accumulation and left out. None otherwise."""
    if len(x) < 3 or x[0] <= 0:
        return None
    ks = [1]
    num, den = float(x[0]), 1.0
    for i, xi in enumerate(x[1:], 1):
        k = int(round(float(xi) / (num / den)))
        if k <= ks[-1]:
            if i == len(x) - 1 and xi > x[i - 1]:
                x = x[:-1]  # a short last rise: a partial accumulation (as in find_episodes)
                break
            return None
        ks.append(k)
        num += float(xi) * k
        den += k * k
    k_arr = np.array(ks, dtype=np.float64)
    err = np.abs(x / (num / den) - k_arr) / np.sqrt(k_arr)
    if k_arr[-1] > 2 * len(x) or np.mean(err <= tolerance) < 0.8:
        return None  # mostly skipped rungs: the unit is too small to mean anything
    return k_arr.astype(np.int64)


def _median(x: np.ndarray) -> float:
    """``np.median`` of a short array, the same value without its per-call cost (a shuffled
    residual holds thousands of short climbs: 1.2 s of a replay's attribution went to it)."""
    s = np.sort(x)
    k = len(s) // 2
    return float(s[k]) if len(s) % 2 else float((s[k - 1] + s[k]) / 2)


def find_episodes(v: np.ndarray, min_increments: int = 3, regularity: float = 0.35,
                  min_rise: float = 0.3, reset_fraction: float = 0.6) -> list[Episode]:
    """Climbs of >= ``min_increments`` rising steps whose increments are regular (coefficient of
    variation <= ``regularity``; a short last or first step is allowed: a partial accumulation),
    rising by >= ``min_rise`` of the start level, and followed by a drop of >= ``reset_fraction``
    of the climb. A climb whose values are whole multiples of its first rung (see ``rungs``) is
    regular whatever its increments: an accumulator whose lost records skip rungs."""
    d = np.diff(v)
    n = len(v)
    rising = np.concatenate([[False], d > 0, [False]])
    edges = np.flatnonzero(rising[1:] != rising[:-1])
    out: list[Episode] = []
    for i, j in zip(edges[::2], edges[1::2], strict=True):
        if j - i < min_increments:
            continue  # points i..j climb: j - i rising steps; j is the peak
        inc = d[i:j]
        med = _median(inc)
        core = inc
        if len(core) > 1 and core[-1] < 0.6 * med:
            core = core[:-1]
        if len(core) > 1 and (core[0] < 0.6 * med or core[0] > 1.6 * med):
            core = core[1:]
        rise = v[j] - v[i]
        level = abs(v[i]) if v[i] != 0 else abs(med)
        dropped = j < n - 1 and (v[j] - v[j + 1]) >= reset_fraction * rise
        if (len(core) >= min_increments and dropped and rise >= min_rise * level
                and (np.std(core) <= regularity * np.mean(core) or rungs(v[i:j + 1]) is not None)):
            out.append(Episode(int(i), int(j), core))
    return out


def chance_episodes(v: np.ndarray, window: int, shuffles: int, seed: int, **kw) -> float:
    """Episodes expected by chance: the mean count after shuffling the de-trended residual
    (structure destroyed, trend and noise level kept), scaled to the series' length."""
    if len(v) <= 20_000:
        x = v
    else:  # ten blocks spread over the run: noise relative to the level changes as it trains
        starts = np.linspace(0, len(v) - 2000, 10).astype(int)
        x = np.concatenate([v[a:a + 2000] for a in starts])
    r, trend = detrend(x, window)
    ratio = np.nanmin(x) > 0 and np.nanmin(trend) > 0
    rng = np.random.default_rng(seed)
    counts = []
    for _ in range(shuffles):
        p = rng.permutation(r)
        counts.append(len(find_episodes(p * trend if ratio else p + trend, **kw)))
    return float(np.mean(counts)) * len(v) / len(x)


@dataclass(frozen=True)
class Ladder(Detector):
    """The seed incident's shape: climbs through near-equal increments, then a reset drop, repeated.
    Calibrated against shuffles of the de-trended residual (chance episodes) and a coverage rule;
    the cause is `accumulator` when most climbs sit on whole multiples of their own first rung.

    min_increments: rises an episode needs. regularity: how unequal the increments may be
    (relative spread). min_rise: an episode's climb relative to the noise. reset_fraction: how
    much of the climb the drop must undo. min_episodes: episodes needed; strong_episodes: episodes
    for an error rather than a warning. multiple_tolerance: distance from a whole multiple, in
    units of the rung times sqrt(k) at rung k, that still counts as one. window: records in the
    de-trending median. shuffles / seed: the shuffled residuals that measure chance episodes;
    chance_factor: episodes must exceed this many times the chance count. min_coverage: share of
    the span the episodes must cover."""

    name = "ladder"
    title = "repeated climbs through near-equal increments followed by a reset drop"
    doc = KindDoc(
        meaning=(
            'climbs through near-equal increments, then a reset drop; cause `accumulator` (values are k '
            '× a level: a summed, never-reset loss), `batch_composition` (the climbs recur with the data '
            'order) or `unknown`'),
        severity=(
            'error with >= 3 episodes, else warning'),
        evidence=(
            '`episodes`, `median_length` (rising steps per climb), `increment`, `regularity_cv`, '
            '`clearest` (up to 3 episodes: `start_step`, `peak_step`, `reset_step`, `values`), '
            '`expected_by_chance` (episodes in shuffled data), `cause` (`accumulator` / '
            '`batch_composition` / `unknown`) and its support: `on_integer_multiples`, '
            '`reset_over_increment`, or `period_steps`'),
        contract=(
            'repeated climbs through near-equal increments followed by a reset drop (evidence.cause: '
            '`accumulator` when the values are integer multiples of the reset level, `batch_composition` '
            'when tied to data, `lr_schedule` when the logged LR explains it, else `unknown`)'),
    )
    metrics = ("loss",)

    min_increments: int = 3
    regularity: float = 0.35
    min_rise: float = 0.3
    reset_fraction: float = 0.6
    min_episodes: int = 2
    strong_episodes: int = 3
    multiple_tolerance: float = 0.25
    window: int = 201
    shuffles: int = 19
    chance_factor: float = 3.0
    min_coverage: float = 0.2
    seed: int = 0

    def explained(self, finding: Finding, findings: list[Finding]) -> bool:
        """In a short log, a ladder over some of the cycles is those cycles, unless it names an
        accumulator (then the ladder says it)."""
        return finding.evidence.get("cause") != "accumulator" and \
            any("cycle_top" in g.evidence for g in structures(finding, findings))

    def detect(self, series: Series) -> list[Finding] | Skipped:
        v, steps = series.finite()
        if len(v) < self.min_increments * self.min_episodes + 2:
            return Skipped(self.name, series.metric, f"only {len(v)} finite points; needs "
                           f"{self.min_increments * self.min_episodes + 2}")
        kw: dict = {"min_increments": self.min_increments, "regularity": self.regularity,
                    "min_rise": self.min_rise, "reset_fraction": self.reset_fraction}
        eps = find_episodes(v, **kw)
        if len(eps) < self.min_episodes:
            return []
        chance = chance_episodes(v, self.window, self.shuffles, self.seed, **kw)
        if len(eps) < self.chance_factor * chance + self.min_episodes:
            return []
        # a ladder fills the stretch it occupies; chance climbs are scattered thinly
        covered = sum(e.peak - e.start + 2 for e in eps)
        span = eps[-1].peak + 2 - eps[0].start
        if covered < self.min_coverage * span:
            return []
        increment = float(np.median([e.increment for e in eps]))
        lengths = [e.peak - e.start for e in eps]
        cause, because = self._cause(v, steps, eps, increment)
        clearest = sorted(eps, key=lambda e: e.cv)[:3]
        # start to start; the shortest distances are episodes found one after the other (a missed
        # episode, lost records or a gap between runs of climbs make the median longer)
        gaps = np.diff([steps[e.start] for e in eps]).astype(np.float64)
        first, last = eps[0], eps[-1]
        severity = Severity.ERROR if len(eps) >= self.strong_episodes else Severity.WARNING
        evidence = {
            "episodes": len(eps),
            "median_length": int(np.median(lengths)),
            "increment": round(increment, 6),
            "regularity_cv": round(float(np.median([e.cv for e in eps])), 4),
            "clearest": [{"start_step": int(steps[e.start]), "peak_step": int(steps[e.peak]),
                          "reset_step": int(steps[e.peak + 1]),
                          "values": [round(float(x), 6) for x in v[e.start:e.peak + 2]]}
                         for e in sorted(clearest, key=lambda e: e.start)],
            "recurrence_steps": float(np.median(gaps)),
            "consecutive_steps": float(np.median(gaps[gaps < 1.5 * gaps.min()])),
            "expected_by_chance": round(chance, 2),
            "cause": cause,
        }
        evidence.update(because)
        stretch = steps_text(int(steps[first.start]), int(steps[last.peak + 1]))
        summary = (f"{series.metric} climbs in ~{int(np.median(lengths))} near-equal increments "
                   f"of ~{increment:.3g} then resets ({len(eps)} episodes, {stretch})")
        summary += {
            "accumulator": f"; values are integer multiples of ~{increment:.3g}: a loss "
                           "accumulator that is not divided or reset?",
            "batch_composition": f"; the climbs recur every ~{because.get('period_steps', 0)} "
                                 "steps: runs of batches from one length bucket?",
            "unknown": "; check how batches are composed and how the logged loss is accumulated",
        }[cause]
        return [Finding(self.name, severity, series.metric, int(steps[first.start]),
                        int(steps[last.peak + 1]), summary, evidence, series.segment)]

    def _cause(self, v: np.ndarray, steps: np.ndarray, eps: list[Episode], increment: float
               ) -> tuple[str, dict]:
        # accumulator: the values of most climbs are whole multiples of their own first rung
        fits = [rungs(v[e.start:e.peak + 1], self.multiple_tolerance) for e in eps]
        on_multiple = float(np.mean([f is not None for f in fits]))
        if on_multiple >= 0.6:
            top = max(int(f[-1]) for f in fits if f is not None)
            return "accumulator", {"on_integer_multiples": round(on_multiple, 3), "max_rung": top}
        starts = np.array([steps[e.start] for e in eps], dtype=float)
        gaps = np.diff(starts)
        if len(gaps) >= 2:
            # climbs recur with the data order: gaps are whole multiples of one period (a missed
            # or split episode doubles or halves a gap, so the median gap is the period)
            period = float(np.median(gaps))
            multiples = gaps / period
            on_grid = np.abs(multiples - np.round(multiples)) <= 0.1
            if period > 0 and np.mean(on_grid & (np.round(multiples) >= 1)) >= 0.8:
                return "batch_composition", {"period_steps": int(round(period))}
        return "unknown", {"on_integer_multiples": round(on_multiple, 3)}
