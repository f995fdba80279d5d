"""The framework samplers replay batch for batch what the frameworks' own code makes: torch's
samplers run here; transformers + accelerate and fairseq through the sequences that
fixtures/record_samplers.py recorded from their code (see its docstring for versions and how)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from tests.conftest import FIXTURES

torch = pytest.importorskip("torch")

from losslens.replay import Plan, build_epochs  # noqa: E402
from losslens.replay import frameworks as fw  # noqa: E402
from losslens.replay.correlate import correlate  # noqa: E402

RECORDED = np.load(FIXTURES / "samplers" / "recorded.npz")
_spec = importlib.util.spec_from_file_location("record_samplers", FIXTURES / "record_samplers.py")
assert _spec is not None and _spec.loader is not None
record_samplers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(record_samplers)
CASES = record_samplers.CASES
BOUNDS = (0, 128, 256, 512, 1024, 2049)


def plan_of(case: str) -> tuple[str, Plan, int, int]:
    """The strategy, plan, seed and epochs that name a recorded case on the command line."""
    strategy, bs, ga, world, seed, epochs, extra = CASES[case]
    plan = Plan(BOUNDS, token_budget=extra.get("max_tokens", 49152),
                max_batch_size=extra.get("max_sentences", 64), max_seq_len=2048, grad_accum=ga,
                world_size=world, per_device_batch=bs or None, batch_multiple=extra.get("multiple", 8),
                lhotse_buckets=extra.get("buckets", 10), lhotse_buffer=extra.get("buffer", 20_000),
                bucket_shuffle=extra.get("shuffle", False),
                loader_draws=0)  # (the samplers were recorded iterated alone, not through a DataLoader)
    return strategy, plan, seed, epochs


def recorded(case: str, epoch: int) -> tuple[np.ndarray, np.ndarray]:
    return RECORDED[f"{case}/e{epoch}/order"], RECORDED[f"{case}/e{epoch}/sizes"]


@pytest.mark.parametrize("case", list(CASES))
def test_replays_the_frameworks_own_sequence_batch_for_batch(case: str) -> None:
    strategy, plan, seed, epochs = plan_of(case)
    lens = torch.from_numpy(RECORDED[f"{case}/lengths"])
    eps = build_epochs(strategy, lens, plan, seed, epochs)
    assert len(eps) == epochs
    for e, ep in enumerate(eps):
        order, sizes = recorded(case, e)
        assert ep.size.tolist() == sizes.tolist()
        assert ep.samples.tolist() == order.tolist()


def test_recorded_cases_cover_what_makes_them_differ() -> None:
    """Sanity of the pinned data: ties in the lengths, wrapped tails, dropped fairseq batches."""
    lens = RECORDED["hf_grouped_w3/lengths"]
    assert len(np.unique(lens)) < len(lens) / 10  # many ties: tie-breaking is tested
    order, _ = recorded("hf_grouped_w3", 0)
    assert len(order) == 3000  # 600 batches of 5 over 3 ranks: no wrap needed
    order, sizes = recorded("hf_random_w2", 0)
    assert len(order) == 3008 and set(sizes.tolist()) == {8}  # 3000 → 376 batches: wrapped from the head
    assert order[3000:].tolist() == order[:8].tolist()
    order, sizes = recorded("fairseq_w1", 0)
    assert len(order) < 3000 and all(s % 8 == 0 or s < 8 for s in sizes.tolist())


@pytest.mark.parametrize(("n", "bs", "world", "seed", "epoch"),
                         [(1000, 8, 4, 0, 0), (1003, 8, 4, 5, 2), (10, 4, 3, 1, 1), (7, 2, 8, 0, 0)])
def test_torch_distributed_sampler(n: int, bs: int, world: int, seed: int, epoch: int) -> None:
    from torch.utils.data import BatchSampler, DistributedSampler

    per_rank = []
    for rank in range(world):
        s = DistributedSampler(range(n), num_replicas=world, rank=rank, shuffle=True, seed=seed)
        s.set_epoch(epoch)
        per_rank.append([list(b) for b in BatchSampler(s, bs, drop_last=False)])
    seq = [b for group in zip(*per_rank, strict=True) for b in group]
    order, sizes = fw.torch_distributed_batches(n, bs, world, seed, epoch)
    assert order.tolist() == [i for b in seq for i in b]
    assert sizes.tolist() == [len(b) for b in seq]


@pytest.mark.parametrize(("n", "seed", "epoch"), [(1000, 0, 0), (37, 42, 3)])
def test_hf_random_is_a_seeded_torch_random_sampler(n: int, seed: int, epoch: int) -> None:
    """accelerate's SeedableRandomSampler reseeds torch's RandomSampler with seed + epoch."""
    from torch.utils.data import RandomSampler

    sampler = RandomSampler(range(n), generator=torch.Generator().manual_seed(seed + epoch))
    assert fw.hf_random_indices(n, seed, epoch).tolist() == list(sampler)


def test_fairseq_batch_by_size_by_hand() -> None:
    """Sizes a multiple of 4 unless smaller; a batch closes when n × longest would pass 100;
    a tail that alone overflows closes as its own batch; the short last batch is dropped."""
    tokens = np.array([10, 10, 10, 10, 10, 12, 12, 20, 20, 20, 30], dtype=np.int64)
    got = fw._batch_by_size(np.arange(11), tokens, 100, -1, 4)
    assert [b.tolist() for b in got] == [[0, 1, 2, 3], [4, 5, 6, 7]]  # [8, 9, 10]: not a multiple
    got = fw._batch_by_size(np.arange(11), tokens, 100, -1, 1)
    assert [len(b) for b in got] == [7, 3, 1]  # 7 × 12 = 84 (8 × 20 would be 160); 3 × 20; 30 alone
    assert [b.tolist() for b in fw._batch_by_size(np.arange(5), tokens[:5], -1, 2, 1)] == \
        [[0, 1], [2, 3], [4]]


def test_hf_mega_batches_span_grad_accum() -> None:
    """The Trainer's group-by-length batch size is per-device × GA: mega-batches of 50 × 32
    samples, one sawtooth per 50 optimizer steps on one rank, 50 / W steps on W ranks."""
    from losslens.replay.order import order_stats

    rng = np.random.default_rng(1)
    lens = torch.from_numpy(np.clip(rng.lognormal(6, 0.8, 40_000), 8, 4000).astype(np.int64))
    for world, period in ((1, 50), (2, 25)):
        plan = Plan((0, 500, 4001), max_seq_len=4000, grad_accum=4, world_size=world, per_device_batch=8)
        st = order_stats(build_epochs("hf-group-by-length", lens, plan, 3, 1), plan)
        assert st["period_steps"] == period and st["period_acf"] > 0.9


def planted_log(mean_len: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A decaying loss that rises with the step's batch length (0.12 per standard deviation of it,
    noise 0.05: ρ ≈ 0.8 against the true sequence)."""
    t = np.arange(len(mean_len))
    z = (mean_len - mean_len.mean()) / mean_len.std()
    return 2.0 + 1.5 * np.exp(-t / 150) + 0.12 * z + rng.normal(0, 0.05, len(t))


def step_lengths(lens: np.ndarray, order: np.ndarray, sizes: np.ndarray, per_step: int) -> np.ndarray:
    """Per optimizer step of one epoch, the mean longest length of its micro-batches (the
    epoch's last micro-batches that do not fill a step: a step of their own)."""
    ends = np.cumsum(sizes)
    mx = np.maximum.reduceat(lens[order], ends - sizes)
    return np.array([mx[i:i + per_step].mean() for i in range(0, len(mx), per_step)])


def framework_run(case: str) -> tuple[str, Plan, int, int, np.ndarray, np.ndarray]:
    """A run's parameters, its lengths and its per-step batch lengths as the framework's own code
    fed them: the recorded sequences, or torch's DistributedSampler run here."""
    if case == "torch_distributed":
        from torch.utils.data import BatchSampler, DistributedSampler

        lens = RECORDED["hf_random_w2/lengths"]
        plan = Plan(BOUNDS, max_seq_len=2048, grad_accum=2, world_size=4, per_device_batch=4)
        out = []
        for e in range(3):
            per_rank = []
            for rank in range(4):
                s = DistributedSampler(range(len(lens)), num_replicas=4, rank=rank, seed=9)
                s.set_epoch(e)
                per_rank.append([list(b) for b in BatchSampler(s, 4, drop_last=False)])
            seq = [b for group in zip(*per_rank, strict=True) for b in group]
            out.append(step_lengths(lens, np.concatenate(seq), np.array([len(b) for b in seq]), 8))
        return "torch-distributed", plan, 9, 3, lens, np.concatenate(out)
    strategy, plan, seed, epochs = plan_of(case)
    lens = RECORDED[f"{case}/lengths"]
    mean_len = np.concatenate([step_lengths(lens, *recorded(case, e), plan.per_step) for e in range(epochs)])
    return strategy, plan, seed, epochs, lens, mean_len


@pytest.mark.slow
@pytest.mark.parametrize("case", ["hf_grouped_long", "hf_random_w2", "fairseq_w4", "torch_distributed",
                                  "lhotse_w2_shuffled", "lhotse_w1"])
def test_planted_dependence_on_a_framework_fed_run(case: str) -> None:
    """A run fed by the framework's own sampler, its loss following the batch lengths: replay with
    the run's parameters finds it (p <= 0.01); the same loss shuffled in time is not one (the data
    cannot tell: a seed is never verified as the run's), and another seed is not this run's order."""
    strategy, plan, seed, epochs, lens, mean_len = framework_run(case)
    rng = np.random.default_rng(5)
    loss = planted_log(mean_len, rng)
    steps = np.arange(len(loss))
    t_lens = torch.from_numpy(lens)
    found = correlate(steps, loss, strategy, t_lens, plan, seed, epochs, null_seeds=99)["verdict"]
    assert found["dependence"] is True and found["p_value"] <= 0.01 and found["method"] == "sampler"
    control = correlate(steps, rng.permutation(loss), strategy, t_lens, plan, seed, epochs, null_seeds=99)
    if case == "lhotse_w1":  # every seed feeds this order: it is the run's, and a "no" can be said
        assert control["verdict"]["dependence"] is False and control["verdict"]["detectable_rho"] <= 0.3
    else:  # no seed's order is proven the run's: the data cannot tell, never a "no"
        assert control["verdict"]["dependence"] is None and control["verdict"]["p_value"] > 0.01
        assert "not verified" in control["verdict"]["reason"]
    wrong = correlate(steps, loss, strategy, t_lens, plan, seed + 1, epochs, null_seeds=99)["verdict"]
    if case == "lhotse_w1":  # no in-bucket shuffle: Lhotse's bucket picks ignore the seed, so does the order
        assert "circular_shift" in found["tests"] and wrong == found
        return
    assert wrong["dependence"] is not True
    if strategy == "hf-group-by-length":  # the sawtooth every seed shares: seen, and said so
        assert wrong["dependence"] is None and "shape every seed" in wrong["reason"]


@pytest.mark.slow
def test_a_short_grouped_run_tells_its_seed_from_the_others() -> None:
    """15 mega-batches (750 steps): with the loss taken past its de-trending edge (where the trend
    lags the early fall, as the first mega-batch starts), the run's seed is told from the others
    (p = 0.01); other seeds are "cannot tell" with the reason, never a "no"."""
    strategy, plan, seed, epochs, lens, mean_len = framework_run("hf_grouped_w1")
    loss = planted_log(mean_len, np.random.default_rng(5))
    for s in (seed, seed + 1, seed + 2):
        v = correlate(np.arange(len(loss)), loss, strategy, torch.from_numpy(lens), plan, s, epochs,
                      null_seeds=99)["verdict"]
        assert v["tests"]["shared_shape"]["rho"] > 0.7
        if s == seed:
            assert v["dependence"] is True and v["p_value"] <= 0.01
        else:
            assert v["dependence"] is None and "shape every seed" in v["reason"]
