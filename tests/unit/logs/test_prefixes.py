"""Real logs arrive behind prefixes the trainer did not write: a capture's timestamp (kubectl,
docker, `ts`, journald), Python logging's asctime and level, a '> ' quote. They are stripped in
sniffing, every per-line reader and watch, and their time is kept on the records."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from losslens import analyze, read_log
from losslens.logs.base import strip_prefixes

NANOGPT = [f"iter {s}: loss {2.5 - s / 1000:.4f}, time 100.00ms, mfu 1.00%" for s in range(0, 200, 5)]


NANOGPT[30] = "iter 150: loss nan, time 100.00ms, mfu 1.00%"


KV = [f"step={s} loss={2 - s / 100:.3f} lr=1e-4" for s in range(40)]


KV[35] = "step=35 loss=nan lr=1e-4"


# Hugging Face Trainer's stdout dicts: the parser reads the dict wherever it stands on the line
HF = [f"{{'loss': {2 - s / 100:.4f}, 'grad_norm': 1.5, 'learning_rate': 0.0001, 'epoch': {s / 40:.2f}}}"
      for s in range(40)]


HF[35] = "{'loss': nan, 'grad_norm': nan, 'learning_rate': 0.0001, 'epoch': 0.88}"


PREFIXES = {
    "kubectl --timestamps": lambda i: f"2024-05-01T10:00:{i % 60:02d}.123456789Z ",
    "docker logs -t": lambda i: f"2024-05-01T10:00:{i % 60:02d}.123456789+00:00 ",
    "ts": lambda i: f"Dec  1 10:00:{i % 60:02d} ",
    "journald": lambda i: f"Dec 01 10:00:{i % 60:02d} gpu-node-3 python3[4242]: ",
    "python logging": lambda i: f"2024-05-01 10:00:{i % 60:02d},123 - INFO - ",
    "python logging with name": lambda i: f"2024-05-01 10:00:{i % 60:02d},123 - __main__ - INFO - ",
    # Hugging Face's example scripts: datefmt '%m/%d/%Y %H:%M:%S'
    "hf examples": lambda i: f"05/01/2024 10:00:{i % 60:02d} - INFO - __main__ - ",
    "basicConfig": lambda i: "INFO:root:",
    "bracketed time": lambda i: f"[2024-05-01 10:00:{i % 60:02d}] ",
    "pasted quote": lambda i: "> ",
    "srun --label": lambda i: "0: ",
    "loguru": lambda i: f"2024-05-01 10:00:{i % 60:02d}.123 | INFO     | yolox.core.trainer:after_iter:24 - ",
}


@pytest.mark.parametrize("body", ["nanogpt", "kv", "hf"])
@pytest.mark.parametrize("capture", list(PREFIXES))
def test_prefixed_logs_read_as_the_plain_log(tmp_path: Path, capture: str, body: str) -> None:
    """Each capture's prefix before three trainers' lines: read as the plain log, the NaN found at
    its step, and the capture's time kept, also where the format reads its lines whole, prefix
    and all (Hugging Face's dicts: the time is then read in a second pass)."""
    lines = {"nanogpt": NANOGPT, "kv": KV, "hf": HF}[body]
    path = tmp_path / "run.log"
    path.write_text("\n".join(PREFIXES[capture](i) + x for i, x in enumerate(lines)) + "\n")
    log = read_log(path)
    assert log.format == body
    assert log.lines.as_dict() == {"total": 40, "parsed": 40, "skipped": 0, "blank": 0}
    nan = [f for f in analyze(log).findings if f.kind == "nonfinite" and f.metric == "loss"]
    assert [f.start_step for f in nan] == [{"nanogpt": 150, "kv": 35, "hf": 36}[body]]
    micro = {"kubectl --timestamps": 123456, "docker logs -t": 123456, "python logging": 123000,
             "python logging with name": 123000, "bracketed time": 0, "loguru": 123000,
             "hf examples": 0}
    if capture in micro:  # the others hold no date: no time
        assert log.train["time"][1] == datetime(2024, 5, 1, 10, 0, 1, micro[capture])


def test_what_is_stripped_and_what_is_not() -> None:
    assert strip_prefixes("2024-05-01 10:00:00,123 - __main__ - INFO - step=1 loss=2") == \
        ("step=1 loss=2", datetime(2024, 5, 1, 10, 0, 0, 123000))
    assert strip_prefixes("> > iter 5: loss 2.0") == ("iter 5: loss 2.0", None)
    # a logger's name after the level is a dunder or dotted one; a message's own ' - ' stays
    assert strip_prefixes("12/01/2024 10:00:00 - INFO - __main__ - ***** Running training *****")[0] \
        == "***** Running training *****"
    assert strip_prefixes("2025-10-20 03:34:43,941 - src.training.train - INFO - Validation - Loss: "
                          "0.1996, F1: 0.9995")[0] == "Validation - Loss: 0.1996, F1: 0.9995"
    assert strip_prefixes("iter 5: loss 2.0")[0] == "iter 5: loss 2.0"
    assert strip_prefixes("step=1 loss=2")[0] == "step=1 loss=2"
    assert strip_prefixes("2024-05-01 10:00:00,0.5,1.2")[0] == "2024-05-01 10:00:00,0.5,1.2"  # a CSV row
    assert strip_prefixes("INFO")[0] == "INFO"  # never the whole line


def test_formats_that_know_their_prefix_keep_it() -> None:
    """fairseq writes 'time | INFO | fairseq.trainer | ...' itself: read as fairseq, not stripped."""
    from tests.conftest import FIXTURES

    assert read_log(FIXTURES / "fairseq.log").format == "fairseq"


@pytest.mark.parametrize(("line", "fmt", "metrics"), [
    ("step = {s}, loss = {v}, lr = 1e-4", "kv", ["loss", "lr"]),
    ("Epoch 1 Step {s}: loss = {v}", "colon", ["loss", "epoch"]),
])
def test_spaced_equals_reads(tmp_path: Path, line: str, fmt: str, metrics: list[str]) -> None:
    """print(f"loss = {loss}") loggers: 'key = value' reads as 'key=value' does."""
    path = tmp_path / "run.log"
    path.write_text("\n".join(line.format(s=s, v=f"{67.7 - s / 10:.2f}") for s in range(40)) + "\n")
    log = read_log(path)
    assert log.format == fmt and log.metrics == metrics and log.lines.parsed == 40
    assert log.train["loss"][3] == pytest.approx(67.4)


PREAMBLE = [f"W0530 14:48:26.433000 2622492 site-packages/torch/_dynamo/convert_frame.py:1233] line {i} "
            "of a graph break's traceback" for i in range(3000)]


@pytest.mark.parametrize("body", ["nanogpt", "kv"])
@pytest.mark.parametrize("capture", ["kubectl --timestamps", "python logging", "pasted quote"])
def test_prefixed_logs_behind_a_long_preamble(tmp_path: Path, capture: str, body: str) -> None:
    """3,000 lines of torch.compile warnings before the first record (as in a real modded-nanogpt
    fork's log): the format is sniffed deep, and the prefixes are judged on the lines it was
    sniffed on (they were judged on the first 400: all preamble, so nothing was read: exit 2),
    by read_log and by watch (which assumed kv at 2,000 lines and read nothing: exit 0)."""
    from losslens.config import load
    from losslens.watch.watcher import Watcher

    records, nan_step = (NANOGPT, 150) if body == "nanogpt" else (KV, 35)
    lines = [PREFIXES[capture](i) + x for i, x in enumerate(PREAMBLE + records)]
    path = tmp_path / "run.log"
    path.write_text("\n".join(lines) + "\n")
    log = read_log(path)
    assert log.format == body and log.lines.parsed == 40
    assert [f.start_step for f in analyze(log).findings if f.kind == "nonfinite"] == [nan_step]
    w = Watcher("x", None, load(None, cwd=Path("/")).registry(), frozenset())
    for line in lines:
        w.feed(line)
    w.finish_input()
    w.analyse(now=0.0)
    assert w.format is not None and w.format.name == body and w.acc.parsed == 40
    assert w.report is not None and any(f.kind == "nonfinite" for f in w.report.findings)


@pytest.mark.parametrize("prefix", [
    "I0101 10:00:{s:02d}.123456 12345 solver.cpp:228] ",
    "2024-05-01 10:00:{s:02d}.123 | INFO | yolox.core.trainer:after_iter:246 - "])
def test_a_code_location_in_a_prefix_is_no_metric(tmp_path: Path, prefix: str) -> None:
    """Caffe's glog lines ('I0101 10:00:00.123456 12345 solver.cpp:228] Iteration 100, loss = 2.3')
    and loguru's were read by the generic 'key: value' reader with their prefixes on, as well as
    without: 'solver.cpp:228' became a metric 'solver_cpp' on every record. Where the generic reader
    reads as many lines either way, the prefixes are cut."""
    lines = [prefix.format(s=s % 60) + f"Iteration {s}, loss = {'nan' if s == 700 else 2.5 - s / 1000}"
             for s in range(0, 1000, 10)]
    path = tmp_path / "caffe.log"
    path.write_text("\n".join(lines) + "\n")
    log = read_log(path)
    assert log.format == "colon" and set(log.train.columns) - {"step", "line", "time", "segment"} == {"loss"}
    assert [f.start_step for f in analyze(log).findings if f.kind == "nonfinite"] == [700]


def test_a_record_over_several_prefixed_lines_keeps_its_first_line_s_time(tmp_path: Path) -> None:
    """'2025-11-18 20:28:28,581 - INFO - Epoch 1/20' then '… - Train Loss: 2.0380, Train Acc: 16.41%'
    and '… - Val Loss: …' (a real log's shape): the epoch's record took the time of the line that
    closed it (the next epoch's head, after a restart five minutes later: every time one record
    late, and the last record none). It takes the time of the line that opened it, as the parser
    reading the prefix itself does."""
    from datetime import datetime, timedelta

    t0, rows, heads = datetime(2025, 11, 18, 20, 28, 28), [], []
    for e in range(1, 21):
        at = t0 + timedelta(minutes=3 * e)
        heads.append(at)
        stamp = [(at + timedelta(seconds=s)).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3] for s in (0, 15, 16, 17)]
        rows += [f"{stamp[0]} - INFO - Epoch {e}/20",
                 f"{stamp[1]} - INFO - Train Loss: {2.0 - e / 20:.4f}, Train Acc: {16 + e:.2f}%",
                 f"{stamp[2]} - INFO - Val Loss: {1.9 - e / 20:.4f}, Val Acc: {18 + e:.2f}%",
                 f"{stamp[3]} - INFO - Model saved at checkpoints/resnet_epoch_{e - 1}.pth"]
    path = tmp_path / "train.log"
    path.write_text("\n".join(rows) + "\n")
    log = read_log(path)
    assert log.train.height == 20 and log.train["time"].to_list() == heads


def test_capture_times_column_wise_as_line_by_line() -> None:
    """The time text of a capture's prefix, read column-wise (the second pass that times the
    records of a format reading its lines whole) as ``base._iso`` reads it: ISO with a comma or a
    point, nanoseconds cut to microseconds, a month-first date (day first where the month cannot
    be: '13/01/2024')."""
    import polars as pl

    from losslens.logs.base import _iso
    from losslens.logs.columnar import times

    texts = ["2024-05-01 10:00:00,123", "2024-05-01T10:00:00.123456789", "12/01/2024 10:00:00",
             "13/01/2024 23:59:59", "01/13/2024 10:00:00,5", "2024-05-01 10:00:00"]
    assert times(pl.Series(texts)).to_list() == [_iso(t) for t in texts]
    assert _iso("12/01/2024 10:00:00") == datetime(2024, 12, 1, 10, 0)
    assert _iso("13/01/2024 23:59:59") == datetime(2024, 1, 13, 23, 59, 59)


PREFIX_PIECES = [
    "2024-05-01 10:00:00 ", "[2024-05-01 10:00:00,123] ", "2024-05-01T10:00:00.123456789Z ",
    "2024-05-01T10:00:00+05:30 | ", "2024-05-01 10:00:00.1234567890 ", "2024-05-01 10:00:00,5-0530 - ",
    "12/01/2024 10:00:00 - ", "13/01/2024 23:59:59,5 ", "[2024-05-01 10:00:00]", "2024-05-01 10:00:00.",
    "INFO - __main__ - ", "[INFO] ", "INFO:root:", "__main__ - INFO - ", "> ", ">> ", " 12: ",
    "Dec  1 10:00:00 host unit[42]: ", "I1203 10:00:01.123456 139872 train.py:512] ",
    "yolox.core.trainer:after_iter:246 - ", "2024-05-01 10:00:00 - INFO - ", "\u00e9 ", "",
    "I1203 10:00:01.123456 139872 2024-05-01T10:00:00.py:512] ",  # a time inside a timeless prefix
]


@pytest.mark.parametrize("seed", range(3))
def test_prefixes_cut_column_wise_as_line_by_line(seed: int) -> None:
    """Each line's capture prefixes cut column-wise (their matches taken whole, the time as the
    first ISO or month-first time in the prefix, not through the regex's groups) as
    ``strip_prefixes`` cuts them, line by line: up to four prefixes deep, odd fractions and
    offsets, lines that are all prefix."""
    import random

    import polars as pl

    from losslens.logs.columnar import _cut_prefixes, times

    rng = random.Random(seed)
    lines = ["".join(rng.choice(PREFIX_PIECES) for _ in range(rng.randrange(5)))
             + rng.choice(["step=1 loss=2", "iter 5: loss 2.0", "", "x", "2024-05-01 10:00:00"])
             for _ in range(3000)]
    lines += ["> ", "2024-05-01 10:00:00 ", "[2024-05-01 10:00:00] ", "INFO ", " 12: ",  # all prefix
              "Dec  1 10:00:00 "]
    rest, stamp = _cut_prefixes(pl.Series(lines))
    expected = [strip_prefixes(x) for x in lines]
    assert rest.to_list() == [r for r, _ in expected]
    assert times(stamp).to_list() == [w for _, w in expected]
