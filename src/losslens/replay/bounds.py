"""Bucket bounds that maximise padding efficiency (pad to the bucket's largest length), by
dynamic programming over the sorted length histogram: F[k][j] = min_i F[k-1][i] + u_j (N_j - N_i)."""

from __future__ import annotations

import numpy as np


def optimize_bounds(lengths: np.ndarray, k: int) -> list[int]:
    """Exclusive bucket edges [0, e_1, ..., e_k] minimising the padded tokens Σ_b n_b · max_b."""
    u, c = np.unique(lengths, return_counts=True)  # distinct lengths ascending, counts
    n_u = len(u)
    k = max(1, min(k, n_u))
    cum = np.concatenate([[0], np.cumsum(c)]).astype(np.float64)  # N_0..N_U
    uf = u.astype(np.float64)
    prev = np.full(n_u + 1, np.inf)
    prev[0] = 0.0
    arg = np.zeros((k + 1, n_u + 1), dtype=np.int64)
    for level in range(1, k + 1):
        cur = np.full(n_u + 1, np.inf)
        for j in range(1, n_u + 1):
            # bucket (i..j]: its largest length is u[j-1], its count N_j - N_i
            cand = prev[:j] + uf[j - 1] * (cum[j] - cum[:j])
            i = int(np.argmin(cand))
            cur[j], arg[level, j] = cand[i], i
        prev = cur
    edges, j = [], n_u
    for level in range(k, 0, -1):
        edges.append(int(u[j - 1]) + 1)
        j = int(arg[level, j])
    return [0, *sorted(edges)]


def bound_efficiency(lengths: np.ndarray, bounds: list[int]) -> float:
    """Σℓ / Σ_k n_k · (largest length in bucket k): padding to each bucket's longest sample."""
    idx = np.searchsorted(np.asarray(bounds[1:-1]), lengths, side="right")
    total = 0.0
    for b in range(len(bounds) - 1):
        sel = lengths[idx == b]
        if sel.size:
            total += sel.size * float(sel.max())
    return float(lengths.sum() / total) if total else 0.0
