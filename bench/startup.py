"""`losslens check` on a 5k-line log against bare imports of its stack, same run, both started in
an empty folder (no losslens config to read).

    python bench/startup.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import best_of, dflash_log  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    log = dflash_log(5000).resolve()
    exe = shutil.which("losslens")
    check = [exe, "check", str(log)] if exe else [sys.executable, "-m", "losslens", "check", str(log)]
    baseline = [sys.executable, "-c", "import typer, rich.console, numpy, polars"]

    # both in a folder of their own, as a monitoring script runs the gate: this repository's
    # pyproject.toml names losslens, and reading a config is not what is measured here
    folder = tempfile.mkdtemp(prefix="losslens-startup-")

    def run(cmd):
        return lambda: subprocess.run(cmd, capture_output=True, check=False, cwd=folder)

    t_base = best_of(run(baseline), args.repeat)
    t_check = best_of(run(check), args.repeat)
    t_help = best_of(run([*check[:-2], "--help"]), args.repeat)
    print(f"python -c 'import typer, rich.console, numpy, polars'  {t_base:6.3f} s")
    print(f"losslens check (5,000-line log)                        {t_check:6.3f} s  "
          f"ratio {t_check / t_base:.2f} (goal <= 1.3)")
    print(f"losslens --help                                        {t_help:6.3f} s  "
          f"ratio {t_help / t_base:.2f}")


if __name__ == "__main__":
    main()
