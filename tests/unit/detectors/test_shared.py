"""Spikes shared by runs that read the same data (``analyze --same-data``): a ×1.5 batch in two
runs whose heavy-tailed noise makes one run alone call it a draw of the noise; independent runs
share nothing beyond the stated chance."""

from __future__ import annotations

import numpy as np

from losslens.detectors.shared import Excursions, marked, shared_spikes
from losslens.findings import Finding, Severity


def run(seed: int, spikes: tuple[int, ...] = (), n: int = 2000) -> Excursions:
    """A decaying loss with Student-t (3 degrees of freedom) noise, ×1.5 at ``spikes``."""
    rng = np.random.default_rng(seed)
    steps = np.arange(1, n + 1)
    v = (0.8 + 2.5 * np.exp(-steps / 300)) * np.exp(0.03 * rng.standard_t(3, n))
    for s in spikes:
        v[s - 1] *= 1.5
    return Excursions.of(f"run{seed}", steps, v)


def test_a_batch_both_runs_spike_at_is_shared_and_a_spike_of_one_is_not() -> None:
    a, b = run(1, (700,)), run(2, (700, 1300))
    [s] = shared_spikes([a, b])
    assert (s.step, s.runs) == (700, (0, 1)) and s.chance <= 0.01


def test_independent_runs_rarely_share_a_spike() -> None:
    warnings = infos = 0
    for k in range(100):
        for s in shared_spikes([run(10 * k), run(10 * k + 1)]):
            warnings += s.chance <= 0.01
            infos += s.chance > 0.01
    assert warnings <= 2 and infos <= 8  # (1 and 5 expected in 100 pairs)


def test_a_shared_spike_overrides_a_draw_of_the_noise() -> None:
    a, b = run(1, (700,)), run(2, (700,))
    draw = Finding("spike", Severity.INFO, "loss", 700, 700, "… likely a draw of this run's noise",
                   {"peak_step": 700, "noise_draws_expected": 0.3, "noise_tail_index": 2.5})
    unrelated = Finding("spike", Severity.INFO, "loss", 1500, 1500, "another", {"peak_step": 1500})
    shared = shared_spikes([a, b])
    [f, g] = marked([draw, unrelated], [a, b], 0, shared, "loss")
    assert f.severity == Severity.WARNING and f.evidence["cause"] == "data"
    assert "noise_draws_expected" not in f.evidence and "draw" not in f.summary
    assert f.evidence["shared_with"][0]["run"] == "run2" and f.evidence["shared_with"][0]["step"] == 700
    assert g == unrelated
    [new] = marked([], [a, b], 1, shared, "loss")  # a step the run's own findings did not name
    assert (new.kind, new.start_step, new.severity) == ("spike", 700, Severity.WARNING)


def test_too_short_or_single_runs_share_nothing() -> None:
    assert shared_spikes([run(1, (10,), n=15), run(2, (10,), n=15)]) == []
    assert shared_spikes([run(1, (700,))]) == []
