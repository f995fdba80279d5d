"""read_log on a generated DFlash log against two per-line Python loops in the same run: the
plainest one (a `re.findall` of key=value pairs, each value's text appended to its key's list,
one polars cast per column at the end: no lists, units or timestamps read) and one that builds
the same columns as read_log (bench/naive.py); and read_log's peak RSS.

Two floors in the same run, for what a reader of these lines can cost at all:
- polars' floor: polars' own CSV tokenizer splitting the file at '=' into cells (as read_log's
  key=value reader starts), then each cell's value cut at its first space and cast to a number:
  one query, on all cores, without any check of the keys, lists, units, times or line accounting;
- the compiled reference, bench/kv_reference.c (when a C compiler is found): the file read
  whole, each 'key=value' pair's value read as a decimal number into its key's column,
  single-threaded (as fast as plain C reads these lines, the issue's 'C reference').

The same lines with 1 % of a real run's noise between them (``losslens.synth.with_noise``:
tracebacks, warnings, a rank's NCCL line, a progress bar, checkpoint messages, blank lines) are
read in the same run, against the clean file and the C reference on the noisy file.

With the 'fast' extra installed (numba), read_log is timed again with its compiled key=value
kernels (``losslens.logs.formats.kv.fast``), which it uses on files of 64 MiB or more; the first
figure is always the default install's (polars alone).

    python bench/parse_speed.py [--lines 1000000] [--repeat 3] [--noise 0.01]
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import OUT, best_of, child_peak_rss_mb, dflash_log  # noqa: E402
from line_readers import KV_PAIR, _pairs_loop  # noqa: E402
from naive import naive_read  # noqa: E402

from losslens import read_log  # noqa: E402


def polars_floor(path: Path) -> None:
    """The cells of every line (polars' CSV tokenizer at '='), each value up to its first space
    cast to a float: the least the polars path does, with none of read_log's checks."""
    import polars as pl

    data = path.read_bytes().replace(b"~", b"=")
    cells = pl.read_csv(io.BytesIO(data), has_header=False, separator="=", quote_char=None,
                        infer_schema=False, truncate_ragged_lines=True, missing_columns="insert",
                        schema={f"c{i}": pl.String for i in range(16)})
    values = (pl.col(f"c{i}").str.splitn(" ", 2).struct.field("field_0").cast(pl.Float64, strict=False)
              .alias(f"v{i}") for i in range(1, 16))
    cells.lazy().select(values).collect(engine="streaming")


def polars_only(path: Path) -> None:
    """read_log as the default install reads (the 'fast' extra's numba kernels off)."""
    os.environ["LOSSLENS_FAST"] = "off"
    try:
        read_log(path)
    finally:
        del os.environ["LOSSLENS_FAST"]


def _compiled_reader(path: Path, repeat: int) -> tuple[float, float] | None:
    """read_log with the 'fast' extra's numba kernels (compiled, or loaded from numba's cache, by a
    first untimed read), best of ``repeat``; and what loading the cached build costs a fresh
    process. None where numba is not installed."""
    from losslens.logs.formats.kv import fast

    os.environ["LOSSLENS_FAST"] = "on"
    try:
        if fast.kernels() is None:
            return None
        read_log(path)
        took = best_of(lambda: read_log(path), repeat)
    finally:
        del os.environ["LOSSLENS_FAST"]
    code = ("import time; from losslens.logs.formats.kv import fast; t = time.perf_counter(); "
            "fast.kernels(); print(time.perf_counter() - t)")
    load = min(float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                    check=True).stdout) for _ in range(2))
    return took, load


def compiled_reference(path: Path, repeat: int) -> float | None:
    """bench/kv_reference.c built with the machine's C compiler (-O2) and run on ``path``: the
    best wall time of ``repeat`` runs, or None without a compiler."""
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        return None
    OUT.mkdir(exist_ok=True)
    exe = OUT / "kv_reference"
    src = Path(__file__).parent / "kv_reference.c"
    subprocess.run([cc, "-O2", "-o", str(exe), str(src), "-lm"], check=True)
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run([str(exe), str(path)], check=True, capture_output=True)
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--noise", type=float, default=0.01, help="share of noise lines in the noisy file")
    args = ap.parse_args()
    path = dflash_log(args.lines)
    size_mb = path.stat().st_size / 2**20
    # memory first, in fresh interpreters (a child forked from a big parent inherits its RSS)
    rss = child_peak_rss_mb(f"from losslens import read_log; read_log({str(path)!r})")
    base = child_peak_rss_mb("import polars, numpy, losslens")
    fast = best_of(lambda: polars_only(path), args.repeat)
    compiled = _compiled_reader(path, args.repeat)
    plain = best_of(lambda: _pairs_loop(KV_PAIR)(path), 1)
    naive = best_of(lambda: naive_read(str(path)), 1)
    floor = best_of(lambda: polars_floor(path), args.repeat)
    ref = compiled_reference(path, args.repeat)
    print(f"file: {args.lines:,} DFlash lines, {size_mb:.0f} MiB")
    print(f"read_log          {fast:7.2f} s   ({args.lines / fast / 1e6:.2f} M lines/s)")
    print(f"plain re loop     {plain:7.2f} s   (text per key, one cast per column): "
          f"speed-up {plain / fast:.2f}x")
    print(f"same-columns loop {naive:7.2f} s   (numbers, lists, units, timestamps): "
          f"speed-up {naive / fast:.2f}x")
    print(f"polars' floor     {floor:7.2f} s   ({args.lines / floor / 1e6:.2f} M lines/s; split at '=', "
          f"cut, cast: no checks): read_log takes {fast / floor:.2f}x")
    if ref is not None:
        print(f"C reference       {ref:7.2f} s   ({args.lines / ref / 1e6:.2f} M lines/s; a number per pair, "
              f"one thread): read_log takes {fast / ref:.2f}x")
    else:
        print("C reference          -      (no C compiler found)")
    if compiled is not None:
        numba_t, load = compiled
        against = f"; read_log takes {numba_t / ref:.2f}x the C reference" if ref else ""
        print(f"with numba        {numba_t:7.2f} s   ({args.lines / numba_t / 1e6:.2f} M lines/s; the 'fast' "
              f"extra): {fast / numba_t:.2f}x faster than polars alone{against}; loading its cached "
              f"build costs a fresh process {load:.2f} s")
    else:
        print("with numba           -      (the 'fast' extra is not installed)")
    print(f"peak RSS read_log {rss:7.0f} MiB (interpreter + imports alone: {base:.0f} MiB; "
          f"goal <= 400)")
    if args.noise:
        noisy = _noisy(path, args.noise)
        t = best_of(lambda: polars_only(noisy), args.repeat)
        ref = compiled_reference(noisy, args.repeat)
        against = f"; the C reference on it {ref:.2f} s: read_log takes {t / ref:.2f}x" if ref else ""
        print(f"noisy file        {t:7.2f} s   ({args.noise:.0%} noise lines): {t / fast:.2f}x the clean "
              f"file{against}")
        if compiled is not None:
            numba_t = _compiled_reader(noisy, args.repeat)[0]  # type: ignore[index]
            against = f": read_log takes {numba_t / ref:.2f}x the C reference" if ref else ""
            print(f"noisy, with numba {numba_t:7.2f} s   {numba_t / compiled[0]:.2f}x the clean file with "
                  f"numba{against}")


def _noisy(path: Path, share: float) -> Path:
    """``path``'s lines with ``share`` of a real run's noise between them (cached beside it)."""
    from losslens.synth import with_noise

    out = path.with_name(f"{path.stem}_noise{share:g}.log")
    if not out.exists():
        out.write_text("\n".join(with_noise(path.read_text().splitlines(), share)) + "\n")
    return out


if __name__ == "__main__":
    main()
