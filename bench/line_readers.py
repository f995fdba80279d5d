"""read_log on each line format against the plainest loop that could stand in for it, in the
same run: per line, the one call a person would write for that format (`json.loads`,
`csv.reader`, `ast.literal_eval`, a `re.findall` of its pairs), each value into a per-key
list, one polars frame at the end. Where polars has a reader of its own for the whole file
(NDJSON, CSV) that is timed too, as the compiled reference. read_log does more than any of them
(steps, units, NaN spellings, eval records, prefixes, every line accounted for), so a ratio
above 1 is what that costs and one below 1 is the columnar path paying off.

    python bench/line_readers.py [--lines 200000] [--repeat 1] [--only jsonl,csv]
"""

from __future__ import annotations

import argparse
import ast
import csv
import json
import math
import os
import random
import re
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import OUT, best_of  # noqa: E402

from losslens import read_log  # noqa: E402
from losslens.synth import with_noise  # noqa: E402

KV_PAIR = re.compile(r"([A-Za-z_][\w/.\-]*)=([^\s|,;\[\]()]+)")
FAIRSEQ_PAIR = re.compile(r"(\w+)=([^,\s]+)")
TITAN_PAIR = re.compile(r"([a-z_]+):\s+([-+\d.eE,]+)")
ANSI = re.compile(r"\x1b\[[0-9;]*m")
COLON_PAIR = re.compile(r"(\w[\w ]*?): ([-+\d.eE]+)")
MODDED_PAIR = re.compile(r"(\w+):([-+\d.eE]+)")
LIGHTNING_PAIR = re.compile(r"(\w+)=([^\s,\]]+)")
NANO = re.compile(r"^iter (\d+): loss (\S+), time (\S+)ms")


def _loss(i: int, rng: random.Random) -> float:
    return 3 / math.sqrt(1 + i / 100) + rng.gauss(0, 0.02)


def _lines(name: str, n: int) -> list[str]:
    rng = random.Random(0)
    if name == "jsonl":
        return [json.dumps({"step": i, "train/loss": round(_loss(i, rng), 4), "train/lr": 1e-4,
                            "train/grad_norm": round(rng.uniform(0.5, 1.5), 3)}) for i in range(n)]
    if name == "csv":
        return ["step,loss,lr,grad_norm"] + [f"{i},{_loss(i, rng):.4f},1e-4,{rng.uniform(.5, 1.5):.3f}"
                                             for i in range(n)]
    if name == "hf":
        return [str({"loss": round(_loss(i, rng), 4), "grad_norm": round(rng.uniform(0.5, 1.5), 4),
                     "learning_rate": 1e-4, "epoch": round(i / n * 3, 2)}) for i in range(n)]
    if name == "hf-bars":  # the Trainer's stdout and stderr in one file: a dict a step through its bar
        from losslens.synth import hf_stdout_lines

        return hf_stdout_lines(n, logging_steps=1, eval_steps=1000)[:n]
    if name == "megatron":
        return [f" iteration {i:8d}/ {n:8d} | consumed samples: {i * 1024:12d} | elapsed time per "
                f"iteration (ms): {18000 + rng.gauss(0, 200):.1f} | learning rate: 6.000E-05 | global "
                f"batch size:  1024 | lm loss: {_loss(i, rng):.6E} | loss scale: 4096.0 | grad norm: "
                f"{abs(rng.gauss(1, .1)):.3f} | num zeros: 0.0 | number of skipped iterations:   0 | "
                f"number of nan iterations:   0 |" for i in range(1, n + 1)]
    if name == "nanogpt":
        return [f"iter {i}: loss {_loss(i, rng):.4f}, time {1431 + rng.gauss(0, 5):.2f}ms, mfu 0.01%"
                for i in range(n)]
    if name == "modded-nanogpt":
        return [f"step:{i}/{n} train_loss:{_loss(i, rng):.4f} train_time:{i * 391}ms "
                f"step_avg:{391 + rng.gauss(0, 2):.2f}ms" for i in range(n)]
    if name == "fairseq":
        from losslens.synth import fairseq_lines

        return fairseq_lines(n)
    if name == "torchtitan":
        from losslens.synth import torchtitan_lines

        return torchtitan_lines(n)
    if name == "olmo":
        from losslens.synth import olmo_lines

        return olmo_lines(n // 6)  # six lines a record
    if name == "lightning":  # n redraws of the bar, one a step, '\r' between them, a line an epoch
        per = 2000
        return ["\r".join(f"Epoch {e}:  {100 * i // per}%|██ | {i}/{per} [00:{i % 60:02d}<00:10,  9.50it/s, "
                          f"v_num=0, train_loss={_loss(e * per + i, rng):.3f}"
                          + (f", val_loss={2 - e / 100:.3f}]" if e else "]") for i in range(1, per + 1))
                for e in range(max(1, n // per))]
    if name == "colon":
        return [f"2025-03-02 10:00:00,000 - INFO - Step {i}/{n} | loss: {3 - i / n:.4f} | lr: "
                f"1.00e-04 | grad norm: 0.812 | tokens/s: 31,{i % 1000:03d}" for i in range(n)]
    if name == "kv-kubectl":
        return [f"2024-05-01T10:{i // 60 % 60:02d}:{i % 60:02d}.123456789Z step={i} "
                f"loss={_loss(i, rng):.4f} acc=0.5 lr=1e-04" for i in range(n)]
    if name == "mlflow":  # one metric file: 'timestamp(ms) value step'
        return [f"{1701361200000 + 391 * i} {_loss(i, rng):.6g} {i}" for i in range(n)]
    if name == "kv-ranks":
        return [f"[rank{i % 2}]: step={i // 2} loss={_loss(i, rng):.4f} acc=0.5 lr=1e-04"
                for i in range(n)]
    raise ValueError(name)


def _by_key(rows: list[dict[str, object]]):
    import polars as pl

    return pl.DataFrame(rows, infer_schema_length=None)


def _pairs_loop(pattern: re.Pattern[str]) -> Callable[[Path], object]:
    def run(path: Path):
        import polars as pl

        cols: dict[str, list[str]] = {}
        with open(path) as f:
            for line in f:
                for k, v in pattern.findall(line):
                    cols.setdefault(k, []).append(v)
        n = min(len(v) for v in cols.values())
        return pl.DataFrame({k: v[:n] for k, v in cols.items()}).with_columns(
            pl.all().cast(pl.Float64, strict=False))
    return run


def _titan_loop(path: Path):
    import polars as pl

    cols: dict[str, list[str]] = {}
    with open(path) as f:
        for line in f:
            for k, v in TITAN_PAIR.findall(ANSI.sub("", line)):
                cols.setdefault(k, []).append(v)
    n = min(len(v) for v in cols.values())
    return pl.DataFrame({k: v[:n] for k, v in cols.items()}).with_columns(
        pl.all().str.replace_all(",", "").cast(pl.Float64, strict=False))


OLMO_HEAD = re.compile(r"\[step=(\d+)")


def _olmo_loop(path: Path):
    import polars as pl

    rows: list[dict[str, object]] = []
    with open(path) as f:
        for line in f:
            m = OLMO_HEAD.search(line)
            if m:
                rows.append({"step": int(m.group(1))})
            elif rows and line.startswith(" ") and "=" in line:
                k, v = line.strip().split("=", 1)
                rows[-1][k] = float(v.replace(",", ""))
    return pl.DataFrame(rows, infer_schema_length=None)


def _json_loop(path: Path):
    with open(path) as f:
        return _by_key([json.loads(line) for line in f])


def _csv_loop(path: Path):
    import polars as pl

    with open(path, newline="") as f:
        rows = csv.reader(f)
        header = next(rows)
        cols: list[list[float]] = [[] for _ in header]
        for row in rows:
            for col, cell in zip(cols, row, strict=True):
                col.append(float(cell))
    return pl.DataFrame(dict(zip(header, cols, strict=True)))


def _hf_loop(path: Path):
    with open(path, newline="\n") as f:  # (a bar's redraws before a dict: the dict from its '{')
        return _by_key([ast.literal_eval(line[line.index("{'"):]) for line in f if "{'" in line])


def _nano_loop(path: Path):
    import polars as pl

    steps, losses, times = [], [], []
    with open(path) as f:
        for line in f:
            m = NANO.match(line)
            if m:
                steps.append(int(m.group(1)))
                losses.append(float(m.group(2)))
                times.append(float(m.group(3)) / 1000)
    return pl.DataFrame({"step": steps, "loss": losses, "step_time_s": times})


def _mlflow_loop(path: Path):
    """A metric file, or each one of a run folder (merged by step), split per line."""
    import polars as pl

    files = sorted((path / "metrics").iterdir()) if path.is_dir() else [path]
    by_step: dict[int, dict[str, float]] = {}
    for f in files:
        with open(f) as lines:
            for line in lines:
                ts, value, step = line.split()
                by_step.setdefault(int(step), {"time": int(ts)})[f.name] = float(value)
    return pl.DataFrame([{"step": k, **v} for k, v in sorted(by_step.items())])


def _polars_ndjson(path: Path):
    import polars as pl

    return pl.read_ndjson(path)


def _polars_csv(path: Path):
    import polars as pl

    return pl.read_csv(path)


BASELINES: dict[str, tuple[str, Callable[[Path], object], Callable[[Path], object] | None]] = {
    "jsonl": ("json.loads per line", _json_loop, _polars_ndjson),
    "csv": ("csv.reader, float() per cell", _csv_loop, _polars_csv),
    "hf": ("ast.literal_eval per dict line", _hf_loop, None),
    "hf-bars": ("ast.literal_eval per dict line", _hf_loop, None),
    "megatron": ("re.findall 'name: value'", _pairs_loop(COLON_PAIR), None),
    "nanogpt": ("re.match per line", _nano_loop, None),
    "modded-nanogpt": ("re.findall 'name:value'", _pairs_loop(MODDED_PAIR), None),
    "fairseq": ("re.findall 'key=value'", _pairs_loop(FAIRSEQ_PAIR), None),
    "torchtitan": ("ANSI re.sub, re.findall 'name: value'", _titan_loop, None),
    "olmo": ("re.search the head, str.split each field", _olmo_loop, None),
    "colon": ("re.findall 'name: value'", _pairs_loop(COLON_PAIR), None),
    "lightning": ("re.findall 'key=value' (text mode splits at '\\r')", _pairs_loop(LIGHTNING_PAIR), None),
    "kv-kubectl": ("re.findall 'key=value'", _pairs_loop(KV_PAIR), None),
    "kv-ranks": ("re.findall 'key=value'", _pairs_loop(KV_PAIR), None),
    "mlflow": ("str.split, int()/float() per line", _mlflow_loop, None),
    "mlflow-run": ("the same per file, merged by step in a dict", _mlflow_loop, None),
}


def _written(name: str, n: int, noise: float = 0.0) -> Path:
    """The generated log (cached in bench/out): a file (with ``noise``: that share of its lines a
    real run's noise, see ``_common.with_noise``), or for MLflow a metric file named by its
    metric, or a run folder of three metric files of n/3 lines each."""
    if name == "mlflow":
        path = OUT / f"mlflow_{n}" / "loss"
    elif name == "mlflow-run":
        path = OUT / f"mlflow_run_{n}"
        if not path.exists():
            (path / "metrics").mkdir(parents=True)
            (path / "meta.yaml").write_text("artifact_uri: bench\n")
            for metric in ("loss", "learning_rate", "grad_norm"):
                (path / "metrics" / metric).write_text("\n".join(_lines("mlflow", n // 3)) + "\n")
        return path
    else:
        path = OUT / (f"lines_{name}_{n}.log" if not noise else f"lines_{name}_{n}_noise{noise:g}.log")
    if not path.exists():
        path.parent.mkdir(exist_ok=True)
        lines = _lines(name, n)
        # (an OLMo record is six lines, after the file's first: noise put in every six lines lands
        # before a record's last field, as another process's warning can, the harder case)
        unit = 6 if name == "olmo" else 1
        path.write_text("\n".join(with_noise(lines, noise, unit=unit) if noise else lines) + "\n")
    return path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--only", default="", help="comma-separated names (default: all)")
    ap.add_argument("--noise", type=float, default=0.01,
                    help="share of a real run's noise lines in the noisy file (0: clean only)")
    args = ap.parse_args()
    names = [x for x in args.only.split(",") if x] or list(BASELINES)
    OUT.mkdir(exist_ok=True)
    fast = _has_numba()
    print(f"{args.lines:,} lines each; best of {args.repeat}; lines/s in thousands; read_log with polars "
          f"alone (LOSSLENS_FAST=off); noisy: the same lines with {args.noise:.0%} of a real run's noise "
          f"between them; numba: read_log with the 'fast' extra's kernels (LOSSLENS_FAST=on), on the "
          f"noisy file, for the formats it reads{'' if fast else ' (numba is not installed)'}")
    print(f"{'format':14s} {'read_log':>9s} {'k lines/s':>9s} {'plain loop':>10s} {'ratio':>6s}"
          f"  {'polars':>7s}  {'noisy':>7s} {'k lines/s':>9s} {'noisy/clean':>11s}  "
          f"{'numba':>7s} {'k lines/s':>9s}  baseline")
    for name in names:
        path = _written(name, args.lines)
        what, plain, compiled = BASELINES[name]
        os.environ["LOSSLENS_FAST"] = "off"
        log = read_log(path)
        least = args.lines // (12 if name == "olmo" else 6 if name == "mlflow-run" else 2) - 1
        assert log.train.height >= least, (name, log.train.height)
        ours = best_of(lambda p=path: read_log(p), args.repeat)
        base = best_of(lambda p=path, f=plain: f(p), args.repeat)
        ref = f"{best_of(lambda p=path, f=compiled: f(p), args.repeat):6.2f}s" if compiled else "      -"
        noisy = "      -           -            -"
        numba = "      -          -"
        if args.noise and not name.startswith("mlflow"):
            npath = _written(name, args.lines, args.noise)
            assert read_log(npath).train.height == log.train.height, name  # the same records
            t = best_of(lambda p=npath: read_log(p), args.repeat)
            noisy = f"{t:6.2f}s {args.lines * (1 + args.noise) / t / 1e3:9.0f} {t / ours:11.2f}"
            if fast and _skeleton_read(name):
                os.environ["LOSSLENS_FAST"] = "on"
                assert read_log(npath).train.height == log.train.height, name
                t = best_of(lambda p=npath: read_log(p), args.repeat)
                numba = f"{t:6.2f}s {args.lines * (1 + args.noise) / t / 1e3:9.0f}"
        os.environ.pop("LOSSLENS_FAST", None)
        print(f"{name:14s} {ours:8.2f}s {args.lines / ours / 1e3:9.0f} {base:9.2f}s "
              f"{ours / base:6.2f}  {ref}  {noisy}  {numba}  {what}")


def _has_numba() -> bool:
    from losslens.logs.fast import compiled

    return compiled("losslens.logs.skeleton_kernels") is not None


def _skeleton_read(name: str) -> bool:
    """Whether the format's large files are read by the skeleton reader (or key=value's kernels)."""
    from losslens.logs.registry import BY_NAME

    fmt = BY_NAME.get(name.split("-")[0] if name.startswith("kv") else name)
    return fmt is not None and (fmt.one_line_records or fmt.name == "kv")


if __name__ == "__main__":
    main()
