"""Batching strategies: rebuild the batches (and their length buckets) a run fed its model.

Torch does the heavy, vectorised work (bucketing, shuffles, per-batch maxima); the only
sequential part — greedy packing under a token budget with dynamic padding — is a short numpy
loop over batches. Exactness (see ``EXACTNESS``): our RNG is torch's, seeded with seed + epoch;
a run replays exactly only if its code drew its order the same way, otherwise the replay is
statistical (same distribution of orders, not the same order).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch

from losslens.replay import frameworks

STRATEGIES = ("static-sorted", "random", "bucketed-shuffle", "stride-interleave", "hf-group-by-length",
              "hf-random", "torch-distributed", "fairseq", "lhotse")
EXACTNESS = {
    "static-sorted": "batch composition exact (deterministic); batch order statistical (seed + epoch)",
    "random": "statistical (full shuffle each epoch, then greedy packing)",
    "bucketed-shuffle": "statistical (shuffle within buckets, pack, shuffle all batches)",
    "stride-interleave": ("bucket sequence exact (deterministic largest-deficit interleave); "
                          "composition statistical"),
    "hf-group-by-length": ("exact (transformers LengthGroupedSampler + accelerate sharding, after the "
                           "DataLoader's draw of its base seed) when torch's global RNG held the "
                           "seed when the first epoch was drawn and training draws nothing from it "
                           "(no dropout on the CPU generator) before later epochs; else statistical"),
    "hf-random": "exact (accelerate SeedableRandomSampler, seed + epoch; the HF Trainer's default)",
    "torch-distributed": "exact (torch DistributedSampler, seed + epoch, set_epoch called each epoch)",
    "fairseq": ("exact (fairseq batch_by_size, frozen batches, numpy_seed(seed + epoch) batch "
                "shuffle; LanguagePairDataset order)"),
    "lhotse": ("exact (Lhotse DynamicBucketingSampler, sync_buckets: bucket picks from Random(1234) "
               "whatever the seed; samples streamed in the order given)"),
}


@dataclass(frozen=True)
class Plan:
    """How batches are packed. ``bounds`` are bucket edges: bucket k holds
    bounds[k] <= length < bounds[k+1] (exclusive upper bound, as in the seed's [.., 8193])."""

    bounds: tuple[int, ...]
    token_budget: int = 49152
    max_batch_size: int = 64
    max_seq_len: int = 8192
    bs_from: str = "bound"  # batch size from budget // exclusive bound ('bound') or // (bound - 1)
    grad_accum: int = 1  # micro-batches per optimizer step and rank
    world_size: int = 1  # data-parallel ranks: micro-batch j goes to rank j mod W
    per_device_batch: int | None = None  # fixed-count samplers' batch size (None: max_batch_size)
    batch_multiple: int = 8  # fairseq's required_batch_size_multiple
    lhotse_buckets: int = 10  # Lhotse's num_buckets (equal-duration bins)
    lhotse_buffer: int = 20_000  # Lhotse's buffer_size
    bucket_shuffle: bool = False  # Lhotse's shuffle: the order inside a bucket is random
    # int64 draws torch's DataLoader makes from the global generator before each epoch's
    # permutation (its iterator's base seed): 1 for the HF Trainer, 0 for the sampler alone
    loader_draws: int = 1

    @property
    def device_batch(self) -> int:
        """Samples per micro-batch for the fixed-count samplers (hf-*, torch-distributed)."""
        return self.per_device_batch or self.max_batch_size

    @property
    def per_step(self) -> int:
        """Micro-batches per optimizer step, all ranks together."""
        return max(1, self.grad_accum * self.world_size)

    @property
    def k(self) -> int:
        return len(self.bounds) - 1

    def bucket_batch_sizes(self) -> list[int]:
        """Samples per batch in each bucket: min(max_batch_size, budget // divisor); the seed's
        49152 // 8193 = 5 ('bound') vs 49152 // 8192 = 6 ('max')."""
        div = [b - (1 if self.bs_from == "max" else 0) for b in self.bounds[1:]]
        return [max(1, min(self.max_batch_size, self.token_budget // max(1, d))) for d in div]


@dataclass
class Epoch:
    """One epoch's batches in feed order."""

    bucket: torch.Tensor  # (n_batches,) bucket of each batch (of its longest sample)
    size: torch.Tensor  # (n_batches,) samples per batch
    max_len: torch.Tensor  # (n_batches,)
    tokens: torch.Tensor  # (n_batches,) real tokens
    samples: torch.Tensor  # (n_samples,) sample ids in feed order (empty: built without samples)
    offsets: torch.Tensor  # (n_batches + 1,) where each batch starts in ``samples`` (or empty)

    @property
    def n(self) -> int:
        return int(self.bucket.numel())


def bucketize(lengths: torch.Tensor, plan: Plan) -> torch.Tensor:
    """Each length's bucket index (0..K-1) under the plan's exclusive upper bounds."""
    edges = torch.tensor(plan.bounds[1:-1], dtype=lengths.dtype, device=lengths.device)
    return torch.bucketize(lengths, edges, right=True)  # (n,) 0..K-1


_gen = frameworks.generator  # one seeded CPU generator: the same numbers on every machine


def _perm(n: int, gen: torch.Generator, device: torch.device) -> torch.Tensor:
    """A random permutation drawn on the CPU and moved to ``device``: CUDA's generator draws other
    numbers, and a seed must name the same batch sequence on every machine (a few ms for 1M)."""
    return torch.randperm(n, generator=gen).to(device)


def _from_groups(lengths: torch.Tensor, order: torch.Tensor, batch_id: torch.Tensor, n_batches: int,
                 plan: Plan, batch_order: torch.Tensor | None, samples: bool = True) -> Epoch:
    """Per-batch tables from samples in ``order`` with their batch ids (ascending). ``samples``:
    also the sample ids in feed order (a Monte-Carlo over seeds needs only the batch tables)."""
    dev = lengths.device
    lens = lengths.index_select(0, order)  # (index_select: several times faster than [] on CPU)
    size = torch.bincount(batch_id, minlength=n_batches)
    tokens = torch.zeros(n_batches, dtype=torch.int64, device=dev).scatter_add_(0, batch_id, lens)
    max_len = torch.zeros(n_batches, dtype=torch.int64, device=dev).scatter_reduce_(
        0, batch_id, lens, reduce="amax", include_self=False)
    bucket = bucketize(max_len, plan)
    if batch_order is not None:  # reorder the batches (and, when kept, the samples with them)
        if samples:
            start = torch.cumsum(size, 0) - size
            sizes = size.index_select(0, batch_order)
            new_start = torch.cumsum(sizes, 0) - sizes
            shift = torch.repeat_interleave(start.index_select(0, batch_order) - new_start, sizes)
            order = order.index_select(0, shift + torch.arange(int(sizes.sum()), device=dev))
        size, tokens, max_len, bucket = (t.index_select(0, batch_order)
                                         for t in (size, tokens, max_len, bucket))
    if not samples:
        none = torch.empty(0, dtype=torch.int64, device=dev)
        return Epoch(bucket, size, max_len, tokens, none, none)
    offsets = torch.zeros(n_batches + 1, dtype=torch.int64, device=dev)
    offsets[1:] = torch.cumsum(size, 0)
    return Epoch(bucket, size, max_len, tokens, order, offsets)


def _greedy_sizes(lens: np.ndarray, budget: int, max_bs: int) -> np.ndarray:
    """Greedy packing with dynamic padding: a batch grows while count × max length <= budget."""
    sizes = []
    i, n = 0, len(lens)
    steps = np.arange(1, max_bs + 1)
    while i < n:
        w = lens[i:i + max_bs]
        ok = np.maximum.accumulate(w) * steps[:len(w)] <= budget
        k = len(w) if ok.all() else max(1, int(np.argmin(ok)))
        sizes.append(k)
        i += k
    return np.asarray(sizes, dtype=np.int64)


def _packed(lengths: torch.Tensor, order: torch.Tensor, plan: Plan, batch_order_seed: int | None,
            samples: bool = True) -> Epoch:
    sizes = torch.from_numpy(_greedy_sizes(lengths.index_select(0, order).cpu().numpy(), plan.token_budget,
                                           plan.max_batch_size)).to(lengths.device)
    n_b = int(sizes.numel())
    batch_id = torch.repeat_interleave(torch.arange(n_b, device=lengths.device), sizes)
    perm = None
    if batch_order_seed is not None:
        perm = _perm(n_b, _gen(batch_order_seed), lengths.device)
    return _from_groups(lengths, order, batch_id, n_b, plan, perm, samples)


@dataclass(frozen=True)
class BucketLayout:
    """What a bucketed strategy's epoch owes to the lengths and the plan alone, whatever the seed:
    each sample's bucket, and the batch id of each position once the samples are grouped by
    bucket (bucket k's run of batch ids is first[k] + position // its batch size)."""
    buckets: torch.Tensor  # int16 (small keys: gathered and sorted 3x faster)
    batch_id: torch.Tensor
    batches_per_bucket: torch.Tensor


def bucket_layout(lengths: torch.Tensor, plan: Plan) -> BucketLayout:
    """``BucketLayout`` of ``lengths`` (clamped to the plan's max_seq_len) under ``plan``."""
    dev = lengths.device
    b = bucketize(lengths, plan).to(torch.int16)
    bs = torch.tensor(plan.bucket_batch_sizes(), device=dev)
    counts = torch.bincount(b.long(), minlength=plan.k)
    n_k = (counts + bs - 1) // bs
    first = torch.cumsum(n_k, 0) - n_k
    batch_id = torch.cat([torch.arange(c, device=dev) // size + f for c, size, f in
                          zip(counts.tolist(), bs.tolist(), first.tolist(), strict=True)])
    return BucketLayout(b, batch_id, n_k)


def _bucketed(lengths: torch.Tensor, plan: Plan, seed: int, interleave: bool, samples: bool = True,
              layout: BucketLayout | None = None) -> Epoch:
    dev = lengths.device
    g = _gen(seed)
    layout = layout or bucket_layout(lengths, plan)
    b, batch_id, n_k = layout.buckets, layout.batch_id, layout.batches_per_bucket
    perm = _perm(lengths.numel(), g, dev)
    order = perm.index_select(0, torch.sort(b.index_select(0, perm), stable=True).indices)  # by bucket
    n_b = int(n_k.sum())
    if interleave:
        # largest-deficit interleave (Megatron's blending): buckets run dry together and a
        # bucket with share p never runs longer than about ceil(1 / (1 - p)) batches
        seq = torch.tensor(_largest_deficit(tuple(n_k.tolist())), device=dev)
        batch_order = torch.empty(n_b, dtype=torch.int64, device=dev)
        # batch ids are bucket-major, so the i-th position of bucket k takes batch first[k] + i
        batch_order[torch.sort(seq, stable=True).indices] = torch.arange(n_b, device=dev)
    else:
        batch_order = _perm(n_b, g, dev)
    return _from_groups(lengths, order, batch_id, n_b, plan, batch_order, samples)


@lru_cache(maxsize=16)
def _largest_deficit(counts: tuple[int, ...]) -> list[int]:
    """The bucket of each position: next = argmax_k (share_k · t − taken_k), among non-empty."""
    total = sum(counts)
    share = [c / total for c in counts]
    taken = [0] * len(counts)
    out = []
    for t in range(1, total + 1):
        best, k = -1e18, -1
        for i, c in enumerate(counts):
            if taken[i] < c:
                d = share[i] * t - taken[i]
                if d > best:
                    best, k = d, i
        out.append(k)
        taken[k] += 1
    return out


class Sorted:
    """static-sorted keeps its batches across epochs: built once, order shuffled per epoch."""

    def __init__(self, lengths: torch.Tensor, plan: Plan):
        order = torch.sort(lengths, stable=True).indices
        self.base = _packed(lengths, order, plan, None)
        self.lengths, self.plan = lengths, plan

    def epoch(self, seed: int, samples: bool = True) -> Epoch:
        e = self.base
        perm = _perm(e.n, _gen(seed), e.bucket.device)
        if not samples:  # the same batches in another order
            none = e.samples[:0]
            bucket, size, max_len, tokens = (t.index_select(0, perm)
                                             for t in (e.bucket, e.size, e.max_len, e.tokens))
            return Epoch(bucket, size, max_len, tokens, none, none)
        n_b = e.n
        batch_id = torch.repeat_interleave(torch.arange(n_b, device=e.bucket.device), e.size)
        return _from_groups(self.lengths, e.samples, batch_id, n_b, self.plan, perm)


def _sequence(lengths: torch.Tensor, plan: Plan, order: np.ndarray, sizes: np.ndarray, samples: bool = True
              ) -> Epoch:
    """An epoch from a framework's global micro-batch sequence (sample ids and batch sizes)."""
    dev = lengths.device
    sizes_t = torch.from_numpy(sizes).to(dev)
    n_b = int(sizes_t.numel())
    batch_id = torch.repeat_interleave(torch.arange(n_b, device=dev), sizes_t)
    return _from_groups(lengths, torch.from_numpy(order).to(dev), batch_id, n_b, plan, None, samples)


def _framework(strategy: str, lengths: torch.Tensor, plan: Plan, seed: int, epochs: int, samples: bool = True,
               seen: torch.Tensor | None = None) -> list[Epoch]:
    """The epochs a real framework's sampler makes (``frameworks``), as Epochs. ``seen``: the
    lengths the sampler orders by (the samples' full lengths: a sampler sorts and packs before
    any truncation), ``lengths`` those the batches are measured with."""
    lens = (seen if seen is not None else lengths).cpu().numpy()
    n, bs, world = len(lens), plan.device_batch, plan.world_size
    out = []
    if strategy == "fairseq":
        frozen = frameworks.fairseq_batches(lens, plan.token_budget, plan.max_batch_size,
                                            plan.batch_multiple, seed)
        return [_sequence(lengths, plan, *frameworks.fairseq_epoch(frozen, seed, e), samples)
                for e in range(epochs)]
    if strategy == "lhotse":
        bins = frameworks.lhotse_bins(lens, plan.lhotse_buckets)
        return [_sequence(lengths, plan, *frameworks.lhotse_epoch(
            lens, plan.token_budget, plan.max_batch_size, bins, plan.lhotse_buffer, plan.bucket_shuffle,
            seed, e, world), samples) for e in range(epochs)]
    gen = _gen(seed)  # the grouped sampler draws epoch after epoch from one generator
    for e in range(epochs):
        if strategy == "hf-group-by-length":
            for _ in range(plan.loader_draws):  # the DataLoader's base seed, drawn first
                torch.empty((), dtype=torch.int64).random_(generator=gen)
            seq = frameworks.shard_even(frameworks.hf_grouped_indices(lens, bs * plan.grad_accum, gen),
                                        bs, world)
        elif strategy == "hf-random":
            seq = frameworks.shard_even(frameworks.hf_random_indices(n, seed, e), bs, world)
        else:
            seq = frameworks.torch_distributed_batches(n, bs, world, seed, e)
        out.append(_sequence(lengths, plan, *seq, samples))
    return out


def build_epochs(strategy: str, lengths: torch.Tensor, plan: Plan, seed: int, epochs: int,
                 samples: bool = True, layout: BucketLayout | None = None) -> list[Epoch]:
    """The batches of ``epochs`` epochs in feed order (epoch e uses seed + e, or the framework's
    own rule: see ``frameworks``). ``samples=False``: the per-batch tables only (the same
    batches; ``Epoch.samples`` and ``offsets`` empty), for a Monte-Carlo over seeds; ``layout``:
    a bucketed strategy's ``bucket_layout`` of these lengths, made once for many seeds."""
    seen, lengths = lengths, lengths.clamp(max=plan.max_seq_len)
    if strategy == "static-sorted":
        s = Sorted(lengths, plan)
        return [s.epoch(seed + e, samples) for e in range(epochs)]
    if strategy in frameworks.FRAMEWORKS:  # (ordered by the lengths the sampler saw)
        return _framework(strategy, lengths, plan, seed, epochs, samples, seen)
    out = []
    for e in range(epochs):
        if strategy == "random":
            order = _perm(lengths.numel(), _gen(seed + e), lengths.device)
            out.append(_packed(lengths, order, plan, None, samples))
        elif strategy == "bucketed-shuffle":
            out.append(_bucketed(lengths, plan, seed + e, interleave=False, samples=samples, layout=layout))
        elif strategy == "stride-interleave":
            out.append(_bucketed(lengths, plan, seed + e, interleave=True, samples=samples, layout=layout))
        else:
            raise ValueError(f"unknown strategy {strategy!r} (known: {', '.join(STRATEGIES)})")
    return out
