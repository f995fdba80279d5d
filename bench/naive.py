"""The baseline every parse benchmark compares with: a plain per-line Python ``re`` loop that
builds the same columns (numbers, lists, units, timestamps) as read_log's key=value reader."""

from __future__ import annotations

import re
from datetime import datetime

import polars as pl

PAIR = re.compile(r"([A-Za-z_][\w/.\-]*)[=~](\[[^\]]*\]|[^\s|,;\[\]()]+)")
RATE = re.compile(r"\(([\d.]+)([KMG]?)tok/s\)")
STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\]")
UNITS = {"b/s": 1.0, "d": 86400.0, "h": 3600.0, "s": 1.0, "ms": 1e-3}
SCALE = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9}


def value(text: str) -> float | list[float]:
    if text.startswith("["):
        return [float(x) for x in text[1:-1].split(",") if x.strip()]
    try:
        return float(text)
    except ValueError:
        m = re.match(r"([-+\d.eE]+)(.*)", text)
        return float(m.group(1)) * UNITS.get(m.group(2), float("nan")) if m else float("nan")


def naive_read(path: str) -> pl.DataFrame:
    cols: dict[str, list] = {}
    n = 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            pairs = PAIR.findall(line)
            if not pairs:
                continue
            row: dict[str, object] = {"line": lineno}
            m = STAMP.match(line)
            row["time"] = datetime.fromisoformat(m.group(1)) if m else None
            for k, v in pairs:
                row[k] = int(v) if k == "step" else value(v)
            r = RATE.search(line)
            if r:
                row["tokens_per_s"] = float(r.group(1)) * SCALE[r.group(2)]
            for k, v in row.items():
                if k not in cols:
                    cols[k] = [None] * n
                cols[k].append(v)
            n += 1
            for col in cols.values():
                if len(col) < n:
                    col.append(None)
    return pl.DataFrame(cols)
