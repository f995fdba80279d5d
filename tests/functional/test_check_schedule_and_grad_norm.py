"""Detectors on shapes they were not tuned to, through `losslens check`: an SGDR loss with its LR
logged passes; Megatron lines with a NaN grad norm and no loss fail."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from losslens import read_log
from losslens.analysis import analyze
from losslens.findings import Severity
from tests.unit.shapes import alarms, of, sgdr_lines


@pytest.mark.slow
def test_sgdr_periodic_loss_is_the_schedule_when_the_lr_is_logged(tmp_path: Path) -> None:
    path = tmp_path / "sgdr.log"
    path.write_text("\n".join(sgdr_lines(500, lr_logged=True)) + "\n")
    report = analyze(read_log(path))
    (f,) = of(report, "periodicity")
    assert f.severity == Severity.INFO and f.evidence["cause"] == "lr_schedule"
    assert abs(f.evidence["period_steps"] - 500) <= 25
    assert "the schedule explains it" in f.summary
    assert alarms(report) == []
    check = subprocess.run([sys.executable, "-m", "losslens", "check", str(path)], capture_output=True)
    assert check.returncode == 0


@pytest.mark.slow
def test_megatron_lines_without_a_loss_and_a_nan_grad_norm_fail(tmp_path: Path) -> None:
    """Megatron-DeepSpeed lines (a public issue paste) that leave the loss out and print
    'grad norm: nan': an error and exit 1, not 'no records'."""
    meg = tmp_path / "megatron.log"
    meg.write_text("".join(
        f" iteration     {i}/  250000 | consumed samples:        {i * 8} | elapsed time per iteration "
        f"(ms): 4247.9 | learning rate: 2.999E-04 | global batch size:     8 | loss scale: 1.0 | grad "
        f"norm: {'nan' if i >= 5426 else '1.234'} | number of nan iterations:   0 |\n"
        for i in range(5420, 5440)))
    proc = subprocess.run([sys.executable, "-m", "losslens", "check", str(meg)],
                          capture_output=True, text=True)
    assert proc.returncode == 1 and "grad_norm is NaN from step 5426" in proc.stdout
