"""The vectorised key=value reader gives exactly what the per-line parser gives."""

from __future__ import annotations

import random
import re

import polars as pl
import pytest

from losslens import read_log, synth
from losslens.logs.formats.kv import columns as kv_fast
from tests.conftest import FIXTURES
from tests.naive import assert_same_as_per_line, sprinkle

pytestmark = pytest.mark.usefixtures("columnar", "kv_reader")


def assert_same(path) -> None:
    assert_same_as_per_line(path, "kv")


@pytest.mark.parametrize("name", ["seed004_dflash.log", "drafter_restart.log"])
def test_fixtures(name: str) -> None:
    assert_same(FIXTURES / name)


NOISE = [
    "",
    "   ",
    "Traceback (most recent call last):",
    "[2026-05-15 21:30:00] checkpoint saved to /ckpt/step_500",
    "[2026-05-15 21:30:01] step=77 loss=nan acc=0.1 lr=1e-05 extra_key=3",  # unknown key
    "[2026-05-15 21:30:02] step=78 loss=1.5 acc=0.1 global_step=9 lr=1e-5",  # hidden 'step'
    "[2026-05-15 21:30:03.250] step=79 loss=1.5 acc=0.1",  # fractional seconds
    "step=80 loss=1.25e+00 acc=0.2 q_pre=[1,2,3] note=ok",  # no time, list without spaces
    "[2026-05-15 21:30:05] step=81 loss=-inf acc=0.1 q_pre=[] q_hs=[x]",  # empty / bad list
    "[2026-05-15 21:30:06] step=82 loss=0.5 | tgt=1.5Mtok/s eval_loss=0.7",  # eval on a line
    "[2026-05-15 21:30:07] step=83 lr=1e-5 noise=0.1",  # no training metric
    "[2026-05-15 21:30:08] step=84 loss=1,5 acc=0.1",  # comma: value cut at ','
    "\u00e9t\u00e9 step=85 loss=0.9 acc=0.1 \u2713",
    "[2026-05-15 21:30:09] step=86 loss=0.9 acc=0.1 ETA=1h",
    "[2026-05-15 21:30:10] step=87 loss= 0.9 acc=0.1",  # empty value
    "[2026-05-15 21:30:11] step=88 loss=0.9~x acc=0.1",  # '~' inside a value
    "[2026-05-15 21:30:12] step=89 loss=0.9 acc=0.1 tokens=1.05M wait=3m params=7B",  # magnitudes
    "Step 90/1000: training loss=0.9, validation loss=1.1, full validation loss=1.0",  # OpenAI's events
    "[2026-05-15 21:30:13] step=91 train loss=0.9 val acc=0.5 test acc = 0.4 eval step=3",
    # a rate before the template's rate cell: the first one is the line's
    "[2026-05-15 21:30:14] step=92 loss=0.9 acc=0.1 streak=1.2 lr=1e-05 noise=0.1 (5.0tok/s) | tgt=0.68b/s "
    "dft=0.68b/s (32.1Ktok/s) | q_pre=[1, 2, 3, 4, 5, 6] q_hs=[1] | epoch~0.00 ETA=4.0d",
]


def test_a_phase_word_before_a_loss_is_part_of_its_key(tmp_path) -> None:
    """OpenAI fine-tuning's events, 'Step 100/1000: training loss=0.21, validation loss=0.33, full
    validation loss=0.30': every pair was 'loss', the first kept, the validation loss lost. A phase
    word before 'loss' or 'acc' is part of the key, line by line and column-wise."""
    lines = [f"Step {s}/1000: training loss={2 / (1 + s / 100):.4f}"
             + (f", validation loss={2.2 / (1 + s / 100):.4f}" if s % 50 == 0 else "")
             for s in range(1, 5001)]
    path = tmp_path / "ft.log"
    path.write_text("\n".join(lines) + "\n")
    assert_same(path)
    log = read_log(path)
    assert (log.format, log.train.height, log.eval.height) == ("kv", 5000, 100)
    assert log.eval["eval_loss"][0] == round(2.2 / 1.5, 4)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_generated_with_odd_lines(tmp_path, seed: int) -> None:
    rng = random.Random(seed)
    lines = list(synth.dflash_lines(3000, seed=seed))
    sprinkle(lines, NOISE, 200, rng)
    path = tmp_path / "odd.log"
    path.write_text("\n".join(lines) + ("\n" if seed else ""))  # seed 0: no final newline
    assert_same(path)


# values a template line holds that its first readings (a plain cast, the template's unit, a
# ', ' split list, an integer step) must leave to the later ones or to the per-line parser
ODD_VALUES = {
    "tgt": ["nanb/s", "infb/s", "-infb/s", "1e3b/s", "0.5", "2.5Mb/s", "0.7B/S", "b/s", "1,5b/s", "0:00:24"],
    "ETA": ["23.5h", "4.0d", "nand", "1e1d", "0:00:24", "1 day, 2:03:04.5", "5m", "d", "-4d"],
    "step": ["+5", "5.0", "5/100", "'5", "5.5", "1e3", "nan"],
    "q_pre": ["[]", "[1,2]", "[1, x]", "[ 1, 2]", "[nan, inf]", "[1.5e3, -2]"],
    "loss": ["nan", "-inf", "1e-3", ".5", "5.", "+0.5", "0x10", "1_0"],
}


@pytest.mark.parametrize("seed", [0, 1])
def test_first_readings_agree_with_the_per_line_parser(tmp_path, seed: int) -> None:
    """The query reads numbers with the unit the template was written with, lists split at
    ', ' and steps as integers in one pass; every value that reading misses or could misread
    ('nanb/s', a second unit, '[1,2]', '5/100') is read as the per-line parser reads it."""
    rng = random.Random(seed)
    lines = list(synth.dflash_lines(3000, seed=seed))
    for _ in range(600):
        at = rng.randrange(len(lines))
        key = rng.choice(list(ODD_VALUES))
        lines[at] = re.sub(rf"\b{key}=(\[[^\]]*\]|[^ ]+)", f"{key}={rng.choice(ODD_VALUES[key])}",
                           lines[at], count=1)
    path = tmp_path / "odd_values.log"
    path.write_text("\n".join(lines) + "\n")
    assert_same(path)
    log = read_log(path)
    assert log.train.height > 2900 and log.train["eta_s"].drop_nulls().max() > 86400


def test_chunk_boundaries_do_not_split_lines(tmp_path, chunks_of) -> None:
    chunks_of(1000)
    path = tmp_path / "small.log"
    path.write_text("\n".join(synth.dflash_lines(400)) + "\n")
    log = read_log(path)
    assert log.train["step"].to_list() == list(range(400))
    assert log.lines.total == 400


def test_templates_found() -> None:
    lines = list(synth.dflash_lines(50))
    (t,) = kv_fast.templates(lines)
    assert t.keys[:3] == ("step", "loss", "acc") and t.rate_cell == 8 and t.lead[0] == " "
    assert t.lists == tuple(k in ("q_pre", "q_hs") for k in t.keys)


def test_fast_path_reads_dflash_columns(tmp_path) -> None:
    path = tmp_path / "d.log"
    path.write_text("\n".join(synth.dflash_lines(1000)) + "\n")
    log = read_log(path)
    assert log.train.schema["q_pre"] == pl.List(pl.Float64)
    assert log.train["tokens_per_s"].is_between(30000, 34000).all()


CAPTURES = [
    lambda i: f"2024-05-01T10:{i // 60 % 60:02d}:{i % 60:02d}.{i:09d}Z ",  # kubectl --timestamps
    lambda i: f"2024-05-01 10:00:{i % 60:02d},{i % 1000:03d} - INFO - ",  # Python logging
    lambda i: f"> [2024-05-01 10:00:{i % 60:02d}] INFO:root:",  # quoted in an issue
    lambda i: f"Dec  1 10:00:{i % 60:02d} node7 train.sh[4242]: ",  # journald
    lambda i: f"[rank{i % 4}]: ",  # torchrun
    lambda i: f"[default{i % 2}]: 2024-05-01 10:00:{i % 60:02d} ",  # torchrun --tee, then a time
]


@pytest.mark.parametrize("shape", range(len(CAPTURES)))
def test_captured_and_ranked_lines_read_vectorised_as_line_by_line(tmp_path, shape: int) -> None:
    """A capture's prefixes and torchrun rank prefixes are cut off column-wise, their time and
    rank kept, with odd lines (bare, blank, a prefix alone, noise) among them."""
    rng = random.Random(shape)
    prefix = CAPTURES[shape]
    lines = [prefix(i) + x for i, x in enumerate(synth.dflash_lines(2000, seed=shape))]
    for _ in range(80):
        at = rng.randrange(len(lines))
        lines.insert(at, rng.choice(NOISE + [prefix(at), prefix(at).rstrip(), prefix(at) + " "]))
    path = tmp_path / "captured.log"
    path.write_text("\n".join(lines) + "\n")
    assert_same(path)
    log = read_log(path)
    assert log.train.height >= 2000 // (4 if "rank" in prefix(0) else 2 if "default" in prefix(0) else 1)


def test_kubectl_timestamps_are_the_records_time(tmp_path) -> None:
    path = tmp_path / "k.log"
    path.write_text("".join(f"2024-05-01T10:00:{i:02d}.123456789Z step={i} loss={3 - i / 100} acc=0.5\n"
                            for i in range(50)))
    log = read_log(path)
    assert str(log.train["time"][3]) == "2024-05-01 10:00:03.123456"


@pytest.mark.parametrize("end", ["\n", ""])
def test_a_few_ranked_lines_among_records_go_to_the_parser_as_filed(tmp_path, chunks_of, end: str) -> None:
    """A few lines behind '[rankN]: ' among key=value records (a rank's NCCL warning, a prefix
    alone, a rank's own record, a line that is not UTF-8, the file's last line): hidden from the
    template reader, read by the parser as the file has them, in chunks of any size."""
    chunks_of(1 << 14)
    lines = [x.encode() for x in synth.dflash_lines(1200, seed=4)]
    odd = [b"[rank1]: NCCL WARN Timeout 600000 ms", b"[rank1]: ", b"[rank3]:",
           b"[rank2]: step=77 loss=2.5 acc=0.5 lr=1e-05",
           b"[rank0]: caf\xe9 step=78 loss=nan", b"  [rank1]: indented warning"]
    for i, x in enumerate(odd):
        lines.insert(150 * (i + 1), x)
    lines.append(b"[rank1]: the last line")
    path = tmp_path / "ranked.log"
    path.write_bytes(b"\n".join(lines) + end.encode())
    assert_same(path)
    log = read_log(path)
    assert log.lines.total == 1207 and log.train.height == 1201  # (rank 0's NaN record is one)
    assert log.lines.skipped == {"unrecognised line": 5, "another rank's record (rank 0 analysed)": 1}
