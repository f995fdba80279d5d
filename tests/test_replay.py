"""Replay on CPU with small data: hand-checked batch sequences, invariants, correlation."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from losslens import synth  # noqa: E402
from losslens.errors import InputError  # noqa: E402
from losslens.replay import STRATEGIES, Plan, build_epochs, load_lengths, replay  # noqa: E402
from losslens.replay.bounds import bound_efficiency, optimize_bounds  # noqa: E402
from losslens.replay.correlate import correlate, step_table  # noqa: E402
from losslens.replay.order import max_runs, run_lengths, shuffled_max_runs  # noqa: E402
from losslens.replay.strategies import _greedy_sizes, _largest_deficit  # noqa: E402
from tests.conftest import FIXTURES  # noqa: E402

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
        assert torch.equal(torch.sort(ea.samples).values, torch.arange(3000))  # each sample once
        assert int(ea.size.sum()) == 3000 and ea.offsets[-1] == 3000
        parts = ea.samples.split(ea.size.tolist())
        assert [int(lens[p].max()) for p in parts] == ea.max_len.tolist()
        if strategy != "hf-group-by-length":  # fixed-size batches by sample count, not tokens
            assert bool((ea.size * ea.max_len <= plan.token_budget).all())


def test_max_runs_vectorised_matches_loop() -> None:
    rows = torch.tensor([[0, 0, 1, 1, 1, 0], [2, 2, 2, 2, 0, 1], [1, 0, 1, 0, 1, 0]])
    assert max_runs(rows).tolist() == [3, 4, 1]
    labels = torch.tensor([0] * 50 + [1] * 50)
    mc = shuffled_max_runs(labels, 64, seed=0)
    assert mc.shape == (64,) and 3 <= float(mc.float().mean()) <= 9


def test_correlation_finds_planted_dependence_and_not_absent() -> None:
    rng = np.random.default_rng(0)
    lens = torch.from_numpy(np.clip(rng.lognormal(6.5, 0.8, 20000), 16, 4000).astype(np.int64))
    plan = Plan((0, 400, 800, 1600, 4001), token_budget=16000, max_batch_size=64, max_seq_len=4000)
    mean_len, _ = step_table(build_epochs("bucketed-shuffle", lens, plan, 7, 1), 1, 1)
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


def test_cli_replay_json(tmp_path) -> None:
    import json

    from typer.testing import CliRunner

    from losslens.cli import app

    rng = np.random.default_rng(0)
    np.save(tmp_path / "l.npy", np.clip(rng.lognormal(7.3, 0.8, 20000), 16, 8192).astype(np.int64))
    res = CliRunner().invoke(app, ["replay", "--lengths", str(tmp_path / "l.npy"), "--epochs", "2",
                                   "--grad-accum", "4", "--json", "--out", str(tmp_path / "b.csv"),
                                   "--steps-out", str(tmp_path / "s.parquet")])
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout)
    (entry,) = rep["strategies"]
    assert set(entry) >= {"name", "batches_per_epoch", "bucket_batch_share", "padding_efficiency",
                          "max_same_bucket_run"}
    import polars as pl

    table = pl.read_csv(tmp_path / "b.csv")
    assert table.height == 2 * entry["batches_per_epoch"] and table["step"].max() == (table.height - 1) // 4
    steps = pl.read_parquet(tmp_path / "s.parquet")
    assert steps.height == table["step"].max() + 1 and steps["batches"].sum() == table.height
    assert steps["tokens"].sum() == table["tokens"].sum()
    assert (steps["batches"][:-1] == 4).all() and (steps["distinct_buckets"] <= 4).all()
    # the step's bucket is its longest batch's: the bucket the correlation aligns with the loss
    first = table.filter(pl.col("step") == 0).sort("max_len", descending=True)
    assert steps["bucket"][0] == first["bucket"][0] and steps["max_len"][0] == first["max_len"][0]
    bad = CliRunner().invoke(app, ["replay", "--lengths", str(tmp_path / "l.npy"), "--bounds", "0,100,50"])
    assert bad.exit_code == 2 and "--bounds must increase" in bad.stderr


@pytest.mark.parametrize(("seed", "tied"), [(0, True), (1, False)])
def test_readme_replay_ties_the_bucketed_fixture_to_its_order(seed: int, tied: bool) -> None:
    """fixtures/bucketed_run.log: loss levels ×1, ×1.5, ×2 by the bucket of each step of
    bucketed-shuffle seed 0. The replay with that seed ties them (and names the cause); another
    seed's order does not."""
    import json

    from typer.testing import CliRunner

    from losslens.cli import app
    from tests.conftest import FIXTURES

    res = CliRunner().invoke(app, ["replay", "--lengths", str(FIXTURES / "lengths_seed_shape.npy"),
                                   "--log", str(FIXTURES / "bucketed_run.log"), "--seed", str(seed),
                                   "--null-seeds", "99" if tied else "19", "--json"])
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout)
    c = rep["correlation"]
    assert c["aligned_records"] == 1260 and c["loss_level_is"] == "ratio to trend"
    (band,) = rep["findings"]
    assert band["kind"] == "multimodal" and len(band["evidence"]["modes"]) == 3
    levels = c["loss_level_by_bucket"]
    if tied:
        assert c["rho"] > 0.7 and c["p_value"] == 0.01
        assert band["evidence"]["cause"] == "batch_composition"
        # the planted ×1 : ×1.5 : ×2 levels, read back per bucket (relative to the trend)
        assert levels["3"] / levels["0"] == pytest.approx(1.5, rel=0.05)
        assert levels["5"] / levels["0"] == pytest.approx(2.0, rel=0.05)
    else:
        assert abs(c["rho"]) < 0.1 and c["p_value"] > 0.05
        assert "cause" not in band["evidence"]


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
        "2 samples are longer than --max-seq-len 8192 and are counted truncated to it",
        "3 samples alone exceed the token budget 2048: each forms a batch of one, over budget"]
    assert "notes" not in replay(np.array([100, 200]), Plan((0, 1000, 8193)))[0]


def test_replay_with_log_sets_ladder_cause(tmp_path) -> None:
    import json

    from typer.testing import CliRunner

    from losslens.cli import app

    rng = np.random.default_rng(0)
    lens = np.clip(rng.lognormal(6.5, 0.8, 20000), 16, 4000).astype(np.int64)
    np.save(tmp_path / "l.npy", lens)
    plan = Plan((0, 400, 800, 1600, 4001), token_budget=16000, max_batch_size=64, max_seq_len=4000)
    mean_len, _ = step_table(build_epochs("bucketed-shuffle", torch.from_numpy(lens), plan, 7, 1), 1, 1)
    steps, loss = synth.bucket_dependent_log(mean_len, strength=3.0, seed=1)
    text = "".join(f"step={s} loss={v:.5f}\n" for s, v in zip(steps, loss, strict=True))
    (tmp_path / "run.log").write_text(text)
    res = CliRunner().invoke(app, ["replay", "--lengths", str(tmp_path / "l.npy"), "--bounds",
                                   "0,400,800,1600,4001", "--token-budget", "16000", "--max-seq-len",
                                   "4000", "--seed", "7", "--log", str(tmp_path / "run.log"),
                                   "--null-seeds", "99", "--json"])
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout)
    assert rep["correlation"]["p_value"] == 0.01 and rep["correlation"]["rho"] > 0.5
    for f in rep["findings"]:
        if f["kind"] in ("ladder", "multimodal"):
            assert f["evidence"]["cause"] == "batch_composition"


def test_hash_keys_give_permutations_and_are_deterministic() -> None:
    from losslens.replay.order import hash_keys

    rows = torch.arange(8)
    k1, k2 = hash_keys(3, rows, 1000), hash_keys(3, rows, 1000)
    assert torch.equal(k1, k2) and bool((k1 >= 0).all())
    perms = torch.argsort(k1, dim=1)
    assert all(torch.equal(torch.sort(p).values, torch.arange(1000)) for p in perms)
    assert len({tuple(p[:20].tolist()) for p in perms}) == 8  # different orders per seed row


def test_ladder_peaks_fall_in_long_bucket_runs() -> None:
    """A loss that climbs while a run of long-bucket steps lasts: its peaks sit in long runs."""
    rng = np.random.default_rng(1)
    lens = torch.from_numpy(np.clip(rng.lognormal(6.5, 0.8, 20000), 16, 4000).astype(np.int64))
    plan = Plan((0, 400, 800, 1600, 4001), token_budget=16000, max_batch_size=64, max_seq_len=4000)
    _, bucket = step_table(build_epochs("bucketed-shuffle", lens, plan, 3, 1), 1, 1)
    loss = np.empty(len(bucket))
    level = 1.0
    for i, b in enumerate(bucket):  # accumulate while the same bucket repeats, reset otherwise
        level = level + 1.0 if i and b == bucket[i - 1] and b == 3 else 1.0
        loss[i] = level * (1 + rng.normal(0, 0.01))
    res = correlate(np.arange(len(loss)), loss, "bucketed-shuffle", lens, plan, 3, 1, null_seeds=99)
    assert res["events"] >= 5
    assert res["events_in_runs_ge_4"] > res["events_in_runs_null_mean"]
    assert res["events_in_runs_p_value"] <= 0.01


def test_replay_html_shows_buckets_under_the_loss(tmp_path) -> None:
    from typer.testing import CliRunner

    from losslens.cli import app

    rng = np.random.default_rng(0)
    lens = np.clip(rng.lognormal(6.5, 0.8, 5000), 16, 4000).astype(np.int64)
    np.save(tmp_path / "l.npy", lens)
    (tmp_path / "run.log").write_text("".join(f"step={s} loss={2 + np.sin(s / 5):.4f}\n" for s in range(300)))
    args = ["replay", "--lengths", str(tmp_path / "l.npy"), "--bounds", "0,400,800,1600,4001",
            "--token-budget", "16000", "--max-seq-len", "4000", "--null-seeds", "9"]
    page_path = str(tmp_path / "r.html")
    res = CliRunner().invoke(app, [*args, "--log", str(tmp_path / "run.log"), "--html", page_path])
    assert res.exit_code == 0, res.output
    page = (tmp_path / "r.html").read_text()
    assert 'data-metric="replay buckets"' in page and "replayed length bucket of each step" in page
    # the evidence panel: one bar per bucket, with ρ and p in its title
    assert "loss ratio to trend by replayed bucket (ρ=" in page and page.count('text-anchor="middle">×') == 4
    bad = CliRunner().invoke(app, [*args, "--html", str(tmp_path / "x.html")])
    assert bad.exit_code == 2 and "--html needs --log" in bad.stderr
