"""CI-cheap runs of the benchmarks in bench/ at small sizes, so that a benchmark never rots."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT


@pytest.mark.slow
def test_many_logs_benchmark_runs_small() -> None:
    script = ROOT / "bench" / "many_logs.py"
    proc = subprocess.run([sys.executable, str(script), "--logs", "6", "--sample", "2"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "6 logs of 300 lines" in proc.stdout and "faster)" in proc.stdout


@pytest.mark.slow
def test_replay_null_benchmark_runs_small() -> None:
    pytest.importorskip("torch")
    script = ROOT / "bench" / "replay_null.py"
    proc = subprocess.run([sys.executable, str(script), "--samples", "20000", "--repeat", "1",
                           "--null-seeds", "9"], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "9 null seeds" in proc.stdout and "ratio" in proc.stdout
    assert "verdict: " in proc.stdout  # (9 seeds cannot reach p <= 0.01: the verdict is no dependence)
