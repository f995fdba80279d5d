"""Peak memory of reading and of analysing a large log against the same at 1M lines (the goal:
within 1.5x of the 1M figure at 10M lines), each in a fresh interpreter, with the bare imports in
the same run (the floor every command pays) and the file's size. ``--format``: a DFlash
key=value log (wide: 12 metrics a line) or a narrow JSON Lines log (four columns).

    python bench/big_log_memory.py [--lines 10000000] [--base 1000000] [--repeat 1]
                                   [--format dflash|jsonl]

Each figure is the lowest of ``--repeat`` runs (polars' allocator returns freed memory to the
system on a timer, which moves a peak by a few tens of MiB from run to run).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import child_peak_rss_mb, dflash_log, jsonl_log  # noqa: E402

CASES = (
    ("read_log", "from losslens import read_log; read_log({path!r})"),
    ("read_log + analyze", "from losslens import read_log; from losslens.analysis import analyze; "
                           "analyze(read_log({path!r}))"),
)


def peaks(lines: int, repeat: int, fmt: str = "dflash") -> dict[str, float]:
    """Each case's lowest peak RSS (MiB) over ``repeat`` runs on a ``lines``-line log, printed."""
    path = dflash_log(lines) if fmt == "dflash" else jsonl_log(lines)
    kind = "DFlash" if fmt == "dflash" else "JSON Lines"
    print(f"{lines:,} {kind} lines, {path.stat().st_size / 2**30:.2f} GiB on disk")
    out = {}
    for what, code in CASES:
        t = time.perf_counter()
        out[what] = min(child_peak_rss_mb(code.format(path=str(path))) for _ in range(repeat))
        print(f"  {what:20} peak RSS {out[what] / 1024:5.2f} GiB  ({out[what] * 2**20 / lines:5.0f} B a line)"
              f"  {(time.perf_counter() - t) / repeat:6.1f} s a run")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=10_000_000)
    ap.add_argument("--base", type=int, default=1_000_000, help="the size the peak is compared with")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--format", choices=("dflash", "jsonl"), default="dflash")
    args = ap.parse_args()
    floor = child_peak_rss_mb("import numpy, polars, losslens.analysis")
    print(f"bare imports {floor:.0f} MiB")
    base, big = peaks(args.base, args.repeat, args.format), peaks(args.lines, args.repeat, args.format)
    for what, _ in CASES:
        print(f"{what:20} {args.lines:,} lines / {args.base:,} lines: {big[what] / base[what]:.2f}x "
              f"({big[what]:.0f} / {base[what]:.0f} MiB; goal <= 1.5x)")


if __name__ == "__main__":
    main()
