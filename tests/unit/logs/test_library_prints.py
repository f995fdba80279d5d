"""What named libraries print during training (Ultralytics YOLO, Stable Baselines, fastai,
MaxText, mlx-lm, ESPnet2, LitGPT, DeepSpeed, Flax, OpenNMT, Marian, spaCy, gradient boosting,
Darknet, Ray Tune, Ignite) read as records and analysed."""


from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from losslens import read_log
from losslens.analysis import analyze
from losslens.findings import Severity
from losslens.logs.base import strip_prefixes
from tests.unit.shapes import alarms, of


def _ultralytics_lines(epochs: int, nan_from: int | None = None) -> list[str]:
    """Ultralytics YOLO's stdout as nohup captures it: a header per epoch, the epoch's row redrawn
    with its bar ('\\r' between states, the running means changing), the validation table."""
    pad = " " * 16
    out = ["Ultralytics 8.3.2 🚀 Python-3.11.7 torch-2.4.0+cu121 CUDA:0 (NVIDIA A100-SXM4-40GB, 40326MiB)",
           f"Starting training for {epochs} epochs...", ""]
    for e in range(1, epochs + 1):
        box = "nan" if nan_from is not None and e >= nan_from else f"{1.5 * np.exp(-e / 40) + 0.6:.4g}"
        cls, dfl = 2.0 * np.exp(-e / 30) + 0.5, 1.3 * np.exp(-e / 50) + 0.9
        out.append("      Epoch    GPU_mem   box_loss   cls_loss   dfl_loss  Instances       Size")
        out.append("\r".join(f"{e:>11}/{epochs}      2.61G {box:>10} {cls + 0.1 / k:>10.4g} {dfl:>10.4g} "
                             f"{180 + k:>10}        640: {k * 100 // 8:3d}%|{'█' * k}{' ' * (8 - k)}| "
                             f"{k}/8 [00:0{k}<00:00,  3.21it/s]" for k in range(1, 9)))
        out.append(f"{pad} Class     Images  Instances      Box(P          R      mAP50  mAP50-95): "
                   "100%|██████████| 1/1 [00:00<00:00,  2.35it/s]")
        out.append(f"{pad}   all        128        929      {0.5 + e / 200:.3f}      0.546      "
                   f"{0.45 + e / 200:.3f}      0.454")
        out.append(f"{pad}person        128        254      0.701      0.602      0.688      0.471")
        out.append("")
    return out + [f"{epochs} epochs completed in 0.123 hours."]


def _visualizer_lines(epochs: int, per_epoch: int, data: bool = True, nan_at: tuple[int, int] | None = None,
                      drop_zero: bool = False) -> list[str]:
    """The loss log of pytorch-CycleGAN-and-pix2pix / CUT (with 'data:') or pix2pixHD / SPADE
    (without): options, a header, then '(epoch: E, iters: I, time: T[, data: D]) name: value ' lines
    whose iters count images within the epoch (every 20 of 77, so an epoch's first print is at
    3, 6, ... as the run's total passes a multiple of 20), LR updates and epoch ends between."""
    rng = np.random.default_rng(7)
    out = ["----------------- Options ---------------", "               batch_size: 1",
           "                 gan_mode: lsgan", "----------------- End -------------------",
           "================ Training Loss (Sun Mar 10 12:00:00 2024) ================"]
    total = 0
    for e in range(1, epochs + 1):
        out.append(f"learning rate {0.0002 * (1 - (e - 1) / epochs):.7f} -> {0.0002 * (1 - e / epochs):.7f}")
        for it in range(1, per_epoch + 1):
            total += 1
            if total % 20:
                continue
            g = 2.0 * 0.97 ** e + rng.uniform(0, 0.3)
            losses = {"D_A": rng.uniform(0.1, 0.4), "G_A": g, "cycle_A": 1.5 * 0.98 ** e,
                      "idt_A": 0.0 if drop_zero else 0.7 * 0.98 ** e, "D_B": rng.uniform(0.1, 0.4), "G_B": g}
            if nan_at == (e, it):
                losses["cycle_A"] = float("nan")
            shown = " ".join(f"{k}: {v:.3f}" for k, v in losses.items() if not (drop_zero and v == 0))
            timing = f"time: {rng.uniform(0.1, 0.2):.3f}"
            timing += f", data: {rng.uniform(0, 0.01):.3f}" if data else ""
            out.append(f"(epoch: {e}, iters: {it}, {timing}) {shown} ")
        out.append(f"saving the model at the end of epoch {e}, iters {total}")
        out.append(f"End of epoch {e} / {epochs} \t Time Taken: 75 sec")
    return out


def _sb3_lines(dumps: int, losses: tuple[str, ...], nan_at: int | None = None,
               tags: bool = True) -> list[str]:
    """Stable-Baselines3's console: a table per dump between dashed lines, keys sorted under their
    tags ('| train/ |  |', keys indented by three), floats as '%-8.3g'; without tags, OpenAI
    baselines' (its keys bare, 'total_timesteps' among them)."""
    rng = np.random.default_rng(9)
    out = ["Using cuda device", "Wrapping the env with a `Monitor` wrapper"]
    for it in range(1, dumps + 1):
        rows = {"rollout/ep_len_mean": f"{200 + it}", "rollout/ep_rew_mean": f"{-1200 + it * 10:<8.3g}",
                "time/fps": "1234", "time/iterations": str(it), "time/total_timesteps": str(it * 2048)}
        if it > 1:  # (the first dump comes before any update)
            for k, name in enumerate(losses):
                v = float("nan") if it == nan_at and k == len(losses) - 1 else \
                    (k + 1) * (20 * 0.97 ** it + rng.uniform(0, 1))
                rows[f"train/{name}"] = f"{v:<8.3g}"
            rows["train/n_updates"] = str((it - 1) * 10)
        if not tags:
            rows = {k.split("/")[1]: v for k, v in rows.items()}
        key_w = max(len(k.split("/")[-1]) + 3 for k in rows) if tags else max(map(len, rows))
        val_w = max(len(v) for v in rows.values())
        out.append("-" * (key_w + val_w + 7))
        tag = ""
        for key, value in sorted(rows.items()):
            if tags and key.split("/")[0] + "/" != tag:
                tag = key.split("/")[0] + "/"
                out.append(f"| {tag:<{key_w}} | {'':<{val_w}} |")
            shown = f"   {key.split('/')[1]}" if tags else key
            out.append(f"| {shown:<{key_w}} | {value:<{val_w}} |")
        out.append("-" * (key_w + val_w + 7))
    return out


def _boosting_lines(lib: str, rounds: int = 300, nan_at: int | None = None) -> list[str]:
    head = ["[LightGBM] [Info] Number of positive: 500, number of negative: 500",
            "[LightGBM] [Warning] No further splits with positive gain, best gain: -inf"]
    rows = list(head) if lib == "lightgbm" else []
    for i in range(rounds):
        train = 0.6 * np.exp(-i / 60) + 0.05
        val = 0.6 * np.exp(-i / 60) + 0.1 + max(0, i - 150) * 0.002  # overfits after round 150
        t = "nan" if i == nan_at else f"{train:.6f}"
        rows.append({"xgboost": f"[{i}]\ttrain-logloss:{t}\teval-logloss:{val:.6f}",
                     "lightgbm": f"[{i + 1}]\ttraining's binary_logloss: {t}\tvalid_1's binary_logloss: "
                                 f"{val:.6f}\tvalid_1's auc: {0.9:.6f}",
                     "catboost": f"{i}:\tlearn: {t}\ttest: {val:.7f}\tbest: {val:.7f} ({i})\ttotal: {i}ms\t"
                                 f"remaining: {'1m 5s' if i % 2 else '78.3ms'}"}[lib])
    if lib == "lightgbm":  # early stopping prints the best round again
        rows += ["Early stopping, best iteration is:", rows[150 + len(head)]]
    return rows


def test_an_aligned_table_ultralytics_yolo(tmp_path: Path) -> None:
    """Ultralytics YOLO prints each epoch as a row under a header ('1/100  2.61G  1.183 ...'), was
    'no known log format'; its three losses are each watched for a NaN (exit 1), none is 'the'
    loss until --metric says, and the validation's 'all' row is an eval record."""
    path = tmp_path / "train.log"
    path.write_text("\n".join(_ultralytics_lines(60)) + "\n")
    log = read_log(path)
    assert log.format == "table" and log.train["step"].to_list() == list(range(1, 61))
    last_redraw = float(f"{2.0 * np.exp(-1 / 30) + 0.5 + 0.1 / 8:.4g}")
    assert log.train["cls_loss"][0] == last_redraw
    assert log.eval.height == 60 and log.eval["eval_map50"][0] == 0.455 and log.eval["step"][0] == 1
    assert dict(log.lines.skipped) == {"unrecognised line": 3, "a single class's result": 60}
    assert [f.kind for f in analyze(log, metrics=("box_loss",)).findings] == []
    nan = tmp_path / "nan.log"
    nan.write_text("\n".join(_ultralytics_lines(60, nan_from=45)) + "\n")
    (f,) = [f for f in analyze(read_log(nan)).findings if f.kind == "nonfinite"]
    assert (f.metric, f.start_step, f.severity) == ("box_loss", 45, Severity.ERROR)


@pytest.mark.parametrize("data", [True, False])
def test_the_image_translation_loss_log(tmp_path: Path, data: bool) -> None:
    """pytorch-CycleGAN-and-pix2pix's loss_log.txt (and CUT's, pix2pixHD's, SPADE's: one visualizer)
    was 'no known log format', a NaN in it unseen. Each name is a loss, each analysed (the first
    as the loss, a discriminator's never a plateau) until --metric names one; the iters count
    within each epoch."""
    path = tmp_path / "loss_log.txt"
    path.write_text("\n".join(_visualizer_lines(40, 77, data)) + "\n")
    log = read_log(path)
    assert log.format == "cyclegan" and log.train.height == 40 * 77 // 20 and len(log.segments) == 1
    assert log.names["cycle_a_loss"] == "cycle_A" and log.names["g_a_loss"] == "G_A"
    assert log.train["step"].is_sorted() and log.train["lr"][0] == 0.0002 * (1 - 1 / 40)
    assert ("data_time" in log.train.columns) == data and log.train["step_time_s"].max() <= 0.2
    assert dict(log.lines.skipped) == {"unrecognised line": 4, "checkpoint message": 40,
                                       "end-of-epoch summary": 40}
    report = analyze(log)
    assert alarms(report) == [] and report.loss is not None and len(report.loss["others"]) >= 3
    assert alarms(analyze(log, metrics=("G_A",))) == []
    nan = tmp_path / "nan.txt"
    nan.write_text("\n".join(_visualizer_lines(40, 77, data, nan_at=(31, 50))) + "\n")
    (f,) = of(analyze(read_log(nan), metrics=("G_A",)), "nonfinite")
    assert (f.metric, f.severity) == ("cycle_a_loss", Severity.ERROR)
    assert read_log(nan).train.filter(pl.col("cycle_a_loss").is_nan())["line"].to_list() == [f.line]


def test_the_image_translation_loss_log_without_zero_losses(tmp_path: Path) -> None:
    """pix2pixHD leaves a loss that is 0 out of its line: the columns differ from line to line."""
    path = tmp_path / "loss_log.txt"
    path.write_text("\n".join(_visualizer_lines(10, 77, data=False, drop_zero=True)) + "\n")
    log = read_log(path)
    assert log.format == "cyclegan" and "idt_a_loss" not in log.train.columns
    assert log.train.height == 10 * 77 // 20


@pytest.mark.parametrize("tags", [True, False])
def test_stable_baselines_console_tables(tmp_path: Path, tags: bool) -> None:
    """SB3's (and OpenAI baselines') console tables were 'no known log format', a NaN loss unseen.
    A dump is a record at its total timesteps; PPO's 'train/loss' is the loss; SAC's actor and
    critic losses are both watched for a NaN, none is 'the' loss until --metric names one."""
    path = tmp_path / "ppo.log"
    path.write_text("\n".join(_sb3_lines(80, ("loss", "value_loss"), tags=tags)) + "\n")
    log = read_log(path)
    assert (log.format, log.train.height) == ("sb3", 79)  # (the first dump has no loss)
    assert log.train["step"].to_list() == [2048 * k for k in range(2, 81)]
    assert dict(log.lines.skipped) == {"unrecognised line": 2}
    assert log.names["loss"] == ("train/loss" if tags else "loss") and "loss" in log.train.columns
    assert alarms(analyze(log)) == []
    sac = tmp_path / "sac.log"
    sac.write_text("\n".join(_sb3_lines(80, ("actor_loss", "critic_loss"), nan_at=61, tags=tags)) + "\n")
    report = analyze(read_log(sac))
    (f,) = of(report, "nonfinite")
    assert (f.metric, f.start_step, f.severity) == ("critic_loss" if not tags else "train_critic_loss",
                                                    61 * 2048, Severity.ERROR)
    assert report.loss is not None and report.loss["column"] == ("train/actor_loss" if tags else "actor_loss")


def test_fastai_fit_table(tmp_path: Path) -> None:
    """fastai's fit prints 'epoch  train_loss  valid_loss  accuracy  time' then a row an epoch
    ('0  0.523  0.412  0.85  00:12'): 'no known log format' (its time, minutes:seconds, was no
    number). The metrics after valid_loss are the validation set's: eval records."""
    rows = ["epoch     train_loss  valid_loss  accuracy  error_rate  time    "]
    for e in range(30):
        train = "nan" if e == 25 else f"{0.9 * np.exp(-e / 10) + 0.1:<12.6f}"
        rows.append(f"{e:<10}{train:<12}{0.8 * np.exp(-e / 12) + 0.15:<12.6f}{0.5 + e / 70:<10.6f}"
                    f"{0.5 - e / 70:<12.6f}{e // 60:02d}:{12 + e:02d}     ")
    path = tmp_path / "fit.log"
    path.write_text("\n".join(rows) + "\n")
    log = read_log(path)
    assert (log.format, log.train.height, log.eval.height) == ("table", 30, 30)
    assert set(log.eval.columns) >= {"eval_loss", "eval_acc", "eval_error_rate"}
    assert log.train["step_time_s"].to_list()[:2] == [12.0, 13.0] and "acc" not in log.train.columns
    (f,) = of(analyze(log), "nonfinite")
    assert (f.metric, f.start_step) == ("loss", 25)


def test_maxtext_lines_behind_abseil_prefixes(tmp_path: Path) -> None:
    """MaxText prints 'completed step: 9, seconds: 5.667, TFLOP/s/device: 134.924, Tokens/s/device:
    8672.758, total_weights: 196608, loss: 10.374' (its docs' example), behind abseil's 'I1203
    10:00:01.123456 139872 train.py:512] ' when logged. 'completed step' was no step: the records
    were numbered 1, 2, ... and a NaN at step 150 was reported at 151."""
    rng = np.random.default_rng(1)
    rows = []
    for s in range(200):
        loss = "nan" if s == 150 else f"{10 * np.exp(-s / 80) + 2 + rng.normal(0, 0.02):.3f}"
        rows.append(f"I1203 10:{s // 60:02d}:{s % 60:02d}.123456 139872 train.py:512] completed step: {s}, "
                    f"seconds: 5.667, TFLOP/s/device: 134.924, Tokens/s/device: {8672 + s % 7}.758, "
                    f"total_weights: 196608, loss: {loss}")
    path = tmp_path / "maxtext.log"
    path.write_text("\n".join(rows) + "\n")
    log = read_log(path)
    assert log.train["step"].to_list() == list(range(200)) and "tokens_per_s" in log.train.columns
    (f,) = of(analyze(log), "nonfinite")
    assert (f.start_step, f.line) == (150, 151)
    assert strip_prefixes(rows[0])[0].startswith("completed step: 0, ")


def test_build_nanogpt_lines_and_a_slow_down(tmp_path: Path) -> None:
    """build-nanogpt's 'step    10 | loss: 6.532139 | lr 6.0000e-05 | norm: 1.2345 | dt: 323.45ms |
    tok/sec: 1621.32': 'dt' and 'tok/sec' were unknown columns, so a node 2.5x slower from step 200
    went unreported. dt is the step time, tok/sec the token rate; the slow-down is one finding."""
    rng = np.random.default_rng(8)
    rows = []
    for s in range(300):
        dt = 320 + rng.uniform(0, 5) if s < 200 else 800 + rng.uniform(0, 5)
        loss = 10 * np.exp(-s / 100) + 3 + rng.uniform(0, 0.05)
        rows.append(f"step {s:5d} | loss: {loss:.6f} | lr 6.0000e-04 | norm: {1 + rng.uniform(0, 1):.4f} | "
                    f"dt: {dt:.2f}ms | tok/sec: {524288 / dt * 1000:.2f}")
    path = tmp_path / "log.txt"
    path.write_text("\n".join(rows) + "\n")
    log = read_log(path)
    assert {"step_time_s", "tokens_per_s", "grad_norm"} <= set(log.train.columns)
    assert 0.320 <= log.train["step_time_s"][0] <= 0.325
    (f,) = analyze(log).findings
    assert (f.kind, f.metric, f.start_step) == ("throughput_drop", "tokens_per_s", 200)


@pytest.mark.parametrize("colour", [False, True])
def test_mlx_lm_reports(tmp_path: Path, colour: bool) -> None:
    """mlx_lm's trainer prints 'Iter 10: Train loss 2.345, Learning Rate 1.000e-05, It/sec 1.234,
    Tokens/sec 567.800, Trained Tokens 5120, Peak mem 5.600 GB' (its loss in ANSI green in newer
    versions) and 'Iter 200: Val loss 1.234, Val took 5.600s': 'no known log format'. A field of a
    few words and one number is now a pair, the words its name."""
    rng = np.random.default_rng(4)
    green, end = ("\x1b[92m", "\x1b[0m") if colour else ("", "")
    rows = ["Loading pretrained model", "Trainable parameters: 0.047% (3.408M/7241.732M)",
            "Starting training..., iters: 1000"]
    for it in range(10, 1010, 10):
        loss = "nan" if it == 700 else f"{2.5 * np.exp(-it / 400) + 1 + rng.uniform(0, 0.02):.3f}"
        rows.append(f"Iter {it}: Train loss {green}{loss}{end}, Learning Rate 1.000e-05, It/sec 1.234, "
                    f"Tokens/sec {567.8 + rng.uniform(0, 5):.3f}, Trained Tokens {it * 512}, "
                    "Peak mem 5.600 GB")
        if it % 200 == 0:
            rows.append(f"Iter {it}: Val loss {2.6 * np.exp(-it / 400) + 1.1:.3f}, Val took 5.600s")
    path = tmp_path / "mlx.log"
    path.write_text("\n".join(rows) + "\n")
    log = read_log(path)
    assert (log.format, log.train.height, log.eval.height) == ("colon", 100, 5)
    assert {"lr", "tokens_per_s"} <= set(log.train.columns) and log.eval["step"].to_list()[0] == 200
    (f,) = of(analyze(log), "nonfinite")
    assert (f.metric, f.start_step) == ("loss", 700)


@pytest.mark.parametrize("epochs", [5, 120])  # line by line, and a file past 256 KiB
def test_espnet2_reports_and_epoch_results(tmp_path: Path, epochs: int) -> None:
    """ESPnet2's reporter (espnet2/train/reporter.py): '4epoch:train:501-600batch: iter_time=...,
    loss=..., optim0_lr0=..., train_time=...' and '4epoch results: [train] ..., [valid] loss=...'.
    Read as plain key=value lines, the records were numbered (a NaN at epoch 4's batch 600 was
    'step 39'), the epoch results were train records mixing the train averages in, and the valid
    losses were lost. Now: the batch count within the epoch is the step (made to count the run),
    the valid part an evaluation, the train part an average already read."""
    rng = np.random.default_rng(5)
    lines, k = [], 0
    for ep in range(1, epochs + 1):
        for b in range(1, 1001, 100):
            k += 1
            loss = float("nan") if (ep, b) == (4, 501) else 60 * np.exp(-k / 20) + 20 + rng.uniform(0, 1)
            lines.append(f"[gpu01] 2023-01-01 10:00:00,123 (trainer:732) INFO: "
                         f"{ep}epoch:train:{b}-{b + 99}batch: "
                         f"iter_time=1.234e-04, forward_time=0.123, loss_ctc={loss * 1.3:.3f}, "
                         f"loss_att={loss * 0.9:.3f}, acc=0.450, loss={loss:.3f}, backward_time=0.100, "
                         f"optim_step_time=0.020, optim0_lr0=2.000e-05, train_time=1.234")
        lines.append(f"[gpu01] 2023-01-01 10:00:00,123 (trainer:338) INFO: {ep}epoch results: [train] "
                     "iter_time=1.2e-04, loss=33.200, train_time=1.2, time=10 minutes and 5.2 seconds, "
                     f"total_count={ep * 1000}, [valid] loss_ctc=35.100, cer_ctc=0.300, acc=0.600, "
                     f"loss={28.2 - ep * 0.01:.3f}, time=30.1 seconds, total_count={ep * 100}")
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n")
    log = read_log(path)
    assert (log.format, log.train.height, log.eval.height) == ("kv", 10 * epochs, epochs)
    assert log.train["step"].to_list()[:11] == [*range(100, 1001, 100), 1100]
    assert log.eval["step"].to_list()[:2] == [1000, 2000] and log.eval["eval_loss"][0] == 28.19
    assert log.names["step_time_s"] == "train_time" and log.names["data_time"] == "iter_time"
    assert "lr" in log.train.columns and dict(log.lines.skipped) == {}
    (f, *_) = of(analyze(log), "nonfinite")
    assert f.start_step == 3600


def test_litgpt_reports(tmp_path: Path) -> None:
    """litgpt's finetune scripts: 'Epoch 1 | iter 8 step 2 | loss train: 2.345, val: n/a | iter
    time: 123.45 ms (step) remaining time: 0:10:00' and 'iter 100: val loss 2.1000, val time:
    1234.00 ms'. No line read before; the step time keeps its unit written after a space."""
    rng = np.random.default_rng(7)
    rows = []
    for it in range(1, 801):
        loss = "nan" if it == 600 else f"{2.5 * np.exp(-it / 300) + 1 + rng.uniform(0, 0.02):.3f}"
        rows.append(f"Epoch 1 | iter {it} step {it // 4} | loss train: {loss}, val: n/a | "
                    f"iter time: {120 + rng.uniform(0, 5):.2f} ms{' (step)' if it % 4 == 0 else ''} "
                    "remaining time: 0:10:00")
        if it % 200 == 0:
            rows.append(f"iter {it}: val loss {2.6 * np.exp(-it / 300) + 1.1:.4f}, val time: 1234.00 ms")
    path = tmp_path / "litgpt.log"
    path.write_text("\n".join(rows) + "\n")
    log = read_log(path)
    assert (log.format, log.train.height, log.eval.height) == ("colon", 800, 4)
    assert 0.12 <= log.train["step_time_s"].median() <= 0.125
    assert log.eval["step"].to_list() == [200, 400, 600, 800]
    (f,) = of(analyze(log), "nonfinite")
    assert (f.metric, f.start_step) == ("loss", 600)


def test_deepspeed_pipeline_engine_lines(tmp_path: Path) -> None:
    """DeepSpeed prints 'step=10, skipped=0, lr=[0.0001], mom=[(0.9, 0.999)]' and its timer's
    '…/global_step=10, RunningAvgSamplesPerSec=45.1, …'; its pipeline engine prints the loss alone:
    'steps: 10 loss: 2.3012 iter time (s): 0.512 samples/sec: 62.500'. The key=value lines won the
    sniff and held no metric: exit 2 'no kv records', the loss unread. A key=value line counts for
    that format only when it holds a metric."""
    rows = []
    for st in range(10, 3001, 10):
        loss = "nan" if st == 2000 else f"{2.5 * np.exp(-st / 900) + 1:.4f}"
        rows += [f"[2024-01-01 10:00:00,000] [INFO] [logging.py:96:log_dist] [Rank 0] step={st}, "
                 "skipped=0, lr=[0.0001], mom=[(0.9, 0.999)]",
                 f"[2024-01-01 10:00:00,001] [INFO] [timer.py:260:stop] epoch=0/micro_step={st * 4}/"
                 f"global_step={st}, RunningAvgSamplesPerSec=45.12, CurrSamplesPerSec=44.98, "
                 "MemAllocated=12.34GB, MaxMemAllocated=20.1GB",
                 f"steps: {st} loss: {loss} iter time (s): 0.512 samples/sec: 62.500"]
    path = tmp_path / "ds.log"
    path.write_text("\n".join(rows) + "\n")
    log = read_log(path)
    assert (log.format, log.train.height) == ("colon", 300)
    assert log.train["step_time_s"].to_list()[:2] == [0.512, 0.512]
    (f,) = of(analyze(log), "nonfinite")
    assert (f.metric, f.start_step) == ("loss", 2000)


def test_flax_train_and_eval_epoch_lines(tmp_path: Path) -> None:
    """Flax's examples print 'train epoch: 3, loss: 0.2345, accuracy: 93.12' and 'eval epoch: 3, loss:
    0.0512, accuracy: 98.30': the eval line's loss was read as a training loss, and the train/eval
    alternation a periodicity error (exit 1 on a healthy run). A phase word before a position word
    ('eval epoch', 'test step', 'Validation iter') makes the line an evaluation."""
    rows = []
    for e in range(1, 31):
        rows += [f"train epoch: {e}, loss: {0.5 * np.exp(-e / 5) + 0.02:.4f}, accuracy: {90 + e / 10:.2f}",
                 f"eval epoch: {e}, loss: {0.5 * np.exp(-e / 5) + 0.1:.4f}, accuracy: {89 + e / 10:.2f}"]
    path = tmp_path / "flax.log"
    path.write_text("\n".join(rows) + "\n")
    log = read_log(path)
    assert (log.format, log.train.height, log.eval.height) == ("colon", 30, 30)
    assert alarms(analyze(log)) == []


def test_opennmt_reports(tmp_path: Path) -> None:
    """OpenNMT-py's 'Step 100/10000; acc: 12.34; ppl: 1234.56; xent: 7.12; lr: 0.00100; ...': 'xent'
    (the cross-entropy) is its loss; before, no column was a loss (a 'no loss metric' warning, and
    no detector on the loss)."""
    rows = [f"[2024-01-01 10:00:00,000 INFO] Step {s}/10000; acc: {10 + s / 200:.2f}; "
            f"ppl: {np.exp(2 * np.exp(-s / 3000) + 1):.2f}; xent: "
            f"{'nan' if s == 7000 else f'{2 * np.exp(-s / 3000) + 1:.2f}'}; lr: 0.00100; sents: 1234; "
            f"bsz: 456/789/12; 3456/4567 tok/s; {s // 10} sec;" for s in range(100, 10001, 100)]
    path = tmp_path / "onmt.log"
    path.write_text("\n".join(rows) + "\n")
    log = read_log(path)
    assert log.train.height == 100 and log.names["loss"] == "xent"
    (f,) = of(analyze(log), "nonfinite")
    assert (f.metric, f.start_step) == ("loss", 7000)


def test_marian_training_log(tmp_path: Path) -> None:
    """Marian NMT's reports (format from marian-dev's training/scheduler.h): 'Ep. 1 : Up. 1000 : Sen.
    40,000 : Cost 5.12345678 * 1,234,567 @ 12,345 after 2,000,000 : Time 123.45s : 12345.67 words/s
    : gNorm 1.2345 : L.r. 3.0000e-04' and '[valid] Ep. 1 : Up. 5000 : cross-entropy : 123.4 : new
    best'. No line read before ('no known log format')."""
    rows = ["[2024-01-01 09:59:00] [marian] Marian v1.12.0 65bf82ff 2023-02-21 09:56:29 -0800",
            "[2024-01-01 09:59:30] Training started"]
    for u in range(500, 60001, 500):
        cost = "nan" if u == 40000 else f"{2 * np.exp(-u / 15000) + 2:.8f}"
        rows.append(f"[2024-01-01 10:00:00] Ep. {1 + u // 20000} : Up. {u} : Sen. {u * 40:,} : Cost {cost} "
                    f"* 1,234,567 @ 12,345 after {u * 2000:,} : Time 123.45s : 12345.67 words/s : gNorm "
                    "1.2345 : L.r. 3.0000e-04")
        if u % 5000 == 0:
            rows += [f"[2024-01-01 10:00:00] [valid] Ep. 1 : Up. {u} : cross-entropy : 95.1 : new best",
                     f"[2024-01-01 10:00:00] [valid] Ep. 1 : Up. {u} : perplexity : 7.9 : stalled 1 times "
                     "(last best: 7.5)", "Detokenizer Version $Revision: 4134 $", "Language: en",
                     f"[2024-01-01 10:01:00] [valid] Ep. 1 : Up. {u} : translation : 28.9 : new best"]
    path = tmp_path / "train.log"
    path.write_text("\n".join(rows) + "\n")
    log = read_log(path)
    assert (log.format, log.train.height, log.eval.height) == ("marian", 120, 36)
    assert {"grad_norm", "lr", "tokens_per_s"} <= set(log.train.columns)
    assert {"eval_loss", "eval_perplexity", "eval_translation"} <= set(log.eval.columns)
    assert "unrecognised line" not in log.lines.skipped
    (f,) = of(analyze(log), "nonfinite")
    assert (f.metric, f.start_step) == ("loss", 40000)


def test_spacy_train_table(tmp_path: Path) -> None:
    """spaCy's 'spacy train' table: 'E    #       LOSS TOK2VEC  LOSS NER  ENTS_F  ENTS_P  ENTS_R  SCORE'
    (names with a space, columns two spaces apart), a rule, then rows; 'E' the epoch, '#' the step.
    Not read before. Two losses: 'pass --metric', and each watched for a NaN."""
    rows = ["ℹ Pipeline: ['tok2vec', 'ner']", "ℹ Initial learn rate: 0.001",
            "E    #       LOSS TOK2VEC  LOSS NER  ENTS_F  ENTS_P  ENTS_R  SCORE ",
            "---  ------  ------------  --------  ------  ------  ------  ------"]
    for s in range(0, 5000, 200):
        ner = "nan" if s == 3000 else f"{100 * np.exp(-s / 1500) + 5:.2f}"
        ents = f"{min(99, s / 60):>6.2f}"
        rows.append(f"{s // 1000:>3}  {s:>6}  {10 * np.exp(-s / 2000):>12.2f}  {ner:>8}  "
                    f"{ents}  {ents}  {ents}  {min(0.99, s / 6000):>6.2f}")
    path = tmp_path / "spacy.log"
    path.write_text("\n".join(rows) + "\n")
    log = read_log(path)
    assert (log.format, log.train.height) == ("table", 25)
    assert log.train["step"].to_list()[:3] == [0, 200, 400] and log.train["epoch"].to_list()[-1] == 4
    assert {f.kind for f in analyze(log).findings} >= {"nonfinite"}
    assert [f.start_step for f in of(analyze(log, metrics=("loss_ner",)), "nonfinite")] == [3000]


@pytest.mark.parametrize("lib", ["xgboost", "lightgbm", "catboost"])
def test_gradient_boosting_logs(tmp_path: Path, lib: str) -> None:
    """XGBoost's '[12]\\ttrain-logloss:0.21\\teval-logloss:0.25', LightGBM's "[12]\\ttraining's
    binary_logloss: 0.21\\tvalid_1's binary_logloss: 0.25" and CatBoost's '12:\\tlearn: 0.21\\ttest:
    0.25\\tbest: …' were 'no known log format' (XGBoost's read as eval metrics only, no step). The round
    is the step, the training set's loss the loss, the first evaluated set's the eval loss: a
    validation loss rising while the training loss falls is found; LightGBM's 'best gain: -inf' warning
    is no metric."""
    path = tmp_path / f"{lib}.log"
    path.write_text("\n".join(_boosting_lines(lib)) + "\n")
    log = read_log(path)
    assert (log.format, log.train.height, log.eval.height) == ("boosting", 300, 300)
    assert log.train["segment"].n_unique() == 1
    report = analyze(log)
    assert of(report, "nonfinite") == [] and len(of(report, "overfitting")) == 1
    path.write_text("\n".join(_boosting_lines(lib, nan_at=200)) + "\n")
    (f,) = of(analyze(read_log(path)), "nonfinite")
    assert (f.metric, f.start_step) == ("loss", 200 + (lib == "lightgbm"))


@pytest.mark.parametrize("fork", ["alexeyab", "pjreddie"])
@pytest.mark.parametrize("nan_at", [900, None])
def test_darknet_yolo_training_output(tmp_path: Path, fork: str, nan_at: int | None) -> None:
    """AlexeyAB's darknet prints ' 1000: 2.345678, 2.456789 avg loss, 0.001000 rate, 3.21 seconds, 64000
    images, 12.3 hours left' after three YOLO layers' lines ('v3 (mse loss, …) Region 139 Avg (IOU: …),
    count: 5, class_loss = 1.2, iou_loss = 3.4, total_loss = 4.6'): the key=value reader took the
    layer lines (the first layer's 'total_loss' became the loss) and a NaN in the iteration's loss
    was unseen (exit 0). pjreddie's prints '6211: 4.289178, 5.320355 avg, 0.000363 rate, …' after
    'Region 82 Avg IOU: -nan, Class: -nan, Obj: -nan, No Obj: 0.0003, …, count: 0' lines (a scale
    that saw no object: routine, no failure): 'no known log format'. The iteration line is the
    record, the layer lines its detail; with '-map' 'Last accuracy mAP@0.5 = 45.23 %' is an eval."""
    rng = np.random.default_rng(3)
    rows = ["yolov4-custom", " Loaded: 0.000040 seconds"]
    for it in range(1, 1201):
        if fork == "alexeyab":
            rows += [f"v3 (mse loss, Normalizer: (iou: 0.75, obj: 1.00, cls: 1.00) Region {r} Avg (IOU: "
                     f"0.31), count: 5, class_loss = {rng.uniform(1, 2):.6f}, iou_loss = 3.4, "
                     "total_loss = 4.6 " for r in (139, 150, 161)]
        else:
            empty = "Avg IOU: -nan, Class: -nan, Obj: -nan, No Obj: 0.00003, .5R: -nan, .75R: -nan,  count: 0"
            seen = "Avg IOU: 0.73, Class: 0.58, Obj: 0.48, No Obj: 0.0037, .5R: 1.0, .75R: 0.28,  count: 7"
            rows += [f"Region {r} {empty if r == 106 else seen}" for r in (82, 94, 106)]
        loss = "-nan" if it == nan_at else f"{5 * np.exp(-it / 300) + 0.5:.6f}"
        avg = "avg loss" if fork == "alexeyab" else "avg"
        rows += [" (next mAP calculation at 1000 iterations) ",
                 f" {it}: {loss}, {5 * np.exp(-it / 300) + 0.6:.6f} {avg}, 0.001000 rate, 3.212345 "
                 f"seconds, {it * 64} images" + (", 12.345 hours left" if fork == "alexeyab" else "")]
        if it % 400 == 0:
            rows.append(f" Last accuracy mAP@0.5 = {40 + it / 100:.2f} %, best = 47.00 % ")
    path = tmp_path / "darknet.log"
    path.write_text("\n".join(rows) + "\n")
    log = read_log(path)
    assert (log.format, log.train.height, log.eval.height) == ("darknet", 1200, 3)
    assert log.eval["step"].to_list() == [400, 800, 1200]
    found = [(f.metric, f.start_step) for f in of(analyze(log), "nonfinite")]
    assert found == ([("loss", nan_at)] if nan_at else [])


@pytest.mark.parametrize("name", ["result.json", "progress.csv"])
def test_ray_tune_trial_results(tmp_path: Path, name: str) -> None:
    """Ray Tune / RLlib write a trial's results as JSON lines (result.json) and CSV (progress.csv),
    'training_iteration' counting the reports: it is the step (was a metric column, the steps the
    record order: a trial restored from a checkpoint, which reports its iterations again, was
    not seen as a restart)."""
    import json

    iters = [*range(1, 61), *range(41, 101)]  # restored at iteration 40 after a failure at 60
    rows = [{"loss": 2 * np.exp(-i / 30) + 0.5, "accuracy": 0.5 + i / 300, "timestamp": 1700000000 + k,
             "done": False, "training_iteration": i, "trial_id": "a1b2c3", "time_this_iter_s": 10.1,
             "config": {"lr": 0.001}} for k, i in enumerate(iters)]
    path = tmp_path / name
    if name.endswith(".json"):
        path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    else:
        keys = [k for k in rows[0] if k != "config"]
        table = [",".join(keys)] + [",".join(str(r[k]) for k in keys) for r in rows]
        path.write_text("\n".join(table) + "\n")
    log = read_log(path)
    assert log.train["step"].to_list() == iters and log.train["segment"].n_unique() == 2
    assert "training_iteration" not in log.train.columns


def test_ignite_validation_results_are_evaluations(tmp_path: Path) -> None:
    """PyTorch Ignite's examples: 'Epoch[1] Iteration[100/469] Loss: 0.23', then 'Training Results -
    Epoch: 1  Avg accuracy: 0.92 Avg loss: 0.25' and 'Validation Results - Epoch: 1  Avg accuracy:
    0.93 Avg loss: 0.24'. The validation results were training records; a phase word and 'Results'
    (or 'Metrics', 'Summary', 'Set') before the separator open an evaluation line."""
    rows = []
    for e in range(1, 11):
        rows += [f"Epoch[{e}] Iteration[{i}/469] Loss: {2 / (1 + (e * 469 + i) / 1000):.2f}"
                 for i in range(10, 470, 10)]
        rows += [f"Training Results - Epoch: {e}  Avg accuracy: {0.9 + e / 200:.2f} Avg loss: 0.25",
                 f"Validation Results - Epoch: {e}  Avg accuracy: {0.9 + e / 250:.2f} Avg loss: 0.24"]
    path = tmp_path / "ignite.log"
    path.write_text("\n".join(rows) + "\n")
    log = read_log(path)
    assert log.eval.height == 10 and "eval_avg_loss" in log.eval.columns
    assert "eval_avg_loss" not in log.train.columns


def test_xgboost_sklearn_rounds_in_a_notebook_s_output(tmp_path: Path) -> None:
    """XGBoost's sklearn API in a notebook's saved output (lines indented by four spaces, as
    READMEs quote them), with older XGBoost's early stopping: 'Stopping. Best iteration:' then the
    best round again. Every round an eval record, one segment (no restart); a NaN found."""
    rows = ["    Will train until validation_0-rmse hasn't improved in 40 rounds."]
    rows += [f"    [{i}]\tvalidation_0-rmse:{'nan' if i == 90 else 33000 + abs(60 - i) * 10}\t"
             f"validation_1-rmse:{34000 + abs(60 - i) * 12}" for i in range(104)]
    rows += ["    Stopping. Best iteration:",
             "    [63]\tvalidation_0-rmse:32862.5\tvalidation_1-rmse:33900.1"]
    path = tmp_path / "xgb.log"
    path.write_text("\n".join(rows) + "\n")
    log = read_log(path)
    assert (log.format, log.eval.height, log.eval["segment"].n_unique()) == ("boosting", 104, 1)
    assert "unrecognised line" not in log.lines.skipped
    assert {"eval_loss", "eval_validation_1_rmse"} <= set(log.eval.columns)
    (f,) = of(analyze(log), "nonfinite")
    assert (f.metric, f.start_step) == ("eval_loss", 90)


def test_catboost_without_an_eval_set(tmp_path: Path) -> None:
    """CatBoost fitted without an eval set prints '0:\\tlearn: 0.6716917\\ttotal: 199ms\\tremaining:
    19.7s', its times also as '1m 5s' or '0us' (seen in notebooks' outputs): a time with a space
    made the line no record."""
    rows = ["    Learning rate set to 0.5"]
    rows += [f"    {i}:\tlearn: {'nan' if i == 250 else f'{0.7 * np.exp(-i / 100) + 0.03:.7f}'}\t"
             f"total: {'1m 5s' if i > 150 else f'{i * 5}ms'}\tremaining: {'0us' if i == 299 else '19m 56s'}"
             for i in range(300)]
    path = tmp_path / "catboost.log"
    path.write_text("\n".join(rows) + "\n")
    log = read_log(path)
    assert (log.format, log.train.height) == ("boosting", 300)
    assert dict(log.lines.skipped) == {"the library's message": 1}
    (f,) = of(analyze(log), "nonfinite")
    assert (f.metric, f.start_step) == ("loss", 250)
