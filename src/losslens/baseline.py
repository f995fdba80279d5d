"""A baseline of known findings, as mypy's and ruff's: ``--write-baseline FILE`` records what the
logs hold now; ``--baseline FILE`` then lets those findings pass the gate while a new one still
fails it.

A finding is known when the baseline holds one of the same log, kind and metric whose steps
overlap its steps (a spike: the same peak step). Logs are named relative to the baseline file's
folder, so that the file can be committed beside the logs and read from another working folder.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from losslens.errors import UsageError

if TYPE_CHECKING:
    from losslens.findings import Finding, Report

SCHEMA = "losslens.baseline/1"
MAX_BYTES = 64 << 20  # a baseline is a few lines per log: a larger file is not one


@dataclass(frozen=True)
class Known:
    """One finding as the baseline holds it."""

    kind: str
    metric: str
    start_step: int
    end_step: int
    peak_step: int | None = None

    def matches(self, f: Finding) -> bool:
        if f.kind != self.kind or f.metric != self.metric:
            return False
        peak = f.evidence.get("peak_step") if f.kind == "spike" else None
        if peak is not None and self.peak_step is not None:
            return int(peak) == self.peak_step
        return f.start_step <= self.end_step and self.start_step <= f.end_step


@dataclass
class Baseline:
    """Known findings per log (``logs``: the log's name relative to the baseline's folder)."""

    path: str
    logs: dict[str, list[Known]] = field(default_factory=dict)

    def key(self, source: str) -> str:
        """How the baseline names a log: relative to its own folder ('-' stays '-')."""
        if source == "-" or source.startswith("<") or "://" in source:
            return source
        return os.path.relpath(os.path.abspath(source), os.path.dirname(os.path.abspath(self.path)))

    def accepts(self, source: str, f: Finding) -> bool:
        """The finding is a known one of this log."""
        return any(k.matches(f) for k in self.logs.get(self.key(source), ()))

    def count(self) -> int:
        return sum(len(v) for v in self.logs.values())

    @classmethod
    def load(cls, path: str) -> Baseline:
        """The baseline at ``path``; a UsageError naming the file when it is not one."""
        try:
            with open(path, "rb") as f:
                raw = f.read(MAX_BYTES + 1)
        except FileNotFoundError:
            raise UsageError("baseline file not found (--write-baseline FILE makes one)",
                             source=path) from None
        except IsADirectoryError:
            raise UsageError("the baseline is a folder, not a file", source=path) from None
        except OSError as exc:
            raise UsageError(f"cannot read the baseline: {exc.strerror or exc}", source=path) from None
        if len(raw) > MAX_BYTES:
            raise UsageError(f"not a baseline: over {MAX_BYTES >> 20} MiB", source=path)
        try:
            doc = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise UsageError(f"not a baseline (invalid JSON: {str(exc)[:200]})", source=path) from None
        if not isinstance(doc, dict) or doc.get("schema") != SCHEMA or not isinstance(doc.get("logs"), dict):
            raise UsageError(f"not a baseline (expected a JSON object with \"schema\": \"{SCHEMA}\" and "
                             "\"logs\"; --write-baseline FILE makes one)", source=path)
        out = cls(path)
        for log, items in doc["logs"].items():
            if not isinstance(items, list):
                raise UsageError(f"not a baseline: the entry of {str(log)[:200]!r} is not a list",
                                 source=path)
            out.logs[str(log)] = [_known(item, path) for item in items]
        return out

    @classmethod
    def of(cls, path: str, reports: Iterable[Report]) -> Baseline:
        """A baseline of every finding of ``reports``, to be written at ``path``."""
        out = cls(path)
        for r in reports:
            out.logs.setdefault(out.key(r.source), []).extend(
                Known(f.kind, f.metric, f.start_step, f.end_step,
                      int(f.evidence["peak_step"]) if f.kind == "spike" and "peak_step" in f.evidence
                      else None)
                for f in r.findings)
        return out

    def write(self) -> None:
        """Write the file (atomically: a baseline is never half written)."""
        doc: dict[str, Any] = {"schema": SCHEMA, "logs": {
            log: [{k: v for k, v in vars(known).items() if v is not None} for known in items]
            for log, items in sorted(self.logs.items())}}
        tmp = f"{self.path}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        os.replace(tmp, self.path)


def _known(item: Any, path: str) -> Known:
    try:
        return Known(str(item["kind"]), str(item["metric"]), int(item["start_step"]), int(item["end_step"]),
                     None if item.get("peak_step") is None else int(item["peak_step"]))
    except (TypeError, KeyError, ValueError, AttributeError, OverflowError):
        raise UsageError(f"not a baseline: an entry is not {{kind, metric, start_step, end_step}}: "
                         f"{json.dumps(item)[:200]}", source=path) from None
