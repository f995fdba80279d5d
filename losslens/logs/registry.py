"""The formats losslens reads, most specific first (ties in sniffing go to the earlier one)."""

from __future__ import annotations

from losslens.errors import UsageError
from losslens.logs.base import Format
from losslens.logs.colon import Colon
from losslens.logs.console import Fairseq, Lightning, Megatron, ModdedNanoGPT, NanoGPT, TorchTitan
from losslens.logs.kv import KeyValue, Olmo
from losslens.logs.structured import (
    Csv,
    HFStdout,
    JsonLines,
    JsonRecords,
    MlflowMetric,
    TensorBoard,
    TrainerState,
)

FORMATS: tuple[Format, ...] = (
    TrainerState(),
    JsonRecords(),
    JsonLines(),
    Csv(),
    HFStdout(),
    Megatron(),
    Fairseq(),
    NanoGPT(),
    ModdedNanoGPT(),
    TorchTitan(),
    Lightning(),
    Olmo(),
    MlflowMetric(),
    KeyValue(),
    Colon(),
    TensorBoard(),
)

BY_NAME: dict[str, Format] = {f.name: f for f in FORMATS}


def check_format(name: str | None) -> None:
    """UsageError unless ``name`` is None, 'auto' or a known format."""
    if name not in (None, "auto") and name not in BY_NAME:
        raise UsageError(f"unknown format {name!r} (known: auto, {', '.join(BY_NAME)})")
