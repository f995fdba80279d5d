"""The column-wise nanoGPT and Megatron readers give exactly what their per-line parsers give."""

from __future__ import annotations

import random

import pytest

from losslens import read_log, synth
from tests.conftest import FIXTURES, reallog
from tests.naive import assert_same_as_per_line as assert_same

pytestmark = pytest.mark.usefixtures("columnar")


@pytest.mark.parametrize(("path", "format"), [
    (FIXTURES / "megatron_ranks.log", "megatron"), (FIXTURES / "nanogpt_nan.log", "nanogpt")])
def test_fixtures(path, format: str) -> None:
    assert_same(path, format)


@pytest.mark.parametrize(("name", "format"), [
    ("megatron-ds-qwen7b-v100-dynamic-freq", "megatron"), ("bloom-tr1-13b-chronicles-loss-spike", "megatron"),
    ("bloom-tr8-104b-chronicles-divergence", "megatron"), ("nanogpt-termux-cpu-nan", "nanogpt")])
def test_real_logs(name: str, format: str) -> None:
    assert_same(reallog(name), format)


NANO_ODD = [
    "", "  ", "iter 7: loss nan, time 1431.27ms, mfu -100.00%", "ITER 8: LOSS 2.5, TIME 12ms",
    "iter 9: loss -inf, time 3ms, mfu 0.5%", "step 10: train loss 2.1000, val loss NaN",
    "saving checkpoint to out", "iter 11: loss 2.5", "iter 12: loss 2.5, time 3.5e2ms, mfu 1e1%",
    "Traceback (most recent call last):", "number of parameters: 10.65M", " iter 13: loss 2.5, time 3ms",
]


MEGA_ODD = [
    "", " iteration       15/   10000 | lm loss: nan | grad norm: nan |",
    " iteration       16/   10000 | consumed samples: 1,024 | learning rate: 6.000E-05 |",  # no loss
    " iteration       17/   10000 | lm loss: 2.5 | lm loss: 2.7 | grad norm: 1.0 |",  # twice
    " iteration       18/   10000 | lm loss: 2.5 2.6 | elapsed time per iteration (ms): 1e3 |",
    " iteration       19/   10000 | LM Loss: 2.5 | number of nan iterations:   1 | mystery: 3 |",
    " validation loss at iteration 20 on valid set | lm loss value: 2.9E+00 | lm loss PPL: 18.1 |",
    "validation loss at iteration 21 | lm loss value: inf | lm loss PPL: inf | ",
    "validation loss at iteration 22 | nothing: 1 |",
    "--------------------------------------------------------------------",
    " iteration       23/   10000 | lm loss: 2.5 | elapsed time per iteration (ms): 1,5 |",
    "> building train, validation, and test datasets ...",
    " iteration       24/   10000 |",
]


@pytest.mark.parametrize("seed", [0, 1])
def test_generated_with_odd_lines(tmp_path, seed: int) -> None:
    rng = random.Random(seed)
    for format, lines, odd in (("nanogpt", synth.nanogpt_lines(6000, every=2, seed=seed), NANO_ODD),
                               ("megatron", synth.megatron_lines(2000, seed=seed), MEGA_ODD)):
        lines = list(lines)
        for _ in range(120):
            lines.insert(rng.randrange(len(lines)), rng.choice(odd))
        path = tmp_path / f"{format}.log"
        path.write_text("\n".join(lines) + ("\n" if seed else ""))
        assert_same(path, format)
        assert read_log(path).format == format


@pytest.mark.parametrize("prefix", ["[rank{r}]: ", "[default{r}]: ", "2024-05-01T10:00:{s:02d}.5Z "])
def test_ranked_and_timestamped_megatron(tmp_path, prefix: str) -> None:
    lines = [prefix.format(r=i % 2, s=i % 60) + x for i, x in enumerate(synth.megatron_lines(1000))]
    path = tmp_path / "p.log"
    path.write_text("\n".join(lines) + "\n")
    assert_same(path, "megatron")


@pytest.mark.parametrize("name", ["modded-nanogpt-2024-11-14-run-932bbe0e", "llmc-old-format-adamw-baseline",
                                  "text-diffusion-lm-modded-nanogpt-fork"])
def test_real_modded_nanogpt_and_llmc_logs(name: str) -> None:
    assert_same(reallog(name), "modded-nanogpt")


MODDED_ODD = [
    "", "step:7/100 train_loss:nan train_time:3ms step_avg:nanms", "step:8/100 val_loss:3.5 train_time:9ms",
    "step:9/100 train_loss:3.5 train_loss:3.6 lr:1e-3", "step:10/100 note:x", "s:11 trl:4.25",
    "s:12 tel:inf", "  s:13 trl:4.0  ", "step 14/100 | loss 3.9 | norm 1.2 | lr 3.0e-04 | 512.25 ms | "
    "41.2% bf16 MFU | 123456 tok/s", "step 15/100 | train loss nan | norm nan | lr 3e-4",
    "Traceback (most recent call last):", "step:16/100 train_loss:3.4 train_time:1,250ms",
]


@pytest.mark.parametrize("seed", [0, 1])
def test_modded_nanogpt_with_odd_lines(tmp_path, seed: int) -> None:
    rng = random.Random(seed)
    lines = [f"step:{i}/5000 train_loss:{4 - i / 2000 + rng.gauss(0, .02):.4f} train_time:{i * 391}ms "
             f"step_avg:{391 + rng.gauss(0, 2):.2f}ms" for i in range(5000)]
    for _ in range(100):
        lines.insert(rng.randrange(len(lines)), rng.choice(MODDED_ODD))
    path = tmp_path / "modded.log"
    path.write_text("\n".join(lines) + "\n")
    assert_same(path, "modded-nanogpt")
