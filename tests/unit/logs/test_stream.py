"""logs/stream.py: one incremental reader for a file read whole (``read_log``) and a log followed
live (``watch``): the same format, the same accounting line for line, the same records."""

from __future__ import annotations

from pathlib import Path

import pytest
from polars.testing import assert_frame_equal

from losslens import read_log
from losslens.logs.frame import assemble
from losslens.logs.stream import FAST_BATCH, LineStream
from tests.conftest import FIXTURES

LINE_LOGS = ["seed004_dflash.log", "custom_colon.log", "hf_stdout.log", "megatron_ranks.log", "fairseq.log",
             "torchtitan_ansi.log", "olmo_console.log", "keras_csvlogger.csv", "metrics.jsonl",
             "lightning_stdout.log", "timm_train.log", "modded_nanogpt.log", "torchrun_ranks.log"]


def _streamed(path: Path, batch: int) -> LineStream:
    """``path``'s lines fed as a live log gets them, ``batch`` at a time."""
    stream = LineStream(path.name)
    lines = path.read_bytes().decode("utf-8", errors="replace").split("\n")
    lines = lines[:-1] if lines and lines[-1] == "" else lines
    for i in range(0, len(lines), batch):
        stream.feed_lines(lines[i:i + batch])
    stream.finish()
    return stream


@pytest.mark.parametrize("name", LINE_LOGS)
@pytest.mark.parametrize("batch", [1, 3 * FAST_BATCH])
def test_a_log_fed_as_it_comes_reads_as_read_log_reads_it(name: str, batch: int) -> None:
    """Line by line and in large batches (column-wise where the format has a way), every bundled
    line log: the format read_log chooses, its accounting (each skip reason) and its records."""
    path = FIXTURES / name
    log, stream = read_log(path), _streamed(path, batch)
    assert stream.format is not None and stream.format.name == log.format
    data = assemble(str(path), stream.format.name, stream.sink, stream.acc)
    assert data.lines.as_dict() == log.lines.as_dict()
    assert dict(data.lines.skipped) == dict(log.lines.skipped)
    assert data.train.height == log.train.height > 0
    columns = sorted(log.train.columns)
    assert_frame_equal(data.train.select(columns), log.train.select(columns), check_dtypes=False)


def test_watch_reads_a_tab_separated_table_with_a_damaged_line_as_read_log_does(tmp_path: Path) -> None:
    """The parser is made for the first line (a table's delimiter) and a line holding NUL bytes
    is skipped as binary data, live as in a file: before one reader served both, watch read
    this table's 60 rows as 'no training metric' and no record."""
    from losslens.config import load
    from losslens.watch import Watcher

    lines = ["step\tloss\tlr"] + [f"{i}\t{2 - 0.01 * i:.3f}\t1e-4" for i in range(1, 61)]
    lines[30] = "31\t1.69\x00\x00\t1e-4"
    path = tmp_path / "metrics.tsv"
    path.write_text("\n".join(lines) + "\n")
    log = read_log(path)
    w = Watcher(str(path), None, load(None).registry(), frozenset())
    w.feed_batch(lines)
    w.finish_input()
    assert log.format == w.format.name == "csv"
    assert w.acc.as_dict() == log.lines.as_dict() == {"total": 61, "parsed": 60, "skipped": 1, "blank": 0}
    assert dict(w.acc.skipped) == dict(log.lines.skipped) == {"binary data": 1}
    assert len(w.train) == log.train.height == 59
