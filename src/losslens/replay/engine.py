"""The replay itself (torch): batches rebuilt by a strategy, their order statistics, the longest
same-bucket run against chance, bounds, and the correlation with a logged loss."""
from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import torch

from losslens.replay.bounds import bound_efficiency, optimize_bounds
from losslens.replay.lengths import load_lengths
from losslens.replay.order import order_stats, run_lengths, shuffled_max_runs
from losslens.replay.schema import SCHEMA
from losslens.replay.strategies import EXACTNESS, STRATEGIES, Epoch, Plan, build_epochs

CPU_SHUFFLED = 10_000_000  # batches shuffled in all for the longest-run Monte-Carlo on a CPU

__all__ = ["EXACTNESS", "SCHEMA", "STRATEGIES", "Epoch", "Plan", "batch_table", "build_epochs",
           "load_lengths", "pick_device", "replay", "steps_frame"]


def pick_device(name: str = "auto") -> torch.device:
    """The torch device: CUDA when asked for or (auto) present, else the CPU; --device cuda without CUDA
    is a UsageError."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        from losslens.errors import UsageError

        raise UsageError("--device cuda: no CUDA device is available here (use auto or cpu)")
    return torch.device(name)


def batch_table(epochs: list[Epoch], plan: Plan):
    """Per-batch polars table: epoch, index, step, rank, bucket, samples, lengths, tokens."""
    import polars as pl

    parts = []
    start = 0
    per, world_size = plan.per_step, plan.world_size
    for e, ep in enumerate(epochs):
        n = ep.n
        glob = np.arange(start, start + n)
        parts.append(pl.DataFrame({
            "epoch": np.full(n, e), "batch": np.arange(n), "step": glob // per,
            "rank": glob % max(1, world_size), "bucket": ep.bucket.cpu().numpy(),
            "samples": ep.size.cpu().numpy(), "max_len": ep.max_len.cpu().numpy(),
            "mean_len": (ep.tokens.double() / ep.size.double()).cpu().numpy(),
            "tokens": ep.tokens.cpu().numpy(), "padded_tokens": (ep.size * ep.max_len).cpu().numpy()}))
        start += n
    return pl.concat(parts)


def steps_frame(batches):
    """Per optimizer step, from the per-batch table: its batches, the bucket of its longest batch
    (the bucket the correlation uses), how many buckets it mixes, lengths and tokens."""
    import polars as pl

    return (batches.group_by("step", maintain_order=True)
            .agg(pl.col("epoch").first(), pl.len().alias("batches"),
                 pl.col("bucket").sort_by("max_len", descending=True).first(),
                 pl.col("bucket").n_unique().alias("distinct_buckets"),
                 pl.col("samples").sum(), pl.col("max_len").max(),
                 pl.col("max_len").mean().alias("mean_max_len"),
                 pl.col("tokens").sum(), pl.col("padded_tokens").sum()))


def max_run_null(epochs: list[Epoch], shuffles: int, seed: int) -> dict:
    """The longest same-bucket run of this batch sequence against the same batches in random
    orders (Monte-Carlo, all shuffles at once in torch; identical numbers on CPU and CUDA)."""
    bucket = torch.cat([e.bucket for e in epochs])
    observed = int(run_lengths(bucket).max()) if bucket.numel() else 0
    rows = max(1, min(64, 8_000_000 // max(1, bucket.numel())))  # ~64 MB per (rows, n) array
    null = shuffled_max_runs(bucket, shuffles, seed, chunk=rows)
    null_f = null.double()
    return {"shuffles": shuffles, "observed": observed, "mean": round(float(null_f.mean()), 2),
            "q05": round(float(torch.quantile(null_f, 0.05)), 1),
            "q95": round(float(torch.quantile(null_f, 0.95)), 1),
            "p_value": (1 + int((null >= observed).sum())) / (1 + shuffles)}


def replay(lengths: np.ndarray, plan: Plan, strategy: str = "bucketed-shuffle", seed: int = 0,
           epochs: int = 1, device: str = "auto",
           compare: bool = False, optimize: int | None = None, log_steps: np.ndarray | None = None,
           log_loss: np.ndarray | None = None, step_offset: int = 0, null_seeds: int = 99,
           progress: Callable[[str, int, int], None] | None = None, log_epoch: np.ndarray | None = None,
           allow_misalignment: bool = False, logged_loss: str = "mean") -> tuple[dict, list[Epoch]]:
    """The replay report (JSON-ready, schema losslens.replay/1) and the chosen strategy's epochs.
    ``progress(phase, done, total)`` is told how far each phase has got (for a progress bar). With
    a log, a step mismatch between log and replay is refused (UsageError) before the heavy work,
    unless ``allow_misalignment``."""
    dev = pick_device(device)
    lens = torch.from_numpy(np.asarray(lengths)).to(dev)  # (build_epochs truncates where it counts)
    names = list(STRATEGIES) if compare else [strategy]
    entries, chosen = [], None
    for i, name in enumerate(names):
        if progress:
            progress("replaying strategies", i, len(names))
        eps = build_epochs(name, lens, plan, seed, epochs)
        if name == strategy:
            chosen = eps
        stats = order_stats(eps, plan)
        entries.append({"name": name, "exactness": EXACTNESS[name], **stats})
        if progress:
            progress("replaying strategies", i + 1, len(names))
    report: dict = {"schema": SCHEMA, "samples": int(len(lengths)), "device": str(dev),
                    "plan": {"bounds": list(plan.bounds), "token_budget": plan.token_budget,
                             "max_batch_size": plan.max_batch_size, "max_seq_len": plan.max_seq_len,
                             "bucket_batch_size": plan.bucket_batch_sizes(), "bs_from": plan.bs_from},
                    "strategy": strategy, "seed": seed, "epochs": epochs, "grad_accum": plan.grad_accum,
                    "world_size": plan.world_size, "per_device_batch": plan.device_batch,
                    "strategies": entries}
    notes = []
    if (over := int((lengths > plan.max_seq_len).sum())):
        notes.append(f"{over:,} samples are longer than --max-seq-len {plan.max_seq_len}: counted "
                     "truncated to it in the batches' lengths; the framework samplers order them by "
                     "their full lengths, as the frameworks do")
    if (alone := int((np.minimum(lengths, plan.max_seq_len) > plan.token_budget).sum())):
        notes.append(f"{alone:,} samples alone exceed the token budget {plan.token_budget}: each "
                     "forms a batch of one, over budget")
    from losslens.replay.frameworks import CHECKED_AGAINST, version_notes

    if strategy in CHECKED_AGAINST:
        report["checked_against"] = CHECKED_AGAINST[strategy]
        notes += version_notes(strategy)
    if notes:
        report["notes"] = notes
    if chosen is None:
        chosen = build_epochs(strategy, lens, plan, seed, epochs)
    alignment = None
    if log_steps is not None:  # refused here, before the heavy work, unless allowed
        from losslens.replay.align import check_alignment
        from losslens.replay.correlate import step_table

        n_steps = len(step_table(chosen, plan)[0])
        alignment = check_alignment(log_steps.astype(np.int64) - step_offset, log_epoch, n_steps, epochs,
                                    sum(e.n for e in chosen) / epochs, plan.per_step, allow_misalignment)
    if progress:
        progress("shuffling the batch order (longest run by chance)", 0, 1)
    n_batches = sum(e.n for e in chosen)
    # on the CPU, about ten million shuffled batches in all (902K samples x 6 epochs: 29
    # shuffles, 1.5 s); a GPU does all --null-seeds of them
    shuffles = null_seeds if dev.type == "cuda" else \
        min(null_seeds, max(19, CPU_SHUFFLED // max(1, n_batches)))
    report["max_run_null"] = max_run_null(chosen, shuffles, seed)
    if progress:
        progress("shuffling the batch order (longest run by chance)", 1, 1)
    clipped = np.minimum(lengths, plan.max_seq_len)
    if optimize:
        if progress:
            progress(f"optimising {optimize} bucket bounds", 0, 1)
        bounds = optimize_bounds(clipped, optimize)
        better = dataclasses.replace(plan, bounds=tuple(bounds))
        st = order_stats(build_epochs(strategy, lens, better, seed, 1), better)
        report["optimized_bounds"] = {
            "bounds": bounds, "padding_efficiency": round(bound_efficiency(clipped, bounds), 4),
            "given_padding_efficiency": round(bound_efficiency(clipped, list(plan.bounds)), 4),
            "bucket_batch_share": st["bucket_batch_share"], "batches_per_epoch": st["batches_per_epoch"],
            "objective": "padding to each bucket's longest sample (Σℓ / Σ n_k·max_k)"}
    if log_steps is not None and log_loss is not None:
        from losslens.replay.correlate import correlate

        def tick(done: int, total: int) -> None:
            if progress:
                progress("correlating: replays over null seeds", done, total)

        report["correlation"] = correlate(log_steps, log_loss, strategy, lens, plan, seed, epochs,
                                          step_offset, null_seeds, tick=tick, logged_loss=logged_loss,
                                          built=chosen, alignment=alignment)
        report["verdict"] = report["correlation"].pop("verdict")
    return report, chosen
