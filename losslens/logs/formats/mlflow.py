"""MLflow: a metric file of "timestamp value step" lines, and a file-store run folder."""

from __future__ import annotations

import re
from pathlib import Path

from losslens.errors import FormatError
from losslens.logs.base import COMMON_NOISE, Format, LineParser, RegexLineParser
from losslens.logs.sink import Accounting, Sink

# --- MLflow metric file: "timestamp value step" ------------------------------------------------
MLFLOW_LINE = re.compile(r"^(\d{10,13}) ([-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf|-inf|NaN|Infinity))"
                         r"(?: (\d+))?$")


class _MlflowMetricParser(RegexLineParser):
    noise = COMMON_NOISE

    def feed(self, lineno: int, line: str) -> str | None:
        m = MLFLOW_LINE.match(line.strip())
        if not m:
            return "not 'timestamp value step'"
        from datetime import datetime

        name = self.sink.source_name or "value"
        found, metrics = self.sink.metrics_from_pairs([(name, m.group(2))])
        t = datetime.fromtimestamp(int(m.group(1)) / (1000 if len(m.group(1)) > 10 else 1))
        if not self.sink.emit(lineno, int(m.group(3) or 0), metrics, time=t):
            return "no training metric"
        return None


class MlflowMetric(Format):
    """--format mlflow: an MLflow metric file (timestamp value step per line)."""
    name = "mlflow"
    title = ("MLflow file store: a run folder (mlruns/<exp>/<run>/metrics/*) or one metric file "
             "('timestamp value step' lines; the file name is the metric)")
    example = "1701361200123 2.4977 10"

    def sniff(self, lines: list[str]) -> int:
        return sum(1 for x in lines if MLFLOW_LINE.match(x.strip()))

    def parser(self, sink: Sink) -> LineParser:
        return _MlflowMetricParser(sink)


def is_mlflow_run(path: Path) -> bool:
    """A folder of an MLflow file store run (meta.yaml and a metrics/ folder)."""
    return path.is_dir() and (path / "metrics").is_dir() and (path / "meta.yaml").exists()


def read_mlflow_run(path: Path, sink: Sink, acc: Accounting) -> None:
    """mlruns/<experiment>/<run>/metrics/<name>: 'timestamp value step' per line."""
    from datetime import datetime

    rows: dict[int, dict] = {}
    metric_dir = path / "metrics"
    files = sorted(p for p in metric_dir.rglob("*") if p.is_file())
    if not files:
        raise FormatError("no metric files in this MLflow run", source=str(path))
    for f in files:
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
            rec = rows.setdefault(step, {"_time": ts, "_line": acc.total})
            rec[name] = value
    for step in sorted(rows):
        rec = rows[step]
        t, line = rec.pop("_time"), rec.pop("_line")
        found, metrics = sink.metrics_from_pairs([(k, repr(v)) for k, v in rec.items()])
        sink.emit(line, step, metrics, time=datetime.fromtimestamp(t / 1000))
