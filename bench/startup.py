"""`losslens check` on a 5k-line log against bare imports of its stack, same run, both started in
an empty folder (no losslens config to read).

Three floors: the bare imports as Python runs them; the same imports with the collector's
thresholds `losslens` sets before it imports anything (``src/losslens/__main__.py``), the honest floor
for what losslens adds on top of its imports; and those, ended as `losslens` ends a command,
without the interpreter's teardown (``os._exit`` once the output is flushed), so that the ratio to
it shows what the gate adds beyond its imports, with the exit's saving taken out. Runs are interleaved (floor,
check, floor, …) so that a slow minute of the machine hits both; each figure is the best of
``--repeat``, as wall time and as the child's CPU time (user + system, all threads), which a
busy or shared machine disturbs less.

    python bench/startup.py [--repeat 10]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import dflash_log  # noqa: E402

IMPORTS = "import typer, rich.console, numpy, polars"
GC = "import gc; gc.set_threshold(100_000, 20, 10)"  # as src/losslens/__main__.py
EXIT = "import os, sys; sys.stdout.flush(); os._exit(0)"  # ends as src/losslens/__main__.py does


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(cmd: list[str], cwd: str) -> tuple[float, float]:
    """Wall and CPU seconds of one run of ``cmd``."""
    c, t = _cpu(), time.perf_counter()
    subprocess.run(cmd, capture_output=True, check=False, cwd=cwd)
    return time.perf_counter() - t, _cpu() - c


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--lines", type=int, default=5000)
    args = ap.parse_args()
    log = dflash_log(args.lines).resolve()
    # losslens's modules compiled to bytecode first, as pip does on install: a checkout run with
    # PYTHONDONTWRITEBYTECODE would compile each changed module from source at every start
    import compileall

    import losslens

    compileall.compile_dir(Path(losslens.__file__).parent, quiet=1)
    exe = shutil.which("losslens")
    check = [exe, "check", str(log)] if exe else [sys.executable, "-m", "losslens", "check", str(log)]
    runs = {
        "bare": [sys.executable, "-c", IMPORTS],
        "bare, losslens's gc": [sys.executable, "-c", f"{GC}; {IMPORTS}"],
        "bare, losslens's gc and exit": [sys.executable, "-c", f"{GC}; {IMPORTS}; {EXIT}"],
        "check": check,
        "help": [*check[:-2], "--help"],
    }
    # in a folder of their own, as a monitoring script runs the gate: this repository's
    # pyproject.toml names losslens, and reading a config is not what is measured here
    folder = tempfile.mkdtemp(prefix="losslens-startup-")
    best = {k: [float("inf"), float("inf")] for k in runs}
    for _ in range(args.repeat):
        for name, cmd in runs.items():
            wall, cpu = timed(cmd, folder)
            best[name] = [min(best[name][0], wall), min(best[name][1], cpu)]
    os.rmdir(folder)
    (bw, bc), (gw, gc_), (xw, xc), (cw, cc), (hw, hc) = best.values()
    print(f"{'best of ' + str(args.repeat):46s} {'wall':>8s} {'CPU':>8s}")
    print(f"{'python -c ' + repr(IMPORTS):46s} {bw:7.3f}s {bc:7.3f}s")
    print(f"{'  the same, with losslens gc thresholds':46s} {gw:7.3f}s {gc_:7.3f}s")
    print(f"{'  and without the teardown, as losslens ends':46s} {xw:7.3f}s {xc:7.3f}s")
    print(f"{f'losslens check ({args.lines:,}-line log)':46s} {cw:7.3f}s {cc:7.3f}s   "
          f"ratio {cw / bw:.2f} wall, {cc / bc:.2f} CPU; to the gc-matched floor "
          f"{cw / gw:.2f} wall, {cc / gc_:.2f} CPU (goal <= 1.3); to the floor without teardown "
          f"{cw / xw:.2f} wall, {cc / xc:.2f} CPU")
    print(f"{'losslens --help':46s} {hw:7.3f}s {hc:7.3f}s   ratio {hw / bw:.2f} wall")


if __name__ == "__main__":
    main()
