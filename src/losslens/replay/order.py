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


MASK63 = (1 << 63) - 1


def hash_keys(seed: int, rows: torch.Tensor, n: int) -> torch.Tensor:
    """Counter-based random keys (splitmix64 finaliser on int64, logical shifts emulated): the
    same numbers on CPU and CUDA, so Monte-Carlo results do not depend on the device."""
    dev = rows.device
    col = torch.arange(n, device=dev, dtype=torch.int64)
    x = (rows[:, None] * 0x100000001B3 + col[None, :] * 0x9E3779B9 + seed * 0x632BE59B) & MASK63
    for mult, shift in ((0x3F58476D1CE4E5B9 & MASK63, 30), (0x14D049BB133111EB, 27)):
        x = (x ^ ((x >> shift) & (MASK63 >> shift))) * mult
        x = x & MASK63
    return x ^ ((x >> 31) & (MASK63 >> 31))


def shuffled_max_runs(labels: torch.Tensor, seeds: int, seed: int, chunk: int = 64) -> torch.Tensor:
    """Monte-Carlo: the longest same-bucket run for ``seeds`` random orders of these batches
    (one order per seed; identical on every device)."""
    out = []
    for start in range(0, seeds, chunk):
        m = min(chunk, seeds - start)
        rows = torch.arange(start, start + m, device=labels.device, dtype=torch.int64)
        order = torch.argsort(hash_keys(seed, rows, labels.numel()), dim=1, stable=True)
        out.append(max_runs(labels[order]))  # (m, n) one random order per row
    return torch.cat(out)


def expected_longest_run(p: float, n: int) -> float:
    """Longest run of a symbol with share p among n i.i.d. draws: log_{1/p}(n(1 - p))."""
    if p <= 0 or p >= 1 or n <= 1:
        return float(n if p >= 1 else 0)
    return math.log(n * (1 - p)) / math.log(1 / p)


def order_stats(epochs: list[Epoch], plan: Plan, k_run: int = 4) -> dict:
    """What a batch sequence looks like: batches per epoch, bucket shares, padding efficiency, budget
    use, the longest same-bucket run and runs of at least ``k_run`` per 1000 batches, and its period."""
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
    per_step = plan.per_step
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
        "expected_max_run_iid": round(expected_longest_run(share[top], n_b), 1),  # whole sequence
        "bucket_diversity_per_step": diversity,
        "period_steps": lag,
        "period_acf": acf,
    }


def _period(x: torch.Tensor, max_lag: int = 200) -> tuple[int | None, float | None]:
    """The lag (>= 2) with the highest autocorrelation of mean length per step (via FFT)."""
    n = x.numel()
    if n < 8:
        return None, None
    x = (x - x.mean()).double()
    denom = float((x * x).sum())
    if denom == 0:
        return None, None
    size = 1 << (2 * n - 1).bit_length()
    f = torch.fft.rfft(x, n=size)
    acf = torch.fft.irfft(f * f.conj(), n=size)[: min(max_lag, n // 2) + 1] / denom
    if acf.numel() <= 2:
        return None, None
    i = int(torch.argmax(acf[2:])) + 2
    best = round(float(acf[i]), 3)
    return (i, best) if best > 0.3 else (None, best)
