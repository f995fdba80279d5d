"""`losslens watch` started on a big existing log: how long until it has read the backlog and
alerts on a NaN in its last line, against `losslens check` (read_log + analyze, the fast reader
over the whole file) on the same file in the same run; peak RSS of each.

    python bench/watch_catchup.py [--lines 1000000]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import OUT, dflash_log  # noqa: E402


def timed(args: list[str]) -> tuple[float, float, int]:
    """(wall seconds, peak RSS MiB, exit code) of a losslens command."""
    t = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-m", "losslens", *args],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - t, usage.ru_maxrss / 1024, p.returncode


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=1_000_000)
    args = ap.parse_args()
    path = OUT / f"catchup_{args.lines}.log"
    shutil.copyfile(dflash_log(args.lines), path)
    with open(path, "a") as f:
        f.write(f"[2026-05-15 21:00:00] step={args.lines} loss=nan acc=0.1\n")
    size = path.stat().st_size / 2**20
    watch = timed(["watch", str(path), "--json", "--exit-on", "error"])
    check = timed(["check", str(path)])
    print(f"{args.lines + 1:,} lines ({size:.0f} MiB), a NaN in the last one")
    for name, (wall, rss, code) in (("watch FILE --exit-on error", watch), ("check FILE", check)):
        print(f"  {name:28} {wall:6.1f} s  {(args.lines + 1) / wall / 1e3:6.0f}k lines/s  "
              f"peak RSS {rss:5.0f} MiB  exit {code}")
    print(f"  watch / check: {watch[0] / check[0]:.2f}x")
    path.unlink()


if __name__ == "__main__":
    main()
