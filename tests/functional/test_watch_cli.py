"""`losslens watch` as a process: a followed file through rotation and truncation, stdin, exit
codes, config errors, the summary's notes, --tail / --from-end."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.unit.watch.test_watcher import LINES, _write, append


class Proc:
    """A `losslens watch` process whose stdout lines arrive in a queue."""

    def __init__(self, *args: str, stdin=None):
        self.p = subprocess.Popen([sys.executable, "-m", "losslens", "watch", *args],
                                  stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True)
        self.q: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.p.stdout:  # type: ignore[union-attr]
            self.q.put(line)

    def next_event(self, timeout: float = 20.0) -> dict:
        return json.loads(self.q.get(timeout=timeout))

    def stop(self) -> tuple[int, dict, str]:
        self.p.send_signal(signal.SIGINT)
        code = self.p.wait(timeout=20)
        summary = self.next_event()
        return code, summary, self.p.stderr.read()  # type: ignore[union-attr]


@pytest.mark.slow
def test_watch_file_through_rotation_and_truncation(tmp_path: Path) -> None:
    path = tmp_path / "train.log"
    w = Proc(str(path), "--json", "--wait")
    try:
        time.sleep(0.8)  # the file does not exist yet: --wait waits for it
        append(path, LINES[:100])
        time.sleep(0.8)
        append(path, LINES[100:150], end="")  # a partial last line...
        time.sleep(0.8)
        append(path, [""] + LINES[150:200])  # ...completed later
        time.sleep(0.8)
        os.rename(path, tmp_path / "train.log.1")  # rotation
        append(path, LINES[200:300])
        time.sleep(2.5)  # copytruncate loses what the reader has not read yet: give it time
        with open(path, "w") as h:  # copytruncate
            h.write("\n".join(LINES[300:350]) + "\n")
        time.sleep(0.8)
        nan = LINES[350].replace("loss=", "loss=nan x=").split(" x=")[0] + " acc=0.1"
        append(path, [nan] + LINES[351:360])
        ev = w.next_event()
        assert (ev["event"], ev["finding"]["kind"], ev["finding"]["start_step"]) == \
            ("appeared", "nonfinite", 350)
    finally:
        code, summary, err = w.stop()
    assert code == 130
    assert summary["event"] == "summary" and summary["interrupted"] is True
    # every line counted once: 360 lines written (the partial line joined its rest)
    assert summary["lines"] == {"total": 360, "parsed": 360, "skipped": 0, "blank": 0}
    assert "360 lines (360 parsed" in err and "interrupted" in err


@pytest.mark.slow
def test_watch_stdin_exit_on_error() -> None:
    lines = LINES[:120] + ["[2026-05-15 21:00:00] step=120 loss=nan acc=0.1"] + LINES[121:200]
    proc = subprocess.run([sys.executable, "-m", "losslens", "watch", "-", "--json", "--exit-on",
                           "error"], input="\n".join(lines) + "\n", capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 1
    events = [json.loads(x) for x in proc.stdout.splitlines()]
    assert events[0]["event"] == "appeared" and events[0]["finding"]["kind"] == "nonfinite"
    assert events[-1]["event"] == "summary"


@pytest.mark.slow
def test_watch_stdin_clean_exits_0() -> None:
    proc = subprocess.run([sys.executable, "-m", "losslens", "watch", "-", "--exit-on", "error"],
                          input="\n".join(LINES[:300]) + "\n", capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    assert "300 lines (300 parsed, 0 skipped, 0 blank); 0 alert event(s)" in proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("bad", ["window = -1", "colour = 1", "[watch]\nspeed = 2",
                                 "[detectors.spike]\nz = 'high'"])
def test_config_errors_name_the_key(tmp_path: Path, bad: str) -> None:
    (tmp_path / "losslens.toml").write_text(bad + "\n")
    proc = subprocess.run([sys.executable, "-m", "losslens", "check", "x.log"], cwd=tmp_path,
                          capture_output=True, text=True)
    assert proc.returncode == 2
    line = proc.stderr.strip()
    assert line.startswith("losslens: error: losslens.toml: ") and "Traceback" not in line
    key = {"window = -1": "'window'", "colour = 1": "'colour'", "[watch]\nspeed = 2": "'watch.speed'",
           "[detectors.spike]\nz = 'high'": "'detectors.spike.z'"}[bad]
    assert key in line


@pytest.mark.slow
def test_watch_summary_carries_the_notes(tmp_path: Path) -> None:
    path = tmp_path / "run.log"
    _write(path, range(0, 30))
    proc = subprocess.Popen([sys.executable, "-m", "losslens", "watch", str(path), "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(3)
    _write(path, range(5000, 5100), mode="w")
    time.sleep(3)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["event"] == "summary" and summary["lines"]["parsed"] == 130
    assert len(summary["notes"]) == 1 and "possible loss" in summary["notes"][0]
    assert "note: " in err and "1 note(s) on following the file" in err


@pytest.mark.slow
def test_watch_from_the_end_or_the_last_lines_of_a_big_log(tmp_path: Path) -> None:
    path = tmp_path / "run.log"
    rows = [f"step={i} loss={'nan' if i == 100 else 2.0 + i % 7 / 100}\n" for i in range(200_000)]
    rows[199_990] = "step=199990 loss=inf\n"
    path.write_text("".join(rows))

    def run(*opts: str) -> tuple[list[dict], str]:
        proc = subprocess.Popen([sys.executable, "-m", "losslens", "watch", str(path), "--json", *opts],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(3)
        with open(path, "a") as h:
            h.write("step=200000 loss=2.03\nstep=200001 loss=nan\n")
        time.sleep(3)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
        return [json.loads(x) for x in out.splitlines()], err

    events, _ = run("--from-end")
    summary = events[-1]
    assert summary["lines"] == {"total": 200_002, "parsed": 2, "skipped": 200_000, "blank": 0}
    assert summary["skipped"] == {"before the start (--tail / --from-end)": 200_000}
    (nan,) = [e for e in events if e.get("event") == "appeared"]
    assert (nan["finding"]["start_step"], nan["finding"]["line"]) == (200_001, 200_002)
    events, _ = run("--tail", "20")  # of 200,002 lines now: the inf at line 199,991 is among them
    first = [e["finding"]["start_step"] for e in events if e.get("event") == "appeared"]
    assert first and first[0] == 199_990 and events[-1]["lines"]["skipped"] == 199_982
    proc = subprocess.run([sys.executable, "-m", "losslens", "watch", "-", "--tail", "5"],
                          input="", capture_output=True, text=True)
    assert proc.returncode == 2 and "standard input" in proc.stderr
