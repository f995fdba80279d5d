"""Readers on the bundled fixtures: exact values, units, lists, eval apart, restarts, accounting."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest

from losslens import read_log, synth
from losslens.errors import FormatError
from losslens.logs import BY_NAME, FORMATS, sniff
from losslens.logs.base import TOO_LONG
from losslens.logs.names import canonical
from tests.conftest import FIXTURES


def test_seed004_every_field() -> None:
    log = read_log(FIXTURES / "seed004_dflash.log")
    assert log.format == "kv"
    assert log.train.height == 30
    row = log.train.filter(pl.col("step") == 338).row(0, named=True)
    assert row["loss"] == 0.8183 and row["acc"] == 0.055 and row["streak"] == 1.2
    assert row["lr"] == 8.81e-05 and row["noise"] == 0.1
    assert row["tgt"] == 0.68 and row["dft"] == 0.68  # '0.68b/s'
    assert row["tokens_per_s"] == pytest.approx(32100.0)  # '(32.1Ktok/s)'
    assert row["q_pre"] == [50.0, 50.0, 46.0, 45.0, 44.0, 46.0]
    assert row["q_pre_min"] == 44.0 and row["q_pre_mean"] == pytest.approx(281 / 6)
    assert row["q_hs"] == [0.0]
    assert row["epoch"] == 0.02  # 'epoch~0.02'
    assert row["eta_s"] == 4.0 * 86400  # 'ETA=4.0d'
    assert str(row["time"]) == "2026-05-15 21:26:03"
    assert row["line"] == 24
    assert log.train["step"].to_list()[:4] == [0, 2, 3, 4]
    assert log.names["eta_s"] == "ETA" and log.names["tokens_per_s"] == "(Ktok/s)"


@pytest.mark.parametrize(("name", "fmt", "train", "evals", "segments"), [
    ("nanogpt_nan.log", "nanogpt", 41, 3, 1),
    ("metrics.jsonl", "jsonl", 32, 3, 1),
    ("megatron_ranks.log", "megatron", 20, 2, 1),
    ("drafter_restart.log", "kv", 12, 0, 2),
    ("hf_stdout.log", "hf", 3, 1, 1),
    ("trainer_state.json", "trainer-state", 3, 1, 1),
    ("keras_csvlogger.csv", "csv", 5, 5, 1),
    ("lightning_metrics.csv", "csv", 10, 2, 1),
    ("wandb_export.csv", "csv", 10, 0, 1),
    ("modded_nanogpt.log", "modded-nanogpt", 20, 1, 1),
    ("llmc_main.log", "modded-nanogpt", 20, 1, 1),
    ("fairseq.log", "fairseq", 5, 1, 1),
    ("torchtitan_ansi.log", "torchtitan", 10, 0, 1),
    ("olmo_console.log", "olmo", 5, 0, 1),
    ("keras_stdout.log", "colon", 5, 5, 1),
    ("custom_colon.log", "colon", 40, 2, 1),
    ("timm_train.log", "colon", 10, 4, 1),
    ("composer_console.log", "colon", 30, 2, 1),
    ("lightning_stdout.log", "lightning", 31, 2, 1),
    ("metric_logger.log", "colon", 10, 2, 1),
    ("progress_meter.log", "colon", 10, 2, 1),
    ("mmengine.log", "colon", 8, 2, 1),
    ("torchtune_bar.log", "colon", 40, 0, 1),
])
def test_fixture_counts(name: str, fmt: str, train: int, evals: int, segments: int) -> None:
    log = read_log(FIXTURES / name)
    assert (log.format, log.train.height, log.eval.height, len(log.segments)) == \
        (fmt, train, evals, segments)
    acc = log.lines
    assert acc.parsed + acc.n_skipped + acc.blank == acc.total
    # the same file read with its format named explicitly gives the same frame
    assert read_log(FIXTURES / name, format=fmt).train.equals(log.train)


def test_nonfinite_literals_and_nested_keys() -> None:
    log = read_log(FIXTURES / "metrics.jsonl")
    tail = log.train.tail(2)["loss"].to_list()
    assert math.isnan(tail[0]) and tail[1] == math.inf
    assert log.names["loss"] == "train/loss" and log.names["grad_norm"] == "train/grad_norm"


def test_restart_is_a_segment_not_merged() -> None:
    log = read_log(FIXTURES / "drafter_restart.log")
    assert [(s.first_step, s.last_step, s.records) for s in log.segments] == [(0, 50, 6), (30, 80, 6)]
    assert log.train["segment"].to_list() == [0] * 6 + [1] * 6
    assert any("segments (restarts)" in n for n in log.notes)


def test_hf_stdout_steps_eval_and_summary() -> None:
    log = read_log(FIXTURES / "hf_stdout.log")
    assert log.train["step"].to_list() == [10, 20, 30]
    assert log.eval.row(0, named=True)["step"] == 20
    assert log.lines.skipped["run summary"] == 1
    assert log.lines.skipped["progress bar"] == 27


def test_trainer_state_nan_grad_norm_and_lines() -> None:
    log = read_log(FIXTURES / "trainer_state.json")
    assert math.isnan(log.train["grad_norm"][1])
    text = (FIXTURES / "trainer_state.json").read_text().splitlines()
    for step, line in log.train.select("step", "line").rows():
        assert f'"step": {step}' in text[line - 1]


def test_keras_crlf_eval_split() -> None:
    log = read_log(FIXTURES / "keras_csvlogger.csv")
    assert log.train["loss"].to_list()[0] == 0.4
    assert log.eval["eval_loss"].to_list()[0] == 0.3


def test_megatron_rank_prefix_and_units() -> None:
    log = read_log(FIXTURES / "megatron_ranks.log")
    assert log.train["step"].to_list()[:2] == [10, 20]
    assert log.eval["step"].to_list() == [100, 200]
    assert 17 < log.train["step_time_s"][0] < 19


def test_torchtitan_ansi_stripped() -> None:
    log = read_log(FIXTURES / "torchtitan_ansi.log")
    row = log.train.row(0, named=True)
    assert row["step"] == 1 and row["loss"] == 7.9 and row["tokens_per_s"] == 6581.0
    assert row["mfu"] == 1.55


def test_colon_consoles_exact_values() -> None:
    keras = read_log(FIXTURES / "keras_stdout.log")  # 'Epoch 3/5' then that epoch's metrics line
    row = keras.train.filter(pl.col("step") == 3).row(0, named=True)
    assert row["epoch"] == 3.0 and row["loss"] == 0.1467 and row["acc"] == 0.91
    assert keras.eval.filter(pl.col("step") == 3)["eval_loss"].item() == 0.0866
    assert keras.train.filter(pl.col("step") == 2)["loss"].item() == 0.22  # not the mid-epoch 0.9999
    # TensorFlow's oneDNN notice (its own log format); model.evaluate()'s line after fit() is not
    # a training record
    assert dict(keras.lines.skipped) == {"framework log line": 1, "evaluate() after training": 1}
    custom = read_log(FIXTURES / "custom_colon.log")
    row = custom.train.filter(pl.col("step") == 200).row(0, named=True)
    assert (row["loss"], row["lr"], row["grad_norm"], row["tokens_per_s"]) == (2.2, 1e-4, 0.7, 31020.0)
    assert custom.eval["eval_loss"].to_list() == [2.2, 1.4] and custom.eval["step"].to_list() == [200, 400]
    assert custom.names["grad_norm"] == "grad norm" and dict(custom.lines.skipped) == \
        {"unrecognised line": 1}  # the logging WARNING line
    timm = read_log(FIXTURES / "timm_train.log")  # step = epoch x batches per epoch + batch
    assert timm.train["step"].to_list() == [0, 50, 100, 150, 199, 200, 250, 300, 350, 399]
    assert timm.train.filter(pl.col("step") == 250)["loss"].item() == 5.65
    last = timm.eval.filter(pl.col("step") == 399).row(-1, named=True)  # Test: at the last train step
    assert last["eval_loss"] == 4.1 and last["eval_acc_1"] == 30.5
    composer = read_log(FIXTURES / "composer_console.log")  # Train time/batch is the step
    assert composer.train["step"].to_list() == list(range(30))
    assert composer.train.filter(pl.col("step") == 9)["loss"].item() == 2.65
    assert composer.train.filter(pl.col("step") == 29)["lr"].item() == 6e-4  # lr-DecoupledAdamW/group0
    assert composer.eval["step"].to_list() == [14, 29]
    assert composer.eval["eval_loss"].to_list() == [2.425, 2.05]
    assert dict(composer.lines.skipped) == {"unrecognised line": 4, "progress line": 4}


def test_deepspeed_steps_lines_alone(tmp_path) -> None:
    (tmp_path / "ds.log").write_text("".join(
        f"steps: {s} loss: {12.6 - s / 10:.4f} iter time (s): 14.753 samples/sec: 1.084\n"
        for s in range(1, 6)))
    log = read_log(tmp_path / "ds.log")
    assert log.format == "colon" and log.train["step"].to_list() == [1, 2, 3, 4, 5]
    assert log.train["loss"][2] == 12.3 and log.train["samples_per_s"][0] == 1.084


@pytest.mark.parametrize("name", ["metric_logger.log", "progress_meter.log"])
def test_vision_training_loggers(name: str) -> None:
    """'Epoch: [E]  [B/N]' (MetricLogger, 'key: value') and 'Epoch: [E][B/N]' with tab-separated
    'Loss 6.9 (6.9)' fields (ProgressMeter): step = E × N + B; 'Test:' lines are eval records."""
    log = read_log(FIXTURES / name)
    assert log.train["step"].to_list() == [0, 100, 200, 300, 399, 400, 500, 600, 700, 799]
    row = log.train.filter(pl.col("step") == 600).row(0, named=True)
    assert row["loss"] == 5.4 and row["epoch"] == 1.0  # the current value, not the (mean)
    assert log.eval["step"].to_list() == [399, 799] and log.eval["eval_loss"].to_list() == [6.0, 5.0]
    skipped = dict(log.lines.skipped)
    assert skipped.pop("unrecognised line") == (4 if name == "metric_logger.log" else 2)  # '* Acc@1' etc.
    assert skipped == ({"epoch average": 2} if name == "metric_logger.log" else {})


def test_metric_logger_behind_prefixes(tmp_path) -> None:
    """MAE prints a '[12:22:25.163846] ' time before each line; LAVIS/BLIP 'Train: data epoch:'."""
    (tmp_path / "mae.log").write_text(
        "[12:22:25.163846] Epoch: [2]  [0/2]  eta: 0:00:12  lr: 0.000025  loss: 1.6014 (1.6014)  "
        "time: 6.0662  data: 5.3526  max mem: 8379\n"
        "[12:22:25.595520] Epoch: [2]  [1/2]  eta: 0:00:03  lr: 0.000025  loss: 1.5285 (1.5649)  "
        "time: 3.2484  data: 2.6763  max mem: 8379\n"
        "[12:22:26.272235] Epoch: [2] Total time: 0:00:07 (3.5873 s / it)\n"
        "[12:22:26.272235] Averaged stats: lr: 0.000025  loss: 1.5285 (1.5649)\n")
    mae = read_log(tmp_path / "mae.log")
    assert mae.train["step"].to_list() == [4, 5] and mae.train["loss"].to_list() == [1.6014, 1.5285]
    assert dict(mae.lines.skipped) == {"unrecognised line": 1, "epoch average": 1}
    (tmp_path / "lavis.log").write_text(
        "Train: data epoch: [1]  [  50/4254]  eta: 0:30:00  lr: 0.000010  loss: 3.5230  time: 0.4300\n"
        "Train: data epoch: [1]  [4253/4254]  eta: 0:00:00  lr: 0.000010  loss: 3.2910  time: 0.4300\n"
        "Eval: data epoch: [1]  [   0/4254]  eta: 0:20:00    time: 0.2819  data: 0.0002\n")
    lavis = read_log(tmp_path / "lavis.log")
    assert lavis.train["step"].to_list() == [4304, 8507] and lavis.eval.height == 0
    assert dict(lavis.lines.skipped) == {"progress line": 1}  # an eval line with timings only


def test_mmengine_epochs_and_val() -> None:
    log = read_log(FIXTURES / "mmengine.log")  # step = (epoch - 1) × batches + batch
    assert log.train["step"].to_list() == [50, 100, 150, 200, 250, 300, 350, 400]
    assert log.train.filter(pl.col("step") == 300)["loss"].item() == 1.7 and "grad_norm" in log.train.columns
    assert log.eval["step"].to_list() == [200, 400]
    assert log.eval["eval_coco_bbox_map"].to_list() == [0.3, 0.4]
    assert dict(log.lines.skipped) == {"unrecognised line": 1, "progress line": 2}


def test_detectron2_events(tmp_path) -> None:
    (tmp_path / "d2.log").write_text("[11/30 02:00:00 d2.engine.train_loop]: Starting training from "
                                     "iteration 0\n" + "".join(
        f"[11/30 02:00:{i:02d} d2.utils.events]:  eta: 0:10:00  iter: {i * 20 - 1}  total_loss: "
        f"{2.4 - i / 10:.3f}  loss_cls: 1.2  time: 0.4000  data_time: 0.0100  lr: 0.000399  "
        f"max_mem: 2000M\n" for i in range(1, 6)))
    log = read_log(tmp_path / "d2.log")
    assert log.format == "colon" and log.train["step"].to_list() == [19, 39, 59, 79, 99]
    assert log.train["loss"].to_list() == [2.3, 2.2, 2.1, 2.0, 1.9]  # total_loss
    # a sentence that mentions an iteration is not a record header: skipped, not 'parsed'
    assert dict(log.lines.skipped) == {"unrecognised line": 1}


def test_nanotron_lines_and_magnitudes(tmp_path) -> None:
    (tmp_path / "n.log").write_text("".join(
        f"[0000:00:0{i}] iteration: {i} / 100 | consumed_tokens: {i * 1.05:.2f}M | "
        f"elapsed_time_per_iteration_ms: 5.01K | tokens_per_sec: 209K | global_batch_size: 256 | "
        f"lm_loss: {10.8 - i / 10:.2f} | lr: 0.0003 | grad_norm: 5.25\n" for i in range(1, 6)))
    log = read_log(tmp_path / "n.log")
    row = log.train.row(1, named=True)
    assert log.format == "colon" and row["step"] == 2 and row["loss"] == 10.6
    assert row["consumed_tokens"] == 2.1e6 and row["tokens_per_s"] == 209_000.0  # 'M', 'K'


def test_lightning_bar_steps_and_postfix() -> None:
    log = read_log(FIXTURES / "lightning_stdout.log")  # step = epoch × batches + batches done
    assert log.train["step"].to_list() == list(range(0, 301, 10))
    assert log.train.filter(pl.col("step") == 150)["epoch"].item() == 1.0
    # val_loss rides on every redraw after a validation: one eval record per new value
    assert log.eval["step"].to_list() == [100, 200] and log.eval["eval_loss"].to_list() == [2.3, 1.7]
    assert (log.lines.total, log.lines.parsed) == (7, 3)
    assert dict(log.lines.skipped) == {"progress bar": 3, "unrecognised line": 1}


def test_every_redraw_of_a_bar_is_read_and_a_short_file_sniffs_whole(tmp_path) -> None:
    tune = read_log(FIXTURES / "torchtune_bar.log")  # 40 steps in one physical line
    assert tune.train["step"].to_list() == list(range(1, 41))
    assert tune.train["epoch"].unique().to_list() == [1.0]
    assert (tune.lines.total, tune.lines.parsed) == (2, 1)
    # a two-line file whose record is its last line: the head ends at a newline, so it is whole
    (tmp_path / "two.log").write_text("starting\nStep 1 | loss: 2.5\n")
    assert read_log(tmp_path / "two.log").train["loss"].to_list() == [2.5]


@pytest.mark.parametrize("name", ["custom_colon.log", "nanogpt_nan.log", "megatron_ranks.log",
                                  "olmo_console.log", "hf_stdout.log"])
def test_compacted_records_give_the_same_frames(monkeypatch, name: str) -> None:
    """Per-line readers turn records into frames as they go (memory); the frames are the same."""
    from losslens.logs import sink, source

    whole = read_log(FIXTURES / name)
    monkeypatch.setattr(sink, "COMPACT_AT", 1)  # and chunks of a few lines, to compact often
    monkeypatch.setattr(source, "HEAD_BYTES", 700)
    monkeypatch.setattr(source.Source.chunks, "__defaults__", (300, source.MAX_LINE))
    compacted = []
    real = sink.Sink.compact
    monkeypatch.setattr(sink.Sink, "compact", lambda self: (compacted.append(len(self.train)), real(self)))
    small = read_log(FIXTURES / name)
    # (hf's parser revisits its records: it is never compacted)
    assert (sum(n >= 1 for n in compacted) >= 1) == (name != "hf_stdout.log")
    assert small.train.equals(whole.train) and small.eval.equals(whole.eval)


def test_torchrun_ranks_keep_rank_zero(tmp_path) -> None:
    """Four ranks print the same steps, interleaved: read as one run of rank 0 (not 30 restarts)."""
    log = read_log(FIXTURES / "torchrun_ranks.log")
    assert log.format == "kv" and len(log.segments) == 1
    assert log.train["step"].to_list() == list(range(1, 61)) and "rank" not in log.train.columns
    assert log.train.filter(pl.col("step") == 10)["loss"].item() == 2.8  # rank 0's value
    assert (log.lines.total, log.lines.parsed, log.lines.n_skipped) == (241, 60, 181)
    assert log.lines.skipped["another rank's record (rank 0 analysed)"] == 180
    assert "lines from 4 ranks (0, 1, 2, 3): rank 0 analysed, 180 records of the others skipped" in log.notes
    # a NaN that only another rank printed is not analysed, but it is said
    text = (FIXTURES / "torchrun_ranks.log").read_text().replace("[rank3]: step=40 loss=2.2300",
                                                                 "[rank3]: step=40 loss=nan")
    (tmp_path / "nan.log").write_text(text)
    assert read_log(tmp_path / "nan.log").notes[-1].startswith("rank 3 logged a non-finite loss at step 40")
    # one rank only (Megatron's last rank prints): nothing is dropped, no rank column
    mega = read_log(FIXTURES / "megatron_ranks.log")
    assert mega.train.height == 20 and "rank" not in mega.train.columns


def test_generic_colon_reader_yields_to_specific_formats(tmp_path) -> None:
    """DeepSpeed's 'steps: N loss: X' lines between Megatron's: both have 'key: value' pairs;
    the colon reader wins only when no specific format reads a quarter as many lines."""
    lines = []
    for i in range(1, 9):
        lines.append(f"steps: {i} loss: {12 - i / 10:.4f} iter time (s): 14.753 samples/sec: 1.084")
        lines.append(f" iteration        {i}/     500 | consumed samples:           {16 * i} | elapsed time "
                     f"per iteration (ms): 14757.5 | learning rate: 2.000E-07 | global batch size:    16 | "
                     f"lm loss: {12 - i / 10:.6E} | loss scale: 1.0 | grad norm: 20.203 |")
    (tmp_path / "m.log").write_text("\n".join(lines) + "\n")
    assert read_log(tmp_path / "m.log").format == "megatron"
    (tmp_path / "c.log").write_text("\n".join(lines[::2]) + "\n")
    assert read_log(tmp_path / "c.log").format == "colon"


def test_formats_registry_examples_sniff_as_themselves() -> None:
    names = [f.name for f in FORMATS]
    assert len(names) == len(set(names)) == len(BY_NAME)
    for f in FORMATS:
        if f.whole_file:
            continue
        follow = "0,0.88,0.001,0.36,0.27,3.64" if f.name == "csv" else f.example
        lines = [f.example, follow]
        if f.name == "table":  # a table's row is read under its header
            lines = ["  Epoch    GPU_mem   box_loss   cls_loss   dfl_loss  Instances       Size", f.example]
        found, _ = sniff(lines)
        assert found is not None and found.name == f.name, f.name


@pytest.mark.parametrize("prefix", ["eval_", "eval/", "val_", "val/", "valid_", "valid/", "validation_",
                                    "validation/", "Valid_", "VALIDATION/"])
def test_every_validation_name_has_a_canonical_name(prefix: str) -> None:
    """'valid_f1' (any 'valid_' or 'validation_' name not among the aliases) raised IndexError in
    canonical(): a log with such a key was a traceback, not a report."""
    for base, expected in [("f1", "eval_f1"), ("loss", "eval_loss"), ("accuracy", "eval_acc"),
                           ("bleu-4", "eval_bleu_4"), ("", "eval_value"), ("x/y", "eval_x_y")]:
        assert canonical(prefix + base) == expected


@pytest.mark.parametrize(("key", "expected"), [
    ("Loss Train", "loss"), ("loss_train", "loss"), ("Loss/train", "loss"), ("acc_train", "acc"),
    ("Loss Val", "eval_loss"), ("loss_valid", "eval_loss"), ("Loss/test", "eval_loss"),
    ("accuracy_test", "eval_acc"), ("AUC Val", "eval_auc"), ("F1 Micro Val", "eval_f1_micro"),
    ("lm_loss_val", "eval_loss"), ("train", "train"), ("test", "test"), ("std_dev", "std_dev"),
    ("Query Images Test", "query_images_test"), ("num_val", "num_val")])
def test_a_phase_after_the_name(key: str, expected: str) -> None:
    """The phase written after the metric's name, as many hand-written loops and TensorBoard's
    tutorial ('Loss/test') name them: a training or an evaluation metric, as with it in front; a
    count of a set ('Query Images Test: 37855', a real re-identification log) is neither."""
    assert canonical(key) == expected


def test_a_valid_metric_of_any_name_reads(tmp_path: Path) -> None:
    path = tmp_path / "run.log"
    path.write_text("".join(f"epoch: {e}, loss: {2 - e / 10:.2f}, valid_f1: {0.5 + e / 100:.2f}, "
                            f"validation_mae: {1 - e / 50:.3f}\n" for e in range(1, 60)))
    proc = subprocess.run([sys.executable, "-m", "losslens", "check", str(path)], capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr
    log = read_log(path)
    assert {"eval_f1", "eval_mae"} <= set(log.eval.columns) and log.eval.height == 59


def test_no_records_is_a_format_error(tmp_path) -> None:
    p = tmp_path / "notes.txt"
    p.write_text("hello\nworld\n")
    with pytest.raises(FormatError, match="no known log format"):
        read_log(p)
    with pytest.raises(FormatError, match=r"no kv records in 2 lines \(2 skipped, 0 blank\)"):
        read_log(p, format="kv")


@pytest.mark.parametrize(("name", "text"), [
    ("mix.log", "step=1 loss=0.5 acc=1\nstep=2 loss=[1, 2] acc=1\nstep=3 loss=0.4 acc=1\n"),
    ("mix.jsonl", '{"step": 1, "loss": 0.5, "acc": 1}\n{"step": 2, "loss": [1, 2], "acc": 1}\n'
                  '{"step": 3, "loss": 0.4, "acc": 1}\n'),
])
def test_a_metric_that_is_a_list_on_one_line_and_a_number_on_others(tmp_path, name, text) -> None:
    """It used to end in a polars SchemaError traceback; the other shape is left out, with a note."""
    path = tmp_path / name
    path.write_text(text)
    log = read_log(path)
    assert log.train["loss"].to_list() == [0.5, None, 0.4]
    assert "loss: 1 value a list where the first were numbers (left out)" in log.notes


@pytest.mark.parametrize("text", [
    "{'loss': 2.0592, 'grad_norm': 0.6914, 'learning_rate': 7.17e-05, 'epoch': 0.03}",
    "{'a': True, 'b': None, 'c': False}", "{'note': 'x: True, y', 'v': 1}", "{'a': (1, 2)}",
    "{'a': [True, None]}", "{'a': 1_000}", "{'a': [1, 2.5], 'b': {'c': -3}}", "{'a': 1e400}",
    "{'a': 'é', 'b': 12345678901234567890}", "{'a': {1, 2}}", "{'train_runtime': 10.5, 'x': -0.0}",
])
def test_hf_dicts_read_through_json_as_python_reads_them(text: str) -> None:
    """The JSON shortcut for printed dicts gives what ast.literal_eval gives, types included."""
    import ast

    from losslens.logs.formats.huggingface import python_dict

    got, want = python_dict(text), ast.literal_eval(text)
    assert got == want and repr(got) == repr(want)


def test_a_format_s_column_wise_reader_lives_in_its_own_module() -> None:
    """A format is one module: its line parser, its sniff and its column-wise reader together."""
    named = [f for f in FORMATS if f.rows]
    assert {f.name for f in named} >= {"jsonl", "megatron", "nanogpt", "fairseq", "colon", "csv"}
    assert all(f.rows.__module__ == type(f).__module__ for f in named)


def test_an_odd_hf_dict_prints_no_python_warning(tmp_path, capfd) -> None:
    """'1and 2' makes Python's compiler print a SyntaxWarning to stderr; the line is a skip."""
    path = tmp_path / "hf.log"
    path.write_text("{'loss': 1.5, 'grad_norm': 0.5}\n{'a': 1and 2, 'loss': 2}\n")
    log = read_log(path)
    assert log.train.height == 1 and log.lines.skipped
    assert "Warning" not in capfd.readouterr().err


def test_a_metric_named_like_a_record_column_is_renamed(tmp_path) -> None:
    """A JSON key 'line' or 'rank' (or a pair 'step:7' on a damaged modded-nanogpt line) used to
    overwrite the record's own line number or rank (and a 'rank' made it one rank's record)."""
    path = tmp_path / "m.jsonl"
    path.write_text('{"step": 1, "loss": 0.5, "line": 70, "rank": 3}\n'
                    '{"step": 2, "loss": 0.4, "line": 71, "rank": 3}\n')
    log = read_log(path)
    assert log.train["line"].to_list() == [1, 2] and log.train["line_value"].to_list() == [70.0, 71.0]
    assert log.train["rank_value"].to_list() == [3.0, 3.0] and log.train.height == 2


def test_csv_header_names_with_any_characters(tmp_path) -> None:
    """Column names such as 'eval/acc@k=5' or 'loss{rank=0}' are a header (only a quote or a
    control character is not); a key=value line with a list in it is no header (its commas cut
    numbers)."""
    rows = ["step,eval/acc@k=5,loss,grad{norm}"] + [f"{i},0.5,{2 - i / 100:.3f},1.5" for i in range(30)]
    path = tmp_path / "m.csv"
    path.write_text("\n".join(rows) + "\n")
    log = read_log(path)
    assert log.format == "csv" and log.train.height == 30 and log.eval.height == 30
    assert log.names["eval_acc_k_5"] == "eval/acc@k=5" and "grad{norm}" in log.names.values()
    kv = tmp_path / "kv.log"
    kv.write_text("\n".join(synth.dflash_lines(30)) + "\n")
    assert read_log(kv).format == "kv"


def test_sniff_passes_over_generic_formats_only_where_they_cannot_win() -> None:
    """The generic 'key: value' reader is not tried once a specific format has read a quarter of
    the sample lines (it cost 33 ms on a fairseq log's 400 lines): the format found is the one
    that trying every format finds, on every fixture, the heads of the real logs, and mixes of
    colon lines with lines of specific formats in every proportion."""
    import random

    from losslens.logs.sniff import Samples, _sniff
    from losslens.logs.source import decode_lines
    from tests.conftest import REALLOGS
    from tests.naive import sniff_reference

    heads = [decode_lines(p.read_bytes()[:1 << 16])[:-1] for p in sorted(FIXTURES.iterdir())
             if p.is_file() and p.suffix in (".log", ".csv", ".jsonl", ".json")]
    heads += [decode_lines(p.read_bytes()[:1 << 16])[:-1] for p in sorted(REALLOGS.glob("*/*"))
              if p.is_file() and p.name not in ("SOURCE.md", "README.md")]
    rng = random.Random(3)
    colon = [f"Epoch {i} | loss: {2 - i / 100:.3f} | lr: 0.001" for i in range(100)]
    others = [f.example for f in FORMATS if not f.generic and "\n" not in f.example]
    for share in (0.0, 0.1, 0.2, 0.24, 0.25, 0.26, 0.3, 0.5, 0.9, 1.0):
        for other in others:
            k = round(share * 40)
            heads.append(rng.sample(colon, 40 - k) + [other] * k)
    heads += [[], [""], ["no metric here"]]
    for lines in heads:
        samples = Samples.of(lines)
        found, _ = _sniff(samples)
        assert found is sniff_reference(Samples.of(lines)), lines[:3]


def test_regexes_rewritten_to_read_a_run_once_split_as_before() -> None:
    """FIELD_CUT, WORD_PAIR, PAIR, BAR_TAIL, TQDM, the progress-bar noise pattern and
    parse_number's number-and-unit were rewritten so that a long run of spaces, tabs, letters or
    digits is scanned once (a line with 3,000 spaces in a row took the colon reader's sniff
    minutes, one with 3 million letters days): on 300,000 random strings over the characters
    they tell apart, they cut, match and strip exactly as the patterns they replace."""
    import random
    import re

    from losslens.logs.base import COMMON_NOISE
    from losslens.logs.formats.colon import FIELD_CUT, PAIR, SPACED_UNITS, WORD_PAIR
    from losslens.logs.formats.huggingface import TQDM
    from losslens.logs.formats.table import BAR_TAIL
    from losslens.logs.names import _WITH_UNIT, NONFINITE, NUMBER

    field_cut = re.compile(r"\s*(?:[|,;\t]|\s{2,}(?!\s*[-+]?\.?\d)|\s-\s|(?<=\d):\s)\s*")
    word_pair = re.compile(rf"([A-Za-z_][\w/.\-@]*)\s+({NONFINITE}(?![A-Za-z])|{NUMBER})"
                           rf"([A-Za-z%]+)?(?=\s|$)", re.IGNORECASE)
    bar_tail = re.compile(r":?\s+\d{1,3}%\|.*$")
    tqdm = re.compile(r"(\d+)/(\d+) \[[^\]]*?(?:it/s|s/it)\]")
    pair = re.compile(
        rf"(?<![\w/.\-@'\"])([^\W\d][\w/.\-@]*(?: [^\W\d][\w/.\-@]*)?)(?:\s*\([^()]{{1,12}}\))?"
        rf"(?:\s*[:：]\s*| = )({NONFINITE}(?![A-Za-z])|\d{{1,3}}(?:,\d{{3}})+(?:\.\d+)?|{NUMBER})"
        rf"(?:\s*/\s*\d+)?(?:([A-Za-z%]+(?:/[A-Za-z]+)?)|\s({SPACED_UNITS}))?(?![\w.]|:\d)", re.IGNORECASE)
    bar, (new_bar, why) = re.compile(r"\d+%\|.*\|\s*\d+/\d+"), COMMON_NOISE[2]
    with_unit = re.compile(rf"^({NUMBER})\s*([A-Za-z%/()]+)$")
    assert why == "progress bar"
    rng = random.Random(7)
    alphabet = [" ", "\t", "|", ",", ";", "-", ":", "1", "9.", "a", "e", "x_", ".", "+", "%", "%|", "\x1c",
                "  ", "\u00a0", "\n", "nan", "/", "@", "12/3 [", "]", "it/s]", "s/it", "50%|",
                "loss: ", " = ", "E-", "123", ",456", "ms", "(s)", "0:1", "e5"]
    for _ in range(300_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 14)))
        assert FIELD_CUT.split(text) == field_cut.split(text), repr(text)
        assert BAR_TAIL.sub("", text) == bar_tail.sub("", text), repr(text)
        assert [m.span() for m in TQDM.finditer(text)] == [m.span() for m in tqdm.finditer(text)], repr(text)
        assert [m.groups() + m.span() for m in PAIR.finditer(text)] == \
            [m.groups() + m.span() for m in pair.finditer(text)], repr(text)
        old_unit, new_unit = with_unit.match(text), _WITH_UNIT.match(text)
        assert (old_unit and old_unit.groups()) == (new_unit and new_unit.groups()), repr(text)
        old_bar, found_bar = bar.search(text), new_bar.search(text)
        assert (old_bar and old_bar.span()) == (found_bar and found_bar.span()), repr(text)
        fields = [f for f in field_cut.split(text.strip()) if f]
        for f in fields:  # (as _word_pairs takes them: whole fields of pairs, from the field's start)
            old = [m.span() for m in word_pair.finditer(f)]
            new = [m.span() for m in WORD_PAIR.finditer(f)]
            if old and old[0][0] == 0 and all(a[1] + 1 == b[0] for a, b in zip(old, old[1:], strict=False)):
                assert new == old, repr(f)


def _mutations(examples: list[str], count: int, seed: int) -> list[str]:
    """Strings near the examples: each with one to three random insertions (of a piece, repeated
    up to four times), deletions or duplications, where a pattern's backtracking decides."""
    import random

    rng = random.Random(seed)
    pieces = [" ", "  ", "\t", "9", "1", "23", ".", "..", "e", "E-", "+", "-", "nan", "inf", "a", "_", "é",
              ":", "=", ",", "|", "[", "]", "(", ")", "/", "%", "ms", "s", "#", "\n", "a: 1 ", "x=1"]
    out = []
    for _ in range(count):
        text = rng.choice(examples)
        for _ in range(rng.randint(1, 3)):
            at = rng.randint(0, len(text))
            how = rng.random()
            if how < 0.5:
                text = text[:at] + rng.choice(pieces) * rng.randint(1, 4) + text[at:]
            elif how < 0.8:
                text = text[:at] + text[at + rng.randint(1, 5):]
            else:
                cut = text[at:at + rng.randint(1, 8)]
                text = text[:at] + cut + text[at:]
        out.append(text)
    return out


def test_patterns_rewritten_to_read_a_run_once_match_as_before() -> None:
    r"""Patterns that tried every split of a long run, rewritten to read it once, find what they
    found (on 20,000 random edits of lines they read each), and polars reads their `columnar`
    form, the pattern as it was (no possessive quantifier): STEP_WORD and EPOCH_WORD (three
    '\s*' in a row: 'Step' and 400 spaces took 0.17 s, cubic), Megatron's field (a lazy name
    between two '\s*'), the duration's '\s*'s, modded-nanogpt's line (exponential: 'a:a' 22
    times took 21 s), NUMBER (its '\d+\.?\d*' split a run of n digits n²/2 ways: 20,000 in a
    boosting line took 12 s) and the patterns that take a number whole, sb3's table row, the
    tqdm count, the Python twins of fairseq's and Lightning's pairs, which start a key
    where a word does, and torchtitan's pairs, found reading each run of a key's characters once."""
    import re

    from losslens.logs.formats import (
        boosting,
        cyclegan,
        darknet,
        fairseq,
        lightning,
        marian,
        megatron,
        nanogpt,
        sb3,
        torchtitan,
    )
    from losslens.logs.formats.colon import EPOCH_WORD, IS_PAIR, NAMED_FIELD, SPACED, STEP_WORD, WORD_PAIR
    from losslens.logs.formats.kv import BAR_COUNT, TOKRATE
    from losslens.logs.formats.mlflow import MLFLOW_LINE
    from losslens.logs.names import _DURATION, NUMBER, WHOLE_NUMBER, WRAPPED, columnar

    def found(p: re.Pattern[str], text: str) -> tuple[object, ...]:
        m = p.match(text)
        every = [x.groups() + x.span() for x in p.finditer(text)]
        return every, m and m.groups() + m.span(), p.sub("", text)

    examples = {
        nanogpt.NANO_ITER: ["iter 10: loss 4.2038, time 1430.34ms, mfu -100.00%",
                            "iter 425: loss nan, time 1.5ms"],
        nanogpt.NANO_EVAL: ["step 0: train loss 4.2000, val loss 4.2100",
                            "step 5: train loss 1e-3, val loss inf"],
        nanogpt.LLMC: ["s:100 trl:3.2345", "s:7 tel:nan  "],
        nanogpt.LLMC_NEW: ["step   10/100 | train loss 3.2345 | norm 1.2 | lr 6.00e-04 | 123.45 ms"
                           " | 45.6% bf16 MFU | 12345 tok/s", "step 1/9 | loss 3.2 | norm nan | lr 1e-4"],
        nanogpt.MODDED: ["step:10/100 train_loss:3.2 train_time:5586124ms step_avg:391.87ms",
                         "step:1/9 val_loss:4"],
        cyclegan.RECORD: ["(epoch: 1, iters: 100, time: 0.123, data: 0.004) D_A: 0.251 G_A: 0.342"],
        cyclegan.PAIR: [" D_A: 0.251 G_A: 0.342 cycle_A: 1.2 idt_B: nan"],
        cyclegan.LR: ["learning rate 0.0002000 -> 0.0001000", "update learning rate: 2e-4 -> 1.5e-4"],
        darknet.ITERATION: [" 1000: 2.345678, 2.456789 avg loss, 0.001000 rate, 3.212345 seconds, "
                            "64000 images"],
        darknet.MAP: ["Last accuracy mAP@0.50 = 45.67 %"],
        marian.TRAIN: ["Ep. 1 : Up. 500 : Sen. 64,000 : Cost 5.1234 * 1,234,567 @ 2,345 after 12,345,678 : "
                       "Time 123.45s : 12345.67 words/s : gNorm 1.2345 : L.r. 3.0000e-04"],
        marian.VALID: ["Ep. 1 : Up. 500 : ce-mean-words : 4.5678 : new best"],
        TOKRATE: ["step=1 loss=2.3 ( 32.1Ktok/s)", "tgt=0.68b/s dft=0.68b/s (32.1Ktok/s) | q=[50, 46]"],
        WORD_PAIR: ["loss 4.2709", "mfu -100.00%", "lr 1e-4 ms", "tok/s 30512"],
        NAMED_FIELD: ["Learning Rate 1.000e-05", "Train loss 2.345"],
        STEP_WORD: ["Iter [  10/1487] step 5", "global step #12 iteration= [ 3 / 9 ]", "Step 100, batch 7/8"],
        EPOCH_WORD: ["Epoch: [ 0/200]", "epoch #3 EPOCH=[2/5]", "Epoch 1 / 10"],
        SPACED: ["Loss 6.9077e+00 (6.9077e+00)", "  Acc@1   12.5"],
        IS_PAIR: ["Epoch 0, val loss is 0.0477 and kl is 0.0085", "grpo_loss is -0.0"],
        boosting.XGB: ["[12]\ttrain-logloss:0.21352\teval-logloss:0.25731"],
        boosting.XGB_PAIR: ["\ttrain-logloss:0.21352\teval-logloss:0.25731"],
        boosting.LGB: ["[10]\ttraining's binary_logloss: 0.21\tvalid_1's auc: 0.93"],
        boosting.CATBOOST: ["0:\tlearn: 0.6518\ttest: 0.6520\tbest: 0.6520 (0)\ttotal: 5ms"],
        MLFLOW_LINE: ["1701361200123 2.4977 10", "1701361200 nan"],
        WRAPPED: ["{'loss': tensor(2.31, device='cuda:0'), 'acc': np.float64(0.23)}"],
        BAR_COUNT: ["\r 33%|###  | 10/30 [00:10<00:10, 1.00it/s, loss=2.31]", "1/2 [34/5 [6"],
    }
    old_number = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"  # NUMBER as it was
    assert columnar(re.compile(WHOLE_NUMBER)) == NUMBER
    old_step = re.compile(r"\b(?:global step|step|iteration|iter|update|batch)\s*[#=]?\s*\[?\s*(\d+)"
                          r"(?:\s*/\s*\d+)?\b", re.IGNORECASE)
    old_epoch = re.compile(r"\bepoch\s*[#=:]?\s*\[?\s*(\d+)(?:\s*/\s*\d+)?\b", re.IGNORECASE)
    assert columnar(nanogpt.MODDED) == r"^step:(\d+)/(\d+) ((?:\w+:\S+\s*)+)$"
    assert columnar(TOKRATE) == rf"\(\s*({NUMBER})\s*([KMG]?)tok/s\s*\)"
    olds = {STEP_WORD: old_step, EPOCH_WORD: old_epoch,
            MLFLOW_LINE: re.compile(r"^(\d{10,13}) ([-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf|-inf|NaN|"
                                    r"Infinity))(?: (\d+))?$"),
            BAR_COUNT: re.compile(r"(\d+)/(\d+) \[\d"),
            WRAPPED: re.compile(WRAPPED.pattern.replace(r"\d+(?:\.\d*)?", r"\d+\.?\d*"), WRAPPED.flags)}
    for seed, (new, lines) in enumerate(examples.items()):
        kept = re.compile(columnar(new), new.flags)  # (as polars reads it)
        old = olds.get(new) or re.compile(columnar(new).replace(NUMBER, old_number), new.flags)
        if new not in olds and new not in (nanogpt.MODDED, TOKRATE):
            as_was = re.compile(new.pattern.replace(WHOLE_NUMBER, NUMBER), new.flags)  # (whole, or not)
            assert columnar(new) == columnar(as_was)
        assert "++" not in columnar(new) and "*+" not in columnar(new)
        for text in lines + _mutations(lines, 20_000, seed):
            assert found(new, text) == found(old, text) == found(kept, text), (new.pattern[:40], text)

    old_row = re.compile(r"^\s*\| ( *)(\S[^|]*?)\s*\| (.*?)\s*\|\s*$")
    lines = ["|    value_loss           | 36.9        |", "| train/                  |             |",
             "| | x | 1 |", " |  a | b | c |\n"]
    for text in lines + _mutations(lines, 20_000, 60):
        was = old_row.match(text)
        assert sb3.row(text) == (was and was.groups()), text

    lines = ["loss:  7.6442  memory: 39.12GiB(41.18%)  tps: 6,581  mfu: 38.55%", "loss: nan (avg) norm: 1"]
    for text in lines + _mutations(lines, 20_000, 50):
        assert torchtitan.titan_pairs(text) == torchtitan.TITAN_PAIR.findall(text), text

    pairs = {fairseq._KV: (fairseq.FAIRSEQ_KV, ["loss=12.835, nll_loss=12.8, ppl=7306.1, wps=3e4 lr=1e-05"]),
             lightning._PAIR: (lightning.LIGHTNING_PAIR, ["v_num=0, train_loss=2.3, val/acc=.5 1a-b=2 é1x=3]",
                                                          "loss=1 ]x=2"])}
    for seed, (new, (old, lines)) in enumerate(pairs.items()):
        for text in lines + _mutations(lines, 20_000, 100 + seed):
            assert new.findall(text) == old.findall(text), (new.pattern[:40], text)

    old_field = re.compile(r"^\s*([^:|]+?)\s*:\s*(\S+)\s*$")

    def field(m: re.Match[str] | None) -> tuple[str, str] | None:  # as the reader takes it (no blank name)
        return (m.group(1).strip(), m.group(2)) if m and m.group(1).strip() else None

    lines = [" consumed samples:          640 ", " lm loss: 1.0E+01 ", "  : 5", " iteration  10/ 100 "]
    for text in lines + _mutations(lines, 20_000, 200):
        was, now = old_field.match(text), megatron.MEGA_FIELD.match(text)
        assert field(was) == field(now), text

    lines = [" D_A: 0.251 G_A: 0.342 cycle_A: 1.2", " 1a: 0.5", "x: nan y: 1e-3 "]
    for text in lines + _mutations(lines, 20_000, 300):
        was = cyclegan.PAIR.findall(text)
        was_ok = bool(was) and not cyclegan.PAIR.sub("", text).strip()
        now = cyclegan.PAIR.findall(text) if cyclegan.PAIRS.match(text) else []
        assert (was_ok and was) == (bool(now) and now), text

    old_duration = re.compile(r"^(?:(\d+)d)?\s*(?:(\d+)h)?\s*(?:(\d+)m)?\s*(?:(\d+(?:\.\d+)?)s)?$")
    lines = ["1d2h3m4.5s", "2h 30m", "45s", "1h\t5m"]
    for text in lines + _mutations(lines, 20_000, 400):
        was, now = old_duration.match(text), _DURATION.match(text)
        assert (was and was.groups()) == (now and now.groups()), text


@pytest.mark.slow
def test_a_line_with_a_long_run_of_one_character_is_read(tmp_path: Path) -> None:
    """A damaged line holding a million spaces, tabs, letters or digits in a row (also as a
    'key: value' pair's value), in a Trainer log that the colon reader sniffs: check answers (in
    well under the minute allowed; the regexes before took minutes to days) and the records
    around it are read."""
    lines = [str({"loss": round(2 - i / 100, 4), "learning_rate": 1e-4, "epoch": i / 100}) for i in range(60)]
    for run in (" ", "\t", "x", "9", "a ", "eta: 9"):
        line = "INFO:__main__:Loading" + run * (1_000_000 // len(run)) + "model"
        if run == "eta: 9":  # a colon record whose value is a run of digits before a clock's ':0'
            line = "Epoch(train) [1][50/200]  lr: 2.0e-02  eta: " + "9" * 1_000_000 + "0:10:00  time: 0.4"
        damaged = [*lines[:30], line, *lines[30:]]
        path = tmp_path / "run.log"
        path.write_text("\n".join(damaged) + "\n")
        proc = subprocess.run([sys.executable, "-m", "losslens", "check", str(path), "--output-format",
                               "json"], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, (run, proc.stderr[-300:])
        assert json.loads(proc.stdout)["steps"]["count"] == 60


def test_every_reader_reads_a_damaged_line_once() -> None:
    """Every format's sniff and line parser, on its example line with a run of 50,000
    characters (spaces, tabs, digits, letters, 'a_', 'a:a', 'a: 1 ', '| ') after each of its
    separators: each answers (an alarm fails the test after a minute; the patterns that tried
    every split of a run took hours on such a line, quadratic, or longer)."""
    import re
    import signal

    from losslens.logs.sink import Sink, feed_line

    def alarm(*_: object) -> None:
        raise TimeoutError("a reader took over a minute on a damaged line")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(60)
    try:
        for fmt in FORMATS:
            lines = [x for x in fmt.example.split("\n") if x.strip()]
            for line in lines:
                cuts = sorted({m.end() for m in re.finditer(r"[\s:=|,\[(]+", line)}) + [len(line)]
                for unit in (" ", "\t", "9", "a", "a_", "a:a", "a: 1 ", "| "):
                    for cut in cuts:
                        damaged = line[:cut] + unit * (50_000 // len(unit)) + " !" + line[cut:]
                        fmt.sniff([damaged])
                        if not fmt.whole_file:
                            parser = fmt.parser_for(Sink(), damaged)
                            feed_line(parser, 1, damaged)
                            parser.finish()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.slow
@pytest.mark.parametrize(("fixture", "head", "damage"), [
    ("fairseq.log", "train_inner", lambda x: x.replace("loss=", "x" + "a_" * 500_000 + " loss=", 1)),
    ("modded_nanogpt.log", "train_loss", lambda x: x.rstrip() + " " + "a:a" * 40 + " !"),
    ("custom_colon.log", "loss", lambda x: "Step" + " " * 1_000_000 + "! " + x),
    ("megatron_ranks.log", "lm loss", lambda x: x.replace("|", "|" + " " * 1_000_000 + "x |", 1)),
    ("torchtitan_ansi.log", "loss", lambda x: x.rstrip() + " " * 1_000_000 + "!"),
    ("nanogpt_nan.log", "iter", lambda x: "iter 0: loss " + "9" * 1_000_000 + " !"),
    ("lightning_stdout.log", "train_loss", lambda x: x.replace("v_num", "a_" * 500_000 + " v_num", 1)),
])
def test_a_damaged_line_of_each_format_is_read_once(tmp_path: Path, fixture: str, head: str,
                                                     damage: Callable[[str], str]) -> None:
    """A damaged line in each format's log (a run of a million characters where a pattern
    tried every split of it: letters and '_' in fairseq's and Lightning's pairs, spaces after
    'Step', in a Megatron field or after torchtitan's pairs, digits in nanoGPT's loss, 'a:a' in
    modded-nanogpt's line, which took exponential time): check and watch (its line-by-line
    readers, on standard input) answer within the minute as on the log without it (they took
    minutes to days), and check reads every other record."""
    lines = (FIXTURES / fixture).read_text().splitlines()
    at = next(i for i, x in enumerate(lines) if head in x and any(c.isdigit() for c in x))

    def run(command: str) -> subprocess.CompletedProcess[str]:
        path = tmp_path / fixture
        path.write_text("\n".join(lines) + "\n")
        source = str(path) if command == "check" else "-"
        with path.open() as stdin:
            return subprocess.run([sys.executable, "-m", "losslens", command, source, "--json"],
                                  stdin=stdin, capture_output=True, text=True, timeout=60)

    check, watch = run("check"), run("watch")
    lines.insert(at, damage(lines[at]))
    damaged_check, damaged_watch = run("check"), run("watch")
    assert damaged_check.returncode == check.returncode, damaged_check.stderr[-300:]
    assert damaged_watch.returncode == watch.returncode, damaged_watch.stderr[-300:]
    count = json.loads(check.stdout)["steps"]["count"]
    assert json.loads(damaged_check.stdout)["steps"]["count"] in (count, count + 1)


def test_a_line_of_a_mebibyte_is_skipped_unread_but_by_json_lines(tmp_path) -> None:
    """A dumped tensor or a blob of a MiB or more is no record of a line format: skipped with its
    reason, unread by their patterns (which took 9 s on an 8 MiB line) and not sniffed; a JSON
    line that long (a record carrying histograms) is still read."""
    blob = "loss: 1.0 " * (120 << 10)  # 1.2 MB, every piece of it a colon pair
    lines = [f"step={i} loss={2 - i / 100:.3f}" for i in range(40)]
    (tmp_path / "kv.log").write_text(blob + "\n" + "\n".join(lines[:20] + ["x" * (2 << 20)] + lines[20:])
                                     + "\nstep=40 loss=nan\n")
    log = read_log(tmp_path / "kv.log")
    assert log.format == "kv" and log.train["step"].to_list() == list(range(41))
    assert (log.lines.total, log.lines.parsed, log.lines.n_skipped) == (43, 41, 2)
    assert log.lines.skipped[TOO_LONG] == 2
    hist = {"bins": [i / 7 for i in range(90_000)]}
    records = [{"step": i, "loss": 2 - i / 100, **(hist if i == 3 else {})} for i in range(30)]
    (tmp_path / "h.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n")
    assert len(json.dumps(records[3])) >= 1 << 20
    log = read_log(tmp_path / "h.jsonl")
    assert log.format == "jsonl" and log.train.height == 30 and log.lines.n_skipped == 0
    assert log.train.filter(pl.col("step") == 3)["loss"].item() == 1.97


def test_a_log_whose_first_mebibytes_are_a_progress_bar_is_known_by_its_end(tmp_path, monkeypatch) -> None:
    """Hours of a preprocessing step's progress bar before the first record (here past a look
    of 64 KiB into the file, 8 MiB in use): the format is chosen on the file's last lines, and
    the records, the NaN among them, are read."""
    from losslens.logs import reader, source

    monkeypatch.setattr(reader, "SNIFF_DEEP_BYTES", 1 << 16)
    monkeypatch.setattr(source, "HEAD_BYTES", 1 << 14)
    bar = "".join(f"\rMap: {i * 100 // 3000:3d}%|{'#' * (i // 300):10s}| {i}/3000 [00:{i % 60:02d}<00:30, "
                  f"98.{i % 10} examples/s]" for i in range(3000))
    records = [f"step={i} loss={2 - i / 100:.3f}" for i in range(60)] + ["step=60 loss=nan"]
    (tmp_path / "run.log").write_text(bar + "\n" + "\n".join(records) + "\n")
    log = read_log(tmp_path / "run.log")
    assert log.format == "kv" and log.train["step"].to_list() == list(range(61))
    assert math.isnan(log.train["loss"][-1]) and log.lines.skipped["progress bar"] == 3000
