"""Slow, obviously-correct references that the fast paths are checked against."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

from polars.testing import assert_frame_equal

from losslens import read_log
from losslens.logs.frame import LogData, assemble
from losslens.logs.reader import with_capture_times
from losslens.logs.registry import BY_NAME
from losslens.logs.sink import Accounting, Sink
from losslens.logs.sniff import Samples, strips
from losslens.logs.source import decode_lines, open_source
from losslens.logs.stream import read_file


def read_per_line(path: str | Path, format: str) -> LogData:
    """The log read line by line by ``format``'s per-line parser (no vectorised path)."""
    src = open_source(path)
    try:
        sink, acc = Sink(source_name=Path(src.name).name), Accounting()  # (as read_log)
        fmt = BY_NAME[format]
        head = decode_lines(src.head)
        strip = strips(fmt, head)
        first = next((x.rstrip("\r") for x in head if x.strip()), None)
        read_file(src, fmt, sink, acc, strip, first, columnar=False)
        return with_capture_times(assemble(src.name, format, sink, acc), Samples.of(head), strip)
    finally:
        src.close()


def read_kv_per_line(path: str | Path) -> LogData:
    """The key=value log read line by line (see ``read_per_line``)."""
    return read_per_line(path, "kv")


def assert_same_as_per_line(path: str | Path, format: str) -> None:
    """``read_log`` (its vectorised path where the file takes one) gives what the per-line parser
    gives: line accounting, skip reasons, both frames (column order aside), segments, names."""
    fast, slow = read_log(path, format=format), read_per_line(path, format)
    assert fast.lines.as_dict() == slow.lines.as_dict()
    assert dict(fast.lines.skipped) == dict(slow.lines.skipped)
    for a, b in ((fast.train, slow.train), (fast.eval, slow.eval)):
        assert sorted(a.columns) == sorted(b.columns)
        assert_frame_equal(a.select(sorted(a.columns)), b.select(sorted(a.columns)),
                           check_dtypes=False, check_exact=True)
    assert fast.segments == slow.segments
    assert fast.names == slow.names


def sprinkle(lines: list[str], odd: Sequence[str], times: int, rng: random.Random) -> list[str]:
    """``lines`` with ``times`` lines drawn from ``odd`` put in at random places (in place)."""
    for _ in range(times):
        lines.insert(rng.randrange(len(lines)), rng.choice(odd))
    return lines


def read_mlflow_run_per_line(path: str | Path) -> LogData:
    """An MLflow run folder read line by line with ``int``/``float`` and one record emitted per step
    (see ``mlflow.read_mlflow_run``: a step past int64 is a record of its own, after the others)."""
    from losslens.logs.base import local_time_ms

    sink, acc = Sink(), Accounting()
    rows: dict[int, dict] = {}
    lone: list[dict] = []
    metric_dir = Path(path) / "metrics"
    for f in sorted(p for p in metric_dir.rglob("*") if p.is_file()):
        name = f.relative_to(metric_dir).as_posix()
        for n, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
            acc.total += 1
            parts = line.split()
            if not parts:
                acc.blank += 1
                continue
            try:
                ts, value = int(parts[0]), float(parts[1])
                step = int(parts[2]) if len(parts) > 2 else 0
            except (ValueError, IndexError):
                acc.skip("not 'timestamp value step'", n, f"{name}: {line}")
                continue
            acc.parsed += 1
            head = {"_time": ts, "_line": acc.total}
            rec = rows.setdefault(step, head) if -2**63 <= step < 2**63 else (lone.append(head) or head)
            rec[name] = value
    for step, rec in [*sorted(rows.items()), *((None, r) for r in lone)]:
        t, line = rec.pop("_time"), rec.pop("_line")
        found, metrics = sink.metrics_from_pairs([(k, repr(v)) for k, v in rec.items()])
        sink.emit(line, step, metrics, time=local_time_ms(t) if -2**63 <= t < 2**63 else None)
    return assemble(str(path), "mlflow", sink, acc)


def spikes_reference(v, window: int, k: float, min_ratio: float, history: int):
    """The spike detector's causal rule written plainly (``detectors.spike.spikes``): the median
    and the MAD of the previous ``window`` log values, a NaN in front of the first."""
    import numpy as np

    from losslens.detectors.stats import rolling_median

    x = np.log(v)
    n, h = len(x), window // 2
    prev = np.concatenate([[np.nan], x[:-1]])
    med = rolling_median(prev, window, center=False)
    lagging = rolling_median(np.abs(prev - med), window, center=False)
    # the deviations from a centred median, of the window of records ending h + 1 before
    detrended = np.full(n, np.nan)
    if h >= 1 and n > 2 * h + 1:
        res = np.abs(x - rolling_median(x, 2 * h + 1, center=True))
        typical = rolling_median(res, window, center=False)  # (res[j - window + 1 .. j])
        for i in range(2 * h + 1, n):  # the last residual whose centred window is all before i
            detrended[i] = typical[i - h - 1]
    scale = np.fmin(lagging, detrended) * 1.4826
    lagging = lagging * 1.4826
    floor = np.nanmedian(scale[history:]) * 0.5 if len(x) > history else 0.0
    scale = np.maximum(np.nan_to_num(scale, nan=0.0), max(floor, 1e-3))
    floor = np.nanmedian(lagging[history:]) * 0.5 if len(x) > history else 0.0
    lagging = np.maximum(np.nan_to_num(lagging, nan=0.0), max(floor, 1e-3))
    level = np.exp(med)
    recent = np.array([np.nanmedian(v[max(0, i - 5):i]) if i else np.nan for i in range(n)])
    big = v >= min_ratio * (np.fmin(level, recent) if n > 5 else level)
    z = (x - med) / scale
    z[:history] = 0.0
    flagged = (z > k) & big
    flagged[:history] = False
    by_lagging = ((x - med) > k * lagging) & big
    by_lagging[:history] = False
    return flagged, level, np.nan_to_num(z), by_lagging


def sniff_reference(samples: Samples):
    """The sniff before generic formats could be passed over: every format tried in registry
    order, up to the first specific one that reads every line; the best score wins (the first on
    ties), a generic one yielding to the best specific one that reads a quarter of its lines."""
    from losslens.logs.registry import FORMATS

    scores: dict[str, int] = {}
    tried = []
    n = len(samples.raw)
    for f in FORMATS:
        score = samples.score(f)
        if score < n:
            score = max(score, samples.score(f, stripped=True))
        scores[f.name] = score
        tried.append(f)
        if n and score == n and not f.generic:
            break
    best = max(tried, key=lambda f: scores[f.name])
    if best.generic:
        specific = max((f for f in tried if not f.generic), key=lambda f: scores[f.name])
        if scores[specific.name] > 0 and 4 * scores[specific.name] >= scores[best.name]:
            best = specific
    return best if scores[best.name] > 0 else None
