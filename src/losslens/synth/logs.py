"""Log lines in the formats real trainers print (DFlash key=value, nanoGPT, JSON Lines, Megatron,
fairseq, torchtitan, OLMo), with known content: for fixtures and tests."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterator
from datetime import datetime, timedelta

import numpy as np

from losslens.synth.curves import _decay

DFLASH_T0 = datetime(2026, 5, 15, 20, 53, 0)


def dflash_line(step: int, loss: float, acc: float, lr: float, time: datetime,
                tok_per_s: float = 32100.0, q_pre: tuple[int, ...] = (50, 50, 46, 45, 44, 46),
                q_hs: tuple[int, ...] = (0,), epoch: float = 0.02, eta_days: float = 4.0,
                streak: float = 1.2, noise: float = 0.1) -> str:
    """One line of the DFlash drafter monitor, in the seed's exact layout."""
    return (f"[{time:%Y-%m-%d %H:%M:%S}] step={step} loss={loss:.4f} acc={acc:.3f} "
            f"streak={streak:.1f} lr={lr:.2e} noise={noise:.4f} | tgt=0.68b/s dft=0.68b/s "
            f"({tok_per_s / 1000:.1f}Ktok/s) | q_pre=[{', '.join(map(str, q_pre))}] "
            f"q_hs=[{', '.join(map(str, q_hs))}] | epoch~{epoch:.2f} ETA={eta_days:.1f}d")


def dflash_lines(n: int, seed: int = 0) -> Iterator[str]:
    """``n`` DFlash lines of a noisy decaying loss (for speed benchmarks)."""
    rng = np.random.default_rng(seed)
    loss = 1.0 + 2.0 / np.sqrt(1 + np.arange(n) / 100.0) + rng.normal(0, 0.05, n)
    acc = np.clip(0.5 - loss / 8 + rng.normal(0, 0.01, n), 0, 1)
    tok = rng.normal(32100, 300, n)
    q = rng.integers(40, 51, size=(n, 6))
    hs = rng.integers(0, 3, size=n)
    for i in range(n):
        yield dflash_line(i, float(loss[i]), float(acc[i]), 2.52e-07 * min(i + 1, 4000),
                          DFLASH_T0 + timedelta(seconds=6 * i), tok_per_s=float(tok[i]),
                          q_pre=tuple(int(x) for x in q[i]), q_hs=(int(hs[i]),),
                          epoch=i / 150_000)


# The records quoted in seed 004 (steps 0–15, 144–153, 249–259, 338–349); acc is 0.000 for the
# first ~30 steps in the seed, lr is its linear warm-up (7.55e-07 at step 2, 8.81e-05 at 349).
SEED004: tuple[tuple[int, float, float], ...] = (
    (0, 1.3140, 0.000), (2, 11.2112, 0.000), (3, 14.5632, 0.000), (4, 14.4995, 0.000),
    (6, 14.4611, 0.000), (8, 27.0898, 0.000), (10, 14.3071, 0.000), (11, 26.4717, 0.000),
    (13, 37.2273, 0.000), (15, 13.8323, 0.000),
    (144, 3.0102, 0.029), (146, 3.9878, 0.025), (148, 4.9730, 0.027), (149, 5.9852, 0.026),
    (151, 6.2390, 0.032), (153, 0.9935, 0.035),
    (249, 1.6099, 0.040), (251, 2.7743, 0.037), (253, 3.6723, 0.046), (254, 4.6056, 0.034),
    (256, 5.5167, 0.038), (258, 6.4252, 0.035), (259, 0.9470, 0.030),
    (338, 0.8183, 0.055), (340, 1.5599, 0.045), (342, 2.4042, 0.049), (343, 3.2330, 0.046),
    (345, 4.0884, 0.039), (347, 4.4271, 0.044), (349, 0.8700, 0.046),
)


SEED004_T338 = datetime(2026, 5, 15, 21, 26, 3)


SEED004_VERBATIM = ("[2026-05-15 21:26:03] step=338 loss=0.8183 acc=0.055 streak=1.2 lr=8.81e-05 "
                    "noise=0.1000 | tgt=0.68b/s dft=0.68b/s (32.1Ktok/s) | "
                    "q_pre=[50, 50, 46, 45, 44, 46] q_hs=[0] | epoch~0.02 ETA=4.0d")


def seed004_lines() -> list[str]:
    """The seed-004 excerpt as full DFlash lines; step 338 is the seed's verbatim line."""
    out = []
    for step, loss, acc in SEED004:
        t = SEED004_T338 - timedelta(seconds=round((338 - step) * 5.85))
        lr = float(f"{2.5228e-07 * (step + 1):.2e}")
        out.append(SEED004_VERBATIM if step == 338 else
                   dflash_line(step, loss, acc, lr, t, epoch=0.02 * step / 338))
    return out


def nanogpt_lines(n_iters: int = 200, every: int = 5, eval_every: int = 100, seed: int = 0,
                  nan_from: int | None = None) -> list[str]:
    """nanoGPT's console: an 'iter' line every ``every`` iterations and an eval line every
    ``eval_every``."""
    rng = np.random.default_rng(seed)
    out = []
    for it in range(0, n_iters + 1, every):
        if it % eval_every == 0:
            base = 4.2 * (1 + it / 100) ** -0.3
            out.append(f"step {it}: train loss {base:.4f}, val loss {base + 0.01:.4f}")
            if it:
                out.append("saving checkpoint to out")
        loss = 4.2 * (1 + it / 100) ** -0.3 + rng.normal(0, 0.03)
        text = "nan" if nan_from is not None and it >= nan_from else f"{loss:.4f}"
        mfu = -100.0 if it == 0 else 0.01
        out.append(f"iter {it}: loss {text}, time {1431 + rng.normal(0, 5):.2f}ms, mfu {mfu:.2f}%")
    return out


def jsonl_lines(n: int = 50, seed: int = 0) -> list[str]:
    """JSON Lines: train/ metrics every 10 steps, an eval/loss record every 100."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(1, n + 1):
        rec = {"step": i * 10, "train/loss": round(3 / math.sqrt(i) + rng.normal(0, 0.02), 4),
               "train/lr": 1e-4, "train/grad_norm": round(float(rng.uniform(0.5, 1.5)), 3)}
        out.append(json.dumps(rec))
        if i % 10 == 0:
            out.append(json.dumps({"step": i * 10, "eval/loss": round(3 / math.sqrt(i) + 0.1, 4)}))
    return out


def megatron_lines(n: int = 30, seed: int = 0, rank_prefix: str = "") -> list[str]:
    """Megatron-LM iteration lines (behind ``rank_prefix`` when given)."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(1, n + 1):
        loss = 9.0 * (1 + i / 10) ** -0.3 + rng.normal(0, 0.02)
        out.append(
            f"{rank_prefix} iteration {i * 10:8d}/   10000 | consumed samples: {i * 10240:12d} | "
            f"elapsed time per iteration (ms): {18000 + rng.normal(0, 200):.1f} | learning rate: "
            f"{6e-5:.3E} | global batch size:  1024 | lm loss: {loss:.6E} | loss scale: 4096.0 | "
            f"grad norm: {abs(rng.normal(1, 0.1)):.3f} | num zeros: 0.0 | number of skipped "
            f"iterations:   0 | number of nan iterations:   0 |")
        if i % 10 == 0:
            out.append(f"{rank_prefix} validation loss at iteration {i * 10} | lm loss value: "
                       f"{loss + 0.1:.6E} | lm loss PPL: {math.exp(loss + 0.1):.6E} | ")
    return out


def fairseq_lines(n: int = 30, seed: int = 0, epoch_updates: int = 1021, every: int = 100) -> list[str]:
    """fairseq's simple log: a train_inner line every ``every`` updates (``n`` of them), a valid
    and an epoch-summary line at each epoch's end."""
    rng = np.random.default_rng(seed)
    t0 = datetime(2024, 5, 31, 15, 44, 34)
    out = [f"{t0:%Y-%m-%d %H:%M:%S} | INFO | fairseq_cli.train | Namespace(arch='transformer_lm')"]
    for i in range(1, n + 1):
        update = i * every
        epoch, within = update // epoch_updates + 1, update % epoch_updates
        loss = 12.8 * (1 + update / 2000) ** -0.3 + rng.normal(0, 0.02)
        t = t0 + timedelta(seconds=update * 0.15)
        if within < every and i > 1:  # an epoch ended since the last line
            out.append(f"{t:%Y-%m-%d %H:%M:%S} | INFO | valid | epoch {epoch - 1:03d} | valid on "
                       f"'valid' subset | loss {loss + 0.2:.3f} | nll_loss {loss + 0.19:.3f} | ppl "
                       f"{2 ** (loss + 0.2):.2f} | wps 50000 | wpb 3000 | bsz 120 | num_updates {update}")
            out.append(f"{t:%Y-%m-%d %H:%M:%S} | INFO | train | epoch {epoch - 1:03d} | loss "
                       f"{loss:.3f} | nll_loss {loss * 0.99:.3f} | num_updates {update}")
        out.append(f"{t:%Y-%m-%d %H:%M:%S} | INFO | train_inner | epoch {epoch:03d}: {within:6d} / "
                   f"{epoch_updates} loss={loss:.3f}, nll_loss={loss * 0.99:.3f}, ppl={2 ** loss:.2f}, "
                   f"wps={27000 + rng.normal(0, 300):.1f}, ups={6.8 + rng.normal(0, 0.1):.2f}, "
                   f"wpb=4096, bsz=128, num_updates={update}, lr={1.25e-4 * min(1, update / 4000):.4g}, "
                   f"gnorm={abs(rng.normal(3, 0.3)):.3f}, loss_scale=8, train_wall=15, gb_free=10.1, "
                   f"wall={update * 0.15:.0f}")
    return out


def torchtitan_lines(n: int = 30, seed: int = 0, colour: bool = True) -> list[str]:
    """torchtitan's console: a metrics line a step (ANSI colours, as its logger prints them)."""
    rng = np.random.default_rng(seed)
    t0 = datetime(2025, 1, 8, 10, 0, 0)
    c = [f"\x1b[{k}m" if colour else "" for k in (31, 32, 33, 34, 35, 39)]
    out = [f"[titan] {t0:%Y-%m-%d %H:%M:%S},000 - root - INFO - Starting job: llama3 debug training"]
    for i in range(1, n + 1):
        loss = 8.0 * (1 + i / 50) ** -0.3 + rng.normal(0, 0.02)
        mem = 39.12 + rng.normal(0, 0.01)
        out.append(f"[titan] {t0 + timedelta(seconds=i * 1.5):%Y-%m-%d %H:%M:%S},000 - root - INFO - "
                   f"{c[0]}step: {i:2d}  {c[1]}loss: {loss:7.4f}  {c[2]}memory: {mem:5.2f}GiB"
                   f"({mem / 95 * 100:.2f}%)  {c[3]}tps: {6500 + int(rng.integers(0, 200)):,}  "
                   f"{c[4]}mfu: {38.5 + rng.normal(0, 0.2):.2f}%{c[5]}")
    return out


def olmo_lines(n: int = 30, seed: int = 0) -> list[str]:
    """OLMo's console: a '[step=N/T,epoch=E]' head line a step, then indented name=value lines."""
    rng = np.random.default_rng(seed)
    t0 = datetime(2025, 12, 12, 11, 5, 1)
    out = [f"{t0:%Y-%m-%d %H:%M:%S}.000\thost:0\ttrain:417\tINFO\tCLI environment prepared"]
    for i in range(1, n + 1):
        loss = 3.0 * (1 + i / 100) ** -0.1 + rng.normal(0, 0.01)
        out += [f"{t0 + timedelta(seconds=3.9 * i):%Y-%m-%d %H:%M:%S}.{i % 1000:03d}\thost:0\t"
                f"olmo.train:979\tINFO\t[step={i}/15000,epoch={i // 500}]",
                f"    optim/total_grad_norm={abs(rng.normal(0.2, 0.02)):.4f}",
                f"    train/CrossEntropyLoss={loss:.3f}", f"    train/Perplexity={math.exp(loss):.2f}",
                f"    throughput/total_tokens={i * 2097152:,}",
                f"    System/Peak GPU Memory (MB)={111477 + int(rng.integers(0, 9)):,}"]
    return out


def colon_lines(n: int = 300, seed: int = 0, epoch_steps: int = 250, eval_every: int = 50) -> list[str]:
    """A custom trainer's console through Python logging: 'Step N/T | loss: X | lr: Y | grad norm:
    Z | tokens/s: 31,042' a step, an 'Epoch k/E' head line at each epoch's start, and every
    ``eval_every`` steps a 'Validation - Loss: X, Accuracy: Y' line (taken at the last step)."""
    rng = random.Random(seed)
    t0 = datetime(2025, 3, 2, 10, 0, 0)
    epochs = max(1, -(-n // epoch_steps))
    out = []
    for i in range(1, n + 1):
        when = f"{t0 + timedelta(seconds=0.37 * i):%Y-%m-%d %H:%M:%S},{i % 1000:03d}"
        if (i - 1) % epoch_steps == 0:
            out.append(f"{when} - INFO - Epoch {(i - 1) // epoch_steps + 1}/{epochs}")
        loss = 3.0 / math.sqrt(1 + i / 80) + rng.gauss(0, 0.02)
        out.append(f"{when} - INFO - Step {i}/{n} | loss: {loss:.4f} | lr: {3e-4 * (1 - i / (n + 1)):.2e} | "
                   f"grad norm: {rng.uniform(0.4, 1.6):.3f} | tokens/s: {rng.randint(28000, 34000):,}")
        if i % eval_every == 0:
            out.append(f"{when} - INFO - Validation - Loss: {loss + 0.1:.4f}, "
                       f"Accuracy: {0.4 + i / (3 * n):.4f}")
    return out


def hf_stdout_lines(n_steps: int = 300, logging_steps: int = 10, eval_steps: int = 100, eval_batches: int = 8,
                    seed: int = 0, buffered: bool = False) -> list[str]:
    """What a Hugging Face Trainer's stdout and stderr give in one file (``python train.py > out.log
    2>&1``): tqdm's bar redrawn with '\\r' once a step, never ending its line; every
    ``logging_steps`` the logs dict written through the bar (``tqdm.write``: the bar cleared,
    the dict and a newline, the bar drawn again); an evaluation's own bar and its eval dict every
    ``eval_steps``. ``buffered``: stdout block-buffered apart from the bar's stderr (nohup), its
    dicts landing together after a later redraw."""
    rng = random.Random(seed)
    out, line, held = [], "", []
    rate = 4.2

    def redraw(k: int, total: int, per: float) -> str:
        done = int(100 * k / total)
        bar = ("█" * (done // 10)).ljust(10)
        left = (total - k) / per
        return (f"\r{done:3d}%|{bar}| {k}/{total} [{int(k / per) // 60:02d}:{int(k / per) % 60:02d}<"
                f"{int(left) // 60:02d}:{int(left) % 60:02d}, {per:5.2f}it/s]")

    def write(text: str) -> None:
        nonlocal line
        if buffered:
            held.append(text)
            if len(held) == 8:
                out.append(line + "\r" + " " * 60 + "\r" + held[0])
                out.extend(held[1:])
                held.clear()
                line = ""
            return
        out.append(line + "\r" + " " * 60 + "\r" + text)
        line = ""

    for step in range(1, n_steps + 1):
        rate = max(0.5, rate + rng.gauss(0, 0.05))
        line += redraw(step, n_steps, rate)
        if step % logging_steps == 0:
            loss = 3.0 / math.sqrt(1 + step / 50) + rng.gauss(0, 0.02)
            write(str({"loss": round(loss, 4), "grad_norm": round(rng.uniform(0.3, 1.5), 4),
                       "learning_rate": 2e-05 * (1 - step / n_steps), "epoch": round(step / n_steps, 2)}))
            line += redraw(step, n_steps, rate)  # (tqdm draws the bar again after a write)
        if step % eval_steps == 0:
            out.append(line)
            line = "".join(redraw(k, eval_batches, 12.5) for k in range(eval_batches + 1))
            write(str({"eval_loss": round(2.9 / math.sqrt(1 + step / 60), 4), "eval_runtime": 0.64,
                       "epoch": round(step / n_steps, 2)}))
            line += redraw(step, n_steps, rate)
    if held:
        out.append(line + "\r" + " " * 60 + "\r" + held[0])
        out.extend(held[1:])
        line = ""
    out.append(line + "\r" + " " * 60 + "\r" + str({"train_runtime": 71.4, "train_loss": 1.2, "epoch": 1.0}))
    return out


def bucketed_run_lines(step_bucket: np.ndarray, levels: tuple[float, ...] = (1.0, 1.0, 1.0, 1.5, 1.5, 2.0),
                       seed: int = 4) -> list[str]:
    """DFlash lines of a run whose loss level is set by the length bucket of each step's batch
    (``levels[bucket]`` times a decaying curve, 3 % noise): the seed's bands, ground truth known."""
    rng = np.random.default_rng(seed)
    n = len(step_bucket)
    loss = _decay(n, 1.65, 0.55, 50.0) * np.asarray(levels)[step_bucket] * np.exp(rng.normal(0, 0.03, n))
    acc = np.clip(0.45 - 0.1 * np.log(loss) + rng.normal(0, 0.01, n), 0, 1)
    return [dflash_line(i, float(loss[i]), float(acc[i]), 2.5e-07 * min(i + 1, 400),
                        DFLASH_T0 + timedelta(seconds=6 * i), epoch=i / n) for i in range(n)]


# what a real run prints between its records (seen in ../shared/reallogs and the framework runs):
# Python warnings, tracebacks, NCCL lines behind a rank prefix, checkpoint messages, progress bars
NOISE_BLOCKS = (
    ["/usr/lib/python3.11/site-packages/torch/utils/data/dataloader.py:617: UserWarning: This DataLoader "
     "will create 8 worker processes in total.", "  warnings.warn("],
    ["Traceback (most recent call last):", '  File "/opt/train.py", line 412, in _save',
     "    torch.save(state, path)", "OSError: [Errno 28] No space left on device"],
    ["[rank3]:[W1130 02:00:01.123456 ProcessGroupNCCL.cpp:1168] Warning: WorkNCCL(SeqNum=12, "
     "OpType=ALLREDUCE) timed out after 600000 ms"],
    [""],
    ["Saving model checkpoint to /ckpt/checkpoint-1500",
     "Configuration saved in /ckpt/checkpoint-1500/config.json"],
    [" 45%|████▌     | 450/1000 [02:15<02:45,  3.33it/s]"],
    ["NCCL INFO Channel 00/02 :    0   1   2   3   4   5   6   7"],
)


def with_noise(lines: list[str], share: float = 0.01, seed: int = 0, unit: int = 1) -> list[str]:
    """``lines`` with about ``share`` of the result's lines made of NOISE_BLOCKS, put in at random
    places between records of ``unit`` lines (the records keep their order)."""
    rng = random.Random(seed)
    per_block = sum(map(len, NOISE_BLOCKS)) / len(NOISE_BLOCKS)
    blocks = int(len(lines) * share / per_block)
    at = sorted(unit * rng.randrange(len(lines) // unit + 1) for _ in range(blocks))
    out, last = [], 0
    for i in at:
        out += lines[last:i]
        out += rng.choice(NOISE_BLOCKS)
        last = i
    return out + lines[last:]
