"""The samplers of real training stacks, re-created from their source, batch for batch.

Each function returns one epoch as the *global* sequence of micro-batches: micro-batch ``j`` goes to
rank ``j mod W`` and belongs to the epoch's optimizer step ``j // (W · GA)`` — the layout that
accelerate's ``BatchSamplerShard``, torch's ``DistributedSampler`` + ``DataLoader`` and fairseq's
``ShardedIterator`` + ``GroupedIterator`` all produce; an epoch's last micro-batches that do not
fill a step are a step of their own, and the next epoch starts a new one (``step_table``). A
micro-batch is an array of sample ids; the epoch is their concatenation (``order``) and the size
of each (``sizes``).

What each emulates (checked in ``tests/unit/replay/test_frameworks.py`` against the framework's
own code on the same lengths and seed: torch's samplers run there directly; transformers,
accelerate and fairseq through sequences recorded by ``fixtures/record_samplers.py``):

- ``hf-group-by-length`` — transformers ``LengthGroupedSampler`` (``get_length_grouped_indices``
  with batch size per-device × GA, mega-batches of min(50, n // (4·B)) batches sorted longest
  first, the longest sample swapped to the front) drawing from one torch generator seeded once:
  epoch e is its (e+1)-th permutation, as the Trainer's sampler draws epoch after epoch; then
  accelerate's ``BatchSamplerShard`` (batch j to rank j mod W; with W > 1 the epoch's tail is
  completed from its first samples, ``even_batches``).
- ``hf-random`` — the Trainer's default: accelerate's ``SeedableRandomSampler``, a permutation
  from a generator seeded ``seed + epoch`` (``seed`` is the Trainer's ``data_seed`` or ``seed``),
  batched and sharded as above.
- ``torch-distributed`` — ``DistributedSampler(shuffle=True, seed, drop_last=False)`` with
  ``set_epoch(e)`` called each epoch: a permutation seeded ``seed + epoch``, padded by wrapping to
  a multiple of W, rank r taking every W-th sample from r, each rank's ``DataLoader`` cutting
  batches of per-device size.
- ``fairseq`` — ``LanguagePairDataset.ordered_indices`` under ``numpy_seed(seed + 1)`` (a random
  permutation, stable-sorted by length: the permutation only breaks ties), ``batch_by_size``
  (greedy under ``max_tokens`` and ``max_sentences``, sizes a multiple of
  ``required_batch_size_multiple`` unless smaller, the last batch dropped when not a multiple),
  built once (``rebuild_batches`` off); each epoch e (fairseq counts from 1) shuffles the batch
  order with ``np.random.seed(seed + e)``; shards take every W-th batch.
- ``lhotse`` — Lhotse's ``DynamicBucketingSampler`` (map-style, ``sync_buckets`` on, not
  concurrent): equal-duration bins estimated from the first 10,000 samples, a streaming buffer,
  buckets picked by a ``Random(1234)`` that ignores the user's seed (the same picks every epoch),
  batches filled until one more of their longest would pass ``max_duration``; only the optional
  in-bucket shuffle uses ``seed + epoch``. The samples stream in the order given.

The permutations are torch's (``torch.randperm`` on the CPU generator) or numpy's legacy
``RandomState``, so the same seed names the same batches on every machine.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["CHECKED_AGAINST", "FIXED_SIZE", "FRAMEWORKS", "fairseq_batches", "fairseq_epoch",
           "hf_grouped_indices", "generator", "hf_random_indices", "lhotse_bins", "lhotse_epoch",
           "shard_even", "torch_distributed_batches", "version_notes"]

FRAMEWORKS = ("hf-group-by-length", "hf-random", "torch-distributed", "fairseq", "lhotse")
# the framework versions each emulation was checked against (fixtures/record_samplers.py, and
# tests/frameworks for the HF Trainer: a real run's record replayed batch for batch)
CHECKED_AGAINST = {
    "hf-group-by-length": {"transformers": "5.25.0", "accelerate": "1.16.0", "torch": "2.13.0"},
    "hf-random": {"transformers": "5.25.0", "accelerate": "1.16.0", "torch": "2.13.0"},
    "torch-distributed": {"torch": "2.13.0"},
    "fairseq": {"fairseq": "git 3d262bb2"},
    "lhotse": {"lhotse": "1.33.0"},
}


def version_notes(strategy: str) -> list[str]:
    """A note for each framework of ``strategy`` installed here at another version than the one
    its emulation was checked against (nothing is imported: the installed metadata is read)."""
    from importlib.metadata import PackageNotFoundError, version

    notes = []
    for package, checked in CHECKED_AGAINST.get(strategy, {}).items():
        try:
            installed = version(package)
        except PackageNotFoundError:
            continue
        if installed.split("+")[0] != checked:
            notes.append(f"{strategy} was checked against {package} {checked}; {installed} is "
                         "installed here: if the run used it, its sampler may differ")
    return notes
FIXED_SIZE = ("hf-group-by-length", "hf-random", "torch-distributed")  # batches of a fixed count


def generator(seed: int) -> torch.Generator:
    """A CPU torch generator seeded with ``seed``: what ``torch.manual_seed`` gives the global one."""
    return torch.Generator().manual_seed(int(seed))


def hf_grouped_indices(lengths: np.ndarray, batch_size: int, gen: torch.Generator) -> np.ndarray:
    """transformers' ``get_length_grouped_indices(lengths, batch_size, generator=gen)``: a random
    permutation cut into mega-batches of ``mult · batch_size`` (mult = min(n // (4 · batch_size),
    50), at least 1), each sorted longest first (ties keep the permutation's order), and the
    first sample of the mega-batch holding the longest one swapped with the very first."""
    n = len(lengths)
    mult = min(n // (batch_size * 4), 50) or 1
    m = mult * batch_size
    perm = torch.randperm(n, generator=gen).numpy()
    lens = np.asarray(lengths, dtype=np.int64)[perm]
    mega = np.arange(n) // m
    # stable sort by (mega-batch, descending length): ties keep the permutation's order
    order = perm[np.lexsort((-lens, mega))]
    heads = np.asarray(lengths)[order[::m]]
    k = int(np.argmax(heads))  # the first mega-batch whose head is the longest (torch.argmax's rule)
    if k:
        order[0], order[k * m] = order[k * m], order[0]
    return order


def hf_random_indices(n: int, seed: int, epoch: int) -> np.ndarray:
    """accelerate's ``SeedableRandomSampler`` at ``set_epoch(epoch)``: ``randperm`` from a
    generator seeded ``seed + epoch``."""
    return torch.randperm(n, generator=generator(seed + epoch)).numpy()


def shard_even(order: np.ndarray, batch_size: int, world_size: int) -> tuple[np.ndarray, np.ndarray]:
    """accelerate's ``BatchSamplerShard`` (``split_batches=False``, ``even_batches=True``): batches of
    ``batch_size`` consecutive samples, batch j to rank j mod W; with W > 1 the stream is completed
    to a whole number of W full batches with the epoch's first W batches' samples, cycled. With
    W = 1 accelerate does not wrap the sampler and the last batch stays short."""
    n = len(order)
    if world_size > 1 and n:
        block = world_size * batch_size
        need = -n % block
        if need:
            head = order[:block]
            head = np.tile(head, -(-block // len(head)))
            order = np.concatenate([order, head[:need]])
    n = len(order)
    sizes = np.full(n // batch_size, batch_size, dtype=np.int64)
    if n % batch_size:
        sizes = np.append(sizes, n % batch_size)
    return order, sizes


def torch_distributed_batches(n: int, batch_size: int, world_size: int, seed: int, epoch: int
                              ) -> tuple[np.ndarray, np.ndarray]:
    """torch ``DistributedSampler(shuffle=True, seed=seed, drop_last=False)`` after ``set_epoch(epoch)``
    on every rank, each rank's ``DataLoader`` cutting batches of ``batch_size``: as the global
    micro-batch sequence (rank r's b-th batch is micro-batch b · W + r)."""
    perm = torch.randperm(n, generator=generator(seed + epoch)).numpy()
    per_rank = -(-n // world_size)
    total = per_rank * world_size
    if total > n:  # padded by repeating the head (as often as needed)
        perm = np.concatenate([perm, np.tile(perm, -(-(total - n) // n))[: total - n]])
    local = perm.reshape(per_rank, world_size)  # local[i, r]: rank r's i-th sample
    order, sizes = [], []
    for start in range(0, per_rank, batch_size):
        chunk = local[start:start + batch_size]  # (b, W)
        order.append(chunk.T.reshape(-1))  # rank 0's batch, rank 1's batch, ...
        sizes += [len(chunk)] * world_size
    return np.concatenate(order), np.asarray(sizes, dtype=np.int64)


def fairseq_batches(lengths: np.ndarray, max_tokens: int, max_sentences: int, multiple: int,
                    seed: int) -> list[np.ndarray]:
    """fairseq's frozen batches: ``ordered_indices`` (permutation under ``numpy_seed(seed + 1)``,
    then a stable sort by length) cut by ``batch_by_size``."""
    lens = np.asarray(lengths, dtype=np.int64)
    perm = np.random.RandomState(seed + 1).permutation(len(lens)).astype(np.int64)
    idx = perm[np.argsort(lens[perm], kind="mergesort")]
    return _batch_by_size(idx, lens[idx], max_tokens, max_sentences, multiple)


def _batch_by_size(idx: np.ndarray, tokens: np.ndarray, max_tokens: int, max_sentences: int,
                   mult: int) -> list[np.ndarray]:
    """fairseq's ``batch_by_size_vec``: scan in order keeping a committed batch [start, end) and a
    tail [end, pos]; on overflow (too many sentences or tokens) the batch is closed, and the
    tail too when it alone overflows; otherwise the tail joins the batch whenever the size is
    below ``mult`` or a multiple of it. The last batch is dropped when ``mult`` > 1 and its size
    is not a multiple."""
    n = len(idx)
    if n == 0:
        return []
    ends = [0]
    batch_start = 0
    tail_max = batch_max = 0
    for pos in range(n):
        t = int(tokens[pos])
        tail_max = max(tail_max, t)
        new_end = pos + 1
        new_max = max(batch_max, tail_max)
        sentences = new_end - batch_start
        overflow = (max_sentences > 0 and sentences > max_sentences) or \
            (max_tokens > 0 and sentences * new_max > max_tokens)
        matches = sentences < mult or sentences % mult == 0
        if overflow:
            if max_tokens > 0 and tail_max * (new_end - ends[-1]) > max_tokens:
                ends.append(pos)
                tail_max = t
            batch_start = ends[-1]
            ends.append(ends[-1])  # a new batch begins where the last one closed
            new_max = tail_max
        if overflow or matches:
            ends[-1] = new_end
            batch_max = new_max
            tail_max = 0
    bounds = [0, *ends] if ends[-1] == n else [0, *ends, n]
    out = [idx[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    if mult > 1 and out and len(out[-1]) % mult:
        out = out[:-1]
    return out


def fairseq_epoch(batches: list[np.ndarray], seed: int, epoch: int) -> tuple[np.ndarray, np.ndarray]:
    """One epoch of fairseq's ``EpochBatchIterator``: the frozen batches shuffled with
    ``np.random.seed(seed + epoch + 1)`` (fairseq's epochs count from 1); shards take every W-th
    batch, which is the global sequence itself (the empty batches that pad the last shard feed
    nothing)."""
    order = np.random.RandomState(seed + epoch + 1).permutation(len(batches))
    shuffled = [batches[i] for i in order]
    sizes = np.asarray([len(b) for b in shuffled], dtype=np.int64)
    return (np.concatenate(shuffled) if shuffled else np.zeros(0, dtype=np.int64)), sizes


def lhotse_bins(lengths: np.ndarray, num_buckets: int, first: int = 10_000) -> list[float]:
    """Lhotse's ``estimate_duration_buckets`` over the first ``first`` samples: sorted lengths cut
    where the running total passes an equal share of the sum (equal total duration per bucket);
    ``num_buckets - 1`` boundaries or fewer. A length equal to a boundary goes to the lower bucket
    (``bisect_left``)."""
    sizes = np.sort(np.asarray(lengths[:first], dtype=np.float64))
    per = sizes.sum() / num_buckets
    bins: list[float] = []
    tot = 0.0
    for size in sizes.tolist():
        if tot > per:
            bins.append(size)
            tot = 0.0
        tot += size
    return bins


def lhotse_epoch(lengths: np.ndarray, max_duration: float, max_cuts: int | None, bins: list[float],
                 buffer_size: int, shuffle: bool, seed: int, epoch: int, world_size: int
                 ) -> tuple[np.ndarray, np.ndarray]:
    """One epoch of Lhotse's ``DynamicBucketingSampler`` (map-style, ``sync_buckets=True``,
    ``drop_last=False``, not concurrent, the samples streamed in file order): a buffer of
    ``buffer_size`` samples spread over the buckets; each batch from the bucket that a
    ``Random(1234)`` picks (the same pick for the W ranks of a step; an unready bucket gives way to
    its neighbours −1, +2, −3, …), filled in queue order (or ``Random(seed + epoch)``-shuffled)
    until one more of its longest would pass ``max_duration`` or it holds ``max_cuts``; then as
    many new samples read in. W batches per call, rank r keeping the r-th; at the end the last
    batches are pooled and split evenly over the ranks."""
    import bisect
    import random
    from collections import deque

    lens = [float(x) for x in np.asarray(lengths).tolist()]
    k = len(bins) + 1
    buckets: list[deque[int]] = [deque() for _ in range(k)]
    stream = iter(range(len(lens)))
    rng = random.Random(seed + epoch)
    bucket_rng = random.Random(1234)  # not the user's seed: fixed, and the same every epoch

    def collect(n: int) -> None:
        for _ in range(n):
            i = next(stream, None)
            if i is None:
                return
            buckets[bisect.bisect_left(bins, lens[i])].append(i)

    def full(count: int, longest: float) -> bool:  # TimeConstraint.close_to_exceeding
        return (max_cuts is not None and count >= max_cuts) or (count + 1) * longest > max_duration

    def ready(b: deque[int]) -> bool:
        longest = 0.0
        for count, i in enumerate(b, 1):
            longest = max(longest, lens[i])
            if full(count, longest):
                return True
        return False

    sel = [-1, 0]  # BucketSelectionState: the bucket picked and how many ranks used it

    def pick() -> int:  # BucketSelectionState.select_bucket_idx
        if sel[0] < 0 or sel[1] == world_size:
            sel[0], sel[1] = bucket_rng.randrange(k), 0
        sel[1] += 1
        return sel[0]

    def scan(pred) -> int | None:
        idx = pick()
        attempts, lo, hi = 0, idx, idx
        while not (0 <= idx < k and pred(buckets[idx])):
            if lo < 0 and hi >= k:
                return None
            attempts += 1
            idx += (1 if attempts % 2 == 0 else -1) * attempts
            lo, hi = min(lo, idx), max(hi, idx)
        return idx

    def next_batch() -> list[int] | None:
        saved = (bucket_rng.getstate(), list(sel))
        idx = scan(ready)
        if idx is None:
            bucket_rng.setstate(saved[0])
            sel[:] = saved[1]
            idx = scan(lambda b: len(b) > 0)
            if idx is None:
                return None
        b = buckets[idx]
        content = list(b)
        order = list(range(len(content)))
        if shuffle:
            rng.shuffle(order)
        batch, longest = [], 0.0
        for j in order:
            batch.append(j)
            longest = max(longest, lens[content[j]])
            if full(len(batch), longest):
                break
        if shuffle:
            for j in sorted(batch, reverse=True):
                del b[j]
        else:
            for _ in batch:
                b.popleft()
        collect(len(batch))
        return [content[j] for j in batch]

    collect(buffer_size)
    out: list[list[int]] = []
    done = False
    while not done:
        got: list[list[int]] = []
        for _ in range(world_size):
            batch = next_batch()
            if batch is None:
                done = True
                if world_size == 1:
                    break
                continue
            got.append(batch)
        if not got:
            break
        if len(got) < world_size:  # the end: pool what is left and split it over the ranks
            pooled = [i for g in got for i in g]
            chunk = 0
            while (diff := world_size - len(pooled)) > 0:
                pooled += pooled[:diff]
                chunk += 1
            size, extra = divmod(len(pooled), world_size)
            got, start = [], 0
            for r in range(world_size):
                end = start + size + (1 if r < extra else 0)
                got.append(pooled[start:end])
                start = end
        out += got
    sizes = np.asarray([len(b) for b in out], dtype=np.int64)
    order = np.asarray([i for b in out for i in b], dtype=np.int64)
    return order, sizes
