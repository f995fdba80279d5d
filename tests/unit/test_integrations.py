"""What the framework callbacks share (``losslens.integrations.core``), without the frameworks:
the record ``replay --batches`` reads, the lengths of a batch, and the live check."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from losslens.findings import Severity
from losslens.integrations.core import FINDINGS_FILE, LiveCheck, Recorder, lengths_of, rank_path
from losslens.replay.fed import load_fed


def test_each_rank_records_to_its_own_file(tmp_path: Path) -> None:
    assert rank_path(tmp_path / "fed.jsonl", 0, 4) == tmp_path / "fed.jsonl"
    assert rank_path(tmp_path / "fed.jsonl", 2, 4) == tmp_path / "fed.rank2.jsonl"


def test_the_record_is_what_replay_reads(tmp_path: Path) -> None:
    r = Recorder(tmp_path / "fed.jsonl", rank=1, world_size=2)
    r.micro_batch([100, 90])
    r.micro_batch([300, 310])  # two micro-batches accumulated into step 1
    r.step(1)
    r.step(2)  # nothing fed since: no record
    r.micro_batch([50])
    r.step(3)
    r.close()
    lines = [json.loads(x) for x in (tmp_path / "fed.rank1.jsonl").read_text().splitlines()]
    assert lines == [{"step": 1, "micro_batches": [[100, 90], [300, 310]], "rank": 1},
                     {"step": 3, "micro_batches": [[50]], "rank": 1}]
    fed = load_fed(tmp_path / "fed.rank1.jsonl", (0, 128, 8193))
    assert fed.steps.tolist() == [1, 3] and fed.max_len.tolist() == [310.0, 50.0]
    assert fed.mean_len.tolist() == [200.0, 50.0]


def test_the_lengths_of_a_batch_as_frameworks_hand_it_over() -> None:
    mask = np.array([[1, 1, 1, 0], [1, 1, 0, 0]])
    assert lengths_of({"input_ids": mask, "attention_mask": mask}) == [3, 2]
    assert lengths_of({"labels": np.array([[5, 6, -100], [7, -100, -100]])}) == [2, 1]
    assert lengths_of({"input_ids": np.zeros((3, 7))}) == [7, 7, 7]
    assert lengths_of({"lengths": [12, 40]}) == [12, 40]
    assert lengths_of((np.zeros((2, 5)), np.zeros(2))) == [5, 5]
    assert lengths_of("no tensors") == []


def test_the_live_check_stops_at_the_first_non_finite_record(tmp_path: Path) -> None:
    live = LiveCheck("error", tmp_path, budget=0.0)  # (no time for the full check between records)
    for step in range(1, 50):
        assert live.log(step, {"loss": 3.0 - step * 0.01, "learning_rate": 1e-3, "epoch": 0.1}) is None
    assert live.log(50, {"loss": "summary", "train_runtime": 3.2}) is None  # the closing summary
    found = live.log(50, {"loss": math.nan, "grad_norm": math.inf})
    assert found is not None and found.kind == "nonfinite" and found.start_step == 50
    body = json.loads((tmp_path / FINDINGS_FILE).read_text())
    assert body["stopped_by"]["kind"] == "nonfinite" and body["steps"]["count"] == 50
    assert live.log(51, {"loss": math.nan}) is None  # (one stop: the first finding)


def test_the_live_check_is_silent_on_a_healthy_run_and_reports_at_the_end(tmp_path: Path) -> None:
    live = LiveCheck(Severity.WARNING, tmp_path)
    rng = np.random.default_rng(0)
    for step in range(1, 300):
        assert live.log(step, {"loss": 2 + 3 * math.exp(-step / 50) + 0.02 * rng.standard_normal()}) is None
    report = live.finish()
    assert report is not None and report.findings == [] and report.steps["count"] == 299
