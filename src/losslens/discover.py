"""Which files a command reads: paths as given, glob patterns, and the logs inside folders.

A folder walk *selects* files that look like logs (by name, and for JSON documents by their
first bytes) and *ignores* the rest (configs, checkpoints, tokenizers) on purpose. A selected
file that cannot be read is an error the gate must not pass over; an ignored one is listed
under ``--verbose`` only.
"""

from __future__ import annotations

import glob
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

LOG_SUFFIXES = (".log", ".txt", ".jsonl", ".csv", ".json", ".gz", ".out", ".err")
SKIP_DIRS = {".git", "__pycache__", "checkpoints", "wandb-artifacts", "node_modules"}
# files with a log's suffix that trainers and tokenizers write next to their logs
NOT_LOGS = re.compile(r"^(requirements.*\.txt|vocab\.txt|merges\.txt|license(\.txt)?|readme\.txt"
                      r"|.*\.index\.json|wandb-metadata\.json|wandb-summary\.json)$", re.IGNORECASE)


LINKED_OUT = "a link to a file outside the folder (name it to read it)"  # said even without --verbose


@dataclass(frozen=True)
class Target:
    """A log to read, and whether the user named it (an error on it then needs no hint)."""
    path: str
    explicit: bool  # named by the user, or selected by a folder walk


@dataclass
class Walk:
    """What a command will read, and what a folder walk passed over on purpose (and why)."""

    targets: list[Target] = field(default_factory=list)
    ignored: list[tuple[str, str]] = field(default_factory=list)
    unlisted: list[tuple[str, str]] = field(default_factory=list)  # folders that could not be listed
    searched: bool = False  # a folder was walked or a pattern matched: it may find several logs

    @property
    def several(self) -> bool:
        """Several logs were named, or may have been found (each is then said only when it is not
        ok, and one line closes the run)."""
        return self.searched or len(self.targets) + len(self.unlisted) > 1


def expand(paths: list[str]) -> Walk:
    """The logs that files, globs and run folders name (a folder is walked for its logs; an MLflow or
    W&B run folder is one target), and the files passed over with why."""
    walk = Walk()
    for p in paths:
        if p == "-" or os.path.isfile(p):
            walk.targets.append(Target(p, True))
        elif os.path.isdir(p):
            if _is_run_folder(Path(p)):
                walk.targets.append(Target(p, True))
            else:
                walk.searched = True
                _logs_in(Path(p), walk)
        elif any(ch in p for ch in "*?["):
            found = [f for f in sorted(glob.glob(p, recursive=True)) if os.path.isfile(f)]
            # a pattern that matches nothing is a missing file: the reader says so (exit 2)
            walk.targets += [Target(f, True) for f in found] or [Target(p, True)]
            walk.searched |= bool(found)
        else:
            walk.targets.append(Target(p, True))  # missing: the reader says so
    return walk


def _is_run_folder(folder: Path) -> bool:
    """An MLflow run or a W&B offline run: one log made of many files."""
    from losslens.logs.formats.mlflow import is_mlflow_run

    return is_mlflow_run(folder) or any(folder.glob("*.wandb"))


def _logs_in(folder: Path, walk: Walk) -> None:
    """Log files below ``folder``; an MLflow or W&B run folder counts as one log, its files not
    one each; TensorBoard event files are found by name. Links are followed only to files inside
    the folder (a link out of it is passed over: name the file to read it)."""
    inside = os.path.realpath(folder) + os.sep
    outputs = _outputs()

    def unlisted(exc: OSError) -> None:  # a folder we may not read may hold logs: never silent
        walk.unlisted.append((exc.filename or str(folder), f"cannot list the folder: {exc.strerror or exc}"))

    for root, dirs, files in os.walk(folder, onerror=unlisted):
        if _is_run_folder(Path(root)):
            walk.targets.append(Target(root, False))
            dirs[:] = []
            continue
        for d in sorted(dirs):
            if d in SKIP_DIRS or d.startswith("."):
                walk.ignored.append((os.path.join(root, d), "folder of no logs (skipped by name)"))
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
        for name in sorted(files):
            path = os.path.join(root, name)
            linked_out = os.path.islink(path) and not os.path.realpath(path).startswith(inside)
            why = LINKED_OUT if linked_out else \
                (_special(path) or _not_a_log(path, name))
            if why is None and outputs and _identity(path) in outputs:
                why = "the file this command's output is being written to"
            if why is None:
                walk.targets.append(Target(path, False))
            else:
                walk.ignored.append((path, why))
    _one_state_per_run(walk)


def _special(path: str) -> str | None:
    """Why a file of a folder is passed over by its type (reading a FIFO with no writer blocks
    for ever), or None for a regular file (a dangling link is read, and says so)."""
    from losslens.logs.source import special_kind

    try:
        kind = special_kind(os.stat(path).st_mode)
    except OSError:
        return None
    return f"{kind}, not a regular file (`losslens check - < FILE` reads it)" if kind else None


def _outputs() -> set[tuple[int, int]]:
    """The files standard output and standard error are being written to (`check . > report.txt`
    creates report.txt before the walk finds it)."""
    found = set()
    for fd in (1, 2):
        try:
            st = os.fstat(fd)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            found.add((st.st_dev, st.st_ino))
    return found


def _identity(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


CHECKPOINT = re.compile(r"^checkpoint-\d+$")


def _one_state_per_run(walk: Walk) -> None:
    """A Hugging Face run's ``trainer_state.json`` files (one in each ``checkpoint-N`` folder, one
    in the output folder at the end) are one run: each holds the history up to it, so only the
    one holding the most (the largest file) is read; the others are passed over, said why."""
    runs: dict[str, list[Target]] = {}
    for t in walk.targets:
        p = Path(t.path)
        if p.name != "trainer_state.json":
            continue
        run = p.parent.parent if CHECKPOINT.match(p.parent.name) else p.parent
        runs.setdefault(str(run), []).append(t)
    dropped: set[str] = set()
    for states in runs.values():
        if len(states) < 2:
            continue
        latest = max(states, key=_history_size)
        for t in states:
            if t is not latest:
                dropped.add(t.path)
                walk.ignored.append((t.path, f"an earlier state of the same run ({latest.path} holds the "
                                             "later history)"))
    walk.targets = [t for t in walk.targets if t.path not in dropped]


def _history_size(t: Target) -> tuple[int, int]:
    """The larger file holds the longer history; then the later checkpoint."""
    try:
        size = os.path.getsize(t.path)
    except OSError:
        size = -1
    step = re.search(r"checkpoint-(\d+)", t.path)
    return size, int(step.group(1)) if step else -1


def _not_a_log(path: str, name: str, head: Callable[[int], bytes] | None = None) -> str | None:
    """Why a file in a folder is not taken as a log, or None when it is selected. ``head(n)``:
    the file's first n bytes (default: read from ``path`` on this machine)."""
    lower = name.lower()
    if "tfevents" in lower or lower == "metrics.csv":
        return None
    if not lower.endswith(LOG_SUFFIXES):
        return "not a log's file name"
    if NOT_LOGS.match(lower):
        return "a requirements, vocabulary or index file"
    if lower.endswith(".json") and lower != "trainer_state.json":
        try:
            first = head(1 << 16) if head is not None else _head(path, 1 << 16)
        except OSError:
            return None  # selected: reading it says why it cannot be read
        if not (b'"log_history"' in first or first.lstrip().startswith(b"[")
                or _json_lines(first)):
            return "a JSON document that holds no records (a config or a summary)"
    return None


def _head(path: str, n: int) -> bytes:
    with open(path, "rb") as f:
        return f.read(n)


def _json_lines(head: bytes) -> bool:
    lines = [x for x in head.split(b"\n", 3)[:3] if x.strip()]
    return len(lines) >= 2 and all(x.lstrip().startswith(b"{") for x in lines)


def main_log(folder: str, fmt: str | None = None) -> tuple[str, int]:
    """The log of a run folder that `watch DIR` follows and `analyze --pick` reports: of the logs
    the walk selects and can read, the one with the most train records (then the newest).
    Returns it and how many logs were candidates; a UsageError when there is none."""
    from losslens.errors import LossLensError, UsageError
    from losslens.logs import read_log

    walk = expand([folder])
    best: tuple[int, float, str] | None = None
    for t in walk.targets:
        try:
            records = read_log(t.path, fmt).train.height
        except LossLensError:
            continue
        key = (records, os.path.getmtime(t.path), t.path)
        best = key if best is None or key > best else best
    if best is None:
        raise UsageError(f"no readable log found in {folder} ({len(walk.targets)} selected, "
                         f"{len(walk.ignored)} passed over as not logs)")
    return best[2], len(walk.targets)
