"""One verdict for every command: check, analyze --fail-on, scan and watch, and the JUnit, SARIF
and GitHub outputs, all say the same of the same log at every --fail-on level (the gate issue's
option matrix). A level is never dropped: info fails at --fail-on info."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from losslens.cli import app

runner = CliRunner()
LEVELS = ("info", "warning", "error")
RANK = {"info": 0, "warning": 1, "error": 2}


def _logs(folder: Path) -> dict[str, tuple[Path, str | None]]:
    """One log per case, with the worst severity it holds (None: no finding; 'unreadable' and
    'noloss' cannot be judged)."""
    rng = np.random.default_rng(0)
    n = 600
    steps = np.arange(n)
    base = 1 + 2 * np.exp(-steps / 150) + rng.normal(0, 0.02, n)

    def write(name: str, lines: list[str]) -> Path:
        path = folder / name
        path.write_text("\n".join(lines) + "\n")
        return path

    kv = [f"step={i} loss={v:.5f}" for i, v in enumerate(base)]
    spiked = base.copy()
    spiked[400] += 1.0  # 1.8x the local level: a warning spike
    nan = base.copy()
    nan[400] = np.nan
    # a loss that follows a cyclic LR (restarts every 100 steps): an info periodicity, cause lr_schedule
    lr = 1e-3 * (0.5 + 0.5 * np.cos(np.pi * (np.arange(1200) % 100) / 100))
    cyclic = 1 + 2 * np.exp(-np.arange(1200) / 300) + 100 * lr + rng.normal(0, 0.02, 1200)
    binary = folder / "unreadable.log"
    binary.write_bytes(b"step=1 loss=\x00\x01\x02\x03")
    return {
        "clean": (write("clean.log", kv), None),
        "info": (write("info.log", [f"step={i} loss={v:.5f} lr={lr[i]:.6g}" for i, v in enumerate(cyclic)]),
                 "info"),
        "warning": (write("warning.log", [f"step={i} loss={v:.5f}" for i, v in enumerate(spiked)]),
                    "warning"),
        "error": (write("error.log", [f"step={i} loss={v:.5f}" for i, v in enumerate(nan)]), "error"),
        "unreadable": (binary, "unreadable"),
        "noloss": (write("noloss.log", [f"step={i} reward={v:.4f} lr=0.001" for i, v in enumerate(base)]),
                   "noloss"),
    }


@pytest.fixture(scope="module")
def cases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, str | None]]:
    return _logs(tmp_path_factory.mktemp("verdict"))


def expected(worst: str | None, level: str) -> tuple[int, str]:
    """The gate's rule: unreadable or no loss is ERROR (2); a finding at or above the level FAIL (1)."""
    if worst in ("unreadable", "noloss"):
        return 2, "ERROR"
    if worst is not None and RANK[worst] >= RANK[level]:
        return 1, "FAIL"
    return 0, "ok"


def test_the_cases_hold_what_they_say(cases) -> None:
    """Each case's worst finding is the one it stands for (else the matrix tests nothing)."""
    from losslens import analyze, read_log

    for name, (path, worst) in cases.items():
        if worst in ("unreadable", "noloss"):
            continue
        found = {str(f.severity) for f in analyze(read_log(path)).findings}
        top = max(found, key=RANK.__getitem__) if found else None
        assert top == worst, (name, found)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("case", ["clean", "info", "warning", "error", "unreadable", "noloss"])
def test_check_analyze_and_the_ci_formats_agree(cases, case: str, level: str) -> None:
    path, worst = cases[case]
    code, word = expected(worst, level)
    check = runner.invoke(app, ["check", str(path), "--fail-on", level])
    assert check.exit_code == code, check.output
    if case != "unreadable":
        assert f"{path}: " in check.stderr and f"; {word} (--fail-on {level})" in check.stderr, check.stderr
    analyze = runner.invoke(app, ["analyze", str(path), "--fail-on", level, "--json"])
    assert analyze.exit_code == code, analyze.output

    junit = ET.fromstring(runner.invoke(app, ["check", str(path), "--fail-on", level,
                                              "--output-format", "junit"]).stdout)
    failures, errors = int(junit.get("failures")), int(junit.get("errors"))
    assert (failures > 0, errors > 0) == (word == "FAIL", word == "ERROR"), (case, level, failures, errors)
    assert {"tests", "failures", "errors", "skipped", "time"} <= set(junit.attrib)

    sarif = json.loads(runner.invoke(app, ["check", str(path), "--fail-on", level,
                                           "--output-format", "sarif"]).stdout)
    assert sarif["runs"][0]["invocations"][0]["executionSuccessful"] is (word != "ERROR")

    github = runner.invoke(app, ["check", str(path), "--fail-on", level, "--output-format", "github"])
    assert github.exit_code == code
    assert ("title=losslens: cannot" in github.stdout) is (word == "ERROR")


@pytest.mark.parametrize("level", LEVELS)
def test_scan_says_what_check_says(cases, tmp_path: Path, level: str) -> None:
    import polars as pl

    root = tmp_path / "runs"
    for name, (path, _) in cases.items():
        (root / name).mkdir(parents=True)
        (root / name / "train.log").write_bytes(path.read_bytes())
    out = tmp_path / "t.parquet"
    result = runner.invoke(app, ["scan", str(root), "--out", str(out), "--fail-on", level, "-q"])
    table = pl.read_parquet(out).filter(pl.col("row") == "log")
    status = dict(zip(table["run"], table["status"], strict=True))
    for name, (_, worst) in cases.items():
        assert status[name] == expected(worst, level)[1], (name, level)
    assert result.exit_code == 2  # the unreadable and the loss-less logs
    why = table.filter(pl.col("run") == "noloss")["error"][0]
    assert why.endswith("pass --metric NAME to choose the loss")
    # without them, the code is the worst of the others
    for name in ("unreadable", "noloss"):
        (root / name / "train.log").unlink()
    again = runner.invoke(app, ["scan", str(root), "--out", str(out), "--fail-on", level, "-q"])
    assert again.exit_code == max(expected(w, level)[0] for n, (_, w) in cases.items()
                                  if n not in ("unreadable", "noloss"))


@pytest.mark.slow
@pytest.mark.parametrize("level", LEVELS)
def test_watch_on_standard_input_ends_with_the_same_code(cases, level: str) -> None:
    for case in ("clean", "info", "warning", "error", "noloss"):
        path, worst = cases[case]
        proc = subprocess.run([sys.executable, "-m", "losslens", "watch", "-", "--fail-on", level, "-q"],
                              input=path.read_bytes(), capture_output=True, timeout=120,
                              env={**os.environ, "COLUMNS": "120"})
        assert proc.returncode == expected(worst, level)[0], (case, level, proc.stderr.decode())


@pytest.mark.slow
def test_watch_exit_on_info_stops_at_an_info_finding(cases) -> None:
    path, _ = cases["info"]
    proc = subprocess.run([sys.executable, "-m", "losslens", "watch", str(path), "--exit-on", "info",
                           "--json"], capture_output=True, timeout=120)
    assert proc.returncode == 1
    events = [json.loads(x) for x in proc.stdout.decode().splitlines()]
    assert events[0]["event"] == "appeared" and events[0]["finding"]["severity"] == "info"


def test_the_library_says_what_check_says(cases) -> None:
    """``Report.exit_code`` is check's verdict on that log: a loss-less log is 2, not 0."""
    from losslens import analyze, read_log
    from losslens.findings import Severity

    for case in ("clean", "info", "warning", "error", "noloss"):
        path, worst = cases[case]
        report = analyze(read_log(path))
        for level in LEVELS:
            assert report.exit_code(Severity.parse(level)) == expected(worst, level)[0], (case, level)


def test_exit_zero_keeps_the_report_but_not_an_error(cases) -> None:
    nan, _ = cases["error"]
    proc = runner.invoke(app, ["check", str(nan), "--exit-zero"])
    assert proc.exit_code == 0 and "error nonfinite [loss]" in proc.stdout
    assert "; FAIL (--fail-on error, --exit-zero)" in proc.stderr
    bad, _ = cases["unreadable"]
    assert runner.invoke(app, ["check", str(bad), "--exit-zero"]).exit_code == 2
    assert runner.invoke(app, ["check", str(cases["noloss"][0]), "--exit-zero"]).exit_code == 2


def test_a_config_level_is_honoured_like_the_option(cases, tmp_path: Path) -> None:
    info, _ = cases["info"]
    (tmp_path / "losslens.toml").write_text('fail_on = "info"\n')
    proc = subprocess.run([sys.executable, "-m", "losslens", "check", str(info)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "; FAIL (--fail-on info)" in proc.stderr
