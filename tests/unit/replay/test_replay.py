"""Replay on CPU with small data: hand-checked batch sequences, invariants, correlation."""

from __future__ import annotations

import numpy as np
import pytest

from losslens import synth  # noqa: E402
from losslens.errors import InputError  # noqa: E402
from losslens.replay import STRATEGIES, Plan, build_epochs, load_lengths, replay  # noqa: E402
from losslens.replay.bounds import bound_efficiency, optimize_bounds  # noqa: E402
from losslens.replay.correlate import correlate, step_table  # noqa: E402
from losslens.replay.frameworks import FIXED_SIZE  # noqa: E402
from losslens.replay.order import max_runs, run_lengths, shuffled_max_runs  # noqa: E402
from losslens.replay.strategies import _greedy_sizes, _largest_deficit  # noqa: E402
from tests.conftest import FIXTURES  # noqa: E402

torch = pytest.importorskip("torch")


TINY = torch.tensor([5, 1, 9, 3, 7, 2, 8, 4, 6, 10])


TINY_PLAN = Plan((0, 4, 8, 11), token_budget=20, max_batch_size=3, max_seq_len=10)


def test_seed_bound_convention() -> None:
    plan = Plan((0, 770, 1216, 1728, 2432, 3296, 8193))
    assert plan.bucket_batch_sizes() == [63, 40, 28, 20, 14, 5]  # 49152 // 8193 = 5
    assert Plan(plan.bounds, bs_from="max").bucket_batch_sizes()[-1] == 6  # 49152 // 8192 = 6


def test_static_sorted_tiny_hand_checked() -> None:
    (ep,) = build_epochs("static-sorted", TINY, TINY_PLAN, seed=0, epochs=1)
    # sorted 1..10; greedy under 20 tokens with count x max: [1,2,3] [4,5,6] [7,8] [9,10]
    batches = sorted(ep.samples.split(ep.size.tolist()), key=lambda b: int(TINY[b].min()))
    assert [sorted(TINY[b].tolist()) for b in batches] == [[1, 2, 3], [4, 5, 6], [7, 8], [9, 10]]
    assert sorted(ep.bucket.tolist()) == [0, 1, 2, 2]  # buckets of the longest: 3, 6, 8, 10


def test_greedy_never_exceeds_budget() -> None:
    lens = np.array([3, 3, 3, 10, 1, 1, 20, 2])
    assert _greedy_sizes(lens, 20, 4).tolist() == [3, 2, 1, 1, 1]  # 4x10=40>20 → cut; 20 alone


def test_bucketed_tiny() -> None:
    (ep,) = build_epochs("bucketed-shuffle", TINY, TINY_PLAN, seed=1, epochs=1)
    # buckets: [1,2,3] (bs 20//4=5→3), [4..7] (20//8=2), [8,9,10] (20//11=1)
    assert sorted(ep.size.tolist()) == [1, 1, 1, 2, 2, 3]
    for b, idx in zip(ep.bucket.tolist(), ep.samples.split(ep.size.tolist()), strict=True):
        assert {int(x) for x in torch.bucketize(TINY[idx], torch.tensor([4, 8]), right=True)} == {b}


def test_largest_deficit_runs() -> None:
    seq = _largest_deficit((52, 10, 10, 10, 9, 9))
    runs = run_lengths(torch.tensor(seq))
    assert sorted(seq) == sorted([0] * 52 + [1] * 10 + [2] * 10 + [3] * 10 + [4] * 9 + [5] * 9)
    assert int(runs.max()) <= 3  # ceil(1 / (1 - 0.52)) = 3


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_invariants(strategy: str) -> None:
    rng = np.random.default_rng(3)
    lens = torch.from_numpy(np.clip(rng.lognormal(6, 0.9, 3000), 8, 4000).astype(np.int64))
    plan = Plan((0, 300, 600, 1200, 4001), token_budget=8000, max_batch_size=32, max_seq_len=4000)
    a = build_epochs(strategy, lens, plan, seed=5, epochs=2)
    b = build_epochs(strategy, lens, plan, seed=5, epochs=2)
    for ea, eb in zip(a, b, strict=True):
        assert torch.equal(ea.samples, eb.samples)  # determinism under a seed
        n = int(ea.size.sum())
        assert ea.offsets[-1] == n == ea.samples.numel()
        if strategy == "fairseq":  # fairseq drops a last batch that is not a multiple of 8
            assert 3000 - 8 < n <= 3000 and ea.samples.unique().numel() == n
        else:
            assert torch.equal(torch.sort(ea.samples).values, torch.arange(3000))  # each sample once
        parts = ea.samples.split(ea.size.tolist())
        assert [int(lens[p].max()) for p in parts] == ea.max_len.tolist()
        # fixed-count samplers do not pack by tokens; Lhotse checks the budget after adding a
        # sample, so its last (longer) one may overshoot it
        if strategy not in (*FIXED_SIZE, "lhotse"):
            assert bool((ea.size * ea.max_len <= plan.token_budget).all())


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_the_monte_carlo_tables_are_the_replays_own(strategy: str) -> None:
    """Null seeds are built without per-sample orders and side by side on the cores: each seed's
    per-step table is exactly the one its full replay gives, in the seeds' order."""
    from losslens.replay.correlate import seed_tables

    rng = np.random.default_rng(4)
    lens = torch.from_numpy(np.clip(rng.lognormal(6, 0.9, 3000), 8, 4000).astype(np.int64))
    plan = Plan((0, 300, 600, 1200, 4001), token_budget=8000, max_batch_size=32, max_seq_len=4000,
                grad_accum=2)
    seeds = [3, 11, 4, 99]
    fast = list(seed_tables(strategy, lens, plan, seeds, 2))
    for s, (mean_len, bucket) in zip(seeds, fast, strict=True):
        full = build_epochs(strategy, lens, plan, s, 2)
        bare = build_epochs(strategy, lens, plan, s, 2, samples=False)
        assert all(e.samples.numel() == 0 for e in bare)
        for a, b in zip(full, bare, strict=True):
            assert all(torch.equal(x, y) for x, y in ((a.bucket, b.bucket), (a.size, b.size),
                                                       (a.max_len, b.max_len), (a.tokens, b.tokens)))
        want = step_table(full, plan)
        assert np.array_equal(mean_len, want[0]) and np.array_equal(bucket, want[1])


def test_max_runs_vectorised_matches_loop() -> None:
    rows = torch.tensor([[0, 0, 1, 1, 1, 0], [2, 2, 2, 2, 0, 1], [1, 0, 1, 0, 1, 0]])
    assert max_runs(rows).tolist() == [3, 4, 1]
    labels = torch.tensor([0] * 50 + [1] * 50)
    mc = shuffled_max_runs(labels, 64, seed=0)
    assert mc.shape == (64,) and 3 <= float(mc.float().mean()) <= 9


@pytest.mark.slow
def test_correlation_finds_planted_dependence_and_not_absent() -> None:
    rng = np.random.default_rng(0)
    lens = torch.from_numpy(np.clip(rng.lognormal(6.5, 0.8, 20000), 16, 4000).astype(np.int64))
    plan = Plan((0, 400, 800, 1600, 4001), token_budget=16000, max_batch_size=64, max_seq_len=4000)
    mean_len, _ = step_table(build_epochs("bucketed-shuffle", lens, plan, 7, 1), plan)
    steps, loss = synth.bucket_dependent_log(mean_len, strength=1.0, seed=1)
    hit = correlate(steps, loss, "bucketed-shuffle", lens, plan, 7, 1, null_seeds=149)
    assert hit["rho"] > 0.3 and hit["p_value"] < 0.01
    steps, loss = synth.bucket_dependent_log(mean_len, strength=0.0, seed=1)
    miss = correlate(steps, loss, "bucketed-shuffle", lens, plan, 7, 1, null_seeds=49)
    assert miss["p_value"] > 0.05


def test_optimized_bounds_beat_the_seeds() -> None:
    rng = np.random.default_rng(0)
    lens = np.clip(rng.lognormal(7.3, 0.8, 50000), 16, 8192).astype(np.int64)
    bounds = optimize_bounds(lens, 6)
    assert bounds[0] == 0 and bounds[-1] == 8193 and len(bounds) == 7
    seed = [0, 770, 1216, 1728, 2432, 3296, 8193]
    assert bound_efficiency(lens, bounds) > bound_efficiency(lens, seed) + 0.03
    assert optimize_bounds(np.array([5, 5, 9, 9, 9]), 2) == [0, 6, 10]


def test_replay_report_schema_and_seed_shape() -> None:
    rng = np.random.default_rng(0)
    lens = np.clip(rng.lognormal(7.3, 0.8, 60000), 16, 8192).astype(np.int64)
    plan = Plan((0, 770, 1216, 1728, 2432, 3296, 8193))
    report, _ = replay(lens, plan, compare=True, optimize=6, device="cpu")
    assert report["schema"] == "losslens.replay/1"
    by = {e["name"]: e for e in report["strategies"]}
    assert set(by) == set(STRATEGIES)
    assert by["bucketed-shuffle"]["bucket_batch_share"][-1] > 0.45  # the seed's 52 %
    assert by["stride-interleave"]["max_same_bucket_run"] <= 3
    assert by["bucketed-shuffle"]["max_same_bucket_run"] > 6
    assert by["hf-group-by-length"]["period_steps"] == 50
    opt = report["optimized_bounds"]
    assert opt["padding_efficiency"] > opt["given_padding_efficiency"]


def test_lengths_inputs_and_errors(tmp_path) -> None:
    import polars as pl

    np.save(tmp_path / "l.npy", np.array([3, 4, 5]))
    (tmp_path / "l.txt").write_text("3\n4\n5\n")
    pl.DataFrame({"seq_len": [3, 4, 5]}).write_parquet(tmp_path / "l.parquet")
    pl.DataFrame({"n": [3, 4, 5]}).write_csv(tmp_path / "l.csv")
    folder = tmp_path / "hf"
    folder.mkdir()
    pl.DataFrame({"seq_len": [3, 4, 5]}).write_ipc_stream(folder / "data-00000-of-00001.arrow")
    for name in ("l.npy", "l.txt", "l.parquet", "hf"):
        assert load_lengths(tmp_path / name).tolist() == [3, 4, 5]
    assert load_lengths(tmp_path / "l.csv", column="n").tolist() == [3, 4, 5]
    with pytest.raises(InputError, match="no column 'seq_len' .found: n.; pass --column"):
        load_lengths(tmp_path / "l.csv")
    np.save(tmp_path / "bad.npy", np.array([3, 0, -1]))
    with pytest.raises(InputError, match="length 0 at sample 1 is not positive .2 such samples."):
        load_lengths(tmp_path / "bad.npy")


@pytest.mark.parametrize(("strategy", "verdict"), [("hf-group-by-length", "longer"),
                                                    ("stride-interleave", "shorter"),
                                                    ("bucketed-shuffle", "chance")])
def test_longest_run_against_random_orders(strategy: str, verdict: str) -> None:
    """The chosen strategy's longest same-bucket run against the same batches shuffled: HF's
    sorted mega-batches make long runs, interleaving short ones, bucketed-shuffle what chance does
    with a 52 % bucket (the seed's runs were chance, not a bug in the shuffle)."""
    lens = np.load(FIXTURES / "lengths_seed_shape.npy")
    report, _ = replay(lens, Plan((0, 770, 1216, 1728, 2432, 3296, 8193)), strategy, seed=0, epochs=2)
    m = report["max_run_null"]
    assert m["shuffles"] == 99 and m["q05"] <= m["mean"] <= m["q95"]
    if verdict == "longer":
        assert m["p_value"] == 0.01 and m["observed"] > m["q95"]
    elif verdict == "shorter":
        assert m["p_value"] == 1.0 and m["observed"] == 3 < m["q05"]
    else:
        assert m["p_value"] > 0.05 and m["q05"] <= m["observed"] <= m["q95"]


def test_cpu_shuffle_budget(monkeypatch) -> None:
    """On the CPU the longest-run Monte-Carlo shuffles a bounded number of batches (>= 19 shuffles)."""
    import losslens.replay.engine as rp

    lens = np.load(FIXTURES / "lengths_seed_shape.npy")
    monkeypatch.setattr(rp, "CPU_SHUFFLED", 1260 * 30)  # one epoch has 1,260 batches
    report, _ = replay(lens, Plan((0, 770, 1216, 1728, 2432, 3296, 8193)), device="cpu")
    assert report["max_run_null"]["shuffles"] == 30
    monkeypatch.setattr(rp, "CPU_SHUFFLED", 10)
    assert replay(lens, Plan((0, 770, 1216, 1728, 2432, 3296, 8193)), device="cpu")[0][
        "max_run_null"]["shuffles"] == 19


def test_replay_notes_truncated_and_over_budget_samples() -> None:
    lens = np.array([100, 9000, 20000, 3000, 50])
    report, _ = replay(lens, Plan((0, 1000, 8193), token_budget=2048, max_batch_size=8))
    assert report["notes"] == [
        "2 samples are longer than --max-seq-len 8192: counted truncated to it in the batches' "
        "lengths; the framework samplers order them by their full lengths, as the frameworks do",
        "3 samples alone exceed the token budget 2048: each forms a batch of one, over budget"]
    assert "notes" not in replay(np.array([100, 200]), Plan((0, 1000, 8193)))[0]


def test_lengths_over_max_seq_len_never_change_a_framework_sampler_order() -> None:
    """HF's grouped sampler sorts by the samples' full lengths: truncating them first would tie
    the long ones and reorder them."""
    import torch

    from losslens.replay.strategies import build_epochs

    rng = np.random.default_rng(3)
    lens = torch.from_numpy(rng.integers(100, 20_000, 4000))
    orders = [build_epochs("hf-group-by-length", lens, Plan((0, 1000, m + 1), max_seq_len=m,
                                                              per_device_batch=8), 42, 1)[0].samples
              for m in (8192, 30_000)]
    assert orders[0].tolist() == orders[1].tolist()


def test_hash_keys_give_permutations_and_are_deterministic() -> None:
    from losslens.replay.order import hash_keys

    rows = torch.arange(8)
    k1, k2 = hash_keys(3, rows, 1000), hash_keys(3, rows, 1000)
    assert torch.equal(k1, k2) and bool((k1 >= 0).all())
    perms = torch.argsort(k1, dim=1)
    assert all(torch.equal(torch.sort(p).values, torch.arange(1000)) for p in perms)
    assert len({tuple(p[:20].tolist()) for p in perms}) == 8  # different orders per seed row


@pytest.mark.slow
def test_ladder_peaks_fall_in_long_bucket_runs() -> None:
    """A loss that climbs while a run of long-bucket steps lasts: its peaks sit in long runs."""
    rng = np.random.default_rng(1)
    lens = torch.from_numpy(np.clip(rng.lognormal(6.5, 0.8, 20000), 16, 4000).astype(np.int64))
    plan = Plan((0, 400, 800, 1600, 4001), token_budget=16000, max_batch_size=64, max_seq_len=4000)
    _, bucket = step_table(build_epochs("bucketed-shuffle", lens, plan, 3, 1), plan)
    loss = np.empty(len(bucket))
    level = 1.0
    for i, b in enumerate(bucket):  # accumulate while the same bucket repeats, reset otherwise
        level = level + 1.0 if i and b == bucket[i - 1] and b == 3 else 1.0
        loss[i] = level * (1 + rng.normal(0, 0.01))
    res = correlate(np.arange(len(loss)), loss, "bucketed-shuffle", lens, plan, 3, 1, null_seeds=99)
    assert res["events"] >= 5
    assert res["events_in_runs_ge_4"] > res["events_in_runs_null_mean"]
    assert res["events_in_runs_p_value"] <= 0.01


def test_a_replay_request_is_checked_before_torch_loads() -> None:
    """replay.run(ReplayRequest) is the library path: a bad request is a UsageError naming the
    option, raised before torch is imported; a sound one runs and answers a ReplayReport."""
    import subprocess
    import sys

    code = ("import sys\nfrom losslens.errors import UsageError\nfrom losslens.replay import ReplayRequest\n"
            "try:\n    ReplayRequest(lengths='x.npy', bounds=(0, 100, 200))\nexcept UsageError as e:\n"
            "    print(e, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "the last bound (200) must exceed --max-seq-len (8192): bounds are exclusive False"


def test_run_answers_a_replay_report(tmp_path) -> None:
    from losslens.replay import ReplayRequest, run

    lengths = tmp_path / "lengths.npy"
    np.save(lengths, np.array([100, 900, 1500, 3000, 50, 8000, 2500, 700] * 50))
    report = run(ReplayRequest(lengths=str(lengths), seed=3, device="cpu"))
    assert report.summary["samples"] == 400 and report.summary["strategy"] == "bucketed-shuffle"
    batches = report.batches()
    assert batches["samples"].sum() == 400 and report.steps().height == batches.height
    assert report.analysed is None and report.data is None  # no --log


def test_a_framework_installed_at_another_version_is_said(monkeypatch) -> None:
    from losslens.replay import frameworks

    assert "torch" in frameworks.CHECKED_AGAINST["torch-distributed"]
    monkeypatch.setitem(frameworks.CHECKED_AGAINST, "torch-distributed", {"torch": "0.0.1"})
    [note] = frameworks.version_notes("torch-distributed")
    assert note.startswith("torch-distributed was checked against torch 0.0.1; ") and "installed here" in note
    monkeypatch.setitem(frameworks.CHECKED_AGAINST, "torch-distributed", {"no-such-package": "1.0"})
    assert frameworks.version_notes("torch-distributed") == []  # (not installed: nothing to say)
    report, _ = replay(np.array([100, 200, 300, 400]), Plan((0, 1000, 8193), per_device_batch=2),
                       strategy="torch-distributed")
    assert report["checked_against"] == {"no-such-package": "1.0"}
