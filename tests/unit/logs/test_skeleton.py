"""The skeleton reader (logs/skeleton.py, the ``fast`` extra): one compiled pass over a chunk of a
one-line-record format, checked against the per-line parser on the formats it reads, clean and
with a real run's noise, and its safety nets (rules that tie, a template the parser contradicts)."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

import numpy as np
import polars as pl
import pytest

pytest.importorskip("numba")

from losslens import read_log  # noqa: E402
from losslens.logs import skeleton  # noqa: E402
from losslens.logs.base import Format, LineParser, RegexLineParser  # noqa: E402
from losslens.logs.fast import compiled, line_bounds  # noqa: E402
from losslens.logs.registry import BY_NAME  # noqa: E402
from losslens.logs.sink import Sink  # noqa: E402
from losslens.synth import with_noise  # noqa: E402
from losslens.synth.logs import (  # noqa: E402
    colon_lines,
    fairseq_lines,
    jsonl_lines,
    megatron_lines,
    nanogpt_lines,
    torchtitan_lines,
)
from tests.conftest import FIXTURES  # noqa: E402
from tests.naive import assert_same_as_per_line  # noqa: E402


@pytest.fixture
def compiled_reader(monkeypatch, columnar) -> dict[str, int]:
    """The skeleton reader on every file (``LOSSLENS_FAST=on``, no small-file path); counts the
    chunks it read itself ('read') and those it handed to the polars path ('handed')."""
    monkeypatch.setenv("LOSSLENS_FAST", "on")
    seen = {"read": 0, "handed": 0}
    inner = skeleton.SkeletonReader._read

    def counted(self, *args):
        took = inner(self, *args)
        seen["read" if took else "handed"] += 1
        return took
    monkeypatch.setattr(skeleton.SkeletonReader, "_read", counted)
    return seen


def _write(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "run.log"
    path.write_text("\n".join(lines) + "\n")
    return path


FORMATS = {
    "fairseq": lambda: fairseq_lines(2000, every=7, epoch_updates=900),
    "megatron": lambda: megatron_lines(2000),
    "megatron ranked": lambda: megatron_lines(1500, rank_prefix="[rank0]:"),
    "torchtitan": lambda: torchtitan_lines(2000),
    "nanogpt": lambda: nanogpt_lines(6000, every=3, eval_every=300),
    "jsonl": lambda: jsonl_lines(3000) + ['{"step": 3001, "loss/0": 1.5, "nested": {"lr": 1e-4}}'] * 20,
    "colon": lambda: colon_lines(3000, epoch_steps=700, eval_every=45),
}


@pytest.mark.parametrize("noise", [0.0, 0.02])
@pytest.mark.parametrize("name", list(FORMATS))
def test_reads_what_the_per_line_parser_reads(tmp_path, compiled_reader, name, noise) -> None:
    lines = FORMATS[name]()
    path = _write(tmp_path, with_noise(lines, noise, seed=3) if noise else lines)
    fmt = name.split()[0]
    assert_same_as_per_line(path, fmt)
    assert compiled_reader == {"read": 1, "handed": 0}, compiled_reader


CAPTURES = {  # a capture's prefix before the i-th line
    "kubectl": lambda i: f"2024-05-01T10:{i // 60 % 60:02d}:{i % 60:02d}.123456789Z ",
    "logging": lambda i: f"2024-05-01 10:{i // 60 % 60:02d}:{i % 60:02d},{i % 1000:03d} - INFO - ",
    "hf example": lambda i: f"05/01/2024 10:{i // 60 % 60:02d}:{i % 60:02d} - INFO - __main__ - ",
    "slurm": lambda i: f"{i % 3}: ",
    "syslog": lambda i: f"May  1 10:{i // 60 % 60:02d}:{i % 60:02d} gpu-node-3 train[4242]: ",
}


@pytest.mark.parametrize("capture", list(CAPTURES))
@pytest.mark.parametrize("name", ["megatron", "fairseq", "nanogpt"])
def test_lines_behind_a_capture_s_prefix(tmp_path, compiled_reader, name, capture) -> None:
    """A capture's prefix before every line, noise among them: the lines are read as filed (the
    probe cuts each prefix as the parser does) or cut before the scan, and each record takes
    the capture's time where it has none of its own."""
    lines = with_noise(FORMATS[name](), 0.02, seed=1)
    path = _write(tmp_path, [CAPTURES[capture](i) + x for i, x in enumerate(lines)])
    assert_same_as_per_line(path, name)
    assert compiled_reader == {"read": 1, "handed": 0}, compiled_reader


def test_a_rule_that_ties_on_the_first_lines_is_settled_by_the_parser(tmp_path, compiled_reader,
                                                                      chunks_of) -> None:
    """fairseq's count within the epoch equals num_updates through the first epoch: learned there,
    both numbers fit the step; from the second epoch on the parser says which it is."""
    lines = fairseq_lines(3000, every=1, epoch_updates=1500)
    chunks_of(64 << 10)  # the first chunk within the first epoch
    path = _write(tmp_path, lines)
    assert_same_as_per_line(path, "fairseq")
    assert compiled_reader["handed"] == 0 and compiled_reader["read"] > 5
    assert read_log(path).train["step"].to_list()[-3:] == [2998, 2999, 3000]


def test_a_template_the_parser_contradicts_is_dropped(tmp_path, compiled_reader, monkeypatch,
                                                      chunks_of) -> None:
    """A template learned wrong (its loss read from the grad norm's number) is caught by the
    rows the parser reads again in each chunk: those rows are read another way, and the frames
    are still the parser's."""
    learn = skeleton._learn
    spoiled = []

    def wrong(fmt, s, rows, first, stamps, *primer):
        t = learn(fmt, s, rows, first, stamps, *primer)
        if t is not None and (0, "loss") in t.rules and not spoiled:
            grad = t.rules[(0, "grad_norm")][0]
            t.rules[(0, "loss")] = [grad]
            spoiled.append(t)
        return t
    monkeypatch.setattr(skeleton, "_learn", wrong)
    chunks_of(64 << 10)
    path = _write(tmp_path, megatron_lines(1500))
    assert_same_as_per_line(path, "megatron")
    assert spoiled and compiled_reader["read"] > 5


class _NamedByNumber(Format):
    """A toy line format whose second field is a key that may hold a number ('step 7 aux loss 1
    0.25'): no format in the registry names a key by a number standing alone yet."""
    name = "toy-numbered"
    line_records = True

    @staticmethod
    def rows(text, lineno, sink, parser=None):
        return pl.Series([False] * len(text))  # every line to the parser

    def parser(self, sink: Sink) -> LineParser:
        class Parser(RegexLineParser):
            def feed(self, lineno: int, line: str) -> str | None:
                m = re.match(r"^step (\d+) (.+) (\S+)$", line)
                if not m:
                    return "unrecognised line"
                step, metrics = sink.metrics_from_pairs([("step", m.group(1)), (m.group(2), m.group(3))])
                return None if sink.emit(lineno, step, metrics) else "no training metric"
        return Parser(sink)


def test_a_key_named_by_a_number_holds_rows_of_that_number_only(tmp_path, compiled_reader, chunks_of,
                                                                 monkeypatch) -> None:
    """'aux loss 0' on every line of the first chunk, then 'aux loss 1' on one line in 50: the
    number in the key is pinned, and the lines naming another key are the parser's."""
    monkeypatch.setitem(BY_NAME, "toy-numbered", _NamedByNumber())
    lines = [f"step {i} aux loss {int(i > 4000 and i % 50 == 0)} {1 + i / 1e4:.4f}" for i in range(12000)]
    chunks_of(32 << 10)
    path = _write(tmp_path, lines)
    assert_same_as_per_line(path, "toy-numbered")
    log = read_log(path, format="toy-numbered")
    assert log.train["aux_loss_1"].drop_nulls().len() == 159 and compiled_reader["handed"] == 0
    assert log.train["aux_loss_0"].drop_nulls().len() == 12000 - 159


def test_a_file_of_other_lines_goes_to_the_polars_path(tmp_path, compiled_reader) -> None:
    """Lines that share no skeleton (each its own run of words) leave the chunk to polars."""
    words = ["alpha", "beta", "gamma", "delta", "eps", "zeta"]
    lines = [f"{words[i % 6]}{i} {words[(i * 7) % 6]}-{i % 13} " + "x" * (i % 17) for i in range(400)]
    lines += megatron_lines(20)
    path = _write(tmp_path, lines)
    assert_same_as_per_line(path, "megatron")
    assert compiled_reader == {"read": 0, "handed": 1}


def test_off_without_the_setting_or_below_the_size(monkeypatch) -> None:
    monkeypatch.setenv("LOSSLENS_FAST", "off")
    assert skeleton.skeleton_reader(BY_NAME["megatron"], 1 << 30) is None
    monkeypatch.delenv("LOSSLENS_FAST")
    assert skeleton.skeleton_reader(BY_NAME["megatron"], 1 << 20) is None
    assert skeleton.skeleton_reader(BY_NAME["megatron"], 1 << 30) is not None
    assert skeleton.skeleton_reader(BY_NAME["olmo"], 1 << 30) is None  # records over several lines
    assert skeleton.skeleton_reader(BY_NAME["colon"], 1 << 30) is not None  # (its one-line records)


def _scan(lines: list[str]):
    k = compiled(skeleton.KERNELS)
    buf = np.frombuffer(("\n".join(lines) + "\n").encode(), dtype=np.uint8)
    starts, ends = line_bounds(buf)
    return skeleton.Scan(buf, starts, ends, *k.scan(buf, starts, ends, skeleton.WIDTH))


def test_a_skeleton_is_the_line_without_its_numbers() -> None:
    s = _scan(["step=3 loss=-1.25e-05 lr=1e-4", "step=1200 loss=-2.5 lr=3E+2",  # one skeleton
               "step=3 loss=1.25e-05 lr=1e-4",  # a sign is part of it
               "step=3 loss=nan lr=1e-4",  # 'nan' is text
               "v1.2 top5 x_9 rank0: 7",  # numbers inside words are text
               "tps: 31,042 ok", "tps: 31,04 ok",  # a thousands group's width counts
               "   ", "0.12345678901234567890", "step=3  loss=-1.25e-05 lr=1e-4"])
    assert s.hashes[0] == s.hashes[1] and s.hashes[2] != s.hashes[0] != s.hashes[3]
    assert s.values[0, :3].tolist() == [3.0, -1.25e-05, 1e-4]
    assert s.values[1, :3].tolist() == [1200.0, -2.5, 300.0]
    assert s.counts[4] == 1 and s.values[4, 0] == 7.0
    assert s.hashes[5] != s.hashes[6] and s.values[5, :2].tolist() == [31.0, 42.0]
    assert s.blank.tolist() == [False] * 7 + [True, False, False]
    assert s.hashes[9] != s.hashes[0]  # every space counts
    ranked = _scan(["[rank3]: step=1", "  [3]:x", "[rank]: step=1", "x [rank3]: y", "[rank3] :"]).ranked
    assert ranked.tolist() == [True, True, False, False, False]
    assert s.counts[8] == 1 and np.isnan(s.values[8, 0])  # more digits than read exactly
    # leading zeros are not significant: Python's repr of a small float is read exactly
    s = _scan(["epoch 0.004618937644341801 lr 5.773672055427253e-07 x 0.00000000000000001234 "
               "y 0.0000000000000000000001234"])  # (a power of ten past 1e-22: not exact here)
    assert s.values[0, :3].tolist() == [0.004618937644341801, 5.773672055427253e-07, 1.234e-17]
    assert np.isnan(s.values[0, 3])


def test_stamps_read_as_the_per_line_parser_reads_them() -> None:
    k = compiled(skeleton.KERNELS)
    texts = ["2024-02-29 10:00:00,5", "2024-05-31T15:45:19.123456789Z", "2023-02-29 10:00:00",
             "2024-05-31 25:00:00", "2024-05-31"]
    buf = np.frombuffer("\n".join(texts).encode(), dtype=np.uint8)
    starts, ends = line_bounds(buf)
    micros, ok = k.stamps(buf, starts, ends)
    assert ok.tolist() == [True, True, False, False, False]
    epoch = datetime(1970, 1, 1)
    assert [int(m) for m in micros[:2]] == [
        (datetime(2024, 2, 29, 10, 0, 0, 500000) - epoch) // skeleton._US,
        (datetime(2024, 5, 31, 15, 45, 19, 123456) - epoch) // skeleton._US]


COLON_FIXTURES = ["custom_colon.log", "keras_stdout.log", "timm_train.log", "metric_logger.log",
                  "progress_meter.log", "composer_console.log", "mmengine.log", "torchtune_bar.log"]


@pytest.mark.parametrize("chunk", [700, 5_000])
def test_a_parser_with_state_reads_the_first_of_each_run(tmp_path, compiled_reader, chunks_of,
                                                          chunk) -> None:
    """The 'key: value' parser keeps records open over several lines (an 'Epoch k/E' head, an
    evaluation's lines at the last step): the reader takes only a record line whose line before
    is one too, and tells the parser each step it read. Its own lines with a real run's noise,
    every colon fixture's lines among them, in chunks that cut anywhere: as line by line."""
    chunks_of(chunk)
    lines = with_noise(colon_lines(2500, epoch_steps=300, eval_every=40, seed=2), 0.02, seed=4)
    at = 0
    for name in COLON_FIXTURES:  # (each fixture's lines as a block between the generated ones)
        at += len(lines) // (len(COLON_FIXTURES) + 1)
        lines[at:at] = (FIXTURES / name).read_text().splitlines()
    path = _write(tmp_path, lines)
    assert_same_as_per_line(path, "colon")
    assert compiled_reader["read"] > 3, compiled_reader
    evals = read_log(path, format="colon").eval
    assert evals.filter(pl.col("eval_acc").is_not_null())["step"].to_list()[:3] == [40, 80, 120]


def test_a_line_blank_only_once_its_rank_is_cut_is_the_parser_s(tmp_path, compiled_reader) -> None:
    """'[rank1]: ' with nothing after it is no blank line (the parser reads and skips it), though
    the cut chunk the kernel scans holds an empty line there."""
    lines = megatron_lines(1500, rank_prefix="[rank0]:")
    for at in range(100, 1500, 150):
        lines.insert(at, f"[rank{at % 4}]: ")
    path = _write(tmp_path, lines)
    assert_same_as_per_line(path, "megatron")
    log = read_log(path, format="megatron")
    assert log.lines.blank == 0 and sum(log.lines.skipped.values()) == 10
    assert compiled_reader["handed"] == 0
