"""Bad input: one clear line on stderr naming the file (and line), exit 2, never a traceback."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from losslens import read_log
from losslens.errors import LossLensError


def run(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "losslens", *args], input=stdin,
                          capture_output=True, check=False)


def one_error_line(proc) -> str:
    err = proc.stderr.decode()
    assert "Traceback (most recent call last)" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.slow
@pytest.mark.parametrize(("content", "message"), [
    (None, "no such file"),
    (b"", "empty file: no lines to read"),
    (b"\x7fELF\x02\x01\x01\x00\x00\x00binary", "binary data (NUL byte at offset 7), not a text log"),
    ("step=1 loss=2\n".encode("utf-16-le"), "UTF-16 text without a byte-order mark? convert it to UTF-8"),
    (b"Traceback (most recent call last):\n  File \"x.py\", line 1\nValueError: boom\n",
     "no known log format recognised"),
    (b"\xff\xfe\xfa not utf8 at all \xc3\x28\n", "no known log format recognised"),
])
def test_bad_files(tmp_path: Path, content: bytes | None, message: str) -> None:
    path = tmp_path / "bad.log"
    if content is not None:
        path.write_bytes(content)
    proc = run("check", str(path))
    assert proc.returncode == 2
    line = one_error_line(proc)
    assert line.startswith(f"losslens: error: {path}: ")
    assert message in line


@pytest.mark.slow
@pytest.mark.parametrize("codec", ["utf-16", "utf-16-be-bom"])
def test_utf16_with_a_byte_order_mark_reads(tmp_path: Path, codec: str) -> None:
    """Windows PowerShell 5's `python train.py > train.log` writes UTF-16 with a byte-order mark
    (and CRLF): that was 'binary data ... convert it'. It is read, the NaN found at its line."""
    text = "".join(f"step={s} loss={'nan' if s == 70 else f'{2 - s / 100:.3f}'} lr=1e-4\r\n"
                   for s in range(100))
    path = tmp_path / "train.log"
    path.write_bytes(text.encode("utf-16") if codec == "utf-16" else b"\xfe\xff" + text.encode("utf-16-be"))
    proc = run("check", str(path))
    assert proc.returncode == 1 and b"Traceback" not in proc.stderr
    assert f"{path}:71: step 70: error nonfinite [loss]" in proc.stdout.decode()


def _config(folder: Path, text: str) -> Path:
    path = folder / "losslens.toml"
    path.write_text(text + "\n")
    return path


@pytest.mark.slow
def test_directory_and_unknown_format(tmp_path: Path) -> None:
    proc = run("analyze", str(tmp_path))  # a folder with no log in it
    assert proc.returncode == 2 and "no log files found in" in one_error_line(proc)
    log = tmp_path / "a.log"
    log.write_text("step=1 loss=2.0\n")
    # an unknown format or level: exit 2 and the choices named, no traceback
    proc = run("analyze", "--format", "nope", str(log))
    assert proc.returncode == 2
    assert "unknown format 'nope' (known: auto, trainer-state, json-records" in one_error_line(proc)
    proc = run("check", "--fail-on", "fatal", str(log))
    assert proc.returncode == 2 and b"'fatal' is not one of 'info', 'warning', 'error'" in proc.stderr
    assert b"Traceback" not in proc.stderr
    proc = run("analyze", "--config", str(_config(tmp_path, 'format = "nope"')), str(log))
    assert proc.returncode == 2 and "unknown format 'nope'" in one_error_line(proc)


@pytest.mark.slow
def test_invalid_trainer_state_names_the_line(tmp_path: Path) -> None:
    """Damaged before its first log_history entry ends: an error naming the line (with entries
    before the damage, those are read: tests/functional/test_faults.py)."""
    path = tmp_path / "trainer_state.json"
    path.write_text('{\n  "log_history": [\n    {"loss": 1.0,\n     "step": \n')
    proc = run("check", str(path))
    assert proc.returncode == 2
    assert one_error_line(proc).startswith(f"losslens: error: {path}:5: invalid JSON")


def test_partly_good_file_parses_the_good_part(tmp_path: Path) -> None:
    path = tmp_path / "mixed.log"
    junk = "x" * 10_000_000  # a 10 MB single line
    path.write_bytes(b"step=1 loss=2.0 acc=0.1\n\xff\xfe garbage\n" + junk.encode() +
                     b"\nTraceback (most recent call last):\nstep=2 loss=1.9 acc=0.1\nstep=3 loss=1.")
    log = read_log(path)
    assert log.train["step"].to_list() == [1, 2, 3]  # the truncated last line still has a value
    assert log.train["loss"].to_list() == [2.0, 1.9, 1.0]
    acc = log.lines
    assert (acc.total, acc.parsed, acc.n_skipped, acc.blank) == (6, 3, 3, 0)
    assert acc.skipped["traceback or warning"] == 1


@pytest.mark.slow
def test_stdin_dash() -> None:
    proc = run("check", "-", stdin=b"step=1 loss=2.0\nstep=2 loss=1.5\n")
    assert proc.returncode == 0
    assert "<stdin>: 0 finding(s)" in proc.stderr.decode()


TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=300)
LINE = st.one_of(
    TEXT,
    st.builds(lambda s, v: f"step={s} loss={v}", st.integers(-5, 10**6), st.floats(allow_nan=True)),
    st.builds(lambda s, v: f"iter {s}: loss {v}, time 12.0ms", st.integers(0, 999), st.floats()),
    st.builds(lambda d: str(d), st.dictionaries(st.sampled_from(["loss", "step", "lr", "eval_loss"]),
                                                st.one_of(st.floats(), st.integers(), TEXT))),
    st.just("{\"step\": 1, \"loss\": NaN}"),
    st.just(""),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(LINE, max_size=40), raw=st.binary(max_size=64), newline=st.booleans())
def test_fuzz_never_crashes(tmp_path: Path, lines: list[str], raw: bytes, newline: bool) -> None:
    path = tmp_path / "fuzz.log"
    data = "\n".join(lines).encode("utf-8", "surrogatepass") + raw + (b"\n" if newline else b"")
    path.write_bytes(data)
    try:
        log = read_log(path)
    except LossLensError:
        return
    acc = log.lines
    assert acc.parsed + acc.n_skipped + acc.blank == acc.total
    # a file with no '\n' and a '\r' has old Mac line ends ('\r'), as the reader reads it
    end = b"\r" if b"\r" in data and b"\n" not in data else b"\n"
    assert acc.total == data.count(end) + (0 if data.endswith(end) else 1)


@pytest.mark.slow
def test_unwritable_outputs_are_one_line_before_any_work(tmp_path: Path) -> None:
    seed = str(Path(__file__).parents[1] / "fixtures" / "seed004_dflash.log")
    missing = tmp_path / "no" / "page.html"
    proc = run("analyze", seed, "--html", str(missing))
    assert proc.returncode == 2
    assert one_error_line(proc) == f"losslens: error: cannot write {missing}: no folder {missing.parent}"
    proc = run("analyze", seed, "--plot", str(tmp_path))
    assert proc.returncode == 2 and one_error_line(proc).endswith("it is a folder")
    assert not missing.parent.exists()


@pytest.mark.slow
@pytest.mark.parametrize(("args", "message"), [
    (["--optimize-bounds", "0"], "--optimize-bounds K takes 1 to 64 buckets, got 0"),
    (["--optimize-bounds", "65"], "--optimize-bounds K takes 1 to 64 buckets, got 65"),
    (["--null-seeds", "0"], "--null-seeds must be >= 1, got 0"),
    (["--grad-accum", "0"], "--grad-accum must be >= 1, got 0"),
    (["--out", "/nonexistent-folder/b.csv"], "cannot write /nonexistent-folder/b.csv: no folder"),
])
def test_replay_bad_options(tmp_path: Path, args: list[str], message: str) -> None:
    pytest.importorskip("torch")
    import numpy as np

    np.save(tmp_path / "l.npy", np.array([100, 200, 300]))
    proc = run("replay", "--lengths", str(tmp_path / "l.npy"), *args)
    assert proc.returncode == 2 and message in one_error_line(proc)


@pytest.mark.slow
def test_replay_fractional_lengths(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    import numpy as np

    np.save(tmp_path / "l.npy", np.array([100.0, 200.5, 300.25]))
    proc = run("replay", "--lengths", str(tmp_path / "l.npy"))
    assert proc.returncode == 2
    assert one_error_line(proc) == (f"losslens: error: {tmp_path / 'l.npy'}: length 200.5 at sample 1 is "
                                    "not a whole number of tokens (2 such samples)")


HUGE = "99999999999999999999"  # a step past int64: a damaged line, or digits glued together


@pytest.mark.parametrize(("name", "text", "records"), [
    ("titan.log", f"step: 1  loss: 2.5\nstep: {HUGE}  loss: 2.5\nstep: 3  loss: 2.4\n", 3),
    ("mega.log", f" iteration        1/   10000 | lm loss: 2.5 |\n"
                 f" iteration {HUGE}/   10000 | lm loss: 2.5 |\n"
                 f" validation loss at iteration {HUGE} | lm loss value: 2.9 |\n", 2),
    ("nano.log", f"iter 1: loss 2.5, time 10ms, mfu 1%\niter {HUGE}: loss 2.4, time 10ms, mfu 1%\n"
                 f"step {HUGE}: train loss 2.1, val loss 2.2\n", 2),
    ("modded.log", f"step:1/10 train_loss:2.5 train_time:1ms step_avg:1ms\nstep:{HUGE}/10 train_loss:2.4 "
                   f"train_time:1ms step_avg:1ms\ns:{HUGE} trl:2.3\n", 3),
    ("colon.log", f"Step {HUGE}/100 | loss: 2.5 | lr: 1e-4\nStep 2/100 | loss: 2.4 | lr: 1e-4\n", 2),
    ("c.csv", f"step,loss\n{HUGE},2.5\n2,2.4\n", 2),
    ("kv.log", f"step={HUGE} loss=2.5\nstep=2 loss=2.4\n", 2),
])
def test_step_past_int64_is_no_step(tmp_path: Path, name: str, text: str, records: int) -> None:
    """A step too long for int64 made six readers end in a polars error (a traceback from `check`):
    it is no step, like a missing one (the step before it, with a note)."""
    path = tmp_path / name
    path.write_text(text)
    log = read_log(path)
    assert log.train.height == records
    assert any("without a step number" in n or "no step numbers" in n for n in log.notes)


LONG = "1" * 5000  # past int()'s 4,300-digit limit for text


@pytest.mark.parametrize("line", [
    f"Step {LONG} | loss: 2.5", f"Epoch {LONG} Step 2: loss = 2.3", f"Epoch {LONG[:400]} Step 2: loss = 2.3",
    f"Train: {LONG} [ 50/1251 (4%)]  Loss: 2.5 (2.5)", f"Epoch(train)  [{LONG}][ 50/1833]  loss: 2.5",
    f"Epoch [{LONG}][100/62598]\tlr: 1e-4, loss: 2.5", f"1|{LONG}|Loss: 1.55:  2%|",
    f"iter {LONG}: loss 2.5, time 3ms, mfu 1%", f"step {LONG}: train loss 2.1, val loss 2.2",
    f" iteration {LONG}/ 10 | lm loss: 2.5 |", f" validation loss at iteration {LONG} | lm loss value: 2.9 |",
    f"step:{LONG}/100 train_loss:2.5", f"s:{LONG} trl:2.3",
    f"step:  {LONG}  loss:  2.5  memory:  9.12GiB(9.60%)",
    f"{{'loss': 2.5}}  5%| {LONG}/{LONG} [00:01<00:10, 3.2it/s]",
    f"Epoch 1: 5%|x| {LONG}/100 [00:01<00:10, 3.2it/s, loss=2.5]", f"1701361200123 2.5 {LONG}",
])
@pytest.mark.parametrize("around", ["Step 1 | loss: 2.0", "iter 1: loss 2.0, time 3ms, mfu 1%",
                                    " iteration 1/ 10 | lm loss: 2.5 |", "step:1/100 train_loss:2.5",
                                    "{'loss': 2.5}", "step:  1  loss:  2.5  memory:  9.12GiB(9.60%)",
                                    "1701361200123 2.5 1"])
def test_a_number_too_long_for_int_is_no_traceback(tmp_path: Path, line: str, around: str) -> None:
    """A step, epoch or bar count of 5,000 digits (a damaged line) ended eight readers in a
    ValueError traceback (int()'s 4,300-digit limit for text), a 400-digit epoch the colon reader
    in an OverflowError: such a number is past int64, no step, like a 20-digit one."""
    path = tmp_path / "damaged.log"
    path.write_text(f"{around}\n{line}\n{around}\n")
    try:
        read_log(path)
    except LossLensError:
        pass  # 'no records' and the like: a clear line and exit 2, which is fine here


def test_a_csv_with_damaged_rows_near_its_header_is_still_csv(tmp_path: Path) -> None:
    """One or two damaged rows among the first twenty made a metrics CSV 'no known log format'
    (exit 2, nothing read): they are skipped rows of a CSV log."""
    rows = ["epoch,accuracy,loss,val_loss"] + [
        f"{i},{0.5 + i / 400:.4f},{2 - i / 200:.4f},{2.1 - i / 200:.4f}" for i in range(200)]
    rows[2] = "1,0.5025,1.9950"  # a field lost
    rows[9] = '8,"0.52,1.96,2.06'  # a stray quote and comma
    rows[150] = "149,0.8725,nan,1.36"
    path = tmp_path / "training_log.csv"
    path.write_text("\n".join(rows) + "\n")
    log = read_log(path)
    assert log.format == "csv" and log.train.height == 198
    assert dict(log.lines.skipped) == {"wrong number of CSV fields": 2}
    proc = run("check", str(path))
    assert proc.returncode == 1 and b"nonfinite" in proc.stdout


NUMBER_RUN = re.compile(r"\d+(?:\.\d+)?")
ODD_NUMBERS = ["nan", "-inf", "1e999", "99999999999999999999999", "", "x", "0", "-1", "1,5", "0.5.5"]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_format_s_line_damaged_never_crashes(tmp_path: Path, data: st.DataObject) -> None:
    """Each format's own example line (a new format is covered without editing this test) with its
    numbers replaced by odd ones (NaN, inf, overflow, digits past int64, nothing, text), cut short,
    among intact ones: read as the format and sniffed, never a traceback, every line accounted."""
    from losslens.logs import FORMATS

    fmt = data.draw(st.sampled_from([f for f in FORMATS if not f.whole_file]))
    lines = []
    for _ in range(data.draw(st.integers(1, 30))):
        line = NUMBER_RUN.sub(lambda m: data.draw(st.sampled_from([m.group(), *ODD_NUMBERS])), fmt.example)
        lines.append(line[:data.draw(st.integers(0, len(line)))] if data.draw(st.booleans()) else line)
    path = tmp_path / "damaged.log"
    path.write_text("\n".join([fmt.example, *lines]) + "\n")
    for name in (fmt.name, None):
        try:
            log = read_log(path, format=name)
        except LossLensError:
            continue
        acc = log.lines
        assert acc.parsed + acc.n_skipped + acc.blank == acc.total == len(lines) + 1
