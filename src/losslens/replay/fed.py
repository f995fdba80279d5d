"""What a run actually fed, recorded per optimizer step (``replay --batches FILE``): the exact
answer to "which buckets went into the steps where the loss climbed?", with no sampler to emulate.

Formats (one record per optimizer step, or per sample):
- JSON Lines, one object per optimizer step: ``{"step": 12, "lengths": [812, 790, ...]}``, or
  ``"buckets": [3, 3, ...]``, or ``"micro_batches": [[812, 790], [640, ...]]`` (lengths per
  micro-batch when gradients accumulate);
- CSV or Parquet with a ``step,length`` row per sample (a ``bucket`` column may replace
  ``length``);
- ``.npz`` with the same two per-sample arrays, ``step`` and ``length`` (or ``bucket``).

Numpy and polars only: no torch is needed to correlate a loss with what was fed. The replay's
own correlation (``correlate``) shares the event and attribution helpers kept here."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from losslens.detectors.stats import autocorrelation, detrend, ranks, settled, spearman
from losslens.errors import InputError
from losslens.replay.align import TOLERANCE


@dataclass(frozen=True)
class Fed:
    """Per optimizer step, in step order: the step, its samples' mean and longest length, and the
    bucket of its longest sample (lengths against the bounds, or the bucket ids recorded)."""

    steps: np.ndarray
    mean_len: np.ndarray
    max_len: np.ndarray
    bucket: np.ndarray
    measure: str  # what mean_len holds: "length" or "bucket" (only bucket ids were recorded)


def load_fed(path: str | Path, bounds: tuple[int, ...]) -> Fed:
    """The per-step record at ``path``; InputError naming the file (and the line) when it cannot
    be read."""
    p = Path(path)
    name = str(p)
    if not p.is_file():
        raise InputError("no such file", source=name)
    if p.suffix in (".jsonl", ".json", ".ndjson"):
        step, value, kind = _jsonl(p)
    elif p.suffix in (".csv", ".parquet", ".pq"):
        step, value, kind = _table(p)
    elif p.suffix == ".npz":
        step, value, kind = _npz(p)
    else:
        raise InputError("a --batches file is .jsonl, .csv, .parquet or .npz", source=name)
    if not len(step):
        raise InputError("no steps recorded", source=name)
    if not np.all(np.isfinite(value)) or np.any(value < 0):
        raise InputError(f"{kind}s must be finite and >= 0", source=name)
    order = np.argsort(step, kind="stable")
    step, value = step[order], value[order]
    starts = np.flatnonzero(np.r_[True, step[1:] != step[:-1]])
    counts = np.diff(np.r_[starts, len(step)])
    mean = np.add.reduceat(value, starts) / counts
    top = np.maximum.reduceat(value, starts)
    if kind == "bucket":
        bucket = top.astype(np.int64)
    else:
        edges = np.asarray(bounds[1:-1], dtype=np.float64)
        bucket = np.searchsorted(edges, top, side="right").astype(np.int64)
    return Fed(step[starts], mean, top, bucket, kind)


def _jsonl(p: Path) -> tuple[np.ndarray, np.ndarray, str]:
    steps: list[int] = []
    values: list[float] = []
    kinds: set[str] = set()
    with open(p, encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            where = f"{p}:{lineno}"
            try:
                rec = json.loads(line)
                step = int(rec["step"])
                if not -(2 ** 62) <= step < 2 ** 62:
                    raise InputError(f'"step" {str(step)[:30]} is out of range', source=where)
                if "micro_batches" in rec:
                    vals, kind = [x for mb in rec["micro_batches"] for x in mb], "length"
                elif "lengths" in rec:
                    vals, kind = list(rec["lengths"]), "length"
                else:
                    vals, kind = list(rec["buckets"]), "bucket"
                vals = [float(x) for x in vals]
            except json.JSONDecodeError as exc:
                raise InputError(f"not JSON ({exc.msg})", source=where) from None
            except RecursionError:
                raise InputError("not JSON: nested too deeply to read", source=where) from None
            except (KeyError, TypeError, ValueError, OverflowError):
                raise InputError('a record needs "step" and "lengths", "buckets" or "micro_batches" '
                                 '(lists of numbers)', source=where) from None
            kinds.add(kind)
            steps += [step] * len(vals)
            values += vals
    if len(kinds) > 1:
        raise InputError("records mix lengths and buckets: record one of them", source=str(p))
    kind = kinds.pop() if kinds else "length"
    return np.asarray(steps, dtype=np.int64), np.asarray(values, dtype=np.float64), kind


def _table(p: Path) -> tuple[np.ndarray, np.ndarray, str]:
    import polars as pl

    try:
        frame = pl.read_parquet(p) if p.suffix in (".parquet", ".pq") else pl.read_csv(p)
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise InputError(f"cannot read the table: {str(exc).splitlines()[0]}", source=str(p)) from None
    return _columns({c: frame[c].to_numpy() for c in frame.columns}, str(p))


def _npz(p: Path) -> tuple[np.ndarray, np.ndarray, str]:
    import zipfile

    try:
        with np.load(p, allow_pickle=False) as z:
            return _columns({k: z[k] for k in z.files}, str(p))
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as exc:
        raise InputError(f"cannot read the arrays (not a NumPy .npz archive?): {str(exc)[:200]}",
                         source=str(p)) from None


def _columns(cols: dict[str, np.ndarray], name: str) -> tuple[np.ndarray, np.ndarray, str]:
    kind = "length" if "length" in cols else "bucket" if "bucket" in cols else None
    if "step" not in cols or kind is None:
        raise InputError(f"needs a 'step' column and a 'length' (or 'bucket') column; it has "
                         f"{', '.join(cols) or 'none'}", source=name)
    try:
        return cols["step"].astype(np.int64), cols[kind].astype(np.float64), kind
    except (TypeError, ValueError):
        raise InputError(f"'step' and '{kind}' must be numbers", source=name) from None


def logged_view(series: np.ndarray, idx: np.ndarray, k: int) -> np.ndarray:
    """What a logged value at step ``idx`` saw of a per-step ``series``: the step itself (k = 1),
    or the mean over the k steps ending there, as trainers that log the loss averaged over the
    logging interval (HF Trainer, Megatron, fairseq) do."""
    if k <= 1:
        return series[idx]
    c = np.concatenate([[0.0], np.cumsum(series, dtype=np.float64)])
    lo = np.maximum(idx + 1 - k, 0)
    return (c[idx + 1] - c[lo]) / (idx + 1 - lo)


def detrend_window(records: int, interval: int, base: int = 201) -> int:
    """The de-trending window in records: ``base`` steps' worth at the logging ``interval`` (a
    window of 201 records logged every 10 steps spans 2,010 steps and lags a decaying loss by
    more than its dependence on the batches), at most a quarter of the records, at least 11;
    odd."""
    w = max(11, min(base // max(1, interval), records // 4))
    return w | 1


def settled_residual(y: np.ndarray, idx: np.ndarray, interval: int, base: int = 201
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """The loss ``y`` de-trended (``detrend_window``) and past its first half-window, where the
    centred window is cut short and the trend lags the loss's fast early fall: that edge sits at
    step 0 in every run, as the start of a sampler's first mega-batch does, and the two would
    line up whatever the loss follows. (residual, its ``idx``, the trend, the window)."""
    w = detrend_window(len(y), interval, base)
    r, trend = detrend(y, w)
    keep = settled(r, w)
    return r[keep], idx[keep], trend, w


def window_of(logged: np.ndarray, mode: str) -> int:
    """Steps behind each logged loss: the logging interval for ``mean`` (the median gap between
    logged steps), 1 for ``last``."""
    if mode == "last" or len(logged) < 2:
        return 1
    gaps = np.diff(np.unique(logged))
    return max(1, int(np.median(gaps))) if len(gaps) else 1


def event_positions(y: np.ndarray) -> np.ndarray:
    """Positions of ladder peaks and loss spikes in the aligned loss."""
    from losslens.detectors.ladder import find_episodes
    from losslens.detectors.spike import Spike, spikes

    pos = [e.peak for e in find_episodes(y)]
    if len(y) > 8 and np.all(y > 0):
        d = Spike()  # the detector's own rule and defaults, not a copy of them
        flagged, _, _, _ = spikes(y, d.window, d.z, d.min_ratio, d.history)
        pos += np.flatnonzero(flagged).tolist()
    return np.unique(np.asarray(pos, dtype=np.int64))


def in_long_runs(bucket: np.ndarray, at: np.ndarray, k: int) -> float:
    """Share of the steps ``at`` that sit inside a run of >= k steps of the same bucket."""
    if len(at) == 0:
        return 0.0
    change = np.concatenate([[True], bucket[1:] != bucket[:-1]])
    run_id = np.cumsum(change) - 1
    lengths = np.bincount(run_id)
    return float(np.mean(lengths[run_id[at]] >= k))


def misaligned(alignment: dict, message: str, allow: bool) -> None:
    """A log and a record (or replay) that do not line up: refused (UsageError) unless
    ``allow``, then carried in ``alignment["warning"]`` beside any other."""
    if not allow:
        from losslens.errors import UsageError

        raise UsageError(f"the log and the record do not line up: {message} "
                         "(--allow-misalignment to correlate anyway)")
    alignment["warning"] = "; ".join(filter(None, [alignment.get("warning"), message]))


def correlate_fed(steps: np.ndarray, loss: np.ndarray, fed: Fed, offset: int = 0, shifts: int = 99,
                  seed: int = 0, window: int = 201, run_k: int = 4, allow_misalignment: bool = False,
                  logged_loss: str = "mean") -> dict:
    """Does the loss follow what was fed? Logged steps (minus ``offset``) are matched to recorded
    steps; the de-trended loss is rank-correlated with each step's mean length (or bucket), its
    median level taken per bucket, and its ladder peaks and spikes checked for sitting in runs of
    same-bucket steps. The null keeps both series as they are and only breaks their alignment:
    the fed sequence shifted circularly by at least a tenth of its length, ``shifts`` times."""
    pos = np.searchsorted(fed.steps, steps.astype(np.int64) - offset)
    pos = np.minimum(pos, len(fed.steps) - 1)
    matched = fed.steps[pos] == steps.astype(np.int64) - offset
    ok = matched & np.isfinite(loss)
    unmatched = int((~matched).sum())
    alignment: dict = {"recorded_steps": [int(fed.steps[0]), int(fed.steps[-1])],
                       "logged_steps_without_record": unmatched}
    if unmatched > TOLERANCE * len(steps) and unmatched > 1:
        message = (f"{unmatched:,} of {len(steps):,} logged steps have no recorded batch (the record "
                   f"covers steps {fed.steps[0]:,}-{fed.steps[-1]:,}, the log {steps.min() - offset:,}-"
                   f"{steps.max() - offset:,} after --step-offset {offset}): check --step-offset and "
                   "that the record counts optimizer steps as the log does")
        misaligned(alignment, message, allow_misalignment)
    span = (float(fed.steps[-1] - fed.steps[0]) + 1) / max(1.0, float(steps.max() - steps.min()) + 1)
    if span >= 1.5 and len(steps) > 1:
        message = (f"the record holds steps {fed.steps[0]:,}-{fed.steps[-1]:,}, the log "
                   f"{steps.min() - offset:,}-{steps.max() - offset:,}: {span:.1f} times as many: a record "
                   "per micro-batch against a log per optimizer step, or a log that stops early")
        misaligned(alignment, message, allow_misalignment)
    if ok.sum() < 10:
        note = "fewer than 10 logged steps match a recorded step (see --step-offset)"
        return {"aligned_records": int(ok.sum()), "rho": None, "p_value": None, "note": note,
                "alignment": alignment, "verdict": verdict(None, None, "batches", {}, note)}
    idx, y = pos[ok], loss[ok]
    events = idx[event_positions(y)]
    r, idx, trend, w = settled_residual(y, idx, window_of(steps, "mean"), window)
    ratio = bool(np.nanmin(y) > 0 and np.nanmin(trend) > 0)
    k_log = window_of(steps, logged_loss)
    rho = spearman(r, logged_view(fed.mean_len, idx, k_log))
    nearby_offsets(r, idx, fed.mean_len, k_log, rho, offset, alignment)
    levels = {int(k): round(float(np.median(r[fed.bucket[idx] == k])), 4) for k in np.unique(fed.bucket[idx])}
    in_runs = in_long_runs(fed.bucket, events, run_k)
    rng = np.random.default_rng(seed)
    ks, periodic = misaligning_shifts(fed.mean_len, shifts, rng)
    null, null_runs, views = [], [], []
    for k in ks:
        views.append(logged_view(np.roll(fed.mean_len, k), idx, k_log))
        null.append(spearman(r, views[-1]))
        null_runs.append(in_long_runs(np.roll(fed.bucket, k), events, run_k))
    out = dependence(int(ok.sum()), rho, null, levels, ratio, len(events), in_runs, null_runs, run_k,
                     {"unmatched_records": int((~ok).sum()), "alignment": alignment, "against": fed.measure,
                      "detrend_window_records": w,
                      "logged_loss": logged_words(k_log),
                      "null": f"{shifts} circular shifts of the fed sequence (none that lines it up "
                              f"with itself again)", "null_seeds": shifts})
    tests = {"circular_shift": {"rho": out["rho"], "p_value": out["p_value"]}}
    if periodic and len(r) > 3:
        # a sequence that lines up with itself again has its phase fixed at step 0 in every run, as
        # a loss's early fall and anything periodic from the start have theirs: the levels line up
        # whatever the loss follows, and its few distinct shifts make a coarse null. The changes
        # from step to step are tested instead, their null variance from both series'
        # autocorrelations (Bartlett's formula)
        a, b = np.diff(r), np.diff(logged_view(fed.mean_len, idx, k_log))
        steps_rho = spearman(a, b)
        null = [spearman(a, np.diff(v)) for v in views]
        tests["circular_shift"]["tested"] = False
        tests["step_to_step"] = {"rho": round(steps_rho, 4), "p_value": bartlett_p(a, b, steps_rho),
                                 "tested": True,
                                 "why": "the fed sequence is periodic (a shift lines it up with itself "
                                        "again): its levels keep their phase at step 0 in every run"}
    p = tests["step_to_step" if "step_to_step" in tests else "circular_shift"]["p_value"]
    out["verdict"] = (verdict(True, p, "batches", tests) if p <= 0.01
                      else not_found(p, "batches", tests, null, alignment))
    return out


REALIGNED = 0.3  # a shift whose sequence correlates this much with the unshifted one lines it up again


def misaligning_shifts(x: np.ndarray, count: int, rng: np.random.Generator) -> tuple[np.ndarray, bool]:
    """``count`` circular shifts of ``x`` for a null that breaks only the alignment: at least a
    tenth of its length, and none that lines the sequence up with itself again (a periodic or
    run-structured sequence shifted by about its period is the same sequence, and its
    correlation with the loss would be the observed one: the null would lose its power). The
    shifts kept have an autocorrelation of at most REALIGNED (or the least realigning half, where
    too few do); drawn with replacement where fewer than ``count`` are left. Returns the shifts
    and whether any shift left out lined the sequence up again (the sequence is periodic)."""
    n = len(x)
    lo, hi = max(1, n // 10), max(2, n - n // 10)
    ks = np.arange(lo, hi)
    if len(ks) == 0:
        return rng.integers(1, max(2, n), count), False
    c = x - x.mean()
    acf = np.fft.irfft(np.abs(np.fft.rfft(c)) ** 2, n)  # circular: as the shifts wrap
    acf = acf / acf[0] if acf[0] > 0 else np.zeros(n)
    ok = ks[np.abs(acf[ks]) <= REALIGNED]
    if len(ok) < max(10, len(ks) // 10):
        ok = ks[np.argsort(np.abs(acf[ks]), kind="stable")[: max(1, len(ks) // 2)]]
    return rng.choice(ok, count, replace=len(ok) < count), _lines_up_again(acf)


def _lines_up_again(acf: np.ndarray) -> bool:
    """Whether a sequence with this circular autocorrelation is periodic: past the first shift
    where it stops resembling itself, a longer one makes it resemble itself again (a slow drift
    such as a sorted order only decays, up to half its length)."""
    half = acf[1: len(acf) // 2 + 1]
    below = np.flatnonzero(half <= REALIGNED)
    return bool(len(below) and np.any(half[below[0]:] > REALIGNED))


def nearby_offsets(r: np.ndarray, idx: np.ndarray, mean_len: np.ndarray, k_log: int, rho: float, offset: int,
            alignment: dict) -> None:
    """The loss against the replayed lengths at the step offsets nearby (a 0- or 1-based count,
    a shifted log): their correlations go into ``alignment``, and one that lines up clearly
    better than the offset used (its Fisher z higher by 3 standard errors) is a warning there:
    the steps disagree, never silently."""
    near = {}
    for d in (-2, -1, 1, 2):
        j = idx + d
        ok = (j >= 0) & (j < len(mean_len))
        if ok.sum() >= 10:
            near[offset - d] = round(float(spearman(r[ok], logged_view(mean_len, j[ok], k_log))), 4)
    alignment["rho_at_offsets"] = {offset: round(float(rho), 4), **near}
    best = max(near, key=lambda o: abs(near[o]), default=None)
    z = np.arctanh(np.clip(np.abs([rho, near[best] if best is not None else 0.0]), 0.0, 0.999999))
    if best is not None and z[1] - z[0] >= 3 / np.sqrt(max(1, len(idx) - 3)):
        message = (f"the loss lines up with the replay at --step-offset {best} (ρ={near[best]:+.2f}), "
                   f"not at {offset} (ρ={rho:+.2f}): a 0- or 1-based step count, or a shifted log")
        misaligned(alignment, message, allow=True)


def logged_words(k: int) -> str:
    """How each logged loss relates to the steps it covers, in words for the report."""
    return "the step's own" if k <= 1 else f"mean over the {k} steps up to the logged one"


def dependence(aligned: int, rho: float, null: list[float], levels: dict, ratio: bool, events: int,
               in_runs: float, null_runs: list[float], run_k: int, about_null: dict) -> dict:
    """The correlation's JSON: rho and its p-value against ``null`` (the null's description in
    ``about_null``), the loss level by bucket, and the events' share in same-bucket runs against
    the null's."""
    p = (1 + sum(abs(x) >= abs(rho) for x in null)) / (1 + len(null))
    out = {"aligned_records": aligned, "rho": round(rho, 4), "p_value": p, **about_null,
           "null_rho_abs_95": round(float(np.quantile(np.abs(null), 0.95)), 4),
           "loss_level_by_bucket": levels,
           "loss_level_is": "ratio to trend" if ratio else "difference from trend",
           "events": events}
    if events:
        p_runs = (1 + sum(x >= in_runs for x in null_runs)) / (1 + len(null_runs))
        out.update({f"events_in_runs_ge_{run_k}": round(in_runs, 4),
                    "events_in_runs_null_mean": round(float(np.mean(null_runs)), 4),
                    "events_in_runs_p_value": p_runs})
    return out


def verdict(dependence: bool | None, p: float | None, method: str, tests: dict,
            reason: str | None = None, detectable_rho: float | None = None) -> dict:
    """What a replay concludes: ``dependence`` true (the loss follows the batches), false (no
    dependence found, where the test could have seen one of ``detectable_rho``) or null (the data
    cannot tell, ``reason`` says why); the p-value that carried it; ``method``: "batches" (what
    the run fed), "sampler" (an emulated sampler's order) or "order-free"; and the tests behind
    it."""
    out: dict = {"dependence": dependence, "p_value": p, "method": method, "tests": tests}
    if reason:
        out["reason"] = reason
    if detectable_rho is not None:
        out["detectable_rho"] = round(detectable_rho, 3)
    return out


DETECTABLE_RHO = 0.3  # a "no" needs a test that would have seen a dependence of |ρ| this size


def not_found(p: float, method: str, tests: dict, null: list[float], alignment: dict | None,
              unverified: str | None = None) -> dict:
    """The verdict where a test found no dependence (p above 0.01): ``false`` only where it could
    have seen one, stated as ``detectable_rho`` (the |ρ| at which its null is passed at 0.01), at
    most DETECTABLE_RHO; else ``null`` with the reasons, the disagreeing steps first: steps that
    do not line up, an order whose seed nothing verified (``unverified``), a test too weak for
    the steps it had."""
    detectable = float(np.quantile(np.abs(null), 0.99)) if len(null) else None
    reasons = []
    if alignment and alignment.get("warning"):
        reasons.append(f"the steps disagree: {alignment['warning']}")
    if unverified:
        reasons.append(unverified)
    if detectable is None or detectable > DETECTABLE_RHO:
        seen = "" if detectable is None else f" |ρ| >= {detectable:.2f}"
        reasons.append(f"too few aligned steps for a no: the test could only have seen{seen} "
                       f"(a no needs {DETECTABLE_RHO})")
    if reasons:
        return verdict(None, p, method, tests, "; ".join(reasons), detectable)
    return verdict(False, p, method, tests, detectable_rho=detectable)


def attribute(findings: list, correlation: dict, decided: dict, alpha: float = 0.01) -> list:
    """Ladder, multimodal and periodicity findings take cause ``batch_composition`` when the replay's
    verdict (``decided``) ties the loss to the batches (p <= alpha) and nothing else (an LR schedule,
    an accumulator) explains them; the correlation goes into their evidence."""
    from dataclasses import replace

    p = decided.get("p_value")
    if not decided.get("dependence") or p is None or p > alpha:  # 99 null seeds: smallest p 0.01, inclusive
        return findings
    out = []
    for f in findings:
        if f.kind in ("ladder", "multimodal", "periodicity") and \
                f.evidence.get("cause") not in ("lr_schedule", "accumulator"):
            if "rho" in correlation:
                ev = {**f.evidence, "cause": "batch_composition",
                      "replay_correlation": {"rho": correlation["rho"], "p_value": p}}
                said = f"the loss follows the batch lengths (ρ={correlation['rho']:+.2f}, p={p:.2g})"
            else:  # order-free: what the strategy predicts in distribution
                ev = {**f.evidence, "cause": "batch_composition",
                      "replay_order_free": {"p_value": p, "tests": sorted(decided["tests"])}}
                said = f"the loss shows what the batching strategy predicts (order-free, p={p:.2g})"
            f = replace(f, evidence=ev, summary=f.summary + f" — replay: {said}")
        out.append(f)
    return out


def bartlett_p(a: np.ndarray, b: np.ndarray, rho: float) -> float:
    """Two-sided p of a rank correlation ``rho`` between two autocorrelated series, its null
    variance from Bartlett's formula (1 + 2 sum of the products of their autocorrelations) / n."""
    n = len(a)
    lags = np.arange(1, max(1, n // 4))
    # the plain (biased) estimate at each lag: ``autocorrelation`` divides by the pairs a lag has
    acf_a, acf_b = (autocorrelation(ranks(x) - (n - 1) / 2)[lags] * (n - lags) / n for x in (a, b))
    var = (1 + 2 * float(np.sum(acf_a * acf_b))) / n
    return float(math.erfc(abs(rho) / math.sqrt(2 * max(var, 1e-12))))
