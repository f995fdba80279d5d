"""Order statistics of a replayed batch sequence (torch; rows = many seeds at once)."""

from __future__ import annotations

import math

import torch

from losslens.replay.strategies import Epoch, Plan


def run_lengths(seq: torch.Tensor) -> torch.Tensor:
    """Lengths of the runs of equal consecutive values in a 1-D sequence."""
    if seq.numel() == 0:
        return seq.new_zeros(0)
    change = torch.ones(seq.numel(), dtype=torch.bool, device=seq.device)
    change[1:] = seq[1:] != seq[:-1]
    starts = torch.nonzero(change).flatten()
    ends = torch.cat([starts[1:], torch.tensor([seq.numel()], device=seq.device)])
    return ends - starts


def max_runs(rows: torch.Tensor) -> torch.Tensor:
    """Longest same-value run of every row of a (m, n) tensor, vectorised: (m,)."""
    m, n = rows.shape
    change = torch.ones_like(rows, dtype=torch.bool)
    change[:, 1:] = rows[:, 1:] != rows[:, :-1]
    run_id = torch.cumsum(change.flatten().long(), 0) - 1  # runs never cross rows: col 0 starts one
    counts = torch.bincount(run_id)
    row_of_run = torch.div(torch.nonzero(change.flatten()).flatten(), n, rounding_mode="floor")
    out = torch.zeros(m, dtype=counts.dtype, device=rows.device)
    return out.scatter_reduce_(0, row_of_run, counts, reduce="amax", include_self=False)


def shuffled_max_runs(labels: torch.Tensor, seeds: int, seed: int, chunk: int = 64) -> torch.Tensor:
    """Monte-Carlo: the longest same-bucket run for ``seeds`` random orders of these batches."""
    out = []
    g = torch.Generator(device=labels.device).manual_seed(int(seed))
    for start in range(0, seeds, chunk):
        m = min(chunk, seeds - start)
        keys = torch.rand(m, labels.numel(), generator=g, device=labels.device)
        rows = labels[torch.argsort(keys, dim=1)]  # (m, n) one random order per row
        out.append(max_runs(rows))
    return torch.cat(out)


def expected_longest_run(p: float, n: int) -> float:
    """Longest run of a symbol with share p among n i.i.d. draws: log_{1/p}(n(1 - p))."""
    if p <= 0 or p >= 1 or n <= 1:
        return float(n if p >= 1 else 0)
    return math.log(n * (1 - p)) / math.log(1 / p)


def order_stats(epochs: list[Epoch], plan: Plan, grad_accum: int = 1, world_size: int = 1,
                k_run: int = 4) -> dict:
    bucket = torch.cat([e.bucket for e in epochs])
    size = torch.cat([e.size for e in epochs])
    max_len = torch.cat([e.max_len for e in epochs])
    tokens = torch.cat([e.tokens for e in epochs])
    n_b = int(bucket.numel())
    counts = torch.bincount(bucket, minlength=plan.k)
    share = (counts.double() / max(1, n_b)).tolist()
    padded = int((size * max_len).sum())
    runs = run_lengths(bucket)
    top = int(torch.argmax(counts))
    per_step = max(1, grad_accum * world_size)
    n_steps = n_b // per_step
    step_len = max_len[: n_steps * per_step].double().reshape(n_steps, per_step).mean(1) \
        if n_steps else max_len.double()
    diversity = None
    if per_step > 1 and n_steps:
        rows = bucket[: n_steps * per_step].reshape(n_steps, per_step)
        srt = torch.sort(rows, dim=1).values
        diversity = float((1 + (srt[:, 1:] != srt[:, :-1]).sum(1)).double().mean())
    lag, acf = _period(step_len)
    return {
        "batches_per_epoch": n_b / max(1, len(epochs)),
        "bucket_batch_share": [round(x, 4) for x in share],
        "padding_efficiency": round(int(tokens.sum()) / max(1, padded), 4),
        "budget_use": round(int(tokens.sum()) / max(1, n_b * plan.token_budget), 4),
        "max_same_bucket_run": int(runs.max()) if runs.numel() else 0,
        f"runs_ge_{k_run}_per_1000": round(1000 * int((runs >= k_run).sum()) / max(1, n_b), 2),
        "expected_max_run_iid": round(expected_longest_run(share[top], n_b // max(1, len(epochs))), 1),
        "bucket_diversity_per_step": diversity,
        "period_steps": lag,
        "period_acf": acf,
    }


def _period(x: torch.Tensor, max_lag: int = 200) -> tuple[int | None, float | None]:
    """The lag (>= 2) with the highest autocorrelation of mean length per step."""
    n = x.numel()
    if n < 8:
        return None, None
    x = x - x.mean()
    denom = float((x * x).sum())
    if denom == 0:
        return None, None
    lags = range(2, min(max_lag, n // 2) + 1)
    acf = [float((x[:-k] * x[k:]).sum()) / denom for k in lags]
    if not acf:
        return None, None
    i = max(range(len(acf)), key=acf.__getitem__)
    return (list(lags)[i], round(acf[i], 3)) if acf[i] > 0.3 else (None, round(acf[i], 3))
