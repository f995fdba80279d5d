"""watch: the follower on real files (rotation, truncation, recreation, partial lines), the
debounce, and the command as a real process fed through a file and through stdin."""

from __future__ import annotations

import os
import queue
import threading
from pathlib import Path

import pytest

from losslens import synth
from losslens.config import load
from losslens.logs.stream import LineStream
from losslens.watch import Follower, Watcher
from tests.conftest import FIXTURES


def append(path: Path, lines: list[str], end: str = "\n") -> None:
    with open(path, "a") as h:
        h.write("\n".join(lines) + end)


def test_follower_waits_appends_partial_truncate_rotate_recreate(tmp_path: Path) -> None:
    path = tmp_path / "run.log"
    f = Follower(str(path))
    assert f.poll() == []  # not there yet
    path.write_text("a=1\nb=2\nc=")
    assert f.poll() == ["a=1", "b=2"]
    with open(path, "a") as h:
        h.write("3\n")
    assert f.poll() == ["c=3"]  # the partial line waited for its newline
    with open(path, "w") as h:  # copytruncate
        h.write("d=4\n")
    assert f.poll() == ["d=4"] and f.events[-1] == "truncated"
    with open(path, "a") as h:
        h.write("e=5\nf=")
    os.rename(path, tmp_path / "run.log.1")  # rotation; the old file's last line had no newline
    path.write_text("g=7\n")
    assert _polled(f) == ["e=5", "f=", "g=7"] and f.events[-1] == "rotated"
    path.unlink()
    assert f.poll() == []
    path.write_text("h=8\n")  # deleted and recreated
    assert _polled(f) == ["h=8"]
    f.close()


def test_progress_bar_redraws_are_lines_as_they_come(tmp_path: Path) -> None:
    """Lightning writes its bar's newline only at the end of an epoch: each '\r' redraw is taken
    as it arrives, so a NaN mid-epoch is seen mid-epoch (CRLF line ends stay whole)."""
    path = tmp_path / "stdout.log"
    f = Follower(str(path))
    bar = "Epoch 0:  {p:2d}%|    | {b}/400 [00:01<00:09,  9.50it/s, v_num=0, train_loss={v}]"
    path.write_text("\r".join(bar.format(p=b // 4, b=b, v=f"{3 - b / 400:.3f}") for b in range(0, 250, 10)))
    lines = f.poll()
    assert len(lines) == 24 and lines[-1].endswith("train_loss=2.425]")  # the 25th may grow still
    s = load(None, cwd=Path("/"))
    w = Watcher("x", None, s.registry(), frozenset(), confirm=1)
    with open(path, "a") as h:
        h.write("".join("\r" + bar.format(p=b // 4, b=b, v="nan") for b in range(250, 350, 10)) + "\r")
    for line in lines + f.poll():
        w.feed(line)
    (ev,) = w.analyse(now=0.0)  # no newline yet: the epoch is still running
    assert (ev.finding.kind, ev.finding.start_step) == ("nonfinite", 250)
    path.write_text("a=1\r\nb=2\r\n")  # CRLF: two lines, not four
    assert Follower(str(path)).poll() == ["a=1\r", "b=2\r"]
    f.close()


def test_debounce_appears_after_confirmation_then_clears() -> None:
    s = load(None, cwd=Path("/"))
    w = Watcher("x", "kv", s.registry(), frozenset(), window=200, confirm=2, cooldown_s=1e9)
    for i in range(50):
        w.feed(f"step={i} loss={3 - i / 100:.4f}")
    w.feed("step=50 loss=nan")
    assert w.urgent  # the first NaN of a metric: the loop analyses at once, not at its interval
    (ev,) = w.analyse(now=0.0)  # a value read as NaN cannot flap: announced on first sight
    assert (ev.event, ev.finding.kind, ev.finding.start_step) == ("appeared", "nonfinite", 50)
    assert not w.urgent
    assert w.analyse(now=1.0) == w.analyse(now=2.0) == []  # no repeat while unchanged
    for i in range(51, 260):  # the NaN slides out of the bounded window: as `check` on the whole
        w.feed(f"step={i} loss={2.5 - i / 1000:.4f}")  # log would, it stays (the per-record check)
    assert w.analyse(now=3.0) == [] and w.analyse(now=4.0) == []
    (active,) = w.announced()
    assert active.kind == "nonfinite" and active.evidence["seen_by"] == "per-record check"
    assert len(w.train) == 200 and w.acc.total == 260 and w.acc.parsed == 260
    w.feed("step=260 loss=2.2")
    spike = Watcher("x", "kv", s.registry(), frozenset(), window=200, confirm=2, cooldown_s=1e9)
    for i in range(60):  # findings other than a non-finite value still clear when they are gone
        spike.feed(f"step={i} loss={9.0 if i == 40 else 3 - i / 100:.4f}")
    spike.analyse(now=0.0)
    events = spike.analyse(now=1.0)
    assert [e.finding.kind for e in events] == ["spike"]
    for i in range(60, 300):
        spike.feed(f"step={i} loss={3 - i / 1000:.4f}")
    spike.analyse(now=2.0)
    assert [e.event for e in spike.analyse(now=3.0)] == ["cleared"]


def test_keras_epoch_record_is_live_without_the_next_epoch_line() -> None:
    """Keras prints 'Epoch 3/3' at the start and the metrics at the end of an epoch: the record
    is whole at its closing progress line, so a live watch sees the last epoch at once."""
    s = load(None, cwd=Path("/"))
    w = Watcher("x", "colon", s.registry(), frozenset())
    for e in range(1, 4):
        w.feed(f"Epoch {e}/3")
        w.feed(f"1875/1875 [==============================] - 5s 3ms/step - loss: {0.4 / e:.4f} - "
               f"accuracy: 0.9 - val_loss: {0.3 / e:.4f}")
    assert [r["step"] for r in w.train] == [1, 2, 3] and [r["step"] for r in w.evals] == [1, 2, 3]


def test_watch_reads_rank_zero_of_interleaved_ranks() -> None:
    s = load(None, cwd=Path("/"))
    w = Watcher("x", None, s.registry(), frozenset())
    for line in (FIXTURES / "torchrun_ranks.log").read_text().splitlines():
        w.feed(line)
    w.finish_input()
    w.analyse(now=0.0)
    assert w.format is not None and w.format.name == "kv"
    assert [r["step"] for r in w.train if r.get("rank") == 0] == list(range(1, 61))
    assert w.report is not None and w.report.segments == 1


LINES = list(synth.dflash_lines(400))


def test_sniffing_a_long_unrecognised_preamble_is_bounded(monkeypatch) -> None:
    """5,000 lines no reader knows, then records: the format is guessed at 20 lines, again each
    time the pending lines double (or a second later), on every pending line (kv is assumed only
    at SNIFF_MAX): every line is accounted for, and the sniffer ran a handful of times, not once
    a line."""
    import losslens.logs.stream as stream

    calls = []
    real = stream.choose
    monkeypatch.setattr(stream, "choose", lambda lines, *a: calls.append(len(lines)) or real(lines, *a))
    s = load(None)
    w = Watcher("x", None, s.registry(), frozenset())
    for i in range(5000):
        w.feed(f"hello world {i}")
    for i in range(1, 51):
        w.feed(f"step={i} loss={2.0 - 0.01 * i:.3f}")
    w.finish_input()
    assert len(calls) <= 12 and w.format is not None and w.format.name == "kv"
    assert w.acc.as_dict() == {"total": 5050, "parsed": 50, "skipped": 5000, "blank": 0}


def _write(path: Path, lines: range, mode: str = "a") -> None:
    with open(path, mode) as h:
        h.write("".join(f"step={i} loss=1.0\n" for i in lines))


def _steps(lines: list[str]) -> list[int]:
    return [int(x.split()[0].removeprefix("step=")) for x in lines]


def _polled(f: Follower) -> list[str]:
    """What polls give until the follower has read all it has (a rotated file, a copy and the
    file again are read a poll each: memory stays flat while a backlog is read)."""
    lines = f.poll()
    while f.more or f.backlog:
        lines += f.poll()
    return lines


def test_copytruncate_takes_the_lines_written_before_it_from_the_copy(tmp_path: Path) -> None:
    import shutil

    path = tmp_path / "run.log"
    _write(path, range(0, 100))
    f = Follower(str(path))
    seen = _steps(f.poll())
    _write(path, range(100, 180))  # written after the last read...
    shutil.copy(path, tmp_path / "run.log.1")  # ...then logrotate copies the file
    os.truncate(path, 0)  # and truncates it; the writer goes on
    _write(path, range(180, 200))
    seen += _steps(_polled(f))
    assert seen == list(range(200)) and f.events == ["truncated"]
    assert "read from" in f.notes[0] and "run.log.1" in f.notes[0]


def test_truncation_then_a_larger_rewrite_is_read_from_the_top(tmp_path: Path) -> None:
    path = tmp_path / "run.log"
    _write(path, range(0, 50))
    f = Follower(str(path))
    assert _steps(f.poll()) == list(range(50))
    _write(path, range(1000, 1300), mode="w")  # a new run overwrites the log, past the old size
    assert _steps(f.poll()) == list(range(1000, 1300)) and f.events == ["rewritten"]
    assert "possible loss" in f.notes[0]  # no copy: what came between cannot be ruled out


def test_two_rotations_between_reads_lose_no_generation(tmp_path: Path) -> None:
    path = tmp_path / "run.log"
    _write(path, range(0, 10))
    f = Follower(str(path))
    assert _steps(f.poll()) == list(range(10))
    _write(path, range(10, 20))
    os.rename(path, tmp_path / "run.log.2")  # first rotation (the old .1 is now .2)
    _write(path, range(20, 30), mode="w")
    os.rename(path, tmp_path / "run.log.1")  # second rotation before the next read
    _write(path, range(30, 40), mode="w")
    assert _steps(_polled(f)) == list(range(10, 40)) and f.events == ["rotated", "generation"]
    assert "rotated twice" in f.notes[0]


def test_stdin_reader_holds_a_fast_writer_back(monkeypatch) -> None:
    """A parser that falls behind does not grow memory: the reader's queue is bounded, so the
    reader stops reading and the pipe makes the writer wait (back-pressure)."""
    import losslens.watch.follower as watch

    r, w = os.pipe()
    monkeypatch.setattr(watch.sys, "stdin", type("In", (), {"fileno": staticmethod(lambda: r)})())
    q: queue.Queue = queue.Queue(maxsize=2)  # a parser that never takes anything
    threading.Thread(target=watch.stdin_lines, args=(q,), daemon=True).start()
    payload = b"step=1 loss=2.0\n" * 1_000_000  # 16 MB: far more than the pipe and the queue hold
    done = threading.Event()

    def write() -> None:
        try:
            os.write(w, payload)  # blocks while the pipe is full
        except OSError:
            pass
        done.set()

    threading.Thread(target=write, daemon=True).start()
    assert not done.wait(2.0)  # the writer is held back
    assert q.qsize() == 2 and all(len(batch) > 0 for batch in list(q.queue))
    os.close(r)
    os.close(w)


def test_a_slow_log_gets_its_format_without_waiting_for_twenty_lines(monkeypatch) -> None:
    import losslens.watch.watcher as watch

    clock = [100.0]
    monkeypatch.setattr(watch.time, "monotonic", lambda: clock[0])
    w = Watcher("x", None, load(None).registry(), frozenset())
    w.feed("step=1 loss=2.5")
    w.feed("step=2 loss=nan")
    w.tick()
    assert w.stream.parser is None  # just arrived: more lines may come to sniff on
    clock[0] += 2.5
    w.tick()  # two seconds on, the two lines are all there is: sniff them
    assert w.format is not None and w.format.name == "kv" and w.acc.parsed == 2
    assert w.nonfinite["loss"]["first_step"] == 2


def _line_by_line_and_batched(monkeypatch, lines: list[str], window: int, format: str | None = None,
                              first: int = 40, fast: list[int] | None = None) -> tuple[Watcher, Watcher]:
    """The same lines fed one by one and as two batches, the first of ``first`` lines (the
    batches that take the fast path: ``fast``, by default only the second), both finished; their
    accounting and NaN memory checked equal."""
    s = load(None, cwd=Path("/"))
    one, many = (Watcher("x", format, s.registry(), frozenset(), window=window) for _ in range(2))
    for line in lines:
        one.feed(line)
    calls = []
    monkeypatch.setattr(LineStream, "_chunk", lambda self, b, f=LineStream._chunk: (
        calls.append(b.count(b"\n")), f(self, b))[1])
    many.feed_batch(lines[:first])
    many.feed_batch(lines[first:])
    assert calls == (fast if fast is not None else [len(lines) - first])
    for w in (one, many):
        w.finish_input()
    assert many.acc.as_dict() == one.acc.as_dict()
    assert dict(many.acc.skipped) == dict(one.acc.skipped)
    assert str(many.nonfinite) == str(one.nonfinite)
    return one, many


def _rows(w: Watcher) -> list[dict]:
    return [{k: v for k, v in r.items() if v is not None} for r in w.train]


def test_a_large_batch_of_kv_lines_reads_vectorised_and_the_same(monkeypatch) -> None:
    """A backlog of key=value lines goes through the vectorised reader: the same window, the same
    accounting, the same per-record NaN memory and report as line by line, with the window
    (here 500) far shorter than the batch."""
    lines = list(synth.dflash_lines(3000, seed=4))
    lines[1200] = lines[1200].replace("loss=", "loss=nan extra=").split(" acc=")[0] + " acc=0.1"
    lines[1500:1500] = ["", "Traceback (most recent call last):", "step=1499 loss=1.5 q_pre=[1, x]"]
    one, many = _line_by_line_and_batched(monkeypatch, lines, 500)
    assert many.nonfinite["loss"]["first_step"] == 1200
    assert len(many.train) == 500 and _rows(many) == _rows(one)
    assert "q_pre" not in one.train[-1] and one.train[-1]["q_pre_min"] >= 40  # a list: its min, mean
    a, b = one.analyse(now=0.0), many.analyse(now=0.0)
    assert [f.as_dict() for f in one.report.findings] == [f.as_dict() for f in many.report.findings]
    assert [(e.event, e.finding.kind) for e in a] == [(e.event, e.finding.kind) for e in b] == \
        [("appeared", "nonfinite")]


@pytest.mark.parametrize(("name", "make"), [
    ("jsonl", lambda: synth.jsonl_lines(1500, seed=2)),
    ("megatron", lambda: synth.megatron_lines(1500, seed=2)),
    ("nanogpt", lambda: synth.nanogpt_lines(3000, every=2, seed=2)),
    ("kv-ranked", lambda: [f"[rank{i % 2}]: {x}" for i, x in enumerate(synth.dflash_lines(1500))]),
    ("fairseq", lambda: synth.fairseq_lines(1500, seed=2)),
    ("torchtitan", lambda: synth.torchtitan_lines(1500, seed=2)),
    ("olmo", lambda: synth.olmo_lines(400, seed=2)),  # records across the batches' ends
    # Lightning's bar as watch sees it, every '\r' redraw a line (a step redrawn twice, the
    # eval loss in the postfix from the second epoch on)
    ("lightning", lambda: [f"Epoch {i // 300}:  5%|█ | {i % 300 // 2 + 1}/150 [00:01<00:09,  9.50it/s, "
                           f"v_num=0, train_loss={2 + (i % 7) / 10:.3f}"
                           + (", val_loss=1.5]" if i >= 300 else "]") for i in range(1500)]),
])
def test_a_large_batch_of_any_column_wise_format_reads_the_same(monkeypatch, name, make) -> None:
    """A backlog in a format with a column-wise reader (and key=value lines behind rank prefixes)
    goes through it: the same window, accounting and NaN memory as line by line."""
    lines = list(make())
    lines[700] = lines[700].replace("loss", "loss_x", 1)  # an odd line among them
    lines[900:900] = ["", "Traceback (most recent call last):"]
    one, many = _line_by_line_and_batched(monkeypatch, lines, 400)
    assert len(many.train) == 400 and _rows(many) == _rows(one)


def test_a_large_batch_of_colon_lines_reads_the_same(monkeypatch) -> None:
    """A backlog of 'Step N | loss: X' lines under --format colon goes through the column-wise
    reader (the format is no guess there): the same window, accounting, NaN memory and eval
    records as line by line, with a Keras-style epoch and a timm evaluation line among them."""
    lines = [f"Step {s} | loss: {2 + (s % 7) / 10:.4f} | lr: 1.00e-04" for s in range(1, 1501)]
    lines[700] = "Step 700 | loss: nan | lr: 1.00e-04"
    lines[900:900] = ["", "Epoch 2/10", "  loss: 2.5", "val_loss: 2.4", "Traceback (most recent call last):",
                      "Test: [ 0/10]  loss: 1.5 (1.5)  acc1: 50 (50)"]
    # (the first line of the first batch makes the parser)
    one, many = _line_by_line_and_batched(monkeypatch, lines, 400, "colon", 600, [599, len(lines) - 600])
    assert many.nonfinite["loss"]["first_step"] == 700
    assert len(many.train) == 400 and _rows(many) == _rows(one)
    # the evaluation line at the last train step (read column-wise), then the Keras-style epoch
    # (its step the epoch's) once the next record closes it
    assert [r["step"] for r in many.evals] == [r["step"] for r in one.evals] == [900, 2]


def test_copytruncate_with_a_writer_that_does_not_append(tmp_path: Path) -> None:
    """The writer keeps its offset after logrotate's copytruncate: the file starts again with a
    hole of NUL bytes the old size, then the new lines; they are read (not 'binary data')."""
    path = tmp_path / "run.log"
    _write(path, range(0, 100))
    f = Follower(str(path))
    assert _steps(f.poll()) == list(range(100))
    old = path.stat().st_size
    os.truncate(path, 0)
    with open(path, "r+b") as h:  # what a writer without O_APPEND does next
        h.seek(old)
        h.write("".join(f"step={s} loss=2.0\n" for s in range(100, 120)).encode())
    assert _steps(f.poll()) == list(range(100, 120))


@pytest.mark.parametrize("batched", [False, True])
def test_a_generic_guess_from_a_preamble_gives_way_to_the_format_that_comes(batched: bool) -> None:
    """A real HF Trainer nohup log opens with 66 lines of 'CUDA version: 11.8'-like logging: sniffed
    at 20 lines, that read as the generic 'key: value' format, which took 24 of the 183 dicts and
    missed a NaN in the others. The guess is provisional: once the dicts come, the lines are read
    again as hf: every record, the NaN found, one note."""
    from losslens import read_log
    from tests.conftest import reallog

    path = reallog("qwen3-8b-qlora-hf-trainer-nohup")
    lines = path.read_text().split("\n")
    at = next(i for i, x in enumerate(lines) if x.startswith("{'loss': 2.0592"))
    lines[at] = lines[at].replace("'loss': 2.0592", "'loss': nan")
    w = Watcher(str(path), None, load(None, cwd=Path("/")).registry(), frozenset())
    if batched:
        w.feed_batch(lines)
    else:
        for line in lines:
            w.feed(line)
    w.finish_input()
    w.analyse(now=0.0)
    assert w.format is not None and w.format.name == "hf"
    assert w.acc.parsed == read_log(path).lines.parsed == 183
    assert w.acc.parsed + w.acc.n_skipped + w.acc.blank == w.acc.total == len(lines)
    # (the first dict with a metric is on line 335; a tokenizer's {'bos_token_id': None, ...} on
    # line 73 is no Trainer dict)
    assert w.notes == ["the first lines read as colon, then as hf once its lines came: 320 lines read again"]
    assert w.report is not None and [f.start_step for f in w.report.findings if f.kind == "nonfinite"] == [20]


def test_a_generic_format_that_holds_stays() -> None:
    """A log that is 'key: value' all through keeps the generic reader, with no note."""
    w = Watcher("x", None, load(None, cwd=Path("/")).registry(), frozenset())
    lines = (FIXTURES / "custom_colon.log").read_text().splitlines()
    for line in lines:
        w.feed(line)
    w.finish_input()
    assert w.format is not None and w.format.name == "colon" and not w.notes and not w.stream.provisional
    from losslens import read_log

    assert w.acc.parsed == read_log(FIXTURES / "custom_colon.log").lines.parsed


def test_a_rewrite_that_keeps_the_first_bytes_is_still_a_rewrite(tmp_path: Path) -> None:
    """A restarted run prints the same preamble (over 1 KB of it), then its own lines: the bytes
    just before the offset read are gone, so the file is read again from its top."""
    path = tmp_path / "run.log"
    preamble = "".join(f"config.{k} = {k * 7}\n" for k in range(120))  # ~2 KB, the same each start
    path.write_text(preamble + "".join(f"step={i} loss=1.0\n" for i in range(100)))
    f = Follower(str(path))
    first = _polled(f)
    assert _steps(first[120:]) == list(range(100))
    with open(path, "w") as h:  # the restart: same inode, same head, more lines than before
        h.write(preamble + "".join(f"step={i} loss=2.0\n" for i in range(500)))
    again = _polled(f)
    assert f.events == ["rewritten"] and _steps(again[120:]) == list(range(500))
    assert "possible loss" in f.notes[0]


def test_a_rotated_backlog_is_read_a_bounded_piece_at_a_time(tmp_path: Path) -> None:
    path = tmp_path / "run.log"
    line = "step={} loss=1.0 " + "x" * 80 + "\n"
    with open(path, "w") as h:
        h.write("".join(line.format(i) for i in range(200_000)))  # ~20 MB, mostly unread
    f = Follower(str(path), max_bytes=2 << 20)
    got = f.poll()
    os.rename(path, tmp_path / "run.log.1")  # rotated while the follower is far behind
    path.write_text("".join(line.format(i) for i in range(200_000, 200_010)))
    sizes = []
    while True:
        batch = f.poll()
        sizes.append(sum(len(x) + 1 for x in batch))
        got += batch
        if not (f.more or f.backlog):
            break
    assert _steps(got) == list(range(200_010))
    assert max(sizes) < (2 << 20) + 200  # a piece and a carried-over line: never the whole rest
