"""analyze() on a 1M-record log, against read_log of the same file in the same run (the ratio
is what travels between machines; the goal on the 2-core dev machine is analyze <= 10 s).

    python bench/analyze_speed.py [--lines 1000000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import dflash_log  # noqa: E402

from losslens import read_log  # noqa: E402
from losslens.analysis import analyze  # noqa: E402
from losslens.detectors import REGISTRY  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=1_000_000)
    args = ap.parse_args()
    path = dflash_log(args.lines)
    t = time.perf_counter()
    log = read_log(path)
    t_read = time.perf_counter() - t
    t = time.perf_counter()
    report = analyze(log)
    t_analyze = time.perf_counter() - t
    print(f"{log.train.height:,} records; read_log {t_read:.2f} s; analyze {t_analyze:.2f} s "
          f"(ratio {t_analyze / t_read:.2f}); {len(report.findings)} finding(s)")
    for det in REGISTRY:
        t = time.perf_counter()
        analyze(log, detectors=(det,))
        print(f"  {det.name:16} {time.perf_counter() - t:6.2f} s")


if __name__ == "__main__":
    main()
