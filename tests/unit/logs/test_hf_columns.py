"""The column-wise reading of the Trainer's printed dicts gives exactly what the per-line parser
gives, until a progress bar shows and after."""

from __future__ import annotations

import random

import pytest

from losslens import read_log
from losslens.synth import hf_stdout_lines, with_noise
from tests.conftest import FIXTURES, reallog
from tests.naive import assert_same_as_per_line, sprinkle

pytestmark = pytest.mark.usefixtures("columnar")


def test_fixture_and_real_logs() -> None:
    assert_same_as_per_line(FIXTURES / "hf_stdout.log", "hf")
    for name in ("gemma4-26b-deepspeed-swift-sft-stdout", "qwen3-8b-qlora-hf-trainer-nohup"):
        assert_same_as_per_line(reallog(name), "hf")


ODD = [
    "", "{'loss': nan, 'grad_norm': nan, 'learning_rate': 1e-05, 'epoch': 0.5}",
    "{'eval_loss': 1.25, 'eval_runtime': 3.2, 'epoch': 0.5}",
    "{'train_runtime': 100.0, 'train_loss': 1.2, 'epoch': 1.0}",
    "{'loss': 1.5, 'note': \"it's\", 'epoch': 0.5}", "{'loss': 1.5, 'flag': True, 'x': None}",
    "{'loss': 1.5, 'per_rank': [1.4, 1.6], 'empty': []}", "{'loss': (1, 2)}", "{'loss': '0.5'}",
    "Saving model checkpoint to out/checkpoint-500", "{'loss': 1.5, 'epoch': 0.5}  ",
    "{'loss': 1e-05, 'grad_norm': -0.0, 'step': 12}", "{'loss': 1.5, 'loss ': 1.7}",
]


def _dicts(n: int, rng: random.Random, own_steps: bool) -> list[str]:
    out = []
    for i in range(n):
        rec = {"loss": round(3 - i / n + rng.gauss(0, 0.02), 4), "grad_norm": round(rng.uniform(0.5, 2), 4),
               "learning_rate": 2e-05, "epoch": round(i / n, 2)}
        if own_steps:
            rec["step"] = 10 * (i + 1)
        out.append(str(rec))
    return out


@pytest.mark.parametrize(("seed", "own_steps"), [(0, False), (1, True)])
def test_generated_dicts_with_odd_lines(tmp_path, seed: int, own_steps: bool) -> None:
    rng = random.Random(seed)
    lines = _dicts(3000, rng, own_steps)
    sprinkle(lines, ODD, 100, rng)
    path = tmp_path / "hf.log"
    path.write_text("\n".join(lines) + "\n")
    assert_same_as_per_line(path, "hf")


@pytest.mark.parametrize("own_steps", [False, True])
def test_progress_bar_in_a_later_chunk(tmp_path, chunks_of, own_steps: bool) -> None:
    """Dicts read column-wise in the first chunks, then a bar: from there on the per-line parser,
    and the buffered-output step rebuild decided as it would be on the whole file."""
    chunks_of(20_000)
    rng = random.Random(2)
    lines = _dicts(600, rng, own_steps)
    bars = [f" {k}%|#| {k}/100 [00:0{k % 10}<00:10,  1.00it/s]" for k in range(1, 100)]
    lines = lines[:300] + bars + lines[300:] + ["{'eval_loss': 1.0, 'epoch': 1.0}"]
    path = tmp_path / "hf.log"
    path.write_text("\n".join(lines) + "\n")
    assert_same_as_per_line(path, "hf")


@pytest.mark.parametrize("buffered", [False, True])
@pytest.mark.parametrize("chunk", [3_000, 40_000])
def test_trainer_stdout_with_its_bars(tmp_path, chunks_of, buffered: bool, chunk: int) -> None:
    """A Trainer's stdout and stderr in one file (the bar redrawn with '\\r', each dict written
    through it, evaluation bars), noise between, read in chunks that cut it anywhere: the dicts
    read column-wise at the steps the bar gives them, the redraw-only lines skipped as progress
    bars, the step times from the bar's rate and (buffered) the rebuilt steps as line by line."""
    chunks_of(chunk)
    lines = with_noise(hf_stdout_lines(600, logging_steps=5, eval_steps=100, buffered=buffered), 0.03)
    path = tmp_path / "hf.log"
    path.write_text("\n".join(lines) + "\n")
    assert_same_as_per_line(path, "hf")
    log = read_log(path, format="hf")
    assert log.train.height == 120
    if buffered:
        assert any("steps rebuilt" in note for note in log.notes)
    else:
        assert log.train["step"].to_list() == list(range(5, 601, 5))
        assert any("step times read from the progress bar" in note for note in log.notes)
    assert log.lines.skipped["progress bar"] >= 6


def test_a_second_run_after_the_first(tmp_path, chunks_of) -> None:
    """Two runs' stdout one after the other (the bar's count starts again): the same steps as the
    per-line parser gives, whichever chunk the second run starts in."""
    chunks_of(5_000)
    lines = hf_stdout_lines(300, logging_steps=5, seed=1) + hf_stdout_lines(200, logging_steps=5, seed=2)
    path = tmp_path / "hf.log"
    path.write_text("\n".join(lines) + "\n")
    assert_same_as_per_line(path, "hf")


def test_odd_lines_among_bars(tmp_path, chunks_of) -> None:
    """Odd lines (NaNs, lists, strings, a dict after a bar's redraws that is not the line's end,
    two dicts on a line, a count past int64) among a bar-drawn stdout."""
    chunks_of(4_000)
    rng = random.Random(5)
    lines = hf_stdout_lines(400, logging_steps=4, eval_steps=80, seed=3)
    odd = ODD + [
        "\r 50%|#| 5/10 [00:01<00:01, 2.00it/s]{'loss': 1.5, 'epoch': 0.5}"
        "\r 60%|#| 6/10 [00:01<00:01, 2.00it/s]",
        "{'loss': 1.5}{'loss': 1.4}", "\r 10%|#| 99999999999999999999/10 [00:01<00:01, 2.00it/s]",
        "\r 10%|#| 1/10 [00:01<?, ?it/s]", "UserWarning: 10%|#| 1/10 [00:01<00:01, 2.00it/s]",
        "\r 20%|#| 2/1000000 [00:01<00:01, 0.00it/s]", "\r 20%|#| 3/1000000 [00:01<00:01, 3.00s/it]",
        "\r 30%|#| 4/1000000 [junk [00:01<00:01, 2.50it/s]",  # (the rate after a second '[')
    ]
    sprinkle(lines, odd, 60, rng)
    path = tmp_path / "hf.log"
    path.write_text("\n".join(lines) + "\n")
    assert_same_as_per_line(path, "hf")
