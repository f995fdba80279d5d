"""Peak memory of reading and of analysing a large DFlash log, each in a fresh interpreter,
against the bare imports in the same run (the floor every command pays) and the file's size.

    python bench/big_log_memory.py [--lines 12000000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import child_peak_rss_mb, dflash_log  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=12_000_000)
    args = ap.parse_args()
    path = dflash_log(args.lines)
    floor = child_peak_rss_mb("import numpy, polars, losslens.analysis")
    print(f"{args.lines:,} DFlash lines, {path.stat().st_size / 2**30:.2f} GiB on disk; "
          f"bare imports {floor:.0f} MiB")
    for what, code in (
        ("read_log", f"from losslens import read_log; log = read_log({str(path)!r}); "
                     "print(log.train.estimated_size() / 2**20, file=__import__('sys').stderr)"),
        ("read_log + analyze", f"from losslens import read_log; from losslens.analysis import analyze; "
                               f"analyze(read_log({str(path)!r}))"),
    ):
        t = time.perf_counter()
        peak = child_peak_rss_mb(code)
        print(f"  {what:20} peak RSS {peak / 1024:5.2f} GiB  ({peak * 2**20 / args.lines:5.0f} B a line)"
              f"  {time.perf_counter() - t:6.1f} s")


if __name__ == "__main__":
    main()
