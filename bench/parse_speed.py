"""read_log on a generated DFlash log against two per-line Python loops in the same run: the
plainest one (a `re.findall` of key=value pairs, each value's text appended to its key's list,
one polars cast per column at the end: no lists, units or timestamps read) and one that builds
the same columns as read_log (bench/naive.py); and read_log's peak RSS.

    python bench/parse_speed.py [--lines 1000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import best_of, child_peak_rss_mb, dflash_log  # noqa: E402
from line_readers import KV_PAIR, _pairs_loop  # noqa: E402
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
    plain = best_of(lambda: _pairs_loop(KV_PAIR)(path), 1)
    naive = best_of(lambda: naive_read(str(path)), 1)
    print(f"file: {args.lines:,} DFlash lines, {size_mb:.0f} MiB")
    print(f"read_log          {fast:7.2f} s   ({args.lines / fast / 1e6:.2f} M lines/s)")
    print(f"plain re loop     {plain:7.2f} s   (text per key, one cast per column): "
          f"speed-up {plain / fast:.2f}x")
    print(f"same-columns loop {naive:7.2f} s   (numbers, lists, units, timestamps): "
          f"speed-up {naive / fast:.2f}x")
    print(f"peak RSS read_log {rss:7.0f} MiB (interpreter + imports alone: {base:.0f} MiB; "
          f"goal <= 400)")


if __name__ == "__main__":
    main()
