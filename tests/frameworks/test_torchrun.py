"""losslens on what a plain PyTorch loop under ``torchrun --nproc_per_node 2`` (DDP over gloo)
prints: its own 'step N | loss x | ...' lines, and a two-loss GAN (loss_G, loss_D, no total)
whose discriminator alone goes NaN. Each fault's step is read back from the printed lines."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures.frameworks.labels import printed

pytestmark = pytest.mark.slow


def analyze(run: Path) -> dict:
    p = subprocess.run([sys.executable, "-m", "losslens", "analyze", str(run / "train.log"), "--json"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def serious(r: dict) -> list[dict]:
    return [f for f in r["findings"] if f["severity"] != "info"]


@pytest.mark.frameworks_full
def test_a_clean_loop_is_silent_and_read_whole(torchrun_runs) -> None:
    run = torchrun_runs("clean")
    r = analyze(run)
    assert r["lines"]["parsed"] == len(printed(run)) == 200
    assert serious(r) == []


@pytest.mark.frameworks_full
def test_a_nan_under_torchrun_is_found_at_its_step(torchrun_runs) -> None:
    run = torchrun_runs("nan")
    first = next(int(x["step"]) for x in printed(run) if not math.isfinite(x["loss"]))
    got = [f for f in serious(analyze(run)) if f["kind"] == "nonfinite"]
    assert got and {f["start_step"] for f in got} == {first}
    assert {f["metric"] for f in got} == {"loss", "grad_norm"}


def test_a_gan_whose_discriminator_goes_nan_has_both_losses_analysed(torchrun_runs) -> None:
    run = torchrun_runs("gan")
    rows = printed(run)
    first = next(int(x["step"]) for x in rows if not math.isfinite(x["loss_D"]))
    assert all(math.isfinite(x["loss_G"]) for x in rows)
    r = analyze(run)
    assert r["loss"]["column"] == "loss_G" and r["loss"]["others"] == ["loss_D"]
    kinds = {(f["kind"], f["metric"]) for f in r["findings"]}
    assert ("no_loss_metric", "loss") not in {(k, m) for k, m in kinds}
    [nan] = [f for f in r["findings"] if f["kind"] == "nonfinite"]
    assert (nan["metric"], nan["start_step"], nan["severity"]) == ("loss_d", first, "error")
    assert nan["summary"].startswith("loss_d is NaN")
