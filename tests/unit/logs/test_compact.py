"""A large log is held compact (float32 where exact, list columns as their min and mean) and
analysed exactly as it would be in full."""

from __future__ import annotations

import dataclasses

import numpy as np
import polars as pl
import pytest

from losslens import read_log, synth
from losslens.analysis import analyze, series_of
from losslens.logs import sink
from losslens.logs.compact import NARROW_NOTE, Compactor, narrow, widen
from tests.conftest import reallog


@pytest.mark.parametrize("block", [1 << 18, 4_099])  # one block; many (widened a block at a time)
def test_printed_decimals_come_back_exactly(block: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("losslens.logs.compact.BLOCK", block)
    rng = np.random.default_rng(0)
    texts = [f"{v:.{d}g}" for v in rng.lognormal(0, 6, 20_000) for d in (1, 3, 6)]
    texts += ["0", "-0.0", "2.52e-07", "3.0063", "0.1", "32200", "16777215", "-7.5", "1e-30",
              "nan", "inf", "-inf"]
    x = np.array([float(t) for t in texts])
    x32 = narrow(x)
    assert x32 is not None and x32.dtype == np.float32
    back = widen(x32)
    same = (back == x) | (np.isnan(back) & np.isnan(x))
    assert same.all()  # bit for bit the float64 that parsing the text gave


@pytest.mark.parametrize("values", [
    [3.0063123, 1.0],  # seven significant digits
    [1.2e12 + 65, 1.2e12 + 130],  # a counter float32 cannot tell apart
    [1e300],  # beyond float32
    [1e-45],  # below float32's smallest
])
def test_what_float32_would_change_stays_float64(values: list[float]) -> None:
    assert narrow(np.array(values)) is None


def test_a_column_one_chunk_cannot_narrow_is_float64_in_every_chunk() -> None:
    c = Compactor()
    done: list[pl.DataFrame] = []
    done.append(c.frame(pl.DataFrame({"step": [1, 2], "loss": [1.5, 2.25], "tok": [3e12, 4e12]}), done))
    assert done[0].schema["loss"] == pl.Float32
    done.append(c.frame(pl.DataFrame({"step": [3], "loss": [1.0000001], "tok": [5e12]}), done))
    assert [d.schema["loss"] for d in done] == [pl.Float64, pl.Float64]
    assert pl.concat(done)["loss"].to_list() == [1.5, 2.25, 1.0000001]


def _kv_log(tmp_path, n: int = 4000):
    curve = synth.ladder(n=n, period=7, seed=3)
    rng = np.random.default_rng(1)
    path = tmp_path / "run.log"
    with open(path, "w") as f:
        for i, (s, v) in enumerate(zip(curve.steps, curve.loss, strict=True)):
            q = ", ".join(str(x) for x in rng.integers(40, 51, 3))
            f.write(f"step={s} loss={v:.4f} lr={2.5e-7 * min(i + 1, 400):.3g} tokens={1e12 + 977 * i:.0f} "
                    f"q_pre=[{q}]\n")
    return path


def test_a_large_log_reads_compact_and_analyses_the_same(tmp_path, monkeypatch) -> None:
    path = _kv_log(tmp_path)
    full = read_log(path)
    monkeypatch.setattr(sink, "COMPACT_RECORDS", 1000)
    small = read_log(path)
    assert small.lists == ("q_pre",) and "q_pre" not in small.train.columns
    assert small.train.schema["loss"] == pl.Float32 and small.train.schema["lr"] == pl.Float32
    assert small.train.schema["tokens"] == pl.Float64  # a counter at 1e12 stays exact
    assert small.metrics == full.metrics == ["loss", "lr", "tokens", "q_pre"]
    assert small.notes == (NARROW_NOTE,)
    assert small.train.estimated_size() < 0.6 * full.train.estimated_size()
    for metric in ("loss", "lr", "q_pre_min"):
        a, b = series_of(full, metric)[0], series_of(small, metric)[0]
        assert np.array_equal(a.values, b.values) and np.array_equal(a.steps, b.steps)
    ra, rb = analyze(full), analyze(small)
    assert [f.as_dict() for f in ra.findings] == [f.as_dict() for f in rb.findings]
    assert any(f.kind == "ladder" for f in rb.findings)


@pytest.mark.parametrize("name", [
    "megatron-ds-qwen7b-v100-dynamic-freq", "olmo-1b-continued-pretrain-console",
    "qwen3-8b-qlora-hf-trainer-nohup", "bloom-tr8-104b-chronicles-divergence",
    "mistral7b-translator-lora-llamafactory-jsonl"])
def test_compacting_a_real_log_changes_no_value_and_no_finding(name: str) -> None:
    """Real logs, not written here: the columns float32 holds exactly are narrowed, the others
    (OLMo's token and GFLOP counters, a 7-digit loss) stay float64, and every series the
    detectors read and every finding are the same."""
    full = read_log(reallog(name))
    c = Compactor()
    small = dataclasses.replace(full, train=c.frame(full.train, []), lists=tuple(c.lists))
    assert any(t == pl.Float32 for t in small.train.schema.values())
    for metric in full.metrics:
        for a, b in zip(series_of(full, metric), series_of(small, metric), strict=True):
            assert np.array_equal(a.values, b.values, equal_nan=True), metric
    assert [f.as_dict() for f in analyze(full).findings] == [f.as_dict() for f in analyze(small).findings]
