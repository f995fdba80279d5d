"""Nothing read silently short (the issue of that name): a damaged or cut file is a read error the
gate does not pass; standard input, FIFOs, signals, hostile settings and replay inputs end with one
line and an exit code, never a traceback or a wait for ever. Each test fails on the code before."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import FIXTURES

NAN = FIXTURES / "nanogpt_nan.log"


def run(*args: str, stdin: bytes | None = None, cwd: Path | None = None, timeout: float = 60
        ) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "losslens", *args], input=stdin, capture_output=True,
                          cwd=cwd, env={**os.environ, "COLUMNS": "120"}, timeout=timeout)
    out = subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.decode(errors="replace"),
                                      proc.stderr.decode(errors="replace"))
    assert "Traceback" not in out.stderr, out.stderr
    return out


# 1. TensorBoard event files: a flipped byte, a cut


@pytest.fixture(scope="module")
def event_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("tensorboard")
    from torch.utils.tensorboard import SummaryWriter

    folder = tmp_path_factory.mktemp("tb")
    w = SummaryWriter(str(folder))
    for step in range(300):
        w.add_scalar("train/loss", float("nan") if step == 250 else 2.0 - step / 300, step)
    w.close()
    (path,) = folder.glob("events.out.tfevents.*")
    return path


@pytest.mark.slow
def test_a_damaged_event_file_is_read_around_the_damage_and_said(event_file: Path, tmp_path: Path) -> None:
    assert run("check", str(event_file)).returncode == 1  # the whole file: the NaN at step 250
    data = bytearray(event_file.read_bytes())
    flipped = tmp_path / "events.out.tfevents.flipped"
    data[len(data) // 3] ^= 0xFF  # one byte of a record's data, a third of the way in
    flipped.write_bytes(bytes(data))
    proc = run("check", str(flipped))
    assert proc.returncode == 2  # the NaN is found, but what the damage hid is not known
    assert any(f"read short: {why}" in proc.stderr for why in ("1 record(s) damaged", "damaged at offset"))
    assert run("check", str(flipped), "--allow-partial").returncode == 1  # the records after it were read
    cut = tmp_path / "events.out.tfevents.cut"
    # cut inside a record (a cut that falls between two records leaves a whole, shorter file)
    ends = _record_ends(event_file.read_bytes())
    cut.write_bytes(event_file.read_bytes()[: ends[len(ends) // 3] + 7])
    proc = run("check", str(cut))
    assert proc.returncode == 2 and "read short: cut short: " in proc.stderr
    assert run("analyze", str(cut), "--json").returncode == 2
    report = json.loads(run("analyze", str(cut), "--json", "--allow-partial").stdout)
    assert report["read_errors"] and report["read_errors"][0].startswith("cut short")
    assert 90 <= report["steps"]["count"] < 110


def _record_ends(data: bytes) -> list[int]:
    """Where each TFRecord of an event file ends."""
    import struct

    at, ends = 0, []
    while at + 12 <= len(data):
        (length,) = struct.unpack_from("<Q", data, at)
        at += 12 + length + 4
        ends.append(at)
    return ends


@pytest.mark.slow
def test_scan_gives_a_log_read_short_its_error(event_file: Path, tmp_path: Path) -> None:
    import polars as pl

    (tmp_path / "runs" / "a").mkdir(parents=True)
    (tmp_path / "runs" / "a" / event_file.name).write_bytes(event_file.read_bytes()[:3000])
    proc = run("scan", str(tmp_path / "runs"), "--out", str(tmp_path / "t.parquet"), "-q")
    assert proc.returncode == 2
    row = pl.read_parquet(tmp_path / "t.parquet").filter(pl.col("row") == "log").row(0, named=True)
    assert row["status"] == "ERROR" and "read short: cut short" in row["error"]


# 7. other partial reads


def test_partial_reads_are_errors_unless_allowed(tmp_path: Path) -> None:
    lines = [f"step={i} loss={2 - i / 400:.4f}" for i in range(400)]
    lines[380] = "step=380 loss=nan"
    data = gzip.compress(("\n".join(lines) + "\n").encode())
    (tmp_path / "cut.log.gz").write_bytes(data[: len(data) * 3 // 4])
    proc = run("check", str(tmp_path / "cut.log.gz"))
    assert proc.returncode == 2 and "read short: the gzip data ends before its end marker" in proc.stderr
    hist = [{"loss": 2 - i / 100, "step": i * 10} for i in range(1, 60)]
    doc = json.dumps({"log_history": hist}, indent=1)
    (tmp_path / "trainer_state.json").write_text(doc[: len(doc) // 2])
    proc = run("check", str(tmp_path / "trainer_state.json"))
    assert proc.returncode == 2 and "read short: not JSON from line" in proc.stderr
    assert run("check", str(tmp_path / "trainer_state.json"), "--allow-partial").returncode == 0
    (tmp_path / "dup.csv").write_text("step,loss,loss\n" + "".join(
        f"{i},{2 - i / 100},{'nan' if i == 30 else 2 - i / 100}\n" for i in range(50)))
    proc = run("check", str(tmp_path / "dup.csv"))
    assert proc.returncode == 1 and "error nonfinite [loss_2] loss_2 is NaN from step 30" in proc.stdout


# 4. standard input


@pytest.mark.parametrize("data,why", [
    (b"\x00\x01\x02binary", "binary data (NUL byte at offset 0), not a text log"),
    (b"", "no records read in 0 lines"),
    (b"\x1f\x8bgarbage", "the gzip data is damaged"),
    ("step=1 loss=2.0\n".encode("utf-16-le") * 3,
     "binary data (NUL byte at offset 1), not a text log (UTF-16 text without a byte-order mark? convert it"),
])
def test_watch_on_unreadable_standard_input_is_exit_2(data: bytes, why: str) -> None:
    proc = run("watch", "-", stdin=data)
    assert proc.returncode == 2 and why in proc.stderr


def test_watch_reads_standard_input_as_check_does() -> None:
    text = "".join(f"step={i} loss={2 - i / 100:.3f}\n" for i in range(40)) + "step=40 loss=nan\n"
    for data in (text.encode("utf-16"), gzip.compress(text.encode())):
        assert run("check", "-", stdin=data).returncode == 1
        assert run("watch", "-", stdin=data).returncode == 1


def test_a_stdin_read_error_is_put_on_the_queue_not_raised_in_a_thread(monkeypatch) -> None:
    import errno
    import queue

    from losslens.errors import InputError
    from losslens.watch import follower

    def broken(fd: int, n: int) -> bytes:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(follower.os, "read", broken)
    q: queue.Queue = queue.Queue()
    follower.stdin_lines(q, fd=0)
    item = q.get_nowait()
    assert isinstance(item, InputError)
    assert str(item) == "<stdin>: cannot read standard input: Input/output error"


# 5. FIFOs and other special files


def test_a_fifo_is_never_waited_on(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "train.log").write_bytes(NAN.read_bytes())
    os.mkfifo(run_dir / "pipe.log")
    proc = run("check", str(tmp_path), "-v", timeout=30)
    assert proc.returncode == 1
    assert (f"losslens: passed over {run_dir}/pipe.log: a FIFO (named pipe), not a regular file "
            "(`losslens check - < FILE` reads it)") in proc.stderr
    named = run("check", str(run_dir / "pipe.log"), timeout=30)
    assert named.returncode == 2 and "a FIFO (named pipe), not a regular file: read it from standard input" \
        in named.stderr
    assert run("scan", str(tmp_path), "--out", str(tmp_path / "t.parquet"), "-q", timeout=60).returncode == 1
    os.mkfifo(tmp_path / "c.toml")
    config = run("check", str(NAN), "--config", str(tmp_path / "c.toml"), timeout=30)
    assert config.returncode == 2
    assert "cannot read config: a FIFO (named pipe), not a regular file" in config.stderr


# 6. signals as a supervisor sends them


@pytest.mark.slow
@pytest.mark.parametrize("sig,code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_a_signal_to_the_main_process_ends_the_workers_too(tmp_path: Path, sig: int, code: int) -> None:
    bigger = "".join(f"step={i} loss={2 - i / 1e5:.5f}\n" for i in range(60_000))
    for i in range(40):
        (tmp_path / f"r{i}.log").write_text(bigger)
    p = subprocess.Popen([sys.executable, "-m", "losslens", "check", str(tmp_path), "-j", "2"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(2.5)
    p.send_signal(sig)
    started = time.monotonic()
    _, err = p.communicate(timeout=60)  # returns only once every holder of the pipes is gone
    assert p.returncode == code and time.monotonic() - started < 20
    assert err.splitlines()[-1].startswith("interrupted: ") and f"exit {code} (stopped after" in err


# 8. no traceback on hostile settings and replay inputs


@pytest.mark.parametrize("content,why", [
    (b"\x00\x01\xff\xfe", "not UTF-8 text (byte 2): a settings file is TOML"),
    ('fail_on = "info"\n'.encode("utf-16"), "the file is UTF-16; TOML is UTF-8 (save it as UTF-8)"),
    (("a = " + "[" * 100_000 + "]" * 100_000 + "\n").encode(), "invalid TOML: nested too deeply to read"),
    (b"[tool]\nlosslens = 5\n", "[tool.losslens] must be a table of settings, not int 5"),
    (b'fail_on = "' + b"x" * 20_000 + b'"\n', "bad value for 'fail_on': 'xxxx"),
])
def test_a_bad_settings_file_is_one_short_line(tmp_path: Path, content: bytes, why: str) -> None:
    (tmp_path / "c.toml").write_bytes(content)
    proc = run("check", str(NAN), "--config", str(tmp_path / "c.toml"))
    assert proc.returncode == 2 and why in proc.stderr and len(proc.stderr) < 500
    assert run("check", str(NAN), "--config", "/dev/zero").stderr == \
        "losslens: error: /dev/zero: cannot read config: a device, not a regular file\n"


def test_an_implicit_utf16_pyproject_is_said_not_ignored(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_bytes('[tool.losslens]\nfail_on = "info"\n'.encode("utf-16"))
    proc = run("check", str(NAN), cwd=tmp_path)
    assert proc.returncode == 2 and "pyproject.toml: the file is UTF-16" in proc.stderr


@pytest.mark.parametrize("name,content,why", [
    ("bin.jsonl", b"\x00\x01\x02" * 10, "bin.jsonl:1: not JSON"),
    ("big.jsonl", b'{"step": 1180591620717411303424, "lengths": [1, 2]}\n', "is out of range"),
    ("deep.jsonl", b'{"step": 1, "lengths": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n",
     "not JSON: nested too deeply to read"),
    ("garbage.npz", b"PK\x03\x04garbage" * 10, "cannot read the arrays (not a NumPy .npz archive?)"),
])
def test_bad_replay_records_are_one_line(tmp_path: Path, name: str, content: bytes, why: str) -> None:
    (tmp_path / name).write_bytes(content)
    proc = run("replay", "--batches", str(tmp_path / name), "--log", str(FIXTURES / "bucketed_run.log"))
    assert proc.returncode == 2 and why in proc.stderr


def test_odd_json_values_and_keys_never_crash_a_report(tmp_path: Path) -> None:
    lines = [json.dumps({"step": i, "loss": 2 - i / 100}) for i in range(40)]
    lines[10] = '{"step": 10, "loss": [1, 2]}'
    lines[5] = '{"step": 5, "loss": 1.9, "\\ud800bad": 3}'
    (tmp_path / "odd.jsonl").write_text("\n".join(lines) + "\n")
    assert run("analyze", str(tmp_path / "odd.jsonl")).returncode == 0
    assert run("analyze", str(tmp_path / "odd.jsonl"), "--html", str(tmp_path / "p.html")).returncode == 0


def test_a_damaged_scan_state_starts_over(tmp_path: Path) -> None:
    (tmp_path / "runs" / "a").mkdir(parents=True)
    (tmp_path / "runs" / "a" / "train.log").write_bytes(NAN.read_bytes())
    for state in (b"\x00\x01\x02", b"[" * 100_000):
        (tmp_path / "t.scan-state.jsonl").write_bytes(state)
        assert run("scan", str(tmp_path / "runs"), "--out", str(tmp_path / "t.parquet"), "-q").returncode == 1


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["formats"], ["detectors"], ["check", str(NAN)]])
def test_a_full_device_is_one_line(args: list[str]) -> None:
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "losslens", *args], stdout=full, stderr=subprocess.PIPE,
                              text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr == "losslens: error: cannot write the output: No space left on device\n"


# 9-11. secrets, links, messages


def test_url_credentials_and_key_lines_are_masked(tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    log.write_text("connecting to postgres://admin:s3cr3t@db.internal:5432/runs\n"
                   "-----BEGIN RSA PRIVATE KEY-----\n"
                   "MIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM9Oi3bXcG0p8YYAbCdEfGhIjKlMnOpQ\n"
                   + "".join(f"step={i} loss={2 - i / 100:.3f}\n" for i in range(60)))
    text = run("analyze", str(log)).stdout
    page = tmp_path / "p.html"
    run("analyze", str(log), "--html", str(page))
    assert "postgres://admin:***@db.internal" in text
    for shown in (text, page.read_text()):
        assert "s3cr3t" not in shown and "MIIEpAIBAAKCAQEA3Tz2mr7SZ" not in shown


def test_links_out_of_a_folder_are_named_and_dangling_links_and_loops_told_apart(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (tmp_path / "outside.log").write_bytes(NAN.read_bytes())
    (run_dir / "x.log").symlink_to(tmp_path / "outside.log")
    (run_dir / "train.log").write_text("".join(f"step={i} loss={2 - i / 100:.3f}\n" for i in range(60)))
    proc = run("check", str(run_dir))
    assert (f"losslens: passed over {run_dir}/x.log: a link to a file outside the folder (name it to read "
            "it)") in proc.stderr
    (tmp_path / "loop1").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop1")
    (tmp_path / "dangling.log").symlink_to(tmp_path / "nothere.log")
    loop = run("check", str(tmp_path / "loop1")).stderr
    assert loop.endswith("a link loop: the link leads back to itself, never to a file\n")
    assert "a dangling link: what it points to" in run("check", str(tmp_path / "dangling.log")).stderr


def test_a_huge_first_line_does_not_hide_the_format(tmp_path: Path) -> None:
    log = tmp_path / "big_first.log"
    with open(log, "w") as f:
        f.write("x" * (12 << 20) + "\n")  # past the 8 MiB the format is looked for in
        f.write("".join(f"step={i} loss={2 - i / 100:.3f}\n" for i in range(40)) + "step=40 loss=nan\n")
    proc = run("check", str(log))
    assert proc.returncode == 1 and "nonfinite" in proc.stdout
