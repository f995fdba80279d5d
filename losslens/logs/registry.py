"""The formats losslens reads, most specific first (ties in sniffing go to the earlier one)."""

from __future__ import annotations

from losslens.logs.base import Format
from losslens.logs.console import Fairseq, Megatron, ModdedNanoGPT, NanoGPT, TorchTitan
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
    Olmo(),
    MlflowMetric(),
    KeyValue(),
    TensorBoard(),
)

BY_NAME: dict[str, Format] = {f.name: f for f in FORMATS}
