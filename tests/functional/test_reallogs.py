"""Every public log in ../shared/reallogs parses with the record counts its SOURCE.md states."""

from __future__ import annotations

import math

import polars as pl
import pytest

from losslens import read_log
from tests.conftest import reallog

# name, format, train records, eval records, segments
EXPECTED = [
    ("nanogpt-termux-cpu-nan", "nanogpt", 91, 5, 1),
    ("modded-nanogpt-2024-11-14-run-932bbe0e", "modded-nanogpt", 19073, 154, 1),
    ("llmc-old-format-adamw-baseline", "modded-nanogpt", 9536, 76, 1),
    ("mistral7b-translator-lora-llamafactory-jsonl", "jsonl", 866, 0, 1),
    ("megatron-ds-qwen7b-v100-dynamic-freq", "megatron", 500, 5, 1),
    ("gemma4-26b-deepspeed-swift-sft-stdout", "hf", 294, 0, 1),
    ("qwen3-8b-qlora-hf-trainer-nohup", "hf", 175, 8, 1),
    ("chatglm2-ptuning-trainer-state", "trainer-state", 300, 0, 1),
    ("bloom-tr1-13b-chronicles-loss-spike", "megatron", 8, 0, 1),
    ("bloom-tr8-104b-chronicles-divergence", "megatron", 8, 1, 2),
    ("text-diffusion-lm-modded-nanogpt-fork", "modded-nanogpt", 7151, 8, 1),
    ("fairseq-iwslt14-lm-three-restarts", "fairseq", 1110, 0, 3),
    ("olmo-1b-continued-pretrain-console", "olmo", 1010, 0, 1),
    ("lightning-slm-gpt-stuck-run-metrics-csv", "csv", 220, 0, 1),
    ("vispec-eagle1-draft-keyvalue-nemo-automodel-pr3173", "kv", 18, 0, 1),
    ("keras-csvlogger-mnist-cnn", "csv", 30, 30, 1),
]


@pytest.mark.parametrize(("name", "fmt", "train", "evals", "segments"), EXPECTED,
                         ids=[e[0] for e in EXPECTED])
def test_counts(name: str, fmt: str, train: int, evals: int, segments: int) -> None:
    log = read_log(reallog(name))
    assert log.format == fmt
    assert log.train.height == train
    assert log.eval.height == evals
    assert len(log.segments) == segments
    lines = log.lines
    assert lines.parsed + lines.n_skipped + lines.blank == lines.total
    assert "loss" in log.metrics


def value_at(log, step: int, metric: str = "loss", frame: str = "train") -> float:
    df = getattr(log, frame)
    return df.filter(pl.col("step") == step)[metric].to_list()[0]


def test_nanogpt_nan_from_425() -> None:
    log = read_log(reallog("nanogpt-termux-cpu-nan"))
    loss = log.train["loss"].to_numpy()
    steps = log.train["step"].to_numpy()
    assert steps[0] == 0 and steps[-1] == 450
    assert int(steps[[math.isnan(x) for x in loss]].min()) == 425
    assert sum(math.isnan(x) for x in loss) == 6
    assert value_at(log, 0) == 4.2709
    assert log.train["step_time_s"][0] == pytest.approx(10.26808)
    assert "mfu" not in log.train.columns or log.train["mfu"][0] is None  # -100%: unset


def test_modded_spike_value() -> None:
    log = read_log(reallog("modded-nanogpt-2024-11-14-run-932bbe0e"))
    assert [value_at(log, s) for s in (14256, 14257, 14258)] == [3.2266, 6.2785, 3.0936]
    assert log.eval["eval_loss"].to_list()[-1] == 3.0642


def test_megatron_fields() -> None:
    log = read_log(reallog("bloom-tr1-13b-chronicles-loss-spike"))
    assert log.train["step"].to_list() == list(range(29020, 29100, 10))
    assert value_at(log, 29050) == pytest.approx(7.343709)
    assert value_at(log, 29050, "loss_scale") == 8192.0
    assert value_at(log, 29020, "lr") == pytest.approx(9.85e-05)
    assert value_at(log, 29020, "step_time_s") == pytest.approx(22.3066)
    div = read_log(reallog("bloom-tr8-104b-chronicles-divergence"))
    assert value_at(div, 7010, "grad_norm") == pytest.approx(219645.978)
    assert div.eval["eval_loss"].to_list() == [pytest.approx(7.1742)]
    assert [s.first_step for s in div.segments] == [7000, 6900]


def test_hf_stdout_steps_from_tqdm_and_string_values() -> None:
    qwen = read_log(reallog("qwen3-8b-qlora-hf-trainer-nohup"))
    assert qwen.train["step"].to_list()[:3] == [10, 20, 30]
    assert qwen.train["loss"][0] == 2.1095  # on the same physical line as the tqdm redraws
    assert qwen.eval["eval_loss"].to_list()[0] == pytest.approx(1.382, abs=5e-4)
    # buffered stdout: steps rebuilt, each eval at the step of the last train record before it
    assert qwen.eval["step"].to_list() == [200, 400, 600, 800, 1000, 1200, 1400, 1600]
    gemma = read_log(reallog("gemma4-26b-deepspeed-swift-sft-stdout"))
    assert gemma.train["step"].to_list()[:3] == [1, 2, 3]
    assert gemma.train["loss"][0] == 2.029
    assert gemma.train["elapsed_s"][0] == 120.0  # '1m 60s'


def test_fairseq_restarts() -> None:
    log = read_log(reallog("fairseq-iwslt14-lm-three-restarts"))
    assert [(s.first_step, s.last_step, s.records) for s in log.segments] == [
        (100, 1000, 10), (100, 10000, 100), (100, 100000, 1000)]
    assert value_at(log, 100) == 12.835
    assert log.lines.skipped["epoch summary"] == 109


def test_olmo_multiline_records() -> None:
    log = read_log(reallog("olmo-1b-continued-pretrain-console"))
    first = log.train.row(0, named=True)
    assert first["step"] == 1 and first["loss"] == 2.998 and first["grad_norm"] == 0.2370
    assert log.train["tokens_per_s"].drop_nulls()[0] == 68289.0


def test_keras_crlf_and_eval_apart() -> None:
    log = read_log(reallog("keras-csvlogger-mnist-cnn"))
    assert log.train["step"].to_list() == list(range(30))
    assert log.eval["eval_loss"][0] == pytest.approx(3.6416454315185547)
    assert log.train["loss"][0] == pytest.approx(0.3654542565345764)


def test_trainer_state_and_jsonl() -> None:
    st = read_log(reallog("chatglm2-ptuning-trainer-state"))
    assert st.train["step"].to_list()[:2] == [10, 20]
    assert st.train["loss"][0] == 2.6644
    assert st.train["line"][0] > 1
    lf = read_log(reallog("mistral7b-translator-lora-llamafactory-jsonl"))
    assert lf.train["step"].to_list()[-1] == 8660
    assert lf.lines.skipped == {"no training metric": 1}


def test_kv_python_logging() -> None:
    log = read_log(reallog("vispec-eagle1-draft-keyvalue-nemo-automodel-pr3173"))
    row = log.train.row(0, named=True)
    assert row["step"] == 1360 and row["loss"] == 2.3473 and row["acc"] == 0.3961
    assert row["grad_norm"] == 0.1709 and str(row["time"]) == "2026-07-26 19:46:46"


def test_lightning_sparse_rows() -> None:
    log = read_log(reallog("lightning-slm-gpt-stuck-run-metrics-csv"))
    assert log.train["step"].to_list()[:2] == [49, 99]
    assert log.train["loss"][0] == pytest.approx(7.6820597648620605)


def test_framework_lines_are_named_not_unrecognised() -> None:
    """The diffusion fork's log is mostly torch._dynamo's glog warnings ('W0530 14:48:26.433000
    2622492 …/convert_frame.py:1233] …'); Megatron-DeepSpeed's has Python warnings.warn lines;
    fairseq prints its model's module tree."""
    diffusion = dict(read_log(reallog("text-diffusion-lm-modded-nanogpt-fork")).lines.skipped)
    assert diffusion["framework log line"] == 5700 and diffusion["unrecognised line"] == 32
    qwen7b = dict(read_log(reallog("megatron-ds-qwen7b-v100-dynamic-freq")).lines.skipped)
    assert qwen7b["traceback or warning"] == 232  # warnings.warn and DeepSpeed's ' [WARNING] '
    fairseq = dict(read_log(reallog("fairseq-iwslt14-lm-three-restarts")).lines.skipped)
    assert fairseq["model printout"] == 732 and fairseq["unrecognised line"] == 3  # the model's repr
