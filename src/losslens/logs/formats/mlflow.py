"""MLflow: a metric file of "timestamp value step" lines, and a file-store run folder."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import polars as pl

from losslens.errors import FormatError
from losslens.logs.base import COMMON_NOISE, Format, LineParser, RegexLineParser, local_time_ms, whole
from losslens.logs.columnar import (
    add_rows,
    any_of,
    local_times,
    matched,
    metric_columns,
)
from losslens.logs.fields import (
    less_rows,
)
from losslens.logs.names import canonical
from losslens.logs.sink import INT64, Accounting, Sink

# --- MLflow metric file: "timestamp value step" ------------------------------------------------
# (the value's digits split only at a '.', see names.NUMBER)
MLFLOW_LINE = re.compile(r"^(\d{10,13}) ([-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|nan|inf|-inf|NaN|Infinity))"
                         r"(?: (\d+))?$")


class _MlflowMetricParser(RegexLineParser):
    noise = COMMON_NOISE

    def feed(self, lineno: int, line: str) -> str | None:
        m = MLFLOW_LINE.match(line.strip())
        if not m:
            return "not 'timestamp value step'"
        name = self.sink.source_name or "value"
        found, metrics = self.sink.metrics_from_pairs([(name, m.group(2))])
        t = local_time_ms(whole(m.group(1)) * (1 if len(m.group(1)) > 10 else 1000))
        if not self.sink.emit(lineno, whole(m.group(3) or '0'), metrics, time=t):
            return "no training metric"
        return None



# mlflow.MLFLOW_LINE as the columns read it: ASCII digits only (Python's \d takes any digit, and
# int() reads them), the line exactly that (the per-line parser strips it first)
_MLFLOW = (r"^(?<ts>[0-9]{10,13}) (?<value>[-+]?(?:[0-9]+\.?[0-9]*(?:[eE][-+]?[0-9]+)?|nan|inf|-inf|"
           r"NaN|Infinity))(?: (?<step>[0-9]+))?$")


def mlflow_rows(text: pl.Series, lineno: pl.Series, sink: Sink, parser: object = None) -> pl.Series:
    """An MLflow metric file's 'timestamp value step' lines: one metric, named by the file, at
    the local wall time (``columnar.local_times``) of the timestamp, in ms or s."""
    hit, g = matched(text, _MLFLOW)
    if not hit.any():
        return hit
    ts = g["ts"].cast(pl.Int64)
    ms = pl.select(pl.when(g["ts"].str.len_bytes() > 10).then(pl.lit(ts)).otherwise(pl.lit(ts) * 1000))
    when = local_times(ms.to_series())
    step = pl.select(pl.when(g["step"].is_null()).then(0).otherwise(g["step"].cast(pl.Int64, strict=False))
                     ).to_series()
    _, cols, unread = metric_columns(sink, [sink.source_name or "value"], [g["value"]], exact=True)
    bad = any_of(unread, len(g))
    add_rows(sink, {"step": step, "line": lineno.filter(hit), "time": when}, cols, bad)
    return less_rows(hit, bad)


class MlflowMetric(Format):
    """--format mlflow: an MLflow metric file (timestamp value step per line)."""
    name = "mlflow"
    title = ("MLflow file store: a run folder (mlruns/<exp>/<run>/metrics/*) or one metric file "
             "('timestamp value step' lines; the file name is the metric)")
    example = "1701361200123 2.4977 10"
    rows = staticmethod(mlflow_rows)  # column-wise for large files

    def sniff(self, lines: list[str]) -> int:
        return sum(1 for x in lines if MLFLOW_LINE.match(x.strip()))

    def parser(self, sink: Sink) -> LineParser:
        return _MlflowMetricParser(sink)


def is_mlflow_run(path: Path) -> bool:
    """A folder of an MLflow file store run (meta.yaml and a metrics/ folder)."""
    return path.is_dir() and (path / "metrics").is_dir() and (path / "meta.yaml").exists()


# a metric file's line as the columns read it (any other line: Python's int/float decide)
RUN_LINE = (r"^(?<ts>-?[0-9]{1,15}) (?<value>[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)"
            r"(?: (?<step>-?[0-9]{1,18}))?$")


def read_mlflow_run(path: Path, sink: Sink, acc: Accounting) -> None:
    """mlruns/<experiment>/<run>/metrics/<name>: 'timestamp(ms) value step' per line. One record
    per step, with every metric logged at it; its line and wall time are those of the first line
    (in file order) at that step; a metric logged twice at one step keeps its last value. A step
    past int64 is no step: such a line is a record of its own, after the others. A timestamp
    that is no time (past the year 9999) leaves the record without one."""
    import polars as pl

    from losslens.logs.columnar import add_rows, local_times, metric_columns

    metric_dir = path / "metrics"
    files = sorted(p for p in metric_dir.rglob("*") if p.is_file())
    if not files:
        raise FormatError("no metric files in this MLflow run", source=str(path))
    parts, names = [], []
    for i, f in enumerate(files):
        names.append(f.relative_to(metric_dir).as_posix())
        lines = f.read_text(errors="replace").splitlines()
        parts.append(_metric_rows(f"file{i}", lines, acc.total + 1, acc, names[-1]))
        acc.total += len(lines)
    rows = pl.concat(parts)  # (each file's column named by its place: a file may be named 'step')
    keyed = rows.filter(pl.col("step").is_not_null())
    heads = keyed.group_by("step", maintain_order=True).agg(pl.col("line").first(), pl.col("ts").first())
    if keyed.height:
        values = keyed.group_by("step", "name", maintain_order=True).agg(pl.col("value").last())
        heads = heads.join(values.pivot(on="name", index="step", values="value"), on="step", how="left")
    lone = rows.filter(pl.col("step").is_null())  # (steps past int64)
    if lone.height:
        lone = lone.select("step", "line", "ts", "name", "value").pivot(
            on="name", index=["step", "line", "ts"], values="value")
        heads = pl.concat([heads.sort("step"), lone], how="diagonal_relaxed")
    else:
        heads = heads.sort("step")
    held = [i for i in range(len(names)) if f"file{i}" in heads.columns]
    _, cols, _ = metric_columns(sink, [names[i] for i in held], [heads[f"file{i}"] for i in held])
    # files that give one canonical name ('loss', 'train/loss'): it is shown as the one that holds
    # the first value, step by step (the first in file order at that step)
    same: dict[str, list[int]] = {}
    for i in held:
        same.setdefault(canonical(names[i]), []).append(i)
    for name, idx in same.items():
        if len(idx) > 1 and name in sink.names:
            has = heads.select(pl.col(f"file{i}").is_not_null().alias(str(i)) for i in idx)
            row = has.select(pl.any_horizontal(pl.all()).arg_max()).item()
            sink.names[name] = next(names[i] for i in idx if has[str(i)][row]).strip()
    n_idle = len(sink.idle_lines)
    meta = {"step": heads["step"], "line": heads["line"], "time": local_times(heads["ts"])}
    add_rows(sink, meta, cols, None)
    del sink.idle_lines[n_idle:]  # (a step with no training metric: its lines were read all the same)


def _metric_rows(column: str, lines: list[str], first: int, acc: Accounting, shown: str) -> Any:
    """One metric file's lines as rows (name: ``column``, line, step, ts, value); blank and
    unreadable lines accounted in ``acc`` (``shown``: the file's name there). The common line is
    read column-wise, any other by ``int``/``float``."""
    import numpy as np
    import polars as pl

    text = pl.Series("text", lines, dtype=pl.String)
    g = text.str.extract_groups(RUN_LINE).struct.unnest()
    hit = g["ts"].is_not_null()
    line = pl.Series("line", np.arange(first, first + len(lines), dtype=np.int64))
    fast = pl.DataFrame({"line": line, "step": g["step"].cast(pl.Int64).fill_null(0),
                         "ts": g["ts"].cast(pl.Int64), "value": g["value"].cast(pl.Float64)}).filter(hit)
    slow: dict[str, list] = {"line": [], "step": [], "ts": [], "value": []}
    for i in np.flatnonzero(~hit.to_numpy()):
        parts = lines[i].split()
        if not parts:
            acc.blank += 1
            continue
        try:
            ts, value = int(parts[0]), float(parts[1])
            step = int(parts[2]) if len(parts) > 2 else 0
        except (ValueError, IndexError):
            acc.skip("not 'timestamp value step'", int(i) + 1, f"{shown}: {lines[i]}")
            continue
        slow["line"].append(first + int(i))
        slow["step"].append(step if -INT64 <= step < INT64 else None)
        slow["ts"].append(ts if -INT64 <= ts < INT64 else None)
        slow["value"].append(value)
    acc.parsed += fast.height + len(slow["line"])
    schema = {"line": pl.Int64, "step": pl.Int64, "ts": pl.Int64, "value": pl.Float64}
    rows = pl.concat([fast, pl.DataFrame(slow, schema=schema)]).sort("line")
    return rows.with_columns(pl.lit(column).alias("name"))
