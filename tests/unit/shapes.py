"""Curves and log lines that several test modules build: each with its own noise model, not the ones
in losslens.synth."""


from __future__ import annotations

from pathlib import Path

import numpy as np

from losslens.findings import Severity


def of(report, kind: str) -> list:
    return [f for f in report.findings if f.kind == kind]


def alarms(report) -> list[str]:
    return [f.kind for f in report.findings if f.severity >= Severity.WARNING]


def sgdr_lines(period: int, lr_logged: bool, n: int = 3000, every: int = 5) -> list[str]:
    """HF Trainer stdout of an SGDR run (cosine annealing with warm restarts): the loss rises
    with each restart of the LR."""
    rng = np.random.default_rng(3)
    t = np.arange(n)
    lr = 3e-4 * (0.02 + 0.98 * 0.5 * (1 + np.cos(np.pi * (t % period) / period)))
    loss = (1.6 + 2.4 * np.exp(-np.cumsum(lr) / lr.max() / 400) + 0.5 * lr / lr.max())
    loss = loss * np.exp(rng.normal(0, 0.02, n))
    out = []
    for i in range(every, n + 1, every):
        entry = f"'loss': {loss[i - every:i].mean():.4f}, 'grad_norm': {rng.uniform(0.5, 1.5):.4f}"
        if lr_logged:
            entry += f", 'learning_rate': {lr[i - 1]:.4e}"
        out.append(f"{{{entry}, 'epoch': {i / n:.2f}, 'step': {i}}}")
    return out


def preamble_then_dicts(tmp_path: Path, loss: np.ndarray, name: str = "train_log.txt") -> Path:
    """A public log's shape (AdamHermes/MKGL-master train_log.txt): TensorFlow's start-up noise, a
    YAML config with 'eval_steps: 500', the TrainingArguments repr and a printed model, 430 lines in
    all, then the Trainer's dicts."""
    head = ["2025-12-05 09:28:58.964661: I tensorflow/core/util/port.cc:153] oneDNN custom ops on.",
            "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
            "trainer:", "  eval_steps: 500", "  eval_accumulation_steps: 4", "  logging_steps: 10",
            "  per_device_eval_batch_size: 8", "  num_train_epochs: 5"]
    head += [f"      (layers.{i}): LlamaDecoderLayer(" for i in range(420)]
    lr = np.concatenate([np.linspace(1e-3, 5e-3, 5), np.linspace(5e-3, 1e-5, len(loss) - 5)])
    rows = [f"{{'loss': {x:.4f}, 'grad_norm': 0.07, 'learning_rate': {r:.6g}, 'epoch': {0.04 * (i + 1):.2f}}}"
            for i, (x, r) in enumerate(zip(loss, lr, strict=True))]
    path = tmp_path / name
    path.write_text("\n".join(head + rows) + "\n")
    return path
