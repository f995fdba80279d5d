"""Which files a command reads: paths as given, glob patterns, and the logs inside folders."""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from pathlib import Path

LOG_SUFFIXES = (".log", ".txt", ".jsonl", ".csv", ".json", ".gz", ".out", ".err")
SKIP_DIRS = {".git", "__pycache__", "checkpoints", "wandb-artifacts", "node_modules"}


@dataclass(frozen=True)
class Target:
    path: str
    explicit: bool  # named by the user (an error if unreadable) or found in a folder (skipped)


def expand(paths: list[str]) -> list[Target]:
    out: list[Target] = []
    for p in paths:
        if p == "-" or os.path.isfile(p):
            out.append(Target(p, True))
        elif os.path.isdir(p):
            from losslens.logs.runs import is_mlflow_run

            if is_mlflow_run(Path(p)):
                out.append(Target(p, True))
            else:
                out += [Target(f, False) for f in _logs_in(Path(p))]
        elif any(ch in p for ch in "*?["):
            out += [Target(f, True) for f in sorted(glob.glob(p, recursive=True)) if os.path.isfile(f)]
        else:
            out.append(Target(p, True))  # missing: the reader says so
    return out


def _logs_in(folder: Path) -> list[str]:
    """Log files below ``folder``; an MLflow run folder counts as one log, its metric files not
    one each; TensorBoard event files are found by name."""
    from losslens.logs.runs import is_mlflow_run

    found = []
    for root, dirs, files in os.walk(folder):
        if is_mlflow_run(Path(root)):
            found.append(root)
            dirs[:] = []
            continue
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
        for name in sorted(files):
            if name.lower().endswith(LOG_SUFFIXES) or name == "metrics.csv" or "tfevents" in name:
                found.append(os.path.join(root, name))
    return found
