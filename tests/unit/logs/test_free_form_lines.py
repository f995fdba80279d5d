"""Free-form training prints the readers meet in public repositories: bare words and numbers,
epochs and steps in brackets, legends, prose, other languages, evaluation heads, tqdm bars."""


from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from losslens import read_log
from losslens.analysis import analyze
from losslens.findings import Severity
from tests.unit.shapes import alarms, of, preamble_then_dicts


def _noprop_run(backbone: str, epochs: int, start: float, seed: int) -> list[str]:
    """One run as NoProp's CIFAR-100 log prints it (gaggenwaschke/NoProp, logs/log_cifar100.md): a
    markdown heading, a preamble, then 'Epoch 005 loss   9.5198 | train 2.2s' (the loss right-
    aligned, no step), the test accuracy every fifth epoch."""
    rng = np.random.default_rng(seed)
    lines = [f"## cifar100 with {backbone}", "```", "start", f"--- {backbone} on CIFAR100 (100 classes) "
             "using cuda ---", "train start"]
    for e in range(1, epochs + 1):
        loss = start * np.exp(-e / 12) + 0.06 * np.exp(rng.normal(0, 0.05))
        line = f"Epoch {e:03d} loss {loss:8.4f} | train 2.2s"
        lines.append(line + (f" | Acc {40 * (1 - np.exp(-e / 30)):.2f}% | infer 4.5s" if e % 5 == 0 else ""))
    return lines + ["```", ""]


def _fast_scnn_lines(epochs: int, iters: int, seed: int, slow_from: int | None = None) -> list[str]:
    """As Fast-SCNN's trainer logs (a public log: Cuber-Wei/Fast-SCNN-pytorch-for-Silicon-M,
    logs/train.log): a line every 10 iterations, the iteration counted within its epoch (it starts
    again at 3, 6, … as the epochs roll over), 'Time' the seconds since the start."""
    rng = np.random.default_rng(seed)
    lines, t, k = [], 0.0, 0
    for e in range(epochs):
        for i in range(1, iters + 1):
            k += 1
            t += 0.33 * (2.5 if slow_from is not None and k >= slow_from else 1.0)
            if k % 10 == 0:
                loss = 0.9 + 1.2 * np.exp(-k / 2000) + abs(rng.normal(0, 0.15))
                lines.append(f"2025-06-12 13:31:13,075 - INFO - Epoch: [{e:2d}/{epochs}] "
                             f"Iter [{i:4d}/{iters}] "
                             f"|| Time: {t:.4f} sec || lr: {0.01 * (1 - k / (epochs * iters)) ** 0.9:.8f} || "
                             f"Loss: {loss:.4f}")
    return lines


def _phase_after_lines(style: int, epochs: int = 100) -> list[str]:
    rng = np.random.default_rng(style)
    rows = []
    for e in range(epochs):
        train = "nan" if e == 60 else f"{2 * np.exp(-e / 30) + 0.3 + rng.uniform(0, 0.01):.4f}"
        val = f"{2 * np.exp(-e / 30) + 0.4:.4f}"
        rows.append([
            f"Epoch [{e + 1}/{epochs}] | Loss Train: {train} | Loss Val: {val} | AUC Val: 0.8123",
            f"Epoch {e:4d} | loss train: {train} | loss test: {val} | accuracy test: 91.2%",
            f"Epoch [{e + 1:02d}/{epochs}] | Loss Train: {train} | Test Loss (MSE): {val}",
        ][style])
    return rows


@pytest.mark.parametrize("line", [
    "step {s} | loss {x:.4f} | lr 1.00e-04 | tok/s 30512",
    "step {s}: loss {x:.4f}, lr 1.00e-04, grad_norm 0.98",
    "Step {s} - loss {x:.4f} - lr 1e-4",
    "iter {s} loss {x:.4f} lr 0.0001",
    "step {s}  loss {x:.4f}  lr 0.0001",  # two spaces between fields
    "step {s} loss {x:9.4f} | lr 0.0001",  # a value printed right-aligned: its padding
])
def test_bare_word_number_fields_read(tmp_path: Path, line: str) -> None:
    path = tmp_path / "plain.log"
    rows = [line.format(s=10 * i, x=3.0 - 0.01 * i) for i in range(1, 41)]
    path.write_text("Loading 8 shards from /data\n" + "\n".join(rows) + "\n")
    log = read_log(path)
    assert log.lines.as_dict() == {"total": 41, "parsed": 40, "skipped": 1, "blank": 0}
    assert log.train["step"].to_list()[:3] == [10, 20, 30]
    assert log.train["loss"].to_list()[-1] == pytest.approx(2.6)


def test_epoch_lines_with_a_padded_loss_and_no_step(tmp_path: Path) -> None:
    """Two runs in one file, each a line an epoch with the loss padded to a width and no step:
    the loss was never read (two spaces cut 'loss' from its value) and the records were numbered
    in file order, so the second run's first loss (4042) was a ×49,000 spike and the accuracy of
    two runs one falling series. Every epoch's loss is read, the epochs are the steps, and the
    second run is a restart, analysed apart."""
    path = tmp_path / "log_cifar100.md"
    runs = _noprop_run("resnet18", 120, 22.0, 0) + _noprop_run("resnet50", 150, 4042.0, 1)
    path.write_text("\n".join(runs))
    log = read_log(path)
    assert log.format == "colon" and log.train.height == 270 and log.train["loss"].null_count() == 0
    assert log.train["step"].to_list() == list(range(1, 121)) + list(range(1, 151))
    assert len(log.segments) == 2 and any("steps are their epochs" in n for n in log.notes)
    assert [f.kind for f in analyze(log).findings if f.severity >= Severity.WARNING] == []


def test_a_legend_of_metric_names_is_not_a_record(tmp_path: Path) -> None:
    """A markdown log (gaggenwaschke/NoProp, logs/log_fashionmnist.md) opens with a legend of what
    its keys mean. Its '1' (from '1 epoch average loss') was read as a record with avg_loss 1, with
    no epoch: the epochs were no longer the steps and the loss's range began at 1."""
    path = tmp_path / "log_fashionmnist.md"
    path.write_text("\n".join([
        "## FashionMNIST ( 10 categories) with ResNet-18 module + fused cls header",
        "- avg_loss : 1 epoch average loss , l : total loss, f : flow loss, a : anchor loss(label), "
        "kl : kl loss", "```", *(
            f"Epoch {e:4d}/1000 done | avg_loss {393.7 - e:.4f}  l:{389.0 - e:.4f}, f:  0.2141, a:  "
            f"0.0311,  kl:{388.7 - e:.4f}  in 2.9s  " + (" Heun 82.49% Single 82.66% | heun:0.72s"
                                                       if e % 5 == 0 else "") for e in range(1, 176))]))
    log = read_log(path)
    assert (log.format, log.train.height, log.lines.skipped["a legend of metric names"]) == ("colon", 175, 1)
    assert log.train["step"].to_list() == list(range(1, 176))
    assert log.train["avg_loss"].min() == round(393.7 - 175, 4)


def test_steps_counted_within_each_epoch_count_across_the_run(tmp_path: Path) -> None:
    """The step starts again with each epoch. Before, each epoch was a restart (200 segments in the
    real log, each analysed apart: plateaus and spikes by the dozen) and 'Time', the seconds since
    the start, read as a step time rising 91%: a throughput warning on a healthy run."""
    path = tmp_path / "train.log"
    path.write_text("\n".join(_fast_scnn_lines(12, 1487, 0)) + "\n")
    log = read_log(path)
    steps = log.train["step"].to_list()
    assert (len(log.segments), steps[:2], steps[147:149]) == (1, [10, 20], [1480, 1487 + 3])
    assert any("steps count within each epoch" in n for n in log.notes)
    assert analyze(log).findings == []
    slow = tmp_path / "slow.log"  # the same run, every step 2.5x slower from step 9,000 on
    slow.write_text("\n".join(_fast_scnn_lines(12, 1487, 0, slow_from=9000)) + "\n")
    (f,) = analyze(read_log(slow)).findings
    assert (f.kind, f.metric, f.evidence["elapsed"], f.evidence["drop"]) == \
        ("throughput_drop", "step_time_s", True, 0.6)
    assert 8990 <= f.start_step <= 9010 and "from the elapsed time's increments" in f.summary


def test_steps_within_epochs_and_a_resume_and_eval_lines(tmp_path: Path) -> None:
    """'Epoch [2/5], Step [100/600], Loss: 0.2231' (the pytorch-tutorial print, copied widely)
    was read in record order; a run resumed at epoch 3 is still a restart, and an eval line's step
    is its epoch's too."""
    rows = [(e, i) for e in range(1, 5) for i in range(100, 601, 100)] + \
           [(e, i) for e in range(3, 6) for i in range(100, 601, 100)]
    lines = []
    for e, i in rows:
        lines.append(f"Epoch [{e}/5], Step [{i}/600], Loss: {2 - 0.05 * e - 0.0001 * i:.4f}")
        if i == 600:
            lines.append(f"Epoch [{e}/5] Test: val_loss: {2.1 - 0.05 * e:.4f}")
    path = tmp_path / "tutorial.log"
    path.write_text("\n".join(lines) + "\n")
    log = read_log(path)
    assert log.train["step"].to_list() == [(e - 1) * 600 + i for e, i in rows]
    assert len(log.segments) == 2 and log.segments[1].first_step == 1300
    assert log.eval["step"].to_list() == [e * 600 for e in (1, 2, 3, 4, 3, 4, 5)]
    global_steps = tmp_path / "global.log"  # a step that counts the run: left as it is
    global_steps.write_text("\n".join(f"Epoch [{k // 6 + 1}/5], Step [{k * 100 + 100}/3000], Loss: 2.0"
                                      for k in range(30)) + "\n")
    assert read_log(global_steps).train["step"].to_list() == [k * 100 + 100 for k in range(30)]


@pytest.mark.parametrize("head", ["[{e}, {i:5d}] loss: {v:.3f}", "[{e}/3, {i}/12000] Loss = {v:.4f}"])
def test_epoch_and_step_in_brackets(tmp_path: Path, head: str) -> None:
    """PyTorch's CIFAR-10 tutorial prints '[1,  2000] loss: 2.211' (copied into countless
    scripts): the epoch and the step within it, read before in record order."""
    path = tmp_path / "tutorial.log"
    path.write_text("\n".join([head.format(e=e, i=i, v=2.3 / (e + i / 12000)) for e in (1, 2, 3)
                               for i in range(2000, 12001, 2000)] + ["Finished Training"]) + "\n")
    log = read_log(path)
    assert log.train["step"].to_list() == [(e - 1) * 12000 + i for e in (1, 2, 3)
                                           for i in range(2000, 12001, 2000)]
    assert len(log.segments) == 1 and dict(log.lines.skipped) == {"unrecognised line": 1}


def test_key_is_value_prose(tmp_path: Path) -> None:
    """A PaddlePaddle script's prose (a public log: IcarusWizard/prednet-paddle, logs/train.log),
    'no known log format' before: 'avg loss so far is X' is the loss, 'val loss is X, val mse is
    Y.' an eval record at the step before it, the step counted within each epoch."""
    lines = ["W1205 12:44:41.166817   276 device_context.cc:447] Please NOTE: device: 0, GPU Compute "
             "Capability: 7.0, Driver API Version: 10.1, Runtime API Version: 10.1", "Start training!"]
    for e in range(6):
        lines.append(f"Starting epoch {e} current lr is 0.001")
        for i in range(25, 126, 25):
            lines.append(f"Epoch {e}, Step {i}, total used time {7.1 * (e * 5 + i / 25):.6f} (s), "
                         f"avg loss so far is {0.11 / (1 + e + i / 125):.17f}")
        lines.append(f"Epoch {e}, val loss is {0.05 / (1 + e):.16f}, val mse is {0.024 / (1 + e):.17f}.")
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n")
    log = read_log(path)
    assert log.format == "colon" and log.train["step"].to_list() == [e * 125 + i for e in range(6)
                                                                     for i in range(25, 126, 25)]
    assert log.names["avg_loss"] == "avg loss" and log.train["avg_loss"][0] == float(f"{0.11 / 1.2:.17f}")
    assert log.eval["step"].to_list() == [125 * (e + 1) for e in range(6)]
    assert log.eval["eval_mse"].to_list() == [float(f"{0.024 / (1 + e):.17f}") for e in range(6)]
    assert dict(log.lines.skipped) == {"framework log line": 1, "unrecognised line": 7}


def test_the_losses_of_a_gan_are_losses(tmp_path: Path) -> None:
    """'Epoch 1 Average Loss_G: 0.1467, Loss_D: 0.3049' (a public log: Latinaxia/Unet,
    logs/training.log) was 'no known log format': a loss named after the part it trains ('Loss_G',
    mmdet's 'loss_cls') was no metric. Two losses and no total: each is analysed (the
    generator's first), --metric chooses one."""
    path = tmp_path / "training.log"
    path.write_text("".join(f"2025-06-13 00:{e:02d}:46,228 - Epoch {e} Average Loss_G: "
                            f"{0.15 / e ** 0.3:.4f}, Loss_D: {0.3 / e ** 0.5:.4f}\n" for e in range(1, 51)))
    log = read_log(path)
    assert log.format == "colon" and log.train["step"].to_list() == list(range(1, 51))
    assert set(log.metrics) >= {"average_loss_g", "loss_d"}
    report = analyze(log)
    assert report.loss is not None and report.loss["column"] == "Average Loss_G"
    assert report.loss["others"] == ["Loss_D"] and alarms(report) == []
    assert analyze(log, metrics=("Loss_D",)).loss == {"column": "Loss_D", "metric": "loss",
                                                      "why": "chosen with --metric"}
    from losslens.logs.names import is_training_metric

    assert [is_training_metric(n) for n in ("loss_cls", "loss_rpn_bbox", "lossg", "loss_min_median_max",
                                            "loss_scale", "loss_weight_g")] == [True, True, False, False,
                                                                                 False, False]


def test_metric_names_in_chinese(tmp_path: Path) -> None:
    """'训练损失: 1.5476, 训练准确率: 36.46%' (train loss, train accuracy; a public log:
    BreezeDaisy/MVim, Face_Pose/logs/train_face.log) was 'no known log format'. The Chinese metric
    words are read in English (the names as written are kept); a NaN loss fails the gate."""
    lines = []
    for e in range(1, 41):
        loss = "nan" if e == 33 else f"{1.55 / e ** 0.2:.4f}"
        head = "2026-01-28 18:28:20,294 - train_face - INFO - "
        lines += [f"Epoch {e}/100", f"{head}训练损失: {loss}, 训练准确率: {36 + e / 2:.2f}%",
                  f"{head}验证损失：{1.38 / e ** 0.1:.4f}, 验证准确率: {43 + e / 3:.2f}%",
                  f"{head}保存最佳模型到: Face_Pose/models/face/best_model_epoch_{e}.pth"]
    path = tmp_path / "train_face.log"
    path.write_text("\n".join(lines) + "\n")
    log = read_log(path)
    assert log.format == "colon" and log.train["step"].to_list() == list(range(1, 41))
    assert (log.names["loss"], log.names["acc"], log.names["eval_loss"]) == \
        ("训练损失", "训练准确率", "验证损失")
    assert log.eval.height == 40 and log.train["acc"][0] == 36.5
    (f,) = [f for f in analyze(log).findings if f.kind == "nonfinite"]
    assert (f.metric, f.start_step, f.severity) == ("loss", 33, Severity.ERROR)


def test_epoch_records_with_a_best_so_far_line_and_runs_started_again(tmp_path: Path) -> None:
    """'Epoch [1/100], Train Loss: 2.3896, Train Acc: 0.1100, Val Loss: 2.3104, Val Acc: 0.0333'
    then a 'best' line (a public log: BreezeDaisy/MVim, logs/training.log, 17 runs in one file,
    some stopped after their first epoch). The 'best' line made a record with no epoch and a run
    started again at epoch 1 after epoch 1 repeated an epoch: the steps were the record order and
    17 runs one."""
    lines, head = [], "2025-10-27 21:02:24,983 - INFO - "
    for run, epochs in enumerate((1, 30, 1, 25)):
        for e in range(1, epochs + 1):
            lines.append(f"{head}Epoch [{e}/100], Train Loss: {2.3 / (e + run):.4f}, Train Acc: 0.5, "
                         f"Val Loss: {2.2 / (e + run):.4f}, Val Acc: 0.6")
            if e % 4 == 1:
                lines.append(f"{head}Best val acc: {0.6 + e / 1000:.4f}")
    path = tmp_path / "training.log"
    path.write_text("\n".join(lines) + "\n")
    log = read_log(path)
    assert log.train.height == 57 and any("steps are their epochs" in n for n in log.notes)
    # (a run stopped after its first epoch is at the step of the next run's first: not backwards)
    assert [(s.first_step, s.last_step) for s in log.segments] == [(1, 30), (1, 25)]


def test_a_config_dict_beside_the_metrics_is_not_the_hf_format(tmp_path: Path) -> None:
    """A hyperparameter search prints its config dict on each epoch's line ('Config: {'loss_type':
    'ls', ...}, Epoch 1/30, Train Loss: 1.5060, Test Acc: 57.66%'): sniffed as the Trainer's dicts it
    read 0 records (exit 2). A dict counts only with a metric's number in it."""
    config = ("{'filter_config': 'wide', 'activation': 'relu', 'batch_size': 128, 'num_epochs': 30, "
              "'learning_rate': 0.001, 'loss_type': 'ls', 'focal_alpha': 1, 'ls_smoothing': 0}")
    rows = [f"2025-06-02 14:{k % 60:02d}:20,402 - INFO - Config: {config}, Epoch {e}/30, "
            f"Train Loss: {1.5 * 0.95 ** e:.4f}, Test Acc: {57 + e * 0.4:.2f}%"
            for k, e in enumerate([e for _ in range(3) for e in range(1, 31)])]
    path = tmp_path / "hyperparameter_search.log"
    path.write_text("\n".join(rows) + "\n")
    log = read_log(path)
    assert log.format == "colon" and log.train.height == 90 and len(log.segments) == 3
    assert log.train["loss"][0] == round(1.5 * 0.95, 4)


def test_a_format_that_reads_few_first_lines_yields_to_the_one_below_a_long_preamble(tmp_path: Path) -> None:
    """The first 400 lines held only a config ('eval_steps: 500' read as 'evaluation' records): the
    log was taken for a colon log with no loss (exit 2), its 133 Trainer dicts never read, a NaN
    among them unseen. A format that reads few of the first lines yields to one that reads more of
    the whole head; a setting ('eval_steps') makes no evaluation record."""
    rng = np.random.default_rng(3)
    falling = 0.69 * np.exp(-np.arange(133) / 60) + 0.2 + rng.normal(0, 0.01, 133)
    log = read_log(preamble_then_dicts(tmp_path, falling))
    assert (log.format, log.train.height, log.eval.height) == ("hf", 133, 0)
    nan = falling.copy()
    nan[100:] = np.nan
    (f,) = of(analyze(read_log(preamble_then_dicts(tmp_path, nan, "nan.txt"))), "nonfinite")
    assert (f.start_step, f.severity) == (101, Severity.ERROR)  # (the 101st record: no bar, no step)


def test_a_step_printed_at_the_same_iteration_of_every_epoch(tmp_path: Path) -> None:
    """'[train] epoch:7 iter:0/18 0.00% lr:0.000258 loss:0.541594' once an epoch (a public log:
    Alex8211101/UNetpp4HSI): every record sat at step 0, so 164 losses were one point and only the
    NaN check ran. The step now counts the epochs."""
    rng = np.random.default_rng(2)
    lines = ["Total Epoch:300 Image_size:(256, 256) Training num:288  Validation num:72"]
    for e in range(164):
        lines.append(f"[train] epoch:{e} iter:0/18 0.00% lr:0.001000 "
                     f"loss:{0.4 + 0.9 * np.exp(-e / 5) + rng.normal(0, 0.02):.6f} ETA:0.0min")
        lines.append(f"[val] epoch:{e} miou:0.{50 + e % 30}")
    path = tmp_path / "train_log.txt"
    path.write_text("\n".join(lines) + "\n")
    log = read_log(path)
    assert log.train["step"].to_list() == list(range(164)) and len(log.segments) == 1
    assert any("plus one (they count from 0)" in n for n in log.notes)
    skipped = {f.detector for f in analyze(log).skipped if f.metric == "loss"}
    assert "spike" not in skipped and "plateau" not in skipped


@pytest.mark.parametrize("rows", [600, 20_000])  # line by line, and column-wise (a file past 256 KiB)
def test_a_table_with_a_delimiter_after_every_cell(tmp_path: Path, rows: int) -> None:
    """'total loss<TAB>score loss<TAB>...<TAB>' then a row of numbers per step, each cell followed by
    a tab (a public log: BADBADBADBOY/pgnet.pytorch train_log.txt) was 'no known log format': the
    header's empty last cell was no column name."""
    rng = np.random.default_rng(0)
    lines = ["total loss\tscore loss\tborder loss\tctc loss\t"]
    for i in range(rows):
        ctc = "nan" if i == rows - 100 else f"{6 + rng.normal(0, 0.3):.6f}"
        lines.append(f"{40 * np.exp(-i / (rows / 4)) + 10 + rng.normal(0, 1):.6f}\t"
                     f"{0.2 + rng.normal(0, 0.01):.6f}\t{0.14 + rng.normal(0, 0.01):.6f}\t{ctc}\t")
    path = tmp_path / "train_log.txt"
    path.write_text("\n".join(lines) + "\n")
    log = read_log(path)
    assert (log.format, log.train.height) == ("csv", rows)
    assert log.train.columns[-4:] == ["loss", "score_loss", "border_loss", "ctc_loss"]
    (f,) = of(analyze(log), "nonfinite")
    assert (f.metric, f.start_step, f.severity) == ("ctc_loss", rows - 99, Severity.ERROR)


@pytest.mark.parametrize("lead", ["Validation - ", "[val] ", "Test | ", "Eval: "])
def test_a_line_that_opens_with_its_phase_is_an_evaluation(tmp_path: Path, lead: str) -> None:
    """'... - INFO - Validation - Loss: 0.2009, F1: 0.9989, AUC: 1.0000' after each epoch's train
    lines (a public log: BlackPool25/AI-Detector-Text training.log) was a train record: five
    'spikes' at the epoch ends and a periodicity *error* 'data order repeating' (the period was
    the epoch). A message that opens with its phase (behind a capture's prefix too) is an
    evaluation at the last train step; a key that names its phase ('Val loss') stays as it was."""
    rng = np.random.default_rng(6)
    rows = []
    for e in range(5):
        for s in range(e * 3000 + 100, (e + 1) * 3000 + 1, 100):
            rows.append(f"2025-10-19 20:17:28,841 - src.training.train - INFO - Step {s}, "
                        f"Loss: {0.05 + rng.normal(0, 0.0005):.4f}")
        rows.append(f"2025-10-19 21:42:41,484 - src.training.train - INFO - {lead}Loss: "
                    f"{0.2 + rng.normal(0, 0.001):.4f}, F1: 0.9989, AUC: 1.0000")
    path = tmp_path / "training.log"
    path.write_text("\n".join(rows) + "\n")
    log = read_log(path)
    assert (log.train.height, log.eval.height) == (150, 5)
    assert log.eval["step"].to_list() == [3000 * k for k in range(1, 6)] and "eval_f1" in log.eval.columns
    assert alarms(analyze(log)) == []
    both = tmp_path / "both.log"  # the keys say their phase: train and eval on one line, as before
    both.write_text("".join(f"Epoch {e}: Val loss: {0.3 - e / 100:.3f}, Train loss: {0.2 - e / 100:.3f}\n"
                            for e in range(1, 12)))
    log = read_log(both)
    assert log.train["loss"].to_list()[:2] == [0.19, 0.18]
    assert log.eval["eval_loss"].to_list()[:2] == [0.29, 0.28]


@pytest.mark.parametrize("desc", ["Epoch {e}/{epochs}", "train"])
@pytest.mark.parametrize("epochs", [3, 60])  # line by line, and through the column-wise reader (> 256 KiB)
def test_a_tqdm_bar_with_a_postfix_is_a_record_per_redraw(tmp_path: Path, epochs: int, desc: str) -> None:
    """`pbar.set_postfix(loss=..., lr=...)` under nohup: each epoch's bar is one line of '\\r'
    redraws, 'Epoch 2:  45%|####5     | 45/100 [00:15<00:18,  3.33it/s, loss=2.31, lr=1e-4]'. The
    key=value reader took the first redraw's pairs only: one record an epoch, and a NaN in a
    later redraw unseen (check: ok). Each redraw is now a record at the bar's count, counted on
    across the epochs' passes."""
    rng = np.random.default_rng(3)
    lines = ["Loading data...", "Starting training"]
    for e in range(1, epochs + 1):
        states = []
        for n in range(0, 101):
            k = (e - 1) * 100 + n
            loss = "nan" if (e, n) == (2, 50) else f"{2.5 * np.exp(-k / 150) + 0.3 + rng.normal(0, 0.01):.4f}"
            post = f", loss={loss}, lr=1e-4]" if n else "]"
            states.append(f"{desc.format(e=e, epochs=epochs)}: {n:3d}%|{'#' * (n // 10):<10}| {n}/100 "
                          f"[00:{n % 60:02d}<00:30,  3.33it/s{post}")
        lines.append("\r".join(states))
        lines.append(f"Epoch {e} done, val_loss={2.6 * np.exp(-e * 100 / 150) + 0.35:.4f}")
    path = tmp_path / "nohup.out"
    path.write_text("\n".join(lines) + "\n")
    log = read_log(path)
    assert log.format == "kv" and log.train.height == 100 * epochs
    assert log.train["step"].to_list()[:3] == [1, 2, 3] and log.train["step"].to_list()[-1] == 100 * epochs
    assert log.lines.as_dict() == {"total": 2 + 2 * epochs, "parsed": 2 * epochs, "skipped": 2, "blank": 0}
    (f,) = of(analyze(log), "nonfinite")
    assert (f.metric, f.start_step, f.line) == ("loss", 150, 5)


def test_hf_dicts_with_their_own_step_keep_it_across_a_restart(tmp_path: Path) -> None:
    # a run resumed from the checkpoint 30 steps back prints those steps again
    steps = [*range(1, 300), *range(270, 400)]
    rows = [f"{{'loss': {2.0 - 0.001 * s:.4f}, 'learning_rate': 1e-4, 'step': {s}}}" for s in steps]
    path = tmp_path / "resumed.log"
    path.write_text("\n".join(rows) + "\n")
    log = read_log(path)
    assert log.format == "hf" and not any("buffered" in n for n in log.notes)
    first, second = (log.train.filter(log.train["segment"] == k)["step"].to_list() for k in (0, 1))
    assert (first[0], first[-1], second[0], second[-1]) == (1, 299, 270, 399)


@pytest.mark.parametrize("style", range(3))
def test_a_phase_after_the_metric_name(tmp_path: Path, style: int) -> None:
    """'Loss Train: 0.31 | Loss Val: 0.42 | AUC Val: 0.81', 'loss train: … | loss test: …' (hand-
    written loops print this way; TensorBoard's tutorial names 'Loss/train' and 'Loss/test'): the
    validation loss was a second training loss ('loss_val'), a line of only 'loss train' and 'Epoch'
    no record ('Epoch 1 | iter 301 | loss train: 2.3' was 'no known log format'), and 'Test Loss
    (MSE): 0.67' no pair. Now the phase word after the name makes the name an eval one or the
    training one, and a qualifier in parentheses is left out of the name."""
    path = tmp_path / "run.log"
    path.write_text("\n".join(_phase_after_lines(style)) + "\n")
    log = read_log(path)
    assert (log.format, log.train.height, log.eval.height) == ("colon", 100, 100)
    assert "eval_loss" in log.eval.columns and "loss_val" not in log.train.columns
    (f,) = of(analyze(log), "nonfinite")
    assert f.metric == "loss"


def test_an_evaluation_head_opens_an_evaluation(tmp_path: Path) -> None:
    """DeepSpeed-Chat's SFT step prints '***** Evaluating perplexity, Epoch 1/3 *****' then 'ppl:
    12.3, loss: 2.5': the head opened a training record at step 1 (the epoch), and the eval loss
    joined the training loss there, a step going back (a restart reported). A head naming an
    evaluation opens an evaluation record at the last training step."""
    rows = []
    for e in range(3):
        rows.append(f"Beginning of Epoch {e + 1}/3, Total Micro Batches 1000")
        rows += [f"Epoch: {e}, Step: {s}, Rank: 0, loss = {2 / (1 + (e * 1000 + s) / 500):.4f}"
                 for s in range(0, 1000, 20)]
        rows += [f"***** Evaluating perplexity, Epoch {e + 1}/3 *****",
                 f"ppl: {7.5 - e:.4f}, loss: {2.0 - e / 10:.4f}"]
    path = tmp_path / "sft.log"
    path.write_text("\n".join(rows) + "\n")
    log = read_log(path)
    assert log.train["segment"].n_unique() == 1 and log.train.height == 150
    assert log.eval["eval_loss"].to_list() == [2.0, 1.9, 1.8]
    last = log.train["step"].to_list()[49::50]  # each epoch's last training record
    assert log.eval["step"].to_list() == last


@pytest.mark.parametrize("line", [
    "step {s} | loss {loss:.4f} | {rate:,} tok/s | lr 3.0e-04",
    "Step {s}/1000, loss: {loss:.4f}, {rate} samples/s, 0.5 s/it",
    "[2024-01-01 10:00:00,000 INFO] Step {s}/10000; acc: 12.34; xent: {loss:.2f}; {rate}/4567 tok/s; "
    "12 sec;"])
def test_a_rate_written_after_its_number(tmp_path: Path, line: str) -> None:
    """'12,345 tok/s', '1234 samples/s', OpenNMT-py's '3456/4567 tok/s': a rate printed as a number and
    its unit, with no key, was not read, so a run that halved its speed at step 600 passed without a
    word. Such rates (tok/s, tokens/s, words/s, wps, samples/s, img/s, s/it after a space) are read."""
    rows = [line.format(s=s, loss=2 * np.exp(-s / 500) + 1, rate=12345 if s < 600 else 6000)
            for s in range(0, 1000, 5)]
    path = tmp_path / "run.log"
    path.write_text("\n".join(rows) + "\n")
    (f,) = of(analyze(read_log(path)), "throughput_drop")
    assert f.start_step == 600
