"""Can a log's steps be laid on a replay's (or a record's) steps? Never silently: the logged and
replayed step counts per epoch are compared, the logging interval and the micro-batches per step
the log implies are inferred, and a mismatch beyond a few percent is refused with one line saying
what to pass (or, when the user insists, carried as a warning in the report)."""

from __future__ import annotations

import math

import numpy as np

from losslens.errors import UsageError

TOLERANCE = 0.03  # relative mismatch in steps per epoch (or in the run's length) accepted

__all__ = ["TOLERANCE", "check_alignment", "log_steps_per_epoch"]


def log_steps_per_epoch(steps: np.ndarray, epoch: np.ndarray | None) -> float | None:
    """Optimizer steps per epoch as the log tells it: from a fractional epoch (HF's ``epoch`` =
    step / steps per epoch) the median of step / epoch; from an integer epoch index the median
    distance between the first steps of consecutive epochs; None when the log cannot tell."""
    if epoch is None or len(epoch) < 2:
        return None
    ok = np.isfinite(epoch) & (epoch > 0)
    s, e = steps[ok].astype(np.float64), epoch[ok].astype(np.float64)
    if len(e) < 2:
        return None
    if np.any(np.abs(e - np.round(e)) > 1e-6):  # fractional: progress through the epochs
        frac = e > 0.05  # early values are rounded to 2 decimals: too coarse
        return float(np.median(s[frac] / e[frac])) if frac.sum() >= 2 else None
    values, first = np.unique(e, return_index=True)
    starts = s[first]
    gaps = np.diff(starts)[np.diff(values) == 1]
    return float(np.median(gaps)) if len(gaps) >= 2 else None


def check_alignment(logged: np.ndarray, epoch: np.ndarray | None, replayed_steps: int, epochs: int,
                    micro_batches_per_epoch: float, per_step: int, allow: bool = False) -> dict:
    """The alignment block of a replay report. ``logged``: the log's steps (offset removed);
    ``replayed_steps``: optimizer steps the replay made over ``epochs`` epochs of
    ``micro_batches_per_epoch`` micro-batches, ``per_step`` of them a step. Raises UsageError on a
    mismatch unless ``allow`` (then the block carries it as ``warning``)."""
    replay_spe = replayed_steps / max(1, epochs)
    out: dict = {"replayed_steps": int(replayed_steps), "replayed_steps_per_epoch": round(replay_spe, 1)}
    if len(logged):
        out["logged_steps"] = [int(logged.min()), int(logged.max())]
        diffs = np.diff(np.unique(logged))
        out["logging_interval"] = int(np.median(diffs)) if len(diffs) else None
    log_spe = log_steps_per_epoch(logged, epoch)
    problems = []
    if log_spe:
        out["log_steps_per_epoch"] = round(log_spe, 1)
        implied = micro_batches_per_epoch / log_spe
        out["implied_micro_batches_per_step"] = round(implied, 2)
        if abs(replay_spe - log_spe) > TOLERANCE * log_spe:
            hint = (f"the replay makes {micro_batches_per_epoch:,.0f} micro-batches per epoch, "
                    f"{implied:.2f} per logged step (it assumes {per_step}): pass --grad-accum × "
                    f"--world-size = {max(1, round(implied))}" if implied >= 0.5 else
                    "check --per-device-batch, --token-budget and --lengths")
            problems.append(f"the log counts {log_spe:,.0f} steps per epoch, the replay "
                            f"{replay_spe:,.0f}; {hint}")
    last = int(logged.max()) if len(logged) else 0
    if last + 1 > replayed_steps * (1 + TOLERANCE) and last + 1 - replayed_steps > 1:
        more = math.ceil((last + 1) / max(1.0, replay_spe))
        problems.append(f"the log reaches step {last:,} but the replay has {replayed_steps:,} steps "
                        f"({replay_spe:,.0f} per epoch × {epochs}): pass --epochs {more} (or check "
                        "--step-offset, --grad-accum, --world-size)")
    elif not log_spe and last + 1 < replayed_steps * (1 - TOLERANCE):
        out["note"] = (f"the log stops at step {last:,}, {1 - (last + 1) / replayed_steps:.0%} before the "
                       f"replay's {replayed_steps:,} steps end; it has no epoch count to check them by: if "
                       "the run finished its epochs, the step counts disagree (see --grad-accum, "
                       "--world-size, --per-device-batch)")
    if problems:
        message = "; ".join(problems)
        if not allow:
            raise UsageError(f"the log and the replay do not line up: {message} "
                             "(--allow-misalignment to correlate anyway)")
        out["warning"] = message
    return out
