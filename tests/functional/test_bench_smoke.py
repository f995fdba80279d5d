"""CI-cheap runs of the benchmarks in bench/ at small sizes, so that a benchmark never rots."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT


def _bench(name: str, *args: str, timeout: int) -> str:
    """Run bench/``name`` with ``args``; its output (it must exit 0)."""
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / name), *args], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.slow
def test_many_logs_benchmark_runs_small() -> None:
    out = _bench("many_logs.py", "--logs", "6", "--sample", "2", timeout=300)
    assert "6 logs of 300 lines" in out and "faster)" in out


@pytest.mark.slow
def test_replay_null_benchmark_runs_small() -> None:
    pytest.importorskip("torch")
    out = _bench("replay_null.py", "--samples", "20000", "--repeat", "1", "--null-seeds", "9", timeout=300)
    assert "9 null seeds" in out and "ratio" in out
    assert "verdict: " in out  # (9 seeds cannot reach p <= 0.01: the verdict is no dependence)


@pytest.mark.slow
def test_fleet_scan_benchmark_runs_small() -> None:
    out = _bench("fleet_scan.py", "--runs", "60", "--sample", "2", "--no-dask", timeout=600)
    assert "60 run folders" in out and "scan --jobs 1" in out and "runs/s" in out
    touched = re.search(r"re-run, (\d+) logs touched .*: (\d+) read and analysed", out)
    assert touched and touched.group(1) == touched.group(2) != "0"  # only the touched ones
    resumed = re.search(r"SIGTERM at 40 %: exit 143, (\d+) logs kept; .*: (\d+) read and analysed, (\d+) "
                        r"unchanged", out)
    assert resumed and resumed.group(1) == resumed.group(3)  # what was kept is not read again


@pytest.mark.slow
def test_line_readers_benchmark_runs_small() -> None:
    out = _bench("line_readers.py", "--lines", "3000", timeout=300)
    rows = [x.split()[0] for x in out.splitlines()[2:]]
    assert rows == ["jsonl", "csv", "hf", "hf-bars", "megatron", "nanogpt", "modded-nanogpt", "fairseq",
                    "torchtitan", "olmo", "colon", "lightning", "kv-kubectl", "kv-ranks", "mlflow",
                    "mlflow-run"]
    # each line format also read with a real run's noise between its lines, the same records
    noisy = [x.split() for x in out.splitlines()[2:] if not x.startswith("mlflow")]
    assert all(float(r[7]) > 0 for r in noisy), out


@pytest.mark.slow
def test_parse_speed_benchmark_runs_small() -> None:
    out = _bench("parse_speed.py", "--lines", "5000", "--repeat", "1", timeout=300)
    assert "plain re loop" in out and "same-columns loop" in out and "polars' floor" in out
    assert "C reference" in out  # (built and run, or '(no C compiler found)')
    assert re.search(r"noisy file +\d+\.\d\d s +\(1% noise lines\): \d+\.\d\dx the clean file", out)
    # the 'fast' extra's numba kernels, timed in the same run where numba is installed
    assert re.search(r"with numba +(\d+\.\d\d s .*faster than polars alone|-  +\(the 'fast' extra)",
                     out)


@pytest.mark.slow
def test_detector_growth_benchmark_runs_small() -> None:
    out = _bench("detector_growth.py", "--sizes", "5000,50000", timeout=300)
    assert "spike" in out and "growth exponent" in out and "B a record" in out


@pytest.mark.slow
def test_nan_injection_benchmark_runs_small() -> None:
    out = _bench("nan_injection.py", "--seeds", "1", "--limit", "3", timeout=300)
    assert "check        kubectl --timestamps" in out and " 0 missed" in out


@pytest.mark.slow
def test_startup_benchmark_runs_small() -> None:
    out = _bench("startup.py", "--repeat", "1", "--lines", "300", timeout=300)
    assert "losslens check (300-line log)" in out and "to the gc-matched floor" in out


@pytest.mark.slow
def test_damaged_lines_benchmark_runs_small() -> None:
    out = _bench("damaged_lines.py", "--chars", "2000", "--pieces", "3", "--cuts", "1", "--limit", "30",
                 timeout=300)
    assert "baseline: one str.split of the damaged line" in out and "0 format(s) over 30.0 s" in out
    assert "megatron" in out and "fairseq" in out


@pytest.mark.slow
def test_big_log_memory_benchmark_runs_small() -> None:
    out = _bench("big_log_memory.py", "--lines", "3000", "--base", "300", timeout=300)
    assert "300 DFlash lines" in out and "3,000 DFlash lines" in out
    assert re.search(r"read_log \+ analyze +3,000 lines / 300 lines: \d+\.\d\dx", out)
    out = _bench("big_log_memory.py", "--lines", "3000", "--base", "300", "--format", "jsonl", timeout=300)
    assert "3,000 JSON Lines lines" in out


def test_spike_grad_norm_benchmark_runs_small() -> None:
    out = _bench("spike_grad_norm.py", "--records", "20000", "--spikes", "40", "--repeat", "1", timeout=300)
    assert "spikes with a grad-norm lead: 40" in out or "spikes with a grad-norm lead: 39" in out
    assert "x the spike-free time" in out


def test_fuzz_benchmark_runs_small() -> None:
    """A few damaged inputs through every command on each CI run (bench/fuzz.py runs for longer)."""
    out = _bench("fuzz.py", "--cases", "3", "--seed", "0", timeout=600)
    assert out.strip().endswith("0 failure(s)"), out


@pytest.mark.slow
def test_replay_calibration_benchmark_runs_small() -> None:
    pytest.importorskip("torch")
    out = _bench("replay_calibration.py", "--trials", "2", "--strategies", "hf-random", "--steps", "300",
                 timeout=300)
    assert "| hf-random | batches |" in out and "| hf-random | sampler |" in out
