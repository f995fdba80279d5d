"""The framework callbacks on real tiny runs: ``LossLensCallback(fail_on=...)`` stops a run that
goes NaN at the record that logs it, and ``LossLensCallback(record=...)`` writes what each step
fed, which ``losslens replay --batches`` reads back to the run's own dependence on length."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from tests.frameworks.conftest import run_script

pytestmark = pytest.mark.slow


def dicts(log: Path) -> list[dict]:
    """The training dicts the HF Trainer printed (transformers 5 quotes every value)."""
    import ast
    import re

    out = []
    for m in re.finditer(r"\{'loss'[^}]*\}", log.read_text(errors="replace")):
        out.append({k: float(v) for k, v in ast.literal_eval(m.group(0)).items()})
    return out


@pytest.mark.frameworks_full
def test_the_hf_callback_stops_a_run_at_its_first_non_finite_record(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    log = run_script("hf_trainer.py", tmp_path, "--fault", "nan", "--fail-on", "error")
    rows = dicts(log)
    first = next(k for k, r in enumerate(rows, 1) if not all(math.isfinite(v) for v in r.values()))
    assert len(rows) <= first + 1  # stopped within one logging step of it
    assert len(rows) < 200
    report = json.loads((tmp_path / "losslens-findings.json").read_text())
    assert report["stopped_by"]["severity"] == "error"
    assert report["stopped_by"]["start_step"] <= first
    assert "losslens: stopping training at step" in log.read_text(errors="replace")


def test_the_hf_callback_record_of_a_group_by_length_run_replays_to_a_dependence(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    fed = tmp_path / "fed.jsonl"
    log = run_script("hf_trainer.py", tmp_path, "--fault", "group_by_length", "--record", str(fed))
    records = [json.loads(line) for line in fed.read_text().splitlines()]
    assert [r["step"] for r in records] == list(range(1, 201))
    assert all(len(r["micro_batches"]) == 1 and len(r["micro_batches"][0]) == 16 for r in records)
    # length-grouped batches: most of one length (the data has 8, 16 to 128 tokens)
    assert sum(len(set(r["micro_batches"][0])) == 1 for r in records) >= 0.75 * len(records)
    p = subprocess.run([sys.executable, "-m", "losslens", "replay", "--batches", str(fed), "--log", str(log),
                        "--json"], capture_output=True, text=True, timeout=300)
    assert p.returncode in (0, 1), p.stderr
    verdict = json.loads(p.stdout)["verdict"]
    assert verdict["dependence"] is True and verdict["p_value"] <= 0.01

    # the sampler path: the run's order rebuilt from its lengths and seed, batch for batch
    import numpy as np
    import torch

    from fixtures.frameworks.data import samples
    from losslens.replay.strategies import Plan, build_epochs

    lengths = np.array([len(x["input_ids"]) for x in samples(4000, 0, True)])
    np.save(tmp_path / "lengths.npy", lengths)
    plan = Plan((0, 32, 64, 96, 129), max_seq_len=128, per_device_batch=16)
    [epoch] = build_epochs("hf-group-by-length", torch.from_numpy(lengths), plan, 0, 1)
    replayed = lengths[epoch.samples.numpy()][: 16 * len(records)].reshape(len(records), 16)
    assert [sorted(row) for row in replayed.tolist()] == [sorted(r["micro_batches"][0]) for r in records]

    def sampler(seed: int) -> dict:
        args = ["replay", "--lengths", str(tmp_path / "lengths.npy"), "--log", str(log),
                "--strategy", "hf-group-by-length", "--seed", str(seed), "--per-device-batch", "16",
                "--bounds", "0,32,64,96,129", "--max-seq-len", "128", "--json"]
        p = subprocess.run([sys.executable, "-m", "losslens", *args], capture_output=True, text=True,
                           timeout=300)
        assert p.returncode in (0, 1), p.stderr
        return json.loads(p.stdout)

    right = sampler(0)  # the run's seed (its logged steps count from 1: the offset is taken so)
    assert right["verdict"]["dependence"] is True and right["verdict"]["p_value"] <= 0.01
    assert right["step_offset"]["value"] == 1
    wrong = sampler(1)["verdict"]
    assert wrong["dependence"] is None and wrong["reason"]  # "cannot tell", never a "no"


@pytest.mark.frameworks_full
def test_the_lightning_callback_records_each_step_and_stops_a_nan_run(tmp_path: Path) -> None:
    pytest.importorskip("lightning")
    fed = tmp_path / "fed.jsonl"
    out = run_script("lightning_run.py", tmp_path, "--fault", "nan", "--record", str(fed),
                     "--fail-on", "error").read_text(errors="replace")
    assert "losslens: stopping training at step" in out
    records = [json.loads(line) for line in fed.read_text().splitlines()]
    assert [r["step"] for r in records] == list(range(len(records)))  # as self.log numbers them
    assert all(r["micro_batches"][0] == [48] * 16 for r in records)
    import csv

    with next(tmp_path.glob("csv/*/metrics.csv")).open() as f:
        rows = [r for r in csv.DictReader(f) if r.get("train_loss")]
    first = next(int(r["step"]) for r in rows if math.isnan(float(r["train_loss"])))
    assert int(rows[-1]["step"]) <= first + 1 and len(records) <= first + 2
    [report] = list(tmp_path.glob("**/losslens-findings.json"))
    stopped = json.loads(report.read_text())["stopped_by"]
    assert (stopped["kind"], stopped["start_step"]) == ("nonfinite", first)


@pytest.mark.frameworks_full
@pytest.mark.parametrize(("strategy", "option"), [("hf-group-by-length", "--fault=group_by_length"),
                                                  ("hf-random", "--lengths")])
def test_two_epochs_at_grad_accum_3_replay_step_for_step(tmp_path: Path, strategy: str, option: str) -> None:
    """250 micro-batches an epoch at gradient accumulation 3: the Trainer steps 84 times an epoch,
    the last on one micro-batch, and the next epoch starts a new step (the grouped sampler's next
    permutation after the DataLoader's second draw; the random one seeded seed + epoch). The
    replay's steps, epoch by epoch, are the recorded ones, with group_by_length and without."""
    pytest.importorskip("transformers")
    import numpy as np
    import torch

    from fixtures.frameworks.data import samples
    from losslens.replay.strategies import Plan, build_epochs

    fed = tmp_path / "fed.jsonl"
    run_script("hf_trainer.py", tmp_path, option, "--grad-accum", "3", "--steps", "170", "--record", str(fed))
    got = [[sorted(m) for m in json.loads(line)["micro_batches"]] for line in fed.read_text().splitlines()]
    assert [len(s) for s in got[82:86]] == [3, 1, 3, 3]  # the first epoch ends on a partial step
    lengths = np.array([len(x["input_ids"]) for x in samples(4000, 0, True)])
    plan = Plan((0, 32, 64, 96, 129), max_seq_len=128, per_device_batch=16, grad_accum=3)
    replayed = []
    for e in build_epochs(strategy, torch.from_numpy(lengths), plan, 0, 2):
        sizes, order = e.size.numpy(), e.samples.numpy()
        micro = [sorted(lengths[order[a - s:a]].tolist())
                 for a, s in zip(np.cumsum(sizes), sizes, strict=True)]
        replayed += [micro[i:i + 3] for i in range(0, len(micro), 3)]
    assert len(replayed) == 168 and replayed == got[:168]


@pytest.mark.frameworks_full
def test_a_lightning_ddp_run_replays_rank_for_rank(tmp_path: Path) -> None:
    """Two CPU processes under Lightning's DDP (gloo): Lightning puts a DistributedSampler
    (shuffle, seed 0 when none is set) under the DataLoader; each rank's callback records what it
    fed. The torch-distributed replay's global sequence (micro-batch j to rank j mod 2) is each
    rank's record, step for step."""
    pytest.importorskip("lightning")
    import numpy as np
    import torch

    from fixtures.frameworks.data import samples
    from losslens.replay.strategies import Plan, build_epochs

    fed = tmp_path / "fed.jsonl"
    run_script("lightning_run.py", tmp_path, "--devices", "2", "--lengths", "--steps", "100",
               "--record", str(fed))
    ranks = [[sorted(json.loads(line)["micro_batches"][0]) for line in f.read_text().splitlines()]
             for f in (fed, tmp_path / "fed.rank1.jsonl")]
    assert [len(r) for r in ranks] == [100, 100]
    lengths = np.array([len(x["input_ids"]) for x in samples(4000, 0, True)])
    plan = Plan((0, 32, 64, 96, 129), max_seq_len=128, per_device_batch=16, world_size=2)
    [epoch] = build_epochs("torch-distributed", torch.from_numpy(lengths), plan, 0, 1)
    sizes, order = epoch.size.numpy(), epoch.samples.numpy()
    micro = [sorted(lengths[order[a - s:a]].tolist()) for a, s in zip(np.cumsum(sizes), sizes, strict=True)]
    assert micro[0::2][:100] == ranks[0] and micro[1::2][:100] == ranks[1]
