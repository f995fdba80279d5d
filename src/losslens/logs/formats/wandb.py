"""Weights & Biases: an offline run folder (wandb sync first; its .wandb file is not read)."""

from __future__ import annotations

from pathlib import Path


def wandb_offline(path: Path) -> str | None:
    """A W&B offline run folder: its history is in a binary .wandb file losslens cannot read."""
    if not path.is_dir():
        return None
    if any(path.glob("run-*.wandb")) or any(path.glob("*.wandb")):
        hist = list(path.glob("files/wandb-history.jsonl"))
        if hist:
            return str(hist[0])
        return ("a W&B offline run: its history is in the binary run-*.wandb file, which only the "
                "wandb client reads; run `wandb sync` and export the history (run.history() to "
                "JSON/CSV, or the chart's CSV export), then point losslens at that file")
    return None
