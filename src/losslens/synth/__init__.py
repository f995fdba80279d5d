"""Seeded generators of training curves and logs, with ground truth. Used by tests, fixtures and
the benchmarks; public so that users can check losslens on curves they understand.

``curves``: loss curves (clean families and each failure kind), ``logs``: lines as real trainers
print them, ``lengths``: per-sample lengths for replay."""

from __future__ import annotations

from losslens.synth.curves import (
    CLEAN_FAMILIES,
    Curve,
    accuracy_drop,
    bands,
    bucket_dependent_log,
    clean,
    diverging,
    evaluated,
    ladder,
    periodic,
    starved_queue,
    stuck,
    throughput_drop,
    with_nan,
    with_spikes,
)
from losslens.synth.lengths import seed_lengths
from losslens.synth.logs import (
    DFLASH_T0,
    SEED004_T338,
    SEED004_VERBATIM,
    bucketed_run_lines,
    colon_lines,
    dflash_line,
    dflash_lines,
    fairseq_lines,
    hf_stdout_lines,
    jsonl_lines,
    megatron_lines,
    nanogpt_lines,
    olmo_lines,
    seed004_lines,
    torchtitan_lines,
    with_noise,
)

__all__ = [
    "CLEAN_FAMILIES",
    "Curve",
    "DFLASH_T0",
    "SEED004_T338",
    "SEED004_VERBATIM",
    "accuracy_drop",
    "bands",
    "bucket_dependent_log",
    "bucketed_run_lines",
    "clean",
    "colon_lines",
    "dflash_line",
    "dflash_lines",
    "diverging",
    "evaluated",
    "hf_stdout_lines",
    "jsonl_lines",
    "ladder",
    "fairseq_lines",
    "megatron_lines",
    "nanogpt_lines",
    "olmo_lines",
    "periodic",
    "seed004_lines",
    "torchtitan_lines",
    "seed_lengths",
    "starved_queue",
    "stuck",
    "throughput_drop",
    "with_nan",
    "with_noise",
    "with_spikes",
]
