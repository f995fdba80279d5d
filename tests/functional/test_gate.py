"""The gate never lies, and the CLI keeps the conventions engineers expect (issue: a gate that
never lies). Every test runs the real command in a subprocess and checks its exact output or
exit code."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import FIXTURES, ROOT

SEED = str(FIXTURES / "seed004_dflash.log")
NAN = str(FIXTURES / "nanogpt_nan.log")


def run(*args: str, stdin: bytes | None = None, cwd: Path | None = None, env: dict | None = None,
        timeout: float = 60) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "COLUMNS": "120", **(env or {})}
    proc = subprocess.run([sys.executable, "-m", "losslens", *args], input=stdin, capture_output=True,
                          cwd=cwd, env=full, timeout=timeout, check=False)
    out = subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.decode(), proc.stderr.decode())
    assert "Traceback" not in out.stderr, out.stderr
    return out


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


# 1. a folder walk never passes what it could not read


@pytest.fixture
def bad_folder(tmp_path: Path) -> Path:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "bad.log").write_bytes(b"\x00\x01binary")
    (tmp_path / "a" / "empty.log").write_text("")
    (tmp_path / "a" / "config.json").write_text('{"hidden_size": 4}\n')  # a config: passed over
    (tmp_path / "a" / "model.safetensors").write_bytes(b"x")
    offline = tmp_path / "wandb" / "offline-run-1"
    offline.mkdir(parents=True)
    (offline / "run-1.wandb").write_bytes(b"\x00")
    return tmp_path


@pytest.mark.slow
def test_folder_of_unreadable_logs_is_exit_2_with_one_line_each(bad_folder: Path) -> None:
    for command in ("check", "analyze"):
        proc = run(command, str(bad_folder))
        assert proc.returncode == 2
        errors = [x for x in proc.stderr.splitlines() if x.startswith("losslens: error: ")]
        hint = " (--skip-unreadable passes over logs that cannot be read)"
        assert errors[0] == (f"losslens: error: {bad_folder}/a/bad.log: binary data (NUL byte at offset 0), "
                             f"not a text log{hint}")
        assert errors[1].startswith(f"losslens: error: {bad_folder}/wandb/offline-run-1: a W&B offline run: "
                                    "its history is in the binary run-*.wandb file")
        assert "wandb sync" in errors[1]
        assert len(errors) == 2 and proc.stdout == ""
        # an empty file is no log: passed over (--verbose lists it); the run closes with one line
        assert proc.stderr.splitlines()[-1] == (
            "2 logs: 0 ok, 0 FAIL, 2 ERROR; 3 passed over (--verbose lists them); findings: 0 error, "
            "0 warning, 0 info; exit 2 (ERROR: a log could not be judged)")


@pytest.mark.slow
def test_skip_unreadable_passes_over_them_but_never_passes_nothing(bad_folder: Path) -> None:
    proc = run("check", str(bad_folder), "--skip-unreadable")
    assert proc.returncode == 2  # nothing at all could be read
    assert proc.stderr.splitlines()[-1] == (
        f"losslens: error: no log could be read in {bad_folder} (3 file(s) passed over as not logs; "
        "--verbose lists them)")
    assert sum(x.startswith("losslens: skipped: ") for x in proc.stderr.splitlines()) == 2
    good = bad_folder / "b"
    good.mkdir()
    write_lines(good / "train.log", [f"step={s} loss={2 - s / 100:.3f}" for s in range(40)])
    proc = run("check", str(bad_folder), "--skip-unreadable")
    assert proc.returncode == 0
    assert proc.stderr.splitlines()[-1] == ("1 log: 1 ok, 0 FAIL, 0 ERROR; 3 passed over (--verbose lists "
                                            "them); findings: 0 error, 0 warning, 0 info; exit 0 (ok)")
    verbose = run("check", str(bad_folder), "--skip-unreadable", "-v")
    assert f"{good}/train.log: 0 finding(s); 40 records; ok (--fail-on error)" in verbose.stderr
    assert (f"losslens: passed over {bad_folder}/a/empty.log: not a log by its content: empty file: "
            "no lines to read") in verbose.stderr
    quiet = run("check", str(bad_folder), "--skip-unreadable", "-q")
    assert quiet.returncode == 0 and quiet.stderr == "" and quiet.stdout == ""


@pytest.mark.slow
def test_verbose_lists_what_the_walk_passed_over(bad_folder: Path) -> None:
    proc = run("check", str(bad_folder / "a"), "--verbose")
    assert proc.returncode == 2
    assert (f"losslens: passed over {bad_folder}/a/config.json: a JSON document that holds no records "
            "(a config or a summary)") in proc.stderr.splitlines()
    assert f"losslens: passed over {bad_folder}/a/model.safetensors: not a log's file name" in proc.stderr
    assert "losslens: passed over" not in run("check", str(bad_folder / "a")).stderr


@pytest.mark.slow
def test_empty_folder_and_unmatched_glob_are_exit_2(tmp_path: Path) -> None:
    proc = run("check", str(tmp_path))
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"losslens: error: no log files found in {tmp_path}"
    (tmp_path / "config.json").write_text("{}")
    proc = run("check", str(tmp_path))
    assert proc.stderr.strip() == (f"losslens: error: no log files found in {tmp_path} (1 file(s) passed "
                                   "over as not logs; --verbose lists them)")
    missing = tmp_path / "missing[1].log"
    proc = run("check", str(missing))
    assert proc.returncode == 2 and proc.stderr.strip() == f"losslens: error: {missing}: no such file"


# 2. a missing extra is one line, exit 2


def _without(module: str, *argv: str) -> subprocess.CompletedProcess[str]:
    code = (f"import sys; sys.modules[{module!r}] = None; from losslens.cli import main; "
            f"sys.argv = ['losslens', *{list(argv)!r}]; main()")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)


@pytest.mark.slow
def test_missing_extras_are_one_line() -> None:
    proc = _without("torch", "replay", "--lengths", str(FIXTURES / "lengths_seed_shape.npy"))
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("losslens: error: replay rebuilds batches with torch, which is not "
                                   "installed: pip install 'losslens[replay]' (the CPU build: install "
                                   "torch first from PyTorch's CPU wheel index, see README)")
    proc = _without("matplotlib", "analyze", SEED, "--plot", "/tmp/never.png")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip() == ("losslens: error: --plot draws with matplotlib, which is not installed: "
                                   "pip install 'losslens[plot]'")


# 3. watch


@pytest.mark.slow
def test_watch_fail_on_at_the_end_of_stdin() -> None:
    log = Path(NAN).read_bytes()
    assert run("watch", "-", stdin=log).returncode == 1  # default fail_on = error: a NaN fails
    assert run("watch", "-", "--fail-on", "error", "--ignore", "nonfinite", stdin=log).returncode == 0
    clean = "\n".join(f"step={s} loss={2 - s / 100:.3f}" for s in range(40)).encode() + b"\n"
    assert run("watch", "-", "--fail-on", "info", stdin=clean).returncode == 0


@pytest.mark.slow
def test_watch_honours_the_config(tmp_path: Path) -> None:
    config = 'fail_on = "error"\n[watch]\nexit_on = "error"\ninterval_s = 0.05\n'
    (tmp_path / "losslens.toml").write_text(config)
    proc = run("watch", NAN, "--json", cwd=tmp_path, timeout=60)  # a file: it would follow forever
    assert proc.returncode == 1
    events = [json.loads(x) for x in proc.stdout.splitlines()]
    assert events[0]["event"] == "appeared" and events[0]["finding"]["kind"] == "nonfinite"
    assert events[-1]["event"] == "summary"
    (tmp_path / "losslens.toml").write_text('[watch]\nexit_on = "fatal"\n')
    bad = run("watch", NAN, cwd=tmp_path)
    assert bad.returncode == 2 and "bad value for 'watch.exit_on': 'fatal'" in bad.stderr


@pytest.mark.slow
def test_watch_a_run_folder_follows_its_main_log(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    write_lines(tmp_path / "eval.log", ["step=1 loss=2.0", "step=2 loss=1.9"])
    main = Path(NAN).read_text()
    (tmp_path / "train.log").write_text(main)
    proc = run("watch", str(tmp_path), "--exit-on", "error")
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[0] == (f"losslens: watching {tmp_path}/train.log (of 2 log(s) in "
                                           f"{tmp_path}: the one with the most records)")
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = run("watch", str(empty))
    assert proc.returncode == 2
    assert proc.stderr.strip() == (f"losslens: error: no readable log found in {empty} (0 selected, 0 passed "
                                   "over as not logs)")


def _start_watch(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "losslens", "watch", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**os.environ, "COLUMNS": "120"})


@pytest.mark.slow
def test_watch_sigterm_ends_with_the_summary_and_143(tmp_path: Path) -> None:
    log = write_lines(tmp_path / "run.log", [f"step={s} loss={2 - s / 100:.3f}" for s in range(30)])
    proc = _start_watch(str(log), "--json")
    time.sleep(3)  # started and following
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 143, err
    summary = json.loads(out.decode().splitlines()[-1])
    assert summary["event"] == "summary" and summary["interrupted"] is True
    assert summary["lines"]["parsed"] == 30
    assert err.decode().strip() == (f"{log}: 30 lines (30 parsed, 0 skipped, 0 blank); 0 alert event(s); "
                                    "0 active finding(s); interrupted")


@pytest.mark.slow
def test_watch_into_a_closed_pipe_ends_quietly() -> None:
    watch = _start_watch(NAN, "--json")
    assert watch.stdout is not None
    first = watch.stdout.readline()
    assert json.loads(first)["event"] == "appeared"
    watch.stdout.close()  # as `| head -1` does
    _, err = watch.communicate(timeout=30)
    assert watch.returncode == 141 and err == b""


# 4. no loss metric: never 'ok'


@pytest.mark.slow
def test_no_loss_metric_is_never_ok(tmp_path: Path) -> None:
    rl = write_lines(tmp_path / "rl.log", [f"step={s} actor_loss={0.5 - s / 100:.3f} critic_loss="
                                           f"{1 + s / 50:.3f} reward={s}" for s in range(30)])
    # several losses and no total: each is analysed (the critic's doubles: a divergence)
    proc = run("check", str(rl))
    assert proc.returncode == 1
    # (a straight rise from the first record: the turn is its first step, whatever BLAS rounds)
    assert proc.stdout.splitlines()[0].startswith(f"{rl}:1: steps 0-29: error divergence [critic_loss] "
                                                  "critic_loss turns upward at step 0")
    analysed = run("analyze", str(rl), "--json")
    report = json.loads(analysed.stdout)
    assert report["loss"]["column"] == "actor_loss" and report["loss"]["others"] == ["critic_loss"]
    assert [(f["kind"], f["metric"]) for f in report["findings"]] == [("divergence", "critic_loss")]
    # no loss-like column at all: never ok
    none = write_lines(tmp_path / "none.log", [f"step={s} reward={s} kl={s / 100:.3f}" for s in range(30)])
    proc = run("check", str(none))
    assert proc.returncode == 2
    assert proc.stdout.strip() == (f"{none}:1: steps 0-29: warning no_loss_metric [loss] no loss metric "
                                   "found: no loss-like column among reward, kl; pass --metric NAME to "
                                   "choose the loss")
    assert proc.stderr.splitlines()[0] == (f"losslens: error: {none}: no loss metric found: no loss-like "
                                           "column among reward, kl; pass --metric NAME to choose the loss")
    analysed = run("analyze", str(none), "--json")
    report = json.loads(analysed.stdout)
    assert analysed.returncode == 0 and report["loss"] is None
    assert [f["kind"] for f in report["findings"]] == ["no_loss_metric"]
    chosen = run("check", str(rl), "--metric", "critic_loss", "--json")
    report = json.loads(chosen.stdout)
    assert report["loss"] == {"column": "critic_loss", "metric": "loss", "why": "chosen with --metric"}
    assert chosen.returncode == 1  # critic_loss doubles: a divergence (error)
    assert [f["kind"] for f in report["findings"]] == ["divergence"]
    missing = run("check", str(rl), "--metric", "lm_loss")
    assert missing.returncode == 2
    assert missing.stderr.strip() == (f"losslens: error: {rl}: no metric named 'lm_loss' (found: actor_loss, "
                                      "critic_loss, reward); pass --metric with one of them")


def test_an_ok_on_a_loss_too_short_to_judge_says_what_ran(tmp_path: Path) -> None:
    sliver = write_lines(tmp_path / "sliver.log", [f"step={s} grad_norm={1 + s / 100:.2f}"
                                                   + (" loss=2.5" if s == 3 else "") for s in range(165)])
    proc = run("check", str(sliver))
    assert proc.returncode == 0
    assert proc.stderr.splitlines() == [
        f"{sliver}: 0 finding(s); 165 records; ok (--fail-on error)",
        f"{sliver}: note: 1 loss value(s) in 165 records: 6 of 7 checks on the loss need more "
        "(--verbose says which); only nonfinite could run"]
    long = write_lines(tmp_path / "long.log", [f"step={s} loss={3 - s / 100:.3f}" for s in range(60)])
    assert "note" not in run("check", str(long)).stderr  # two of seven need more: no note


def test_a_nan_in_one_of_several_losses_fails_the_gate(tmp_path: Path) -> None:
    """Ultralytics' results.csv holds three losses (box, class, DFL) and none is 'the' loss until
    --metric says: a NaN box loss was exit 2 'no loss metric found', the NaN unseen."""
    head = "epoch,train/box_loss,train/cls_loss,train/dfl_loss,metrics/mAP50(B),val/box_loss,lr/pg0"
    rows = [f"{e},{'nan' if e >= 40 else f'{1.5 / e ** 0.3:.5f}'},{2 / e ** 0.4:.5f},{1.3 / e ** 0.2:.5f},"
            f"{0.3 + e / 200:.5f},{1.6 / e ** 0.3:.5f},0.01" for e in range(1, 61)]
    results = write_lines(tmp_path / "results.csv", [head, *rows])
    proc = run("check", str(results))
    assert proc.returncode == 1
    assert proc.stdout.splitlines()[0] == (
        f"{results}:41: steps 40-60: error nonfinite [train_box_loss] train_box_loss is NaN from step 40 to "
        "the end of the log (last finite value 0.4998): training has blown up (lower the LR, check for bad "
        "batches, fp16 overflow)")


@pytest.mark.slow
def test_the_only_loss_like_column_is_the_loss_and_the_report_says_so(tmp_path: Path) -> None:
    nemo = write_lines(tmp_path / "nemo.log", [f"step={s} reduced_train_loss={3 - s / 100:.3f} lr=1e-4"
                                               for s in range(40)])
    proc = run("analyze", str(nemo))
    assert proc.returncode == 0
    assert "column 'reduced_train_loss' (the only loss-like column)" in proc.stdout
    report = json.loads(run("check", str(nemo), "--json").stdout)
    assert report["loss"] == {"column": "reduced_train_loss", "metric": "loss",
                              "why": "the only loss-like column"}
    assert report["metrics"][0] == "loss"


# 5. output formats


@pytest.mark.slow
def test_text_line_is_file_line_then_steps() -> None:
    proc = run("check", SEED)
    assert proc.stdout.startswith(f"{SEED}:11: steps 144-349: error ladder [loss] loss climbs in ~5 ")


@pytest.mark.slow
def test_github_annotations() -> None:
    proc = run("check", SEED, "--output-format", "github")
    assert proc.returncode == 1
    assert proc.stdout.splitlines() == [
        f"::error file={SEED},line=11,title=losslens ladder [loss] steps 144-349::loss climbs in ~5 "
        "near-equal increments of ~0.91 then resets (3 episodes, steps 144-349); values are integer "
        "multiples of ~0.91: a loss accumulator that is not divided or reset?"]


@pytest.mark.slow
def test_junit_one_case_per_log_and_detector(tmp_path: Path) -> None:
    from losslens.detectors import REGISTRY

    missing = tmp_path / "missing.log"
    proc = run("check", SEED, NAN, str(missing), "--output-format", "junit")
    assert proc.returncode == 2
    root = ET.fromstring(proc.stdout)
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == [SEED, NAN, str(missing)]
    seed_cases = {c.get("name"): c for c in suites[0].findall("testcase")}
    assert list(seed_cases) == [d.name for d in REGISTRY]
    assert seed_cases["ladder"].find("failure") is not None
    assert suites[0].get("failures") == "1" and suites[1].get("failures") == "1"
    assert suites[2].find("testcase/error").get("message") == f"{missing}: no such file"
    assert root.get("tests") == str(2 * len(REGISTRY) + 1) and root.get("errors") == "1"


@pytest.mark.slow
def test_sarif_results_with_lines() -> None:
    proc = run("check", SEED, NAN, "--output-format", "sarif", cwd=ROOT)
    doc = json.loads(proc.stdout)
    assert doc["version"] == "2.1.0"
    results = doc["runs"][0]["results"]
    assert [(r["ruleId"], r["level"]) for r in results] == [("ladder", "error"), ("nonfinite", "error")]
    where = results[1]["locations"][0]["physicalLocation"]
    # paths relative to the folder it ran in, named by originalUriBaseIds
    assert where == {"artifactLocation": {"uri": "fixtures/nanogpt_nan.log", "uriBaseId": "%SRCROOT%"},
                     "region": {"startLine": 42}}
    assert doc["runs"][0]["originalUriBaseIds"] == {"%SRCROOT%": {"uri": ROOT.as_uri() + "/"}}
    assert doc["runs"][0]["invocations"][0]["executionSuccessful"] is True
    assert results[1]["properties"]["start_step"] == 180
    assert {r["id"] for r in doc["runs"][0]["tool"]["driver"]["rules"]} >= {"ladder", "nonfinite", "spike"}


@pytest.mark.slow
def test_json_alias_and_disagreement() -> None:
    assert run("check", SEED, "--json").stdout == run("check", SEED, "--output-format", "json").stdout
    proc = run("check", SEED, "--json", "--output-format", "sarif")
    assert proc.returncode == 2
    assert proc.stderr.strip() == "losslens: error: --json and --output-format sarif disagree: pass one"


# 6. conventions: -h, --quiet/--verbose, choices, completion


@pytest.mark.slow
@pytest.mark.parametrize("command", ["analyze", "check", "watch", "replay", "formats", "detectors"])
def test_every_command_has_short_help(command: str) -> None:
    proc = run(command, "-h")
    assert proc.returncode == 0 and "Usage:" in proc.stdout
    if command in ("analyze", "check", "watch"):
        text = " ".join(proc.stdout.split())
        for option in ("--quiet", "--verbose", "--metric", "--output-format"):
            assert option in text
        assert "<info|warning|error>" in text
        assert "<auto|trainer-state|json-records|jsonl|csv|hf|" in text
    if command == "replay":
        assert ("<static-sorted|random|bucketed-shuffle|stride-interleave|hf-group-by-length|"
                "hf-random|torch-distributed|fairseq|lhotse>") in " ".join(proc.stdout.split())
    top = run("-h").stdout
    assert "--install-completion" in top and "--show-completion" in top


@pytest.mark.slow
def test_detectors_verbose_lists_parameters() -> None:
    proc = run("detectors", "--verbose", env={"COLUMNS": "250"})
    assert proc.returncode == 0 and "min_increments=3" in proc.stdout and "frozen_records=5" in proc.stdout
    assert "min_increments" not in run("detectors").stdout


@pytest.mark.slow
def test_quiet_and_verbose() -> None:
    assert run("check", SEED, "-q").stderr == ""
    short = run("check", SEED, "--verbose")
    assert f"{SEED}: could not check multimodal on loss: only 30 points; needs 100" in short.stderr
    assert run("check", SEED, "-q", "-v").returncode == 2


def test_progress_is_told_the_bytes_read(tmp_path: Path) -> None:
    """Readers tell a listener how far they are (the CLI draws a bar from it on a terminal for
    logs over 50 MB); without a listener nothing happens."""
    from losslens import progress, read_log

    path = write_lines(tmp_path / "big.log", [f"step={s} loss={2 + (s % 7) / 100:.4f} lr=1e-4 note=padding"
                                              for s in range(200_000)])
    heard: list[tuple[str, int, int | None]] = []
    with progress.listening(lambda phase, done, total: heard.append((phase, done, total))):
        read_log(path)
    size = path.stat().st_size
    assert heard and all(total == size for _, _, total in heard)
    assert heard[-1][1] == size and heard[0][0] == f"reading {path}"


# 7. floods are grouped


@pytest.fixture(scope="module")
def spiky(tmp_path_factory) -> Path:
    rng = np.random.default_rng(0)
    values = 2.0 + rng.normal(0, 0.01, 3000)
    values[50::100] *= 3  # 30 spikes
    path = tmp_path_factory.mktemp("spiky") / "spiky.log"
    return write_lines(path, [f"step={s} loss={v:.4f}" for s, v in enumerate(values)])


@pytest.mark.slow
def test_a_flood_of_one_kind_is_grouped(spiky: Path) -> None:
    lines = run("check", str(spiky)).stdout.splitlines()
    spikes = [x for x in lines if " spike [loss] " in x]
    assert len(spikes) == 3
    assert f"{spiky}: … 27 more spike finding(s) on loss (worst warning), steps 50-2950; --all lists " \
           "every one" in lines
    every = run("check", str(spiky), "--all").stdout.splitlines()
    assert sum(" spike [loss] " in x for x in every) == 30
    kinds = [f["kind"] for f in json.loads(run("check", str(spiky), "--json").stdout)["findings"]]
    # + the plateau, and the spike train's period (one every 100 steps: a periodic job or data)
    assert (kinds.count("spike"), len(kinds)) == (30, 32) and "periodicity" in kinds
    table = run("analyze", str(spiky)).stdout
    assert "27 more spike finding(s)" in table


# 8. 80 columns


@pytest.mark.slow
@pytest.mark.parametrize("columns", [80, 120])
def test_views_fit_the_terminal(columns: int, spiky: Path) -> None:
    for log in (SEED, str(spiky)):
        proc = run("analyze", log, env={"COLUMNS": str(columns)})
        widths = [len(x) for x in proc.stdout.splitlines()]
        assert max(widths) <= columns, proc.stdout
        spark = [x for x in proc.stdout.splitlines() if x.startswith("loss ") and "▁" in x][0]
        # and uses the width it has, a column a step at most (the seed log has 30 records)
        assert len(spark) >= columns - 2 if log != SEED else spark.startswith("loss ▆█ ") and len(spark) < 60
    proc = run("replay", "--lengths", str(FIXTURES / "lengths_seed_shape.npy"), "--compare",
               "--null-seeds", "9", env={"COLUMNS": str(columns)})
    assert proc.returncode == 0
    assert max(len(x) for x in proc.stdout.splitlines()) <= columns


# 9. pages


@pytest.mark.slow
def test_html_for_several_logs_is_an_index_and_pages(tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    proc = run("analyze", SEED, NAN, "--html", str(page), "-q")
    assert proc.stderr == ""
    proc = run("analyze", SEED, NAN, "--html", str(page))
    seed_page = tmp_path / "report-seed004_dflash_log.html"
    nan_page = tmp_path / "report-nanogpt_nan_log.html"
    assert proc.stderr.strip().splitlines()[-1] == (f"losslens: wrote {page} (an index of 2 pages: "
                                                    f"{seed_page}, {nan_page})")
    index = page.read_text()
    assert 'href="report-seed004_dflash_log.html"' in index and 'href="report-nanogpt_nan_log.html"' in index
    assert "<h1>" in seed_page.read_text() and "ladder" in seed_page.read_text()


def test_loss_axis_leaves_out_the_warm_up_and_ticks_are_round() -> None:
    from losslens.reporters.chart import nice_ticks, robust_top, tick_label

    assert nice_ticks(0.8183, 37.23, 4) == [10.0, 20.0, 30.0]
    assert nice_ticks(1.93, 2.07, 4) == [1.95, 2.0, 2.05]
    assert [tick_label(v, [0.25, 0.5]) for v in (0.25, 0.5)] == ["0.25", "0.50"]
    assert tick_label(1500.0, [1000.0, 1500.0]) == "1500"
    loss = np.concatenate([[11.0, 9.0, 7.0], 2.0 + 0.1 * np.sin(np.arange(200))])
    top, clipped = robust_top("loss", loss)
    assert top is not None and 2.1 < top < 2.2 and clipped == 3
    assert robust_top("loss", 2.0 + 0.1 * np.sin(np.arange(200))) == (None, 0)


# 10. the library


def test_library_surface() -> None:
    import losslens
    from losslens.detectors import REGISTRY
    from losslens.findings import Finding, Report
    from losslens.logs import LogData

    assert (ROOT / "src" / "losslens" / "py.typed").exists()
    assert callable(losslens.analyze) and "Report" in (losslens.analyze.__doc__ or "")
    report = losslens.analyze(losslens.read_log(SEED))
    assert isinstance(report, losslens.Report) and report.exit_code(losslens.Severity.ERROR) == 1
    shown = report._repr_html_()
    assert '<table id="findings">' in shown and "ladder" in shown and "body{" not in shown
    for cls in (Finding, Report, LogData):
        assert cls.__doc__ and len(cls.__doc__) > 200
    import inspect

    for det in REGISTRY:
        params = [p for p in inspect.signature(type(det).__init__).parameters if p != "self"]
        missing = [p for p in params if p not in (type(det).__doc__ or "")]
        assert missing == [], det.name


# 11-13. install and README


def test_readme_and_dependencies() -> None:
    import tomllib

    readme = (ROOT / "README.md").read_text()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not any(d.startswith("scipy") for d in project["dependencies"])
    assert any(d.startswith("scipy") for d in project["optional-dependencies"]["dev"])
    assert "../shared" not in readme  # every example runs from a fresh clone
    assert "CPU wheel index" in readme


# a NaN is never hidden: not by another rank's record, nor by a record at the same step
def _ranked(tmp_path: Path, old: str, new: str, prefix: str = "") -> Path:
    text = (FIXTURES / "torchrun_ranks.log").read_text()
    assert old in text
    text = text.replace(old, new, 1)
    lines = text.splitlines()
    return write_lines(tmp_path / "ranks.log", [f"{prefix.format(i=i % 60)}{x}" for i, x in enumerate(lines)])


def test_a_nan_only_another_rank_printed_fails_the_gate(tmp_path: Path) -> None:
    log = _ranked(tmp_path, "[rank2]: step=30 loss=2.4200", "[rank2]: step=30 loss=nan")
    out = run("check", str(log))
    assert out.returncode == 1
    line = next(n for n, x in enumerate(log.read_text().splitlines(), 1) if "loss=nan" in x)
    said = f"ranks.log:{line}: step 30: error nonfinite [loss] loss is NaN on rank 2 from step 30"
    assert said in out.stdout
    report = json.loads(run("analyze", str(log), "--json").stdout)
    (f,) = [f for f in report["findings"] if f["kind"] == "nonfinite"]
    assert f["evidence"]["rank"] == 2 and f["line"] == line and f["start_step"] == 30
    clean = run("check", str(FIXTURES / "torchrun_ranks.log"))
    assert clean.returncode == 0


def test_a_nan_behind_a_timestamp_and_a_rank_prefix_fails_the_gate(tmp_path: Path) -> None:
    """'kubectl logs --timestamps' before torchrun's '[rank0]: ': the ranks are told apart (they
    mixed into restarts, and rank 2's record at the same step hid rank 0's NaN)."""
    log = _ranked(tmp_path, "[rank0]: step=22 loss=2.5600", "[rank0]: step=22 loss=nan",
                  prefix="2024-05-01T10:00:{i:02d}.123456789Z ")
    out = run("check", str(log))
    assert out.returncode == 1 and "error nonfinite [loss] loss is NaN from step 22" in out.stdout
    report = json.loads(run("analyze", str(log), "--json").stdout)
    assert "lines from 4 ranks (0, 1, 2, 3): rank 0 analysed, 180 records of the others skipped" \
        in report["notes"]


def test_a_nan_at_a_step_another_record_repeats_fails_the_gate(tmp_path: Path) -> None:
    """Two processes print the same steps into one file, no prefix: the later record at a step
    is analysed, but never in place of a NaN."""
    lines = []
    for step in range(1, 200):
        for proc in (0, 1):
            loss = "nan" if (step, proc) == (120, 0) else f"{3 - step / 100 + proc / 1000:.4f}"
            lines.append(f"step={step} loss={loss} lr=1e-04")
    out = run("check", str(write_lines(tmp_path / "twice.log", lines)))
    assert out.returncode == 1
    assert "error nonfinite [loss] loss is NaN from step 120 in 1 of 199 records" in out.stdout


def test_watch_on_a_hf_log_with_a_preamble_fails_on_its_nan(tmp_path: Path) -> None:
    """The real HF nohup log's preamble made watch read it as 'key: value' lines: 24 of 183
    records, and a NaN in the others passed (exit 0 where check exits 1)."""
    from tests.conftest import reallog

    text = reallog("qwen3-8b-qlora-hf-trainer-nohup").read_text().replace(
        "{'loss': 2.0592, 'grad_norm': 0.69140625", "{'loss': nan, 'grad_norm': 0.69140625", 1)
    log = tmp_path / "training.log"
    log.write_text(text)
    assert run("check", str(log)).returncode == 1
    out = run("watch", "-", "--fail-on", "error", stdin=text.encode())
    assert out.returncode == 1, out.stderr
    assert "error nonfinite [loss] loss is NaN from step 20" in out.stdout
    assert "183 parsed" in out.stderr
