"""The per-line readers (no vectorised path: colon, lightning, nanogpt…) against the plainest
loop that could stand in for them, in the same run: a `re.findall` of 'key: number' pairs per
line into per-key lists, turned into a polars frame. read_log does more (steps from words,
units, thousands separators, multi-line records, eval split, line accounting), so the ratio says
what that costs.

    python bench/line_readers.py [--lines 300000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import OUT, best_of, child_peak_rss_mb  # noqa: E402

from losslens import read_log  # noqa: E402

PAIR = re.compile(r"(\w+): ([-+\d.eE]+)")


def colon_log(n: int) -> Path:
    OUT.mkdir(exist_ok=True)
    path = OUT / f"colon_{n}.log"
    if not path.exists():
        with open(path, "w") as f:
            for i in range(n):
                f.write(f"2025-03-02 10:00:00,000 - INFO - Step {i}/{n} | loss: {3 - i / n:.4f} | lr: "
                        f"1.00e-04 | grad norm: 0.812 | tokens/s: 31,{i % 1000:03d}\n")
    return path


def plain_loop(path: Path):
    import polars as pl

    cols: dict[str, list[float]] = {}
    with open(path) as f:
        for line in f:
            for k, v in PAIR.findall(line):
                cols.setdefault(k, []).append(float(v))
    n = min(len(v) for v in cols.values())
    return pl.DataFrame({k: v[:n] for k, v in cols.items()})


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=300_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    path = colon_log(args.lines)
    rss = child_peak_rss_mb(f"from losslens import read_log; read_log({str(path)!r})")
    base = child_peak_rss_mb("import polars, numpy, losslens")
    ours = best_of(lambda: read_log(path), args.repeat)
    plain = best_of(lambda: plain_loop(path), args.repeat)
    log = read_log(path)
    assert log.format == "colon" and log.train.height == args.lines
    print(f"{args.lines:,} 'Step N | loss: x | …' lines")
    print(f"read_log (colon)  {ours:6.2f} s  ({ours / args.lines * 1e6:.1f} µs a line)")
    print(f"plain re loop     {plain:6.2f} s  ratio {ours / plain:.2f}")
    print(f"peak RSS read_log {rss:6.0f} MiB (interpreter + imports alone: {base:.0f} MiB); records "
          f"become frames every 50,000")


if __name__ == "__main__":
    main()
