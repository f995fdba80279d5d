"""The column-wise reading of the Trainer's printed dicts gives exactly what the per-line parser
gives, until a progress bar shows and after."""

from __future__ import annotations

import random

import pytest

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
