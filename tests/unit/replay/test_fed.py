"""replay --batches: what the run fed, recorded per step, read from every format and correlated
with a loss without a sampler (and without torch)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from losslens.detectors.stats import spearman
from losslens.errors import InputError, UsageError
from losslens.replay.fed import Fed, bartlett_p, correlate_fed, load_fed, misaligning_shifts
from tests.conftest import ROOT

BOUNDS = (0, 770, 1216, 1728, 2432, 3296, 8193)
LEVEL = np.array([1.0, 1.05, 1.1, 1.2, 1.35, 1.5])


def _run(n: int = 2000, seed: int = 0) -> tuple[np.ndarray, list[list[int]]]:
    """Per step: its bucket (runs of like steps, as a bucketed shuffle gives) and 8 lengths."""
    rng = np.random.default_rng(seed)
    buckets: list[int] = []
    while len(buckets) < n:
        buckets += [int(rng.integers(0, 6))] * int(rng.integers(1, 8))
    b = np.array(buckets[:n])
    lengths = [rng.integers(BOUNDS[k], BOUNDS[k + 1], 8).tolist() for k in b]
    return b, lengths


def _loss(b: np.ndarray, follows: bool, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    n = len(b)
    level = LEVEL[b] if follows else 1.0
    return (1.5 + np.exp(-np.arange(n) / 600)) * level * np.exp(rng.normal(0, 0.03, n))


def test_every_format_reads_the_same_steps(tmp_path: Path) -> None:
    b, lengths = _run(50)
    (tmp_path / "a.jsonl").write_text("".join(json.dumps({"step": s, "lengths": x}) + "\n"
                                              for s, x in enumerate(lengths)))
    (tmp_path / "m.jsonl").write_text("".join(json.dumps({"step": s, "micro_batches": [x[:4], x[4:]]})
                                              + "\n" for s, x in enumerate(lengths)))
    rows = pl.DataFrame({"step": [s for s, x in enumerate(lengths) for _ in x],
                         "length": [v for x in lengths for v in x]})
    rows.write_csv(tmp_path / "a.csv")
    rows.sample(fraction=1.0, shuffle=True, seed=0).write_parquet(tmp_path / "a.parquet")  # any order
    np.savez(tmp_path / "a.npz", step=rows["step"].to_numpy(), length=rows["length"].to_numpy())
    fed = [load_fed(tmp_path / f, BOUNDS) for f in ("a.jsonl", "m.jsonl", "a.csv", "a.parquet", "a.npz")]
    for f in fed:
        assert f.steps.tolist() == list(range(50)) and f.measure == "length"
        assert f.bucket.tolist() == b.tolist()  # the bucket of each step's longest sample
        assert f.mean_len == pytest.approx([np.mean(x) for x in lengths])
    (tmp_path / "b.jsonl").write_text("".join(json.dumps({"step": s, "buckets": [int(k)] * 3}) + "\n"
                                              for s, k in enumerate(b)))
    only = load_fed(tmp_path / "b.jsonl", BOUNDS)
    assert only.measure == "bucket" and only.bucket.tolist() == b.tolist()


@pytest.mark.parametrize(("name", "text", "message"), [
    ("x.jsonl", '{"step": 1, "lengths": [1, 2]}\n{"step": 2\n', "x.jsonl:2: not JSON"),
    ("x.jsonl", '{"step": 1, "tokens": [1, 2]}\n', 'x.jsonl:1: a record needs "step" and "lengths"'),
    ("x.jsonl", '{"step": 1, "lengths": [1]}\n{"step": 2, "buckets": [0]}\n', "records mix lengths"),
    ("x.csv", "step,tokens\n1,5\n", "needs a 'step' column and a 'length'"),
    ("x.csv", "step,length\n1,-5\n", "lengths must be finite and >= 0"),
    ("x.txt", "1 2 3\n", "a --batches file is .jsonl, .csv, .parquet or .npz"),
])
def test_a_bad_record_is_one_error_naming_the_file(tmp_path: Path, name: str, text: str,
                                                   message: str) -> None:
    (tmp_path / name).write_text(text)
    with pytest.raises(InputError, match=re.escape(message)):
        load_fed(tmp_path / name, BOUNDS)


def test_the_loss_that_follows_what_was_fed_is_found_and_an_independent_one_is_not(tmp_path: Path) -> None:
    b, lengths = _run()
    path = tmp_path / "fed.jsonl"
    path.write_text("".join(json.dumps({"step": s, "lengths": x}) + "\n" for s, x in enumerate(lengths)))
    fed = load_fed(path, BOUNDS)
    steps = np.arange(len(b))
    tied = correlate_fed(steps, _loss(b, True), fed)
    assert tied["rho"] > 0.8 and tied["p_value"] == 0.01 and tied["aligned_records"] == 2000
    levels = tied["loss_level_by_bucket"]
    assert list(levels) == [0, 1, 2, 3, 4, 5] and all(levels[k] < levels[k + 1] for k in range(5))
    free = correlate_fed(steps, _loss(b, False), fed)
    assert abs(free["rho"]) < 0.1 and free["p_value"] > 0.05
    # logged steps that start at 100 are recorded steps from 0 with --step-offset 100
    moved = correlate_fed(steps + 100, _loss(b, True), fed, offset=100)
    assert moved["rho"] == tied["rho"]
    # nothing aligns: refused with what to check, or with --allow-misalignment a null verdict
    with pytest.raises(UsageError, match=r"2,000 of 2,000 logged steps have no recorded batch .the "
                       r"record covers steps 0-1,999, the log 5,000-6,999 after --step-offset 0.: "
                       r"check --step-offset"):
        correlate_fed(steps + 5000, _loss(b, True), fed)
    lost = correlate_fed(steps + 5000, _loss(b, True), fed, allow_misalignment=True)
    assert lost["rho"] is None and lost["verdict"]["dependence"] is None
    assert lost["alignment"]["warning"].startswith("2,000 of 2,000 logged steps")
    # a few unmatched steps (a log that runs 2 % past the record) are within tolerance
    assert correlate_fed(np.arange(2040), _loss(np.r_[b, b[:40]], True), fed)["verdict"]["dependence"]


def test_the_readme_recorder_writes_what_replay_reads(tmp_path: Path) -> None:
    """The DataLoader wrapper printed in docs/replay.md, run on a real DataLoader: its file is a
    --batches record of every step."""
    torch = pytest.importorskip("torch")
    readme = (ROOT / "docs" / "replay.md").read_text()
    block = readme.split("## What the run fed", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    scope: dict = {}
    exec(block, scope)  # noqa: S102 - the README's own example
    masks = [torch.ones(n, dtype=torch.long) for n in (5, 9, 3, 7, 8, 2)]
    data = [{"attention_mask": torch.nn.functional.pad(m, (0, 9 - len(m)))} for m in masks]
    loader = torch.utils.data.DataLoader(data, batch_size=2)
    out = tmp_path / "fed.jsonl"
    seen = list(scope["RecordLengths"](loader, out))
    assert len(seen) == 3
    fed = load_fed(out, (0, 4, 8, 10))
    assert fed.steps.tolist() == [0, 1, 2] and fed.max_len.tolist() == [9, 7, 8]
    assert fed.bucket.tolist() == [2, 1, 2]


def test_a_loss_logged_as_the_mean_of_its_interval_is_compared_with_that_interval() -> None:
    """HF Trainer, Megatron and fairseq log every k steps the mean loss since the last log: the
    fed lengths are averaged over the same k steps (the default, --logged-loss mean); a
    nanoGPT-style print of the step's own loss is --logged-loss last."""
    b, lengths = _run(3000)
    fed = load_fed_from(lengths)
    per_step = _loss(b, True)
    k = 10
    logged = np.arange(k - 1, len(b), k)  # steps 9, 19, ...: each the mean of the 10 up to it
    mean_loss = per_step[: len(logged) * k].reshape(-1, k).mean(1)
    smeared = correlate_fed(logged, mean_loss, fed)
    assert smeared["logged_loss"] == "mean over the 10 steps up to the logged one"
    assert smeared["rho"] > 0.6 and smeared["p_value"] == 0.01
    own = correlate_fed(logged, mean_loss, fed, logged_loss="last")
    assert own["logged_loss"] == "the step's own" and abs(own["rho"]) < smeared["rho"] / 2
    # and a loss printed at each step is the step's own either way (interval 1)
    assert correlate_fed(np.arange(len(b)), per_step, fed)["logged_loss"] == "the step's own"


def load_fed_from(lengths: list[list[int]]):
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "fed.jsonl"
        path.write_text("".join(json.dumps({"step": s, "lengths": x}) + "\n" for s, x in enumerate(lengths)))
        return load_fed(path, BOUNDS)


def sawtooth_record(n: int = 1250, period: int = 50, seed: int = 0) -> Fed:
    """What a length-grouped sampler feeds: each mega-batch of ``period`` steps from its longest
    batch down to its shortest, the longest first in the run."""
    rng = np.random.default_rng(seed)
    lengths = np.concatenate([np.sort(rng.lognormal(5.5, 0.7, period))[::-1] for _ in range(n // period)])
    return Fed(np.arange(n), lengths, lengths, np.searchsorted([256, 512, 1024], lengths), "length")


def falling_loss(fed: Fed, rho: float, seed: int) -> np.ndarray:
    """A loss with a steep early fall and AR(1) noise, following the record at about ``rho``."""
    rng = np.random.default_rng(seed)
    n = len(fed.mean_len)
    e = np.zeros(n)
    for i, s in enumerate(rng.standard_normal(n)[1:], 1):
        e[i] = 0.5 * e[i - 1] + s
    z = (fed.mean_len - fed.mean_len.mean()) / fed.mean_len.std()
    return 2 + 1.5 * np.exp(-np.arange(n) / 300) + 0.05 * (e / e.std() + rho / np.sqrt(1 - rho ** 2) * z)


def test_a_periodic_record_is_tested_step_to_step_and_keeps_its_level() -> None:
    fed = sawtooth_record()
    out = [correlate_fed(np.arange(1250), falling_loss(fed, 0.0, s), fed, seed=s) for s in range(60)]
    tests = out[0]["verdict"]["tests"]
    assert tests["step_to_step"]["tested"] and not tests["circular_shift"]["tested"]
    # the circular shift of the levels gave p <= 0.01 in 7 % of such runs; the step-to-step test
    # is at its level (expected 0.6 of 60)
    assert sum(o["verdict"]["p_value"] <= 0.01 for o in out) <= 2
    found = [correlate_fed(np.arange(1250), falling_loss(fed, 0.6, s), fed, seed=s) for s in range(10)]
    assert all(o["verdict"]["dependence"] is True for o in found)


def test_bartlett_p_is_the_plain_rank_test_on_white_series() -> None:
    from scipy.stats import spearmanr

    rng = np.random.default_rng(3)
    a, b = rng.standard_normal(500), rng.standard_normal(500)
    rho = spearman(a, b)
    assert bartlett_p(a, b, rho) == pytest.approx(spearmanr(a, b).pvalue, abs=0.03)
    # a shared slow wave makes the plain test far too sure; Bartlett's variance does not
    t = np.arange(500)
    wave = np.sin(t / 20)
    a, b = wave + 0.3 * rng.standard_normal(500), wave + 0.3 * rng.standard_normal(500)
    assert spearmanr(a, b).pvalue < 1e-50 and bartlett_p(a, b, spearman(a, b)) > 1e-6


def test_only_a_sequence_that_lines_up_again_is_periodic() -> None:
    rng = np.random.default_rng(0)
    for x, periodic in ((sawtooth_record().mean_len, True), (np.sort(rng.lognormal(5, 1, 1000)), False),
                        (rng.lognormal(5, 1, 1000), False)):
        assert misaligning_shifts(x, 99, rng)[1] is periodic
