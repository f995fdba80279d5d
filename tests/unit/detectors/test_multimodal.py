"""Loss bands: heavy-tailed noise has none, and bands that follow the learning-rate schedule are
the schedule."""


from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from losslens import read_log
from losslens.analysis import analyze
from losslens.findings import Severity
from losslens.logs import from_arrays
from tests.unit.shapes import alarms, of, sgdr_lines


@pytest.mark.parametrize("seed", range(4))
def test_a_fast_early_fall_in_heavy_tailed_noise_has_no_bands(seed: int) -> None:
    rng = np.random.default_rng(seed)
    t = np.arange(300)
    loss = (4 * np.exp(-t / 100) + 1.5) * np.exp(rng.standard_t(3, 300) * 0.02)
    report = analyze(from_arrays(5 * (t + 1), loss=loss))
    assert of(report, "multimodal") == [] and alarms(report) == []


def test_sgdr_bands_are_the_schedule(tmp_path: Path) -> None:
    # restarts with the LR logged: if the loss falls into bands, they are its high/low-LR phases
    path = tmp_path / "sgdr.log"
    path.write_text("\n".join(sgdr_lines(500, lr_logged=True)) + "\n")
    report = analyze(read_log(path))
    assert all(f.severity == Severity.INFO and f.evidence["cause"] == "lr_schedule"
               for f in report.findings if f.kind in ("multimodal", "periodicity"))


@pytest.mark.parametrize("seed", [4, 5])
def test_bands_that_follow_the_logged_lr_are_the_schedule(seed: int) -> None:
    """Cosine restarts every 500 steps: the loss sits high while the LR is high after each
    restart. When the two bands are found and the LR is logged, the band a record falls in
    follows the LR: info, cause lr_schedule (it was an error blamed on the batches); without the
    LR column nothing can tell, and the bands stay an error."""
    rng = np.random.default_rng(seed)
    t = np.arange(3000)
    lr = 1e-5 + 0.5 * (3e-4 - 1e-5) * (1 + np.cos(np.pi * (t % 500) / 500))
    loss = (1.6 + 1.5 * np.exp(-t / 600)) * (1 + 0.25 * (lr / 3e-4) ** 3) * np.exp(rng.normal(0, 0.02, 3000))
    (f,) = analyze(from_arrays(t, loss=loss, lr=lr)).findings
    assert (f.kind, f.severity, f.evidence["cause"]) == ("multimodal", Severity.INFO, "lr_schedule")
    assert abs(f.evidence["lr_rank_correlation"]) >= 0.5
    (g,) = analyze(from_arrays(t, loss=loss)).findings
    assert (g.kind, g.severity) == ("multimodal", Severity.ERROR)
