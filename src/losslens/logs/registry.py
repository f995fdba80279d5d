"""The formats losslens reads, most specific first (ties in sniffing go to the earlier one)."""

from __future__ import annotations

from losslens.errors import UsageError
from losslens.logs.base import Format
from losslens.logs.formats.boosting import Boosting
from losslens.logs.formats.colon import Colon
from losslens.logs.formats.csvlog import Csv
from losslens.logs.formats.cyclegan import CycleGan
from losslens.logs.formats.darknet import Darknet
from losslens.logs.formats.fairseq import Fairseq
from losslens.logs.formats.huggingface import HFStdout, TrainerState
from losslens.logs.formats.jsonl import JsonLines, JsonRecords
from losslens.logs.formats.kv import KeyValue
from losslens.logs.formats.lightning import Lightning
from losslens.logs.formats.marian import Marian
from losslens.logs.formats.megatron import Megatron
from losslens.logs.formats.mlflow import MlflowMetric
from losslens.logs.formats.nanogpt import ModdedNanoGPT, NanoGPT
from losslens.logs.formats.olmo import Olmo
from losslens.logs.formats.sb3 import StableBaselines
from losslens.logs.formats.table import Table
from losslens.logs.formats.tensorboard import TensorBoard
from losslens.logs.formats.torchtitan import TorchTitan

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
    Table(),
    CycleGan(),
    StableBaselines(),
    Marian(),
    Boosting(),
    Darknet(),
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


def formats_table() -> str:
    """The formats as a Markdown table, from the registry (the README's table is this text: a
    test keeps it in step, so a new format is listed by adding it here)."""
    rows = ["| `--format` | reads |", "|---|---|"]
    rows += [f"| `{f.name}` | {f.title.replace('|', chr(92) + '|')} |" for f in FORMATS]
    return "\n".join(rows)
