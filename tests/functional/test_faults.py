"""Hostile inputs never give a traceback (a gate reads exit 1 as 'finding'): one line on stderr
naming the file or option, exit 2. A corpus of the inputs found by a fuzz run, each run as a
real process, and a property test over random bytes and config values."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from losslens import read_log, synth
from losslens.analysis import analyze
from losslens.cli import app
from losslens.logs.base import TOO_LONG

DEEP = '{"a":' * 100_000 + "1" + "}" * 100_000
OK = "\n".join(f"step={s} loss={2 - s / 100}" for s in range(30)) + "\n"


def run(*args: str, cwd: Path, stdin: bytes | None = None) -> tuple[int, str]:
    proc = subprocess.run([sys.executable, "-m", "losslens", *args], cwd=cwd, input=stdin,
                          capture_output=True, timeout=60, check=False)
    err = proc.stderr.decode()
    assert "Traceback" not in err, err
    return proc.returncode, err.strip()


@pytest.mark.slow
@pytest.mark.parametrize(("files", "args", "message"), [
    ({"deep.jsonl": DEEP + "\n"}, ["check", "deep.jsonl"], "deep.jsonl: no known log format recognised"),
    ({"trainer_state.json": '{"log_history": [' + DEEP + "]}"}, ["check", "trainer_state.json"],
     "trainer_state.json: invalid JSON: nested too deeply to read"),
    ({"trainer_state.json": '{"log_history": [{"step": 1, "loss": ' + "9" * 5000 + "}]}"},
     ["check", "trainer_state.json"], "trainer_state.json: invalid JSON: Exceeds the limit (4300 digits)"),
    ({"h.json": '[{"_step": 1, "loss": ' + "9" * 5000 + "}]"}, ["check", "h.json"], "h.json: invalid JSON"),
    ({"ok.log": OK}, ["analyze", "ok.log", "--plot", "x.bogus"], "--plot x.bogus: name a .png, .svg or .pdf"),
    ({"ok.log": OK, "c.toml": "\x00\x01binary"}, ["check", "ok.log", "--config", "c.toml"],
     "c.toml: invalid TOML"),
    ({"ok.log": OK, "c.toml": "[watch]\ninterval_s = inf\n"}, ["watch", "ok.log", "--config", "c.toml"],
     "bad value for 'watch.interval_s': inf (must be a finite number)"),
    ({"ok.log": OK, "c.toml": "[watch]\ninterval_s = nan\n"}, ["check", "ok.log", "--config", "c.toml"],
     "bad value for 'watch.interval_s': nan (must be a finite number)"),
    ({"ok.log": OK, "c.toml": "[watch]\ninterval_s = 0\n"}, ["check", "ok.log", "--config", "c.toml"],
     "bad value for 'watch.interval_s': 0.0 (must be >= 0.01)"),
    ({"ok.log": OK, "c.toml": "[watch]\nwindow = 0\n"}, ["check", "ok.log", "--config", "c.toml"],
     "bad value for 'watch.window': 0 (must be >= 10)"),
    ({"ok.log": OK, "c.toml": "[detectors.ladder]\nmin_increments = 0\n"},
     ["check", "ok.log", "--config", "c.toml"],
     "bad value for 'detectors.ladder.min_increments': 0 (must be >= 1)"),
    ({"ok.log": OK}, ["watch", "-", "--format", "trainer-state"],
     "watch reads --format trainer-state from a file"),
    ({"ok.log": OK}, ["watch", "/dev/null"], "/dev/null: cannot follow: not a regular file"),
    ({"h.json": '[{"_step": 1, "loss": 2.5},\n {"_step": 2, "loss": 2.4}\n {"_step": 3}]'},
     ["check", "h.json"], "h.json:3: invalid JSON: expecting ',' or ']' between records"),
    ({"h.json": '[{"_step": 1, "loss": 2.5},\n {"_step": 2, "loss": }]'}, ["check", "h.json"],
     "h.json:2: invalid JSON: Expecting value"),
    ({"h.json": '[{"_step": 1, "loss": 2.5}] [1]'}, ["check", "h.json"],
     "h.json:1: invalid JSON: extra data after the array"),
    ({"h.json": '[{"_step": 1, "loss": 2.5}, {"_step": 2, "loss": 2.4}'}, ["check", "h.json"],
     "h.json:1: invalid JSON: expecting ',' or ']' between records"),
    ({"h.json": "[ ]"}, ["check", "h.json", "--format", "json-records"],
     "h.json: no json-records records in 1 lines"),
])
def test_corpus_is_one_line_and_exit_2(tmp_path: Path, files: dict, args: list[str], message: str) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    code, err = run(*args, cwd=tmp_path, stdin=b"")
    assert code == 2
    assert len(err.splitlines()) == 1 and message in err, err


@pytest.mark.slow
def test_csv_step_of_inf_is_a_skipped_line(tmp_path: Path) -> None:
    (tmp_path / "m.csv").write_text("step,loss\n1,2.0\ninf,1.9\n3,1.8\n")
    code, _ = run("analyze", "m.csv", "--json", cwd=tmp_path)
    assert code == 0
    proc = subprocess.run([sys.executable, "-m", "losslens", "analyze", "m.csv", "--json"], cwd=tmp_path,
                          capture_output=True, text=True, check=True)
    assert json.loads(proc.stdout)["lines"] == {"total": 4, "parsed": 3, "skipped": 1, "blank": 0}


@pytest.fixture
def lengths_corpus(tmp_path: Path) -> Path:
    np.save(tmp_path / "cx.npy", np.array([1 + 2j, 3 + 0j] * 50))
    np.save(tmp_path / "big.npy", np.array([1e30, 100.0] * 50))
    np.save(tmp_path / "u64.npy", np.array([2**63 + 5, 100] * 50, dtype=np.uint64))
    np.save(tmp_path / "inf.npy", np.array([np.inf, 100.0] * 50))
    np.save(tmp_path / "ok.npy", np.arange(10, 1010))
    for name, state in (("ds1", []), ("ds2", {"_data_files": [{}]}),
                        ("ds3", {"_data_files": [{"filename": "../../../../etc/passwd"}]})):
        (tmp_path / name).mkdir()
        (tmp_path / name / "state.json").write_text(json.dumps(state))
    return tmp_path


@pytest.mark.slow
@pytest.mark.parametrize(("args", "message"), [
    (["--lengths", "cx.npy"], "cx.npy: lengths must be real numbers, got complex128"),
    (["--lengths", "big.npy"], "big.npy: length 1e+30 at sample 0 is not a token count"),
    (["--lengths", "u64.npy"], "u64.npy: length 9223372036854775813 at sample 0 is not a token count"),
    (["--lengths", "inf.npy"], "inf.npy: length inf at sample 0 is not a token count"),
    (["--lengths", "ds1"], "ds1: state.json has no '_data_files' list"),
    (["--lengths", "ds2"], "ds2: state.json has no '_data_files' list"),
    (["--lengths", "ds3"], "ds3: state.json names a data file outside the folder: "),
    (["--lengths", "ok.npy", "--seed", str(1 << 70)], "--seed takes 0 to 2**63-1"),
    (["--lengths", "ok.npy", "--max-seq-len", "-5"], "--max-seq-len must be >= 1, got -5"),
    (["--lengths", "ok.npy", "--epochs", "1000000"], "--epochs 1000000 × 1,000 samples = 1,000,000,000"),
])
def test_replay_bad_inputs(lengths_corpus: Path, args: list[str], message: str) -> None:
    code, err = run("replay", *args, cwd=lengths_corpus)
    assert code == 2 and len(err.splitlines()) == 1 and message in err, err


runner = CliRunner()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=400) | st.text(max_size=400).map(str.encode),
       command=st.sampled_from(["check", "analyze"]))
def test_random_bytes_exit_0_1_or_2(tmp_path_factory, data: bytes, command: str) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "x.log"
    path.write_bytes(data)
    result = runner.invoke(app, [command, str(path)])
    assert result.exit_code in (0, 1, 2)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.sampled_from(["watch.interval_s", "watch.window", "watch.confirm", "watch.cooldown_s",
                            "detectors.ladder.min_increments", "detectors.spike.z",
                            "detectors.periodicity.window", "detectors.multimodal.min_points"]),
       value=st.one_of(st.integers(-10**6, 10**6), st.floats(allow_nan=True, allow_infinity=True)))
def test_config_values_validate_or_say_why(tmp_path_factory, key: str, value) -> None:
    folder = tmp_path_factory.mktemp("cfg")
    (folder / "ok.log").write_text(OK)
    table, name = key.rsplit(".", 1)
    literal = {float("inf"): "inf", float("-inf"): "-inf"}.get(value, repr(value))
    literal = "nan" if value != value else literal
    (folder / "c.toml").write_text(f"[{table}]\n{name} = {literal}\n")
    result = runner.invoke(app, ["check", str(folder / "ok.log"), "--config", str(folder / "c.toml")])
    assert result.exit_code in (0, 2)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception


@pytest.mark.slow
def test_watch_behind_is_not_blind(tmp_path: Path) -> None:
    """100,000 lines at once on stdin with one NaN at line 50,001: the window (5,000 records)
    moves past it before any analysis, but every record passes the per-record check as it is
    read, so the NaN is announced and watch exits 1 (it exited 0 with no event before)."""
    rng = np.random.default_rng(0)
    lines = [f"step={s} loss={2 + rng.normal(0, 0.01):.4f} lr=1e-4" for s in range(100_000)]
    lines[50_000] = "step=50000 loss=nan lr=1e-4"
    data = ("\n".join(lines) + "\n").encode()
    proc = subprocess.run([sys.executable, "-m", "losslens", "watch", "-", "--json", "--exit-on", "error"],
                          input=data, capture_output=True, timeout=120, check=False)
    assert proc.returncode == 1, proc.stderr.decode()
    events = [json.loads(x) for x in proc.stdout.decode().splitlines()]
    nan = [e["finding"] for e in events if e["event"] == "appeared" and e["finding"]["kind"] == "nonfinite"]
    assert len(nan) == 1
    assert (nan[0]["start_step"], nan[0]["line"], nan[0]["evidence"]["count"]) == (50_000, 50_001, 1)
    ignored = subprocess.run([sys.executable, "-m", "losslens", "watch", "-", "--json", "--ignore",
                              "nonfinite,plateau"], input=data, capture_output=True, timeout=120, check=False)
    assert ignored.returncode == 0  # --ignore nonfinite turns the per-record check off too


def test_lone_carriage_returns_are_line_ends(tmp_path: Path) -> None:
    """A tqdm capture whose every line ends in a lone '\\r' read as one line and 'ok'."""
    body = "".join(f"step={s} loss={'nan' if s == 35 else f'{2 - s / 100:.3f}'}\r" for s in range(40))
    (tmp_path / "cr.log").write_bytes(body.encode())
    from losslens import analyze, read_log

    log = read_log(tmp_path / "cr.log")
    assert log.lines.as_dict() == {"total": 40, "parsed": 40, "skipped": 0, "blank": 0}
    assert [(f.kind, f.start_step, f.line) for f in analyze(log).findings] == [("nonfinite", 35, 36)]


@pytest.mark.slow
def test_quoted_lines_mask_secrets(tmp_path: Path) -> None:
    (tmp_path / "run.log").write_text("curl -H 'Authorization: Bearer abcdefSECRET123'\nexport HF_TOKEN=hf_"
                                      "abcdefghijklmnopqrstuvwx\n" + OK)
    proc = subprocess.run([sys.executable, "-m", "losslens", "analyze", "run.log"], cwd=tmp_path,
                          capture_output=True, text=True, env={"COLUMNS": "200", "PATH": "/usr/bin"},
                          check=True)
    assert "abcdefSECRET123" not in proc.stdout and "hf_abcdef" not in proc.stdout
    assert "Authorization: Bearer ***" in proc.stdout


def test_folder_walk_does_not_follow_links_out(tmp_path: Path) -> None:
    outside = tmp_path / "outside.log"
    outside.write_text(OK)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "train.log").write_text(OK)
    (run_dir / "escape.log").symlink_to(outside)
    (run_dir / "same.log").symlink_to(run_dir / "train.log")
    from losslens.discover import expand

    walk = expand([str(run_dir)])
    assert [Path(t.path).name for t in walk.targets] == ["same.log", "train.log"]
    assert walk.ignored == [(str(run_dir / "escape.log"), "a link to a file outside the folder (name it to "
                                                          "read it)")]


@pytest.mark.slow
def test_watch_refuses_a_gzip_log(tmp_path: Path) -> None:
    from tests.conftest import FIXTURES

    code, err = run("watch", str(FIXTURES / "seed004_dflash.gz.bin"), cwd=tmp_path)
    assert code == 2 and "cannot follow a gzip-compressed log" in err


def test_splitter_joins_pieces_once_and_cuts_long_lines() -> None:
    """watch's stdin reader: pieces of a long line are kept, not re-scanned on every read (it was
    quadratic: an 8 MB line took 10 s, 50 MB over 300 s), and a line is cut at max_line bytes."""
    from losslens.watch import Splitter, complete_lines

    data = b"step=1 loss=2\r\nabc\rdef\n" + b"x" * 5000 + b"\nstep=2 loss=nan\n\r"
    split = Splitter(max_line=1000)
    out: list[bytes] = []
    for i in range(0, len(data), 7):
        out += split.feed(data[i:i + 7])
    whole, rest = complete_lines(data)
    assert [x for x in out if not x.startswith(b"x")] == [x for x in whole if not x.startswith(b"x")]
    assert out[3] == b"x" * 1000 + b" [line cut at 1000 bytes]" and len(out) == len(whole)
    assert split.rest() == rest == b"\r" and split.size <= 1000


@pytest.mark.parametrize("change", ["truncate", "rewrite"])
def test_a_log_truncated_or_rewritten_while_read_is_exit_2(tmp_path: Path, change: str) -> None:
    import os

    from losslens.errors import InputError
    from losslens.logs.source import open_source

    path = tmp_path / "run.log"
    path.write_text("".join(f"step={i} loss={2.0 + i % 7 / 100:.2f}\n" for i in range(600_000)))
    src = open_source(path)
    chunks = src.chunks()
    next(chunks)  # the first 5 MiB read...
    if change == "truncate":
        os.truncate(path, 1000)  # ...then the writer starts over
    else:
        path.write_text("".join(f"iter {i}: loss {3.0:.3f}\n" for i in range(700_000)))
    with pytest.raises(InputError, match="truncated while being read" if change == "truncate"
                       else "rewritten while being read"):
        list(chunks)
    src.close()


def test_a_log_that_grows_while_read_is_a_prefix(tmp_path: Path) -> None:
    from losslens.logs.source import open_source

    path = tmp_path / "run.log"
    path.write_text("".join(f"step={i} loss=2.0\n" for i in range(600_000)))
    src = open_source(path)
    chunks = src.chunks()
    first = next(chunks)
    with open(path, "a") as h:
        h.write("step=600000 loss=2.0\n")
    assert sum(c.count(b"\n") for c in [first, *chunks]) >= 600_000
    src.close()


def test_a_record_too_wide_to_hold_is_a_skipped_line(tmp_path: Path) -> None:
    """One 2.8 MB line of 200,000 keys among ordinary ones took 24 GB (and was killed): now it is
    one skipped line with its reason, in key=value, JSON Lines and CSV alike (the key=value line,
    of more than a MiB, is not even read: see base.LONG_LINE)."""
    wide = " ".join(f"k{j}={j}" for j in range(200_000))
    lines = [f"step={i} loss={3 - i / 100:.3f}" for i in range(40)]
    (tmp_path / "kv.log").write_text("\n".join(lines[:20] + [f"step=20 loss=2.8 {wide}"] + lines[21:]) + "\n")
    row = {f"k{j}": j for j in range(5000)}
    (tmp_path / "m.jsonl").write_text("\n".join(
        [json.dumps({"step": i, "loss": 3 - i / 100}) for i in range(20)]
        + [json.dumps({"step": 20, "loss": 2.8, **row})]) + "\n")
    for name in ("kv.log", "m.jsonl"):
        log = read_log(tmp_path / name)
        reason = TOO_LONG if name == "kv.log" else "more than 4,096 fields in one record"
        assert dict(log.lines.skipped) == {reason: 1}, name
        assert 20 not in log.train["step"].to_list() and log.train.height == 39 - 19 * (name == "m.jsonl")
        ln, text = log.lines.examples[reason]
        assert ln == 21 and text.startswith(("step=20 loss=2.8 k0=0", '{"step": 20'))


def test_a_json_array_is_read_record_by_record(tmp_path: Path) -> None:
    recs = [{"_step": i, "train/loss": 3 - i / 1000, "lr": None if i % 7 else 1e-4} for i in range(3000)]
    recs[1500]["train/loss"] = float("nan")
    (tmp_path / "h.json").write_text(json.dumps(recs, indent=1))
    log = read_log(tmp_path / "h.json")
    assert log.format == "json-records" and log.train.height == 3000
    assert log.train["step"].to_list() == list(range(3000))
    report = analyze(log)
    (nan,) = [f for f in report.findings if f.kind == "nonfinite"]
    assert nan.start_step == 1500
    split = {"columns": ["_step", "loss"], "data": [[i, 2 - i / 100] for i in range(50)]}
    (tmp_path / "s.json").write_text(json.dumps(split))
    assert read_log(tmp_path / "s.json", format="json-records").train.height == 50


def test_a_line_past_8_mib_is_cut_and_counted(tmp_path: Path) -> None:
    """Data without line ends (a forced --format on a binary-ish dump, a 200 MB line) cannot fill
    memory: the line is cut at 8 MiB, still one line, accounted; reading stays linear."""
    ok = [f"step={i} loss={3 - i / 100:.3f}" for i in range(30)]
    long = "x" * (20 << 20)
    path = tmp_path / "run.log"
    path.write_text("\n".join(ok[:10] + [long] + ok[10:]) + "\n" + long)
    log = read_log(path, format="kv")
    assert log.lines.as_dict() == {"total": 32, "parsed": 30, "skipped": 2, "blank": 0}
    ln, text = log.lines.examples[TOO_LONG]
    assert ln == 11 and text == "x" * 160
    assert log.train["step"].to_list() == list(range(30))


def _nan_log(n: int = 3000, nan_at: int = 2500) -> list[str]:
    lines = list(synth.dflash_lines(n))
    lines[nan_at] = lines[nan_at].replace(lines[nan_at].split()[3], "loss=nan")
    return lines


@pytest.mark.parametrize(("where", "hole"), [
    ("start", 100_000),  # copytruncate, a writer that does not append: the old size as a hole
    ("start", 3_000_000),  # a hole past the sniffed head
    ("between", 8192),  # a crash: blocks the disk never got, then the restarted run appends
    ("end", 65536),  # a crash at the end: the file's size written, not its last blocks
])
@pytest.mark.parametrize("small", [True, False])
def test_a_hole_of_nul_bytes_is_passed_over(tmp_path: Path, monkeypatch, where: str, hole: int,
                                            small: bool) -> None:
    """A log with a run of NUL bytes was 'binary data' (exit 2, nothing read): the NULs that open a
    line are passed over with a note, the lines read, a NaN after the hole found."""
    if not small:
        monkeypatch.setattr("losslens.logs.base.SMALL_BYTES", 0)  # the column-wise path too
    lines = _nan_log()
    text = [("\n".join(part) + "\n").encode() for part in (lines[:1000], lines[1000:])]
    data = {"start": b"\x00" * hole + text[0] + text[1], "between": text[0] + b"\x00" * hole + text[1],
            "end": text[0] + text[1] + b"\x00" * hole}[where]
    path = tmp_path / "run.log"
    path.write_bytes(data)
    log = read_log(path)
    assert log.train.height == 3000 and not log.lines.skipped
    assert log.lines.total == 3000 + (where == "end")  # (a last line, all hole, without a newline: blank)
    assert f"{hole:,} NUL bytes at line starts passed over (a hole in the file" in log.notes[0]
    nan = [f for f in analyze(log).findings if f.kind == "nonfinite"]
    assert nan and nan[0].start_step == int(lines[2500].split()[2].removeprefix("step="))


def test_a_nul_inside_a_line_skips_that_line(tmp_path: Path) -> None:
    lines = [f"step={s} loss={2 - s / 100}" for s in range(30)]
    lines[10] = "step=10 loss=1.\x00\x00\x00"  # a hole that starts mid-line: the value is cut
    path = tmp_path / "run.log"
    path.write_text("\n".join(lines) + "\n")
    log = read_log(path)
    assert log.train.height == 29 and dict(log.lines.skipped) == {"binary data": 1}
    code, _ = run("check", "run.log", cwd=tmp_path)
    assert code == 0


def _gz(text: str) -> bytes:
    import gzip

    return gzip.compress(text.encode(), mtime=0)


def test_a_gzip_log_cut_short_is_read_up_to_the_cut(tmp_path: Path) -> None:
    """A .gz cut short (a full disk, an interrupted copy or rotation) was 'cannot read' (exit 2,
    nothing read): what decompresses is read, the NaN in it found, and `check` says the file was
    cut short."""
    lines = _nan_log(20000, 15000)
    whole = _gz("\n".join(lines) + "\n")
    path = tmp_path / "run.log.gz"
    path.write_bytes(whole[: len(whole) * 9 // 10])
    log = read_log(path)
    assert 15000 < log.train.height < 20000 and log.lines.total == log.train.height + 1  # + the cut line
    assert log.lost[0].startswith("the gzip data ends before its end marker, after ")
    assert log.lost[0] in log.notes
    code, err = run("check", "run.log.gz", cwd=tmp_path)  # read short: not passed, whatever it found
    assert code == 2 and "run.log.gz: read short: the gzip data ends before its end marker" in err
    code, err = run("check", "run.log.gz", "--allow-partial", cwd=tmp_path)  # judged on what was read
    assert code == 1 and "run.log.gz: note: the gzip data ends before its end marker" in err
    damaged = bytearray(whole)
    damaged[len(whole) // 2:len(whole) // 2 + 64] = b"\xff" * 64  # damaged in the middle
    path.write_bytes(bytes(damaged))
    log = read_log(path)
    assert 5000 < log.train.height < 20000 and "the gzip data is damaged within its first" in log.lost[0]


def test_gzip_members_and_padding(tmp_path: Path) -> None:
    """Members one after another (`cat a.gz b.gz`) and zeros after the last are one whole log."""
    lines = [f"step={s} loss={2 - s / 1000}" for s in range(1000)]
    path = tmp_path / "run.log.gz"
    path.write_bytes(_gz("\n".join(lines[:600]) + "\n") + _gz("\n".join(lines[600:]) + "\n") + b"\x00" * 512)
    log = read_log(path)
    assert log.train.height == 1000 and not log.lost


def test_a_trainer_state_cut_short_is_read_up_to_the_cut(tmp_path: Path) -> None:
    """trainer_state.json cut short while written (a crash mid-save) was 'invalid JSON' (exit 2,
    nothing read): the log_history entries before the cut are read, and `check` says so."""
    hist = [{"loss": round(2.0 - i / 100, 3), "step": i * 10, "epoch": i / 100} for i in range(1, 60)]
    hist[40]["grad_norm"] = float("nan")
    whole = json.dumps({"best_metric": None, "log_history": hist, "max_steps": 600}, indent=2)
    path = tmp_path / "trainer_state.json"
    path.write_text(whole[: int(len(whole) * 0.8)])
    log = read_log(path)
    assert log.format == "trainer-state" and 41 <= log.train.height < 59
    assert log.lost[0].startswith("not JSON from line ") and "log_history entries before it" in log.lost[0]
    code, err = run("check", "trainer_state.json", cwd=tmp_path)
    assert code == 2 and "trainer_state.json: read short: not JSON from line" in err
    code, err = run("check", "trainer_state.json", "--allow-partial", cwd=tmp_path)
    assert code == 1 and "trainer_state.json: note: not JSON from line" in err
    path.write_text(whole.replace('"loss": 1.99', '"loss": 1.99"', 1))  # the first entry damaged
    code, err = run("check", "trainer_state.json", cwd=tmp_path)
    assert code == 2 and "invalid JSON" in err  # nothing before it: still an error
