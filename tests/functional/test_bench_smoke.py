"""CI-cheap runs of the benchmarks in bench/ at small sizes, so that a benchmark never rots."""

from __future__ import annotations

import re
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


@pytest.mark.slow
def test_fleet_scan_benchmark_runs_small() -> None:
    script = ROOT / "bench" / "fleet_scan.py"
    proc = subprocess.run([sys.executable, str(script), "--runs", "120", "--sample", "2", "--no-dask"],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "120 run folders" in out and "scan --jobs 1" in out and "runs/s" in out
    touched = re.search(r"re-run, (\d+) logs touched .*: (\d+) read and analysed", out)
    assert touched and touched.group(1) == touched.group(2) != "0"  # only the touched ones
    resumed = re.search(r"SIGTERM at 40 %: exit 143, (\d+) logs kept; .*: (\d+) read and analysed, (\d+) "
                        r"unchanged", out)
    assert resumed and resumed.group(1) == resumed.group(3)  # what was kept is not read again


@pytest.mark.slow
def test_line_readers_benchmark_runs_small() -> None:
    script = ROOT / "bench" / "line_readers.py"
    proc = subprocess.run([sys.executable, str(script), "--lines", "3000"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    rows = [x.split()[0] for x in proc.stdout.splitlines()[2:]]
    assert rows == ["jsonl", "csv", "hf", "megatron", "nanogpt", "modded-nanogpt", "colon",
                    "kv-kubectl", "kv-ranks"]


@pytest.mark.slow
def test_parse_speed_benchmark_runs_small() -> None:
    script = ROOT / "bench" / "parse_speed.py"
    proc = subprocess.run([sys.executable, str(script), "--lines", "5000", "--repeat", "1"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "plain re loop" in proc.stdout and "same-columns loop" in proc.stdout


@pytest.mark.slow
def test_detector_growth_benchmark_runs_small() -> None:
    script = ROOT / "bench" / "detector_growth.py"
    proc = subprocess.run([sys.executable, str(script), "--sizes", "5000,50000"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "spike" in proc.stdout and "growth exponent" in proc.stdout and "B a record" in proc.stdout
