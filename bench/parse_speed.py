"""read_log on a generated DFlash log against the naive per-line Python `re` loop (bench/naive.py)
that builds the same columns, in the same run; and read_log's peak RSS.

    python bench/parse_speed.py [--lines 1000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import best_of, child_peak_rss_mb, dflash_log  # noqa: E402
from naive import naive_read  # noqa: E402

from losslens import read_log  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    path = dflash_log(args.lines)
    size_mb = path.stat().st_size / 2**20
    # memory first, in fresh interpreters (a child forked from a big parent inherits its RSS)
    rss = child_peak_rss_mb(f"from losslens import read_log; read_log({str(path)!r})")
    base = child_peak_rss_mb("import polars, numpy, losslens")
    fast = best_of(lambda: read_log(path), args.repeat)
    naive = best_of(lambda: naive_read(str(path)), 1)
    print(f"file: {args.lines:,} DFlash lines, {size_mb:.0f} MiB")
    print(f"read_log          {fast:7.2f} s")
    print(f"naive re loop     {naive:7.2f} s   (same columns: numbers, lists, units, timestamps)")
    print(f"speed-up          {naive / fast:7.1f} x   (goal >= 5x)")
    print(f"peak RSS read_log {rss:7.0f} MiB (interpreter + imports alone: {base:.0f} MiB; "
          f"goal <= 400)")


if __name__ == "__main__":
    main()
