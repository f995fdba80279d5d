"""Per-sample lengths shaped like the seed incident's dataset (for replay)."""

from __future__ import annotations

import numpy as np


def seed_lengths(n: int = 902_000, seed: int = 0) -> np.ndarray:
    """Per-sample lengths shaped like the seed's dataset: log-normal, median ~1500, clipped to
    [16, 8192] (with the seed's bounds about half of the bucketed batches fall in the last bucket)."""
    rng = np.random.default_rng(seed)
    return np.clip(rng.lognormal(np.log(1500), 0.8, n), 16, 8192).astype(np.int64)
