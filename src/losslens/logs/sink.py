"""Raw records as readers emit them, and the table of what a log held."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import polars as pl

from losslens.logs.compact import COMPACT_RECORDS, Compactor, normalised
from losslens.logs.names import (
    RESERVED,
    STEP_KEYS,
    canonical,
    is_eval,
    is_setting,
    is_training_metric,
    parse_value,
    unreserved,
    unwrapped,
)
from losslens.logs.regex import lazy
from losslens.logs.spill import Spill

Value = float | list[float]
MAX_KEYS = 4096  # a record with more fields is skipped: one 3 MB line of 200k keys took 24 GB
TOO_WIDE = f"more than {MAX_KEYS:,} fields in one record"
COMPACT_AT = 50_000  # per-line readers turn their records into a frame every this many


# what a quoted log line must not show: bearer tokens, key=value secrets, well-known token shapes
SECRETS = lazy(
    r"(?i)(\bbearer\s+|(?<![A-Za-z])(?:authorization|api[_-]?key|access[_-]?key|secret|token|password"
    r"|passwd)['\"]?\s*[:=]\s*['\"]?(?:bearer\s+|basic\s+)?)([^\s'\",;]+)"
    r"|\b(?:hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|AKIA[0-9A-Z]{16}"
    r"|xox[baprs]-[A-Za-z0-9-]{10,}|eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]+)")


# a URL's credentials (postgres://admin:pw@host, https://user:token@host): the password part
URL_CREDENTIALS = lazy(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s/:@'\"]+:)[^\s/@'\"]+@")
# a PEM block's armour (a private key's) and a line of its base64 body (48+ characters of it)
# (mixed case and a digit: a run of one letter, or of digits, is no key)
KEY_LINE = lazy(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
                r"|^(?=.*[A-Z])(?=.*[a-z])(?=.*[0-9])\s*[A-Za-z0-9+/]{48,}={0,2}\s*$")


def mask_secrets(text: str) -> str:
    """``text`` with token-like strings replaced by '***' (reports quote skipped lines): tokens,
    key=value secrets, a URL's password, a private key's armour and base64 lines."""
    text = SECRETS.sub(lambda m: f"{m.group(1)}***" if m.group(1) else "***", text)
    text = URL_CREDENTIALS.sub(lambda m: f"{m.group(1)}***@", text)
    return KEY_LINE.sub("*** (a private key's line)", text)


@dataclass
class Accounting:
    """Every input line is exactly one of parsed, skipped (with a reason) or blank."""

    total: int = 0
    parsed: int = 0
    blank: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    examples: dict[str, tuple[int, str]] = field(default_factory=dict)

    def skip(self, reason: str, lineno: int, text: str, count: int = 1) -> None:
        """``count`` lines skipped for ``reason``, the first of them line ``lineno``, ``text``."""
        self.skipped[reason] += count
        if reason not in self.examples:
            self.examples[reason] = (lineno, mask_secrets(text[:160]))

    @property
    def n_skipped(self) -> int:
        return sum(self.skipped.values())

    def as_dict(self) -> dict[str, int]:
        return {"total": self.total, "parsed": self.parsed, "skipped": self.n_skipped,
                "blank": self.blank}


class TooWide(ValueError):
    """A record with more than MAX_KEYS fields (see ``feed_line``)."""


def feed_line(parser: Any, lineno: int, line: str) -> str | None:
    """``parser.feed``, with a record too wide to hold as its skip reason."""
    try:
        return parser.feed(lineno, unwrapped(line))
    except TooWide:
        return TOO_WIDE


@dataclass
class Sink:
    """Collects records (train and eval kept apart) and the original names of metrics."""

    train: list[dict[str, Any]] = field(default_factory=list)
    eval: list[dict[str, Any]] = field(default_factory=list)
    names: dict[str, str] = field(default_factory=dict)
    frames: list[pl.DataFrame] = field(default_factory=list)  # vectorised readers
    eval_frames: list[pl.DataFrame] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)  # what the read could not take (see LogData.lost)
    idle_lines: list[int] = field(default_factory=list)  # vectorised rows that held no metric
    # lines a vectorised pass skipped as the per-line parser would: (the parser's reason, line numbers)
    passed_lines: list[tuple[str, np.ndarray]] = field(default_factory=list)
    source_name: str = ""  # the file's base name (an MLflow metric file is named by its metric)
    # a large log's frames are compacted as they come (see compact.py): train, eval
    compactors: tuple[Compactor, Compactor] | None = None
    spill: Spill | None = None  # and its columns held in a mapped file (see spill.py)
    # each metric's shape as first seen (True: a [..] list); values of the other shape are left out
    shapes: dict[str, bool] = field(default_factory=dict)
    mixed: Counter[str] = field(default_factory=Counter)  # how many were left out, by metric
    # a chunk's per-line tags for the vectorised readers' rows: line, a capture's time ('when'), rank
    tags: pl.DataFrame | None = None
    # the capture's times of the last lines fed without their prefixes (line → time), for a record
    # that one of them opened and a later line completes (see base.feed_ranked)
    line_times: dict[int, datetime] = field(default_factory=dict)

    def _fits(self, name: str, is_list: bool) -> bool:
        """Whether a value of this shape can join ``name``'s column (counted when not)."""
        if self.shapes.setdefault(name, is_list) == is_list:
            return True
        self.mixed[name] += 1
        return False

    def mixed_notes(self) -> list[str]:
        """One note per metric whose values were left out for their shape."""
        first = {True: "a number where the first were lists", False: "a list where the first were numbers"}
        return [f"{self.names.get(k, k)}: {n:,} value{'s' if n > 1 else ''} {first[self.shapes[k]]}"
                " (left out)" for k, n in self.mixed.items()]

    def compact(self) -> None:
        """Turn the records gathered so far into frames: a dict per record costs about ten times
        its columns' memory (1M per-line records: ~1 GB as dicts)."""
        if len(self.train) >= COMPACT_AT:
            self.add(pl.from_dicts(self.train, infer_schema_length=None))
            self.train = []
        if len(self.eval) >= COMPACT_AT:
            self.add(pl.from_dicts(self.eval, infer_schema_length=None), evals=True)
            self.eval = []

    def add(self, frame: pl.DataFrame, evals: bool = False) -> None:
        """A frame of records (a reader's chunk), in canonical types; once the log holds more
        than COMPACT_RECORDS train records, every frame is held compact."""
        clash = [c for c, t in frame.schema.items() if c not in RESERVED and t != pl.Null
                 and self.shapes.setdefault(c, isinstance(t, pl.List)) != isinstance(t, pl.List)]
        if clash:
            self.mixed.update({c: frame[c].len() - frame[c].null_count() for c in clash})
            frame = frame.drop(clash)
        frame = normalised(frame)
        frames = self.eval_frames if evals else self.frames
        if self.compactors is None and not evals and \
                sum(f.height for f in self.frames) + frame.height > COMPACT_RECORDS:
            self.spill = Spill()  # (and their columns held in a file)
            self.compactors = (Compactor(self.spill.hold), Compactor(self.spill.hold))
            for i, c in enumerate(self.compactors):
                held = self.eval_frames if i else self.frames
                done: list[pl.DataFrame] = []
                for f in held:
                    done.append(c.frame(f, done))
                held[:] = done
        if self.compactors is not None:
            frame = self.compactors[1 if evals else 0].frame(frame, frames)
        frames.append(frame)

    def emit(self, line: int, step: int | None, metrics: Mapping[str, Value | None],
             time: datetime | None = None, kind: str | None = None) -> bool:
        """Split ``metrics`` into a train and an eval record; False when neither holds a metric. A
        step past int64 (a parser's ``int`` of a long run of digits) is no step, as ``step_value``."""
        if step is not None and not -INT64 <= step < INT64:
            step = None
        present = {unreserved(k): v for k, v in metrics.items()
                   if v is not None and self._fits(unreserved(k), isinstance(v, list))}
        if kind == "eval":
            evals = {(k if is_eval(k) or k == "epoch" else "eval_" + k): v
                     for k, v in present.items()}
            train: dict[str, Value] = {}
        else:
            train = {k: v for k, v in present.items() if not is_eval(k)}
            evals = {k: v for k, v in present.items() if is_eval(k)}
            if evals and "epoch" in train:
                evals["epoch"] = train["epoch"]
        emitted = False
        if any(is_training_metric(k) for k in train):
            self.train.append({"step": step, "line": line, "time": time, **train})
            emitted = True
        if any(k != "epoch" and not is_setting(k) for k in evals):
            self.eval.append({"step": step, "line": line, "time": time, **evals})
            emitted = True
        return emitted

    def metrics_from_pairs(self, pairs: list[tuple[str, str]]) -> tuple[int | None, dict[str, Value]]:
        """Turn (original key, raw text) pairs into (step, canonical metrics); TooWide past
        MAX_KEYS pairs."""
        if len(pairs) > MAX_KEYS:
            raise TooWide(TOO_WIDE)
        step: int | None = None
        step_rank = len(STEP_KEYS)
        metrics: dict[str, Value] = {}
        for key, raw in pairs:
            low = key.strip().lower()
            if low in STEP_KEYS:
                s = step_value(raw)
                rank = STEP_KEYS.index(low)
                if s is not None and rank < step_rank:
                    step, step_rank = s, rank
                continue
            value = parse_value(raw)
            if value is None:
                continue
            name = canonical(key)
            if name in metrics:
                continue
            metrics[name] = value
            self.names.setdefault(name, key.strip())
        return step, metrics


INT64 = 2**63


def step_value(raw: Any) -> int | None:
    """An integer step from a number or text ('12', '12.0', '12/300'); None if not one."""
    value = _step_value(raw)
    return value if value is not None and -INT64 <= value < INT64 else None


def _step_value(raw: Any) -> int | None:
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw
    if isinstance(raw, float):
        return int(raw) if math.isfinite(raw) and raw == int(raw) else None
    text = str(raw).strip().strip("'\"")
    if "/" in text:
        text = text.split("/", 1)[0].strip()
    try:
        return int(text)
    except ValueError:
        try:
            f = float(text)
        except ValueError:
            return None
        return int(f) if math.isfinite(f) and f == int(f) else None
