"""A large log's columns are held in a mapped temporary file (spill.py), not on the heap: the
frame and the analysis are those of the log held in memory, its pages can be dropped and read
back, and where the file cannot be written the log stays in memory."""

from __future__ import annotations

import math
import pickle
import sys
import tempfile

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from losslens import read_log
from losslens.analysis import analyze, series_of
from losslens.logs import sink
from losslens.logs.spill import Spill


def _log(tmp_path, n: int = 6000):
    """key=value lines: a restart halfway, a NaN loss, a grad norm on every other line (a column
    with nulls), a token counter float32 cannot hold, a list column, an eval line every 500."""
    rng = np.random.default_rng(2)
    path = tmp_path / "run.log"
    with open(path, "w") as f:
        for i in range(n):
            step = i if i < n // 2 else i - n // 2 + 1000  # the step goes back: a second segment
            loss = "nan" if i == 4321 else f"{3 * math.exp(-i / 2000) + rng.normal(0, 0.02):.4f}"
            gn = f" grad_norm={rng.uniform(0.5, 1.5):.3f}" if i % 2 else ""
            f.write(f"[2026-05-15 20:{i // 60 % 60:02d}:{i % 60:02d}] step={step} loss={loss} lr=2.5e-4"
                    f"{gn} tokens={1e12 + 977 * i:.0f} q=[{i % 7}, {i % 5}]\n")
            if i % 500 == 499:
                f.write(f"step={step} eval_loss={2 + rng.normal(0, 0.1):.4f}\n")
    return path


@pytest.fixture
def large(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sink, "COMPACT_RECORDS", 1000)


def _in_memory(path, monkeypatch: pytest.MonkeyPatch):
    with monkeypatch.context() as m:
        m.setattr(Spill, "hold", lambda self, frame, whole=False: frame)
        return read_log(path)


def test_a_large_logs_columns_are_read_from_the_file_and_are_the_same(tmp_path, large, monkeypatch) -> None:
    path = _log(tmp_path)
    held, kept = read_log(path), _in_memory(path, monkeypatch)
    spill = held.spill
    assert spill is not None and not spill.failed and spill.file is None  # (closed once read)
    mapped = {c for c in held.train.columns if spill._mapped(held.train[c])}
    # every fixed-width column without nulls; grad_norm (nulls) stays on the heap
    assert mapped == {"step", "line", "time", "segment", "loss", "lr", "tokens", "q_min", "q_mean"}
    assert all(held.train[c].n_chunks() == 1 for c in mapped)  # each one array: read without a copy
    assert held.train.schema["tokens"] == pl.Float64 and held.train.schema["loss"] == pl.Float32
    assert spill._mapped(held.eval["eval_loss"]) and not spill._mapped(kept.train["loss"])
    assert_frame_equal(held.train, kept.train)
    assert_frame_equal(held.eval, kept.eval)
    assert held.train["segment"].unique().to_list() == [0, 1] and held.train["loss"].is_nan().sum() == 1
    assert [f.as_dict() for f in analyze(held).findings] == [f.as_dict() for f in analyze(kept).findings]
    assert any(f.kind == "nonfinite" for f in analyze(held).findings)


def test_dropped_pages_are_read_back(tmp_path, large) -> None:
    log = read_log(_log(tmp_path))
    before = [s.values.copy() for s in series_of(log, "loss")]
    log.release()
    after = [s.values for s in series_of(log, "loss")]
    assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(before, after, strict=True))
    if sys.platform == "linux":  # the mapped pages leave the process's memory
        def file_kib() -> int:
            with open("/proc/self/status") as f:
                return next(int(x.split()[1]) for x in f if x.startswith("RssFile"))
        touched = file_kib()
        log.release()
        assert file_kib() < touched


def test_a_file_that_cannot_be_written_leaves_the_log_in_memory(tmp_path, large, monkeypatch) -> None:
    path = _log(tmp_path)
    kept = _in_memory(path, monkeypatch)

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tempfile, "TemporaryFile", full)
    log = read_log(path)
    assert log.spill is not None and log.spill.failed and not log.spill.maps
    assert_frame_equal(log.train, kept.train)
    assert [f.as_dict() for f in analyze(log).findings] == [f.as_dict() for f in analyze(kept).findings]


def test_a_held_log_goes_to_another_process_by_value(tmp_path, large) -> None:
    """``--jobs`` sends a worker's log back pickled: its columns' values, no mapping."""
    log = read_log(_log(tmp_path))
    back = pickle.loads(pickle.dumps(log))
    assert back.spill is not None and not back.spill.maps
    assert_frame_equal(back.train, log.train)
    back.release()  # (nothing to drop)


def test_a_small_log_is_not_held_in_a_file(tmp_path) -> None:
    assert read_log(_log(tmp_path, n=300)).spill is None


def test_each_segment_of_a_resumed_run_is_a_slice_and_the_same_series(monkeypatch) -> None:
    """A run resumed from a checkpoint (the step goes back, then rises again) gives each segment as
    a slice of the log's columns, no sort nor de-duplication: the same series as the general path
    (sorted, one record a step: the last, a NaN over a finite value), which a repeated step takes."""
    import polars as pl

    from losslens import analysis
    from losslens.logs import from_arrays

    steps = np.r_[np.arange(1, 501), np.arange(300, 801), np.arange(700, 1001)]
    loss = np.linspace(3, 1, len(steps))
    loss[600] = np.nan
    log = from_arrays(steps, loss=loss, lr=np.full(len(steps), 3e-4))
    fast = series_of(log, "loss")
    assert [s.segment for s in fast] == [0, 1, 2] and [len(s) for s in fast] == [500, 501, 301]
    monkeypatch.setattr(analysis, "_segment_runs", lambda data: None)
    general = series_of(log, "loss")
    for a, b in zip(fast, general, strict=True):
        assert a.segment == b.segment and np.array_equal(a.steps, b.steps)
        assert np.array_equal(a.values, b.values, equal_nan=True)
        assert np.array_equal(a.context["lr"], b.context["lr"])
    monkeypatch.undo()
    repeated = from_arrays(np.r_[steps, [1000]], loss=np.r_[loss, [np.nan]])  # step 1000 twice
    assert analysis._segment_runs(pl.DataFrame({"segment": [0, 0], "step": [5, 5]})) is None
    (last,) = [s for s in series_of(repeated, "loss") if s.segment == 2]
    assert len(last) == 301 and np.isnan(last.values[-1])  # the NaN record of the repeated step


def test_a_long_read_gives_the_heap_back_every_few_chunks(tmp_path, monkeypatch) -> None:
    """A read of many chunks returns the C heap's free pages now and then (glibc's malloc_trim:
    the numba kernels' chunk buffers left 0.15 GiB cut up in it at 10M lines); the read is the
    same, and the call is safe where the C library has none."""
    from losslens.logs import source, spill, stream

    path = _log(tmp_path)
    whole = read_log(path)
    calls = []
    monkeypatch.setattr(stream, "trim_heap", lambda: calls.append(1))
    monkeypatch.setattr(source.Source.chunks, "__defaults__", (4096, source.MAX_LINE))
    monkeypatch.setattr(source, "HEAD_BYTES", 4096)
    assert_frame_equal(read_log(path).train, whole.train)
    chunks = path.stat().st_size / 4096  # (about: chunks end at whole lines)
    assert chunks // stream.TRIM_CHUNKS - 1 <= len(calls) <= chunks // stream.TRIM_CHUNKS + 1
    spill.trim_heap()
    spill.trim_heap()
