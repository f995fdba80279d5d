"""The flags people type from ruff, pytest and mypy, and output that reads well at 80 columns and
in pipes (the gate issue's points 2 to 5). Each test runs the real command and checks its exact
output or exit code."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from losslens import __version__
from losslens.cli import app
from tests.conftest import FIXTURES

runner = CliRunner()
NAN = FIXTURES / "nanogpt_nan.log"
SEED = FIXTURES / "seed004_dflash.log"


def run(*args: str, cwd: Path | None = None, env: dict | None = None, stdin: bytes | None = None,
        timeout: float = 60) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "losslens", *args], input=stdin, capture_output=True,
                          cwd=cwd, env={**os.environ, "COLUMNS": "80", **(env or {})}, timeout=timeout)
    out = subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.decode(), proc.stderr.decode())
    assert "Traceback" not in out.stderr, out.stderr
    return out


def spiky(path: Path, at: tuple[int, ...] = (400,)) -> Path:
    """600 records of a decaying loss with a 1.8x spike at each step of ``at`` (warnings)."""
    rng = np.random.default_rng(0)
    loss = 1 + 2 * np.exp(-np.arange(600) / 150) + rng.normal(0, 0.02, 600)
    for s in at:
        loss[s] += 1.0
    path.write_text("".join(f"step={i} loss={v:.5f}\n" for i, v in enumerate(loss)))
    return path


def test_version_short_and_long() -> None:
    assert run("-V").stdout == run("--version").stdout == f"losslens {__version__}\n"


def test_select_runs_only_the_kinds_named() -> None:
    both = runner.invoke(app, ["check", str(NAN), str(SEED), "--select", "ladder"])
    assert both.exit_code == 1
    assert [x.split(": ")[2].split()[1] for x in both.stdout.splitlines()] == ["ladder"]
    assert runner.invoke(app, ["check", str(NAN), "--select", "ladder,spike"]).exit_code == 0
    bad = runner.invoke(app, ["check", str(NAN), "--select", "ladders"])
    assert bad.exit_code == 2 and "unknown finding kind(s) for --select: ladders" in bad.stderr
    # --ignore is repeatable too, and beats --select
    for args in (["--ignore", "spike", "--ignore", "nonfinite"],
                 ["--select", "nonfinite", "--ignore", "nonfinite"]):
        assert runner.invoke(app, ["check", str(NAN), *args]).exit_code == 0


def test_statistics_counts_findings_by_kind(tmp_path: Path) -> None:
    spiky(tmp_path / "a.log", (400, 500))
    proc = runner.invoke(app, ["check", str(tmp_path / "a.log"), str(NAN), str(SEED), "--statistics"])
    assert proc.exit_code == 1
    assert proc.stdout == ("2  spike            worst warning  in 1 log(s)\n"
                           "1  ladder           worst error    in 1 log(s)\n"
                           "1  nonfinite        worst error    in 1 log(s)\n")
    js = runner.invoke(app, ["check", str(NAN), "--statistics", "--json"])
    assert json.loads(js.stdout) == {"kind": "nonfinite", "count": 1, "worst": "error", "logs": 1}
    bad = runner.invoke(app, ["check", str(NAN), "--statistics", "--output-format", "junit"])
    assert bad.exit_code == 2 and "--statistics prints text or json" in bad.stderr


def test_output_file_takes_the_report_and_o_means_it(tmp_path: Path) -> None:
    out = tmp_path / "report.xml"
    proc = runner.invoke(app, ["check", str(NAN), "--output-format", "junit", "-o", str(out)])
    assert proc.exit_code == 1 and proc.stdout == ""
    assert out.read_text().startswith('<?xml version="1.0" encoding="UTF-8"?>\n<testsuites name="losslens"')
    text = tmp_path / "report.txt"
    runner.invoke(app, ["analyze", str(SEED), "--output-file", str(text)])
    assert "error ladder [loss] steps 144-349" in text.read_text()
    assert runner.invoke(app, ["check", str(NAN), "-o", str(tmp_path / "no" / "x")]).exit_code == 2


def test_show_settings_says_where_each_value_came_from(tmp_path: Path) -> None:
    (tmp_path / "losslens.toml").write_text('fail_on = "warning"\n[watch]\nwindow = 900\n'
                                            '[detectors.spike]\nz = 9.0\n')
    proc = run("check", "--show-settings", "--ignore", "plateau", cwd=tmp_path)
    assert proc.returncode == 0
    lines = {x.split("=")[0].strip(): x for x in proc.stdout.splitlines()}
    assert lines["fail_on"].endswith('= "warning"  # losslens.toml')
    assert lines["ignore"].endswith('= ["plateau"]  # command line')
    assert lines["watch.window"].endswith("= 900  # losslens.toml")
    assert lines["watch.interval_s"].endswith("= 0.3  # built-in default")
    assert lines["detectors.spike.z"].endswith("= 9.0  # losslens.toml")


def test_color_always_never_and_the_environment() -> None:
    red = "\x1b[1;31merror\x1b[0m"
    assert red in run("check", str(NAN), "--color", "always").stdout
    assert "\x1b[" not in run("check", str(NAN)).stdout  # a pipe: no colour
    assert red in run("check", str(NAN), env={"FORCE_COLOR": "1"}).stdout
    assert "\x1b[" not in run("check", str(NAN), "--color", "never", env={"FORCE_COLOR": "1"}).stdout
    assert red in run("check", str(NAN), "--color", "always", env={"NO_COLOR": "1"}).stdout


def test_min_severity_hides_below_but_the_gate_judges_all(tmp_path: Path) -> None:
    log = spiky(tmp_path / "a.log")
    shown = runner.invoke(app, ["check", str(log), "--fail-on", "warning", "--min-severity", "error"])
    assert shown.exit_code == 1 and shown.stdout == ""
    assert f"{log}: 1 finding(s), worst warning; 600 records; FAIL (--fail-on warning)" in shown.stderr
    js = runner.invoke(app, ["analyze", str(log), "--min-severity", "error", "--json"])
    assert json.loads(js.stdout)["findings"] == []


def test_a_baseline_lets_known_findings_pass_and_new_ones_fail(tmp_path: Path) -> None:
    log = spiky(tmp_path / "run.log")
    base = tmp_path / "baseline.json"
    wrote = run("check", "run.log", "--fail-on", "warning", "--write-baseline", "baseline.json", cwd=tmp_path)
    assert wrote.returncode == 0
    assert "losslens: wrote baseline.json (1 finding(s) of 1 log(s))" in wrote.stderr
    assert json.loads(base.read_text()) == {"schema": "losslens.baseline/1", "logs": {"run.log": [
        {"kind": "spike", "metric": "loss", "start_step": 400, "end_step": 400, "peak_step": 400}]}}
    # from another folder: the baseline names logs relative to itself
    known = run("check", str(log), "--fail-on", "warning", "--baseline", str(base))
    assert known.returncode == 0 and "step 400: warning spike" in known.stdout
    spiky(log, (400, 500))  # the run goes on and spikes again
    new = run("check", str(log), "--fail-on", "warning", "--baseline", str(base))
    assert new.returncode == 1 and "step 500: warning spike" in new.stdout
    junit = run("check", str(log), "--fail-on", "warning", "--baseline", str(base),
                "--output-format", "junit")
    assert 'failures="1"' in junit.stdout and "step 500" in junit.stdout
    (tmp_path / "bad.json").write_text('{"findings": []}')
    bad = run("check", str(log), "--baseline", str(tmp_path / "bad.json"))
    assert bad.returncode == 2
    assert bad.stderr.startswith(f"losslens: error: {tmp_path}/bad.json: not a baseline")


def test_check_of_a_folder_closes_with_one_line(tmp_path: Path) -> None:
    for i in range(3):
        (tmp_path / f"run{i}").mkdir()
        spiky(tmp_path / f"run{i}" / "train.log", ())
    (tmp_path / "run1" / "train.log").write_bytes(NAN.read_bytes())
    proc = run("check", str(tmp_path))
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [
        f"{tmp_path}/run1/train.log: 1 finding(s), worst error; 41 records; FAIL (--fail-on error)",
        "3 logs: 2 ok, 1 FAIL, 0 ERROR; findings: 1 error, 0 warning, 0 info; exit 1 (FAIL: a finding at "
        "or above --fail-on error)"]
    verbose = run("check", str(tmp_path), "-v")
    assert f"{tmp_path}/run0/train.log: 0 finding(s); 600 records; ok (--fail-on error)" in verbose.stderr


def test_a_folder_as_users_keep_it(tmp_path: Path) -> None:
    """Stray files are no logs; a run's checkpoints are one run; an output being written is
    passed over; only what could be read counts."""
    run_dir = tmp_path / "out"
    state = json.loads((FIXTURES / "trainer_state.json").read_text())
    for step, history in ((10, state["log_history"][:2]), (20, state["log_history"])):
        (run_dir / f"checkpoint-{step}").mkdir(parents=True)
        (run_dir / f"checkpoint-{step}" / "trainer_state.json").write_text(
            json.dumps({**state, "log_history": history}))
    (run_dir / "eval_results.txt").write_text("epoch = 3.0\neval_loss = 0.512\neval_runtime = 0:00:03.21\n")
    (run_dir / "all_results.json").write_text('{"epoch": 3.0, "eval_loss": 0.51}\n')
    (run_dir / "notes.txt").write_text("Trained with lr 3e-4 and batch 32.\nLooks fine so far.\n")
    (run_dir / "empty.log").write_text("")
    with open(run_dir / "report.txt", "w") as report:
        proc = subprocess.run([sys.executable, "-m", "losslens", "check", str(run_dir), "-v"], stdout=report,
                              stderr=subprocess.PIPE, text=True, timeout=60)
    passed = sorted(x.split(": ")[1].removeprefix("passed over ")
                    for x in proc.stderr.splitlines() if x.startswith("losslens: passed over"))
    assert passed == [str(run_dir / n) for n in ("all_results.json", "checkpoint-10/trainer_state.json",
                                                 "empty.log", "eval_results.txt", "notes.txt", "report.txt")]
    assert proc.returncode == 1  # the NaN grad norm of the one state read
    assert (run_dir / "report.txt").read_text().count("nonfinite") == 1  # once, not once per checkpoint
    assert "1 log: 0 ok, 1 FAIL, 0 ERROR; 6 passed over" in proc.stderr


def test_pages_of_logs_with_the_same_name_are_distinct(tmp_path: Path) -> None:
    for run_name in ("a", "b"):
        (tmp_path / run_name).mkdir()
        (tmp_path / run_name / "train.log").write_bytes(NAN.read_bytes())
    page = tmp_path / "index.html"
    proc = runner.invoke(app, ["analyze", str(tmp_path), "--html", str(page)])
    assert proc.exit_code == 0
    pages = sorted(p.name for p in tmp_path.glob("index-*.html"))
    assert pages == ["index-a_train_log.html", "index-b_train_log.html"]
    assert all(name in page.read_text() for name in pages)


def test_watch_on_a_missing_path_says_so_at_once(tmp_path: Path) -> None:
    missing = tmp_path / "tarin.log"
    started = time.monotonic()
    proc = run("watch", str(missing))
    assert proc.returncode == 2 and time.monotonic() - started < 20
    assert proc.stderr == (f"losslens: error: {missing}: no such file (--wait waits for it to appear, as "
                           "`tail -F` does)\n")
    assert "junit" not in run("watch", "-h").stdout


@pytest.mark.slow
def test_watch_interrupted_accounts_every_line(tmp_path: Path) -> None:
    log = tmp_path / "slow.log"
    log.write_text("".join(f"step={i} loss={2 - i / 100:.3f}\n" for i in range(5)))  # fewer than a sniff
    p = subprocess.Popen([sys.executable, "-m", "losslens", "watch", str(log)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    time.sleep(1.5)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=30)
    assert err.splitlines()[-1].startswith(f"{log}: 5 lines (5 parsed, 0 skipped, 0 blank)")


def test_the_verdict_does_not_depend_on_who_reads_the_output(tmp_path: Path) -> None:
    """`check FILE | head -1` and `check DIR | head -1` both end with the gate's code."""
    for i in range(40):
        (tmp_path / f"r{i}.log").write_bytes(NAN.read_bytes())
    for target in (str(NAN), str(tmp_path)):
        proc = subprocess.run(f"{sys.executable} -m losslens check {target} -q | head -c 10 >/dev/null; "
                              "echo ${PIPESTATUS[0]}", shell=True, executable="/bin/bash",
                              capture_output=True, text=True, timeout=120)
        assert proc.stdout.strip() == "1", (target, proc.stderr)


def test_narrow_terminal_output_reflows(tmp_path: Path) -> None:
    proc = run("analyze", str(SEED))
    lines = proc.stdout.splitlines()
    assert all(line == line.rstrip() for line in lines)  # no padding in a pipe
    assert "error ladder [loss] steps 144-349" in lines
    assert all(len(line) <= 80 for line in lines if not line.startswith(str(SEED)))
    assert "tokens_per_s (Ktok/s)" in proc.stdout and "((" not in proc.stdout
    one = run("check", str(FIXTURES / "megatron_ranks.log"))
    assert "–" not in one.stdout + one.stderr
