"""What a replay is asked (``ReplayRequest``, checked before anything heavy loads) and what it
answers (``ReplayReport``); ``run`` goes from one to the other. torch is imported by ``run`` only,
after the request has been found sound: a bad option costs one line, not a torch import."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from losslens.errors import UsageError
from losslens.replay.schema import SCHEMA

if TYPE_CHECKING:
    import numpy as np

    from losslens.findings import Report
    from losslens.logs import LogData

SEED_BOUNDS = (0, 770, 1216, 1728, 2432, 3296, 8193)  # the seed incident's buckets
MAX_REPLAYED = 200_000_000  # samples × epochs
MAX_OPTIMIZED_BUCKETS = 64  # the bound search is O(K · distinct lengths²)
Progress = Callable[[str, int, int], None]


def parse_bounds(text: str) -> tuple[int, ...]:
    """``--bounds 0,770,8193`` → (0, 770, 8193)."""
    try:
        return tuple(int(x) for x in text.split(","))
    except ValueError:
        raise UsageError(f"--bounds must be comma-separated integers, got {text!r}") from None


@dataclass(frozen=True, kw_only=True)
class ReplayRequest:
    """A replay: the lengths, the batching plan and strategy, what to compare or correlate.
    Every field is checked when the request is made (a UsageError naming the option)."""

    lengths: str | None = None
    batches: str | None = None  # what the run fed, per step (replay.fed): the exact answer
    column: str = "seq_len"
    bounds: tuple[int, ...] = SEED_BOUNDS
    token_budget: int = 49152
    max_batch_size: int = 64
    max_seq_len: int = 8192
    bs_from: str = "bound"
    strategy: str = "bucketed-shuffle"
    seed: int = 0
    epochs: int = 1
    grad_accum: int = 1
    world_size: int = 1
    per_device_batch: int | None = None  # the fixed-count samplers' batch (None: max_batch_size)
    batch_multiple: int = 8  # fairseq's --required-batch-size-multiple
    lhotse_buckets: int = 10  # Lhotse's num_buckets
    lhotse_buffer: int = 20_000  # Lhotse's buffer_size
    bucket_shuffle: bool = False  # Lhotse's shuffle
    log: str | None = None
    step_offset: int | None = None  # None: from the log's format (the HF Trainer counts from 1)
    allow_misalignment: bool = False  # correlate even when log and replay steps do not line up
    logged_loss: str = "mean"  # each logged loss: the mean over the logging interval, or the step's own
    order_free: bool = False  # the run's order is unknown: test what the strategy predicts in distribution
    null_seeds: int = 99
    compare: bool = False
    optimize_bounds: int | None = None
    device: str = "auto"
    page: bool = False  # the post-mortem page's data (needs log)
    loader_draws: int = 1  # the DataLoader's draws before each epoch's permutation (HF grouped)

    @property
    def plan(self):
        """The batching plan (``strategies.Plan``; imports torch)."""
        from losslens.replay.strategies import Plan

        return Plan(self.bounds, self.token_budget, self.max_batch_size, self.max_seq_len, self.bs_from,
                    self.grad_accum, self.world_size, self.per_device_batch, self.batch_multiple,
                    self.lhotse_buckets, self.lhotse_buffer, self.bucket_shuffle, self.loader_draws)

    def __post_init__(self) -> None:
        b = self.bounds
        if len(b) < 2 or any(y <= x for x, y in zip(b, b[1:], strict=False)):
            raise UsageError(f"--bounds must increase: {','.join(map(str, b))}")
        if b[-1] <= self.max_seq_len:
            raise UsageError(f"the last bound ({b[-1]}) must exceed --max-seq-len ({self.max_seq_len}): "
                             "bounds are exclusive")
        if not 0 <= self.seed < 1 << 63:
            raise UsageError(f"--seed takes 0 to 2**63-1, got {self.seed}")
        counts = {"--max-seq-len": self.max_seq_len, "--token-budget": self.token_budget,
                  "--max-batch-size": self.max_batch_size, "--epochs": self.epochs,
                  "--grad-accum": self.grad_accum, "--world-size": self.world_size,
                  "--null-seeds": self.null_seeds, "--batch-multiple": self.batch_multiple,
                  "--lhotse-buffer": self.lhotse_buffer, "--lhotse-buckets": self.lhotse_buckets - 1,
                  "--per-device-batch": 1 if self.per_device_batch is None else self.per_device_batch}
        for option, value in counts.items():
            if value < 1:
                raise UsageError(f"{option} must be >= 1, got {value}")
        k = self.optimize_bounds
        if k is not None and not 1 <= k <= MAX_OPTIMIZED_BUCKETS:
            raise UsageError(f"--optimize-bounds K takes 1 to {MAX_OPTIMIZED_BUCKETS} buckets, got {k}")
        if self.logged_loss not in ("mean", "last"):
            raise UsageError(f"--logged-loss takes mean or last, got {self.logged_loss!r}")
        if self.order_free and (self.log is None or self.lengths is None):
            raise UsageError("--order-free tests a log against a strategy: it needs --log and --lengths")
        if self.page and self.log is None:
            raise UsageError("--html needs --log (the page shows the replay under the log's loss)")
        if (self.lengths is None) == (self.batches is None):
            raise UsageError("pass --lengths (rebuild the batches a strategy makes) or --batches (what "
                             "the run fed, recorded per step), one of them")
        if self.batches is not None and self.log is None:
            raise UsageError("--batches needs --log: it is correlated with the log's loss")
        if self.batches is not None and (self.compare or self.optimize_bounds is not None):
            raise UsageError("--compare and --optimize-bounds rebuild batches from --lengths")


@dataclass(frozen=True)
class ReplayReport:
    """The answer: ``summary`` is the JSON report (schema losslens.replay/1, with the log's
    findings attributed to bucket runs when a log was given); ``epochs`` the chosen strategy's
    batches (for the per-batch and per-step tables); with a log, its data, its analysis and the
    replayed bucket of each logged step (for the page)."""

    request: ReplayRequest
    summary: dict[str, Any]
    epochs: list[Any] = field(repr=False)
    data: LogData | None = field(default=None, repr=False)
    analysed: Report | None = None
    step_bucket: np.ndarray | None = field(default=None, repr=False)
    bucket_steps: np.ndarray | None = field(default=None, repr=False)  # their logged steps (--batches)

    def batches(self):
        """Per-batch polars table: epoch, batch, step, rank, bucket, samples, lengths, tokens."""
        return self._tables[0]

    def steps(self):
        """Per-optimizer-step polars table (see ``engine.steps_frame``)."""
        return self._tables[1]

    @cached_property
    def _tables(self) -> tuple[Any, Any]:  # built once, when first asked for
        from losslens.replay.engine import batch_table, steps_frame

        batches = batch_table(self.epochs, self.request.plan)
        return batches, steps_frame(batches)


def _loss_of(log: str) -> tuple[LogData, np.ndarray, np.ndarray, np.ndarray | None]:
    """The log read, its loss as (steps, values) and its epoch column when it has one; a
    UsageError when it has no loss."""
    from losslens.logs import read_log

    data = read_log(log)
    if "loss" not in data.train.columns:
        raise UsageError("no loss metric in this log", source=log)
    epoch = data.train["epoch"].cast(float).to_numpy() if "epoch" in data.train.columns else None
    return data, data.train["step"].to_numpy(), data.train["loss"].cast(float).to_numpy(), epoch


def _attributed(data: LogData, summary: dict[str, Any]) -> Report:
    """The log analysed, its ladder and multimodal findings attributed to the batches when the
    correlation ties them (their dicts go into ``summary``)."""
    import dataclasses

    from losslens.analysis import analyze
    from losslens.replay.fed import attribute

    report = analyze(data)
    found = attribute(report.findings, summary.get("correlation", {}), summary["verdict"])
    summary["findings"] = [f.as_dict() for f in found]
    return dataclasses.replace(report, findings=found)


def _step_offset(given: int | None, fmt: str) -> tuple[int, str]:
    """The logged step of replayed step 0, and why: as given, else from the log's format."""
    if given is not None:
        return given, "as given (--step-offset)"
    if fmt in ("hf", "trainer-state"):
        return 1, "the HF Trainer logs its first optimizer step as step 1 (--step-offset sets another)"
    return 0, "the log's step 0 is the first optimizer step (--step-offset sets another)"


def run(request: ReplayRequest, progress: Progress | None = None) -> ReplayReport:
    """Replay ``request``: rebuild the batches, compare or optimise when asked, and with a log,
    correlate its loss with the replayed composition and attribute its findings."""
    r = request
    if r.batches is not None:
        return _fed(r)
    from losslens.replay.engine import load_lengths, replay

    assert r.lengths is not None
    lens = load_lengths(r.lengths, r.column)
    if len(lens) * r.epochs > MAX_REPLAYED:  # each replayed sample costs ~40 bytes per epoch
        raise UsageError(f"--epochs {r.epochs} × {len(lens):,} samples = {len(lens) * r.epochs:,} replayed "
                         f"samples, over the {MAX_REPLAYED:,} that fit in memory (~8 GB): replay fewer "
                         "epochs (the statistics settle within a few)")
    data = steps = loss = epoch = None
    offset_why = None
    if r.log is not None:
        data, steps, loss, epoch = _loss_of(r.log)
        offset, offset_why = _step_offset(r.step_offset, data.format)
        r = dataclasses.replace(r, step_offset=offset)
    plan = r.plan
    summary, eps = replay(lens, plan, r.strategy, r.seed, r.epochs, r.device, r.compare,
                          r.optimize_bounds, None if r.order_free else steps, loss, r.step_offset or 0,
                          r.null_seeds, progress, epoch, r.allow_misalignment, r.logged_loss)
    if offset_why is not None:
        summary["step_offset"] = {"value": r.step_offset, "why": offset_why}
    analysed = step_bucket = None
    if data is not None and r.order_free:
        assert steps is not None and loss is not None
        analysed = _order_free(r, data, steps, loss, epoch, summary, eps, lens)
    elif data is not None and "correlation" in summary:
        from losslens.replay.correlate import step_table

        analysed = _attributed(data, summary)
        if r.page:
            step_bucket = step_table(eps, plan)[1]
    return ReplayReport(r, summary, eps, data, analysed, step_bucket)


def _order_free(r: ReplayRequest, data: LogData, steps: np.ndarray, loss: np.ndarray,
                epoch: np.ndarray | None, summary: dict[str, Any], eps: list[Any], lens: np.ndarray
                ) -> Report:
    """--order-free: the log's bands and period against the strategy's bucket shares of steps and
    its period, from the lengths and parameters only (``orderfree``); the verdict into ``summary``."""
    import dataclasses

    import numpy as np

    from losslens.analysis import analyze
    from losslens.replay.align import check_alignment
    from losslens.replay.correlate import step_table
    from losslens.replay.fed import attribute, window_of
    from losslens.replay.orderfree import order_free

    plan = r.plan
    _, bucket = step_table(eps, plan)
    logged = steps.astype(np.int64) - (r.step_offset or 0)
    summary["alignment"] = check_alignment(logged, epoch, len(bucket), r.epochs,
                                           sum(e.n for e in eps) / r.epochs, plan.per_step,
                                           r.allow_misalignment)
    report = analyze(data)
    bands = None
    for f in report.findings:
        if f.kind == "multimodal" and f.metric == "loss":
            bands = [w for _, w in sorted(zip(f.evidence["modes"], f.evidence["shares"], strict=True))]
    (entry,) = [e for e in summary["strategies"] if e["name"] == r.strategy]
    period = entry["period_steps"] if entry["period_steps"] else None
    share = (np.bincount(bucket, minlength=len(plan.bounds) - 1) / max(1, len(bucket))).tolist()
    ok = np.isfinite(loss)
    summary["order_free"] = {"bucket_step_share": [round(x, 4) for x in share], "period_steps": period}
    import torch

    micro = torch.cat([e.bucket for e in eps]).cpu().numpy()  # each micro-batch's, in feed order
    summary["verdict"] = order_free(logged[ok], loss[ok], bands, share, period, bucket,
                                    window_of(logged, r.logged_loss), micro=micro, per_step=plan.per_step)
    band = summary["verdict"]["tests"].get("band_weights")
    if band:
        runs = _band_runs(r, logged[ok], loss[ok], band, lens, len(bucket))
        if runs:
            summary["verdict"]["tests"]["band_runs"] = runs
    found = attribute(report.findings, {}, summary["verdict"])
    summary["findings"] = [f.as_dict() for f in found]
    return dataclasses.replace(report, findings=found)


RUN_REPLAYS = 19  # other seeds replayed for the top band's run lengths


def _band_runs(r: ReplayRequest, logged: np.ndarray, loss: np.ndarray, band: dict, lengths: np.ndarray,
               n_steps: int) -> dict | None:
    """The order-free run-length test: the loss's top band (its share of the de-trended records)
    against the top bucket group's runs in replays of the strategy with other seeds (each laid on
    the ``n_steps`` steps of the replay the log was aligned with)."""
    import numpy as np
    import torch

    from losslens.detectors.stats import detrend
    from losslens.replay.correlate import seed_tables, to_length
    from losslens.replay.orderfree import band_runs

    plan = r.plan
    lens = torch.from_numpy(np.asarray(lengths))  # (build_epochs truncates where it counts)
    resid, _ = detrend(loss, 201)
    high = resid > np.quantile(resid, 1 - band["band_shares"][-1])
    top = band["bucket_groups"][-1]
    keep = (logged >= 0) & (logged < n_steps)
    if keep.sum() < 10:
        return None
    seeds = [r.seed + 1000 + i for i in range(RUN_REPLAYS)]
    predicted = [np.isin(to_length(bucket, n_steps)[logged[keep]], top)
                 for _, bucket in seed_tables(r.strategy, lens, plan, seeds, r.epochs)]
    return band_runs(high[keep], predicted)


def _fed(r: ReplayRequest) -> ReplayReport:
    """--batches: the log's loss against what the run fed, step by step (no sampler, no torch)."""
    import numpy as np

    from losslens.replay.fed import correlate_fed, load_fed

    assert r.batches is not None and r.log is not None
    fed = load_fed(r.batches, r.bounds)
    data, steps, loss, _ = _loss_of(r.log)
    if r.step_offset is None:  # (a record numbers its steps as the run logs them)
        r = dataclasses.replace(r, step_offset=0)
    assert r.step_offset is not None
    summary: dict[str, Any] = {
        "schema": SCHEMA, "mode": "fed", "exactness": "exact: the batches the run recorded",
        "batches": r.batches, "steps_recorded": int(len(fed.steps)), "bounds": list(r.bounds),
        "bucket_step_share": [round(float(x), 4) for x in
                              np.bincount(fed.bucket, minlength=len(r.bounds) - 1) / len(fed.bucket)],
        "correlation": correlate_fed(steps, loss, fed, r.step_offset, r.null_seeds, r.seed,
                                     allow_misalignment=r.allow_misalignment, logged_loss=r.logged_loss)}
    summary["verdict"] = summary["correlation"].pop("verdict")
    return ReplayReport(r, summary, [], data, _attributed(data, summary), fed.bucket,
                        fed.steps + r.step_offset)
