"""Replay: rebuild the batch/bucket sequence a run fed its model, correlate it with the loss,
compare strategies and choose bucket bounds.

``run(ReplayRequest(...)) -> ReplayReport`` is the public path. Importing this package loads no
torch: the request is checked first; the engine (``replay.engine``, torch) loads when a replay
runs or one of its names is asked for."""

from __future__ import annotations

from typing import Any

from losslens.replay.request import SCHEMA, ReplayReport, ReplayRequest, parse_bounds, run

__all__ = ["EXACTNESS", "SCHEMA", "STRATEGIES", "Epoch", "Plan", "ReplayReport", "ReplayRequest",
           "batch_table", "build_epochs", "load_lengths", "parse_bounds", "pick_device", "replay",
           "run", "steps_frame"]


def __getattr__(name: str) -> Any:  # the engine's names, loaded (with torch) on first use
    if name in __all__:
        from losslens.replay import engine

        return getattr(engine, name)
    raise AttributeError(f"module 'losslens.replay' has no attribute {name!r}")
