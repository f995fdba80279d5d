"""HTML and PNG reports for a large log: file sizes and time to write, against the analysis of
the same log in the same run.

    python bench/report_size.py [--lines 1000000]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import dflash_log  # noqa: E402

from losslens import read_log  # noqa: E402
from losslens.analysis import analyze  # noqa: E402
from losslens.reporters import html, png  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=1_000_000)
    args = ap.parse_args()
    log = read_log(dflash_log(args.lines))
    t = time.perf_counter()
    report = analyze(log)
    t_an = time.perf_counter() - t
    with tempfile.TemporaryDirectory() as d:
        page, image = os.path.join(d, "r.html"), os.path.join(d, "r.png")
        t = time.perf_counter()
        with open(page, "w") as f:
            f.write(html.render(report, log))
        t_html = time.perf_counter() - t
        t = time.perf_counter()
        png.write(report, log, image)
        t_png = time.perf_counter() - t
        print(f"{log.train.height:,} records; analyze {t_an:.2f} s")
        for name, path, secs in (("HTML", page, t_html), ("PNG", image, t_png)):
            print(f"{name:5} {os.path.getsize(path) / 1024:7.0f} KiB in {secs:.2f} s "
                  f"({secs / t_an:.2f}x analyze)")


if __name__ == "__main__":
    main()
