"""The gate against a NaN: a non-finite value written into a random record of every text fixture
and real log (../shared/reallogs), and of a generated log of each line format large enough to be
read column-wise (bench/line_readers.py's lines; the fixtures are small enough to be read line by
line), in the log's own spelling, as the log arrives in practice
(as written, CRLF line ends, gzip, behind `kubectl logs --timestamps`, `docker logs -t`, Python
logging's prefix, torchrun's `[rank0]: `, Slurm's `srun --label`). Each damaged log goes
through `read_log` + `analyze` (what `check` runs) and through `watch`'s Watcher, line by line
and in one batch. A NaN is *found* when a `nonfinite` finding
(warning or above) names its metric, *located* when its first step is the record's (or an
earlier non-finite one's). Exit 1 when any is missed.

    python bench/nan_injection.py [--seeds 3] [--metrics loss,grad_norm,eval_loss] [--limit N]
                                  [--no-generated]
"""

from __future__ import annotations

import argparse
import gzip
import random
import re
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from line_readers import _lines  # noqa: E402

from losslens import read_log  # noqa: E402
from losslens.analysis import RECORD_FORMATS, analyze  # (formats with no text line per record)
from losslens.config import load
from losslens.errors import LossLensError
from losslens.findings import Severity
from losslens.logs.base import RANK_PREFIX
from losslens.watch.watcher import Watcher

ROOT = Path(__file__).resolve().parents[1]
REAL = ROOT.parent / "shared" / "reallogs"
TEXT = (".log", ".csv", ".jsonl", ".txt", "")
NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?(?![\w.])")

def _prefixed(prefix: str) -> Callable[[list[str]], bytes]:
    return lambda lines: "\n".join(prefix.format(m=i // 60 % 60, s=i % 60) + x
                                    for i, x in enumerate(lines)).encode()


CAPTURES: dict[str, Callable[[list[str]], bytes]] = {
    "as written": lambda lines: "\n".join(lines).encode(),
    "CRLF": lambda lines: "\r\n".join(lines).encode(),
    "gzip": lambda lines: gzip.compress("\n".join(lines).encode()),
    "kubectl --timestamps": _prefixed("2024-05-01T10:{m:02d}:{s:02d}.123456789Z "),
    "python logging": _prefixed("2024-05-01 10:{m:02d}:{s:02d},123 - INFO - "),
    "torchrun rank": _prefixed("[rank0]: "),
    "srun --label": _prefixed("0: "),
    "docker logs -t": _prefixed("2024-05-01T10:{m:02d}:{s:02d}.123456789+00:00 "),
}


# line formats with a column-wise reader, generated as bench/line_readers.py writes them
GENERATED = ("jsonl", "csv", "hf", "megatron", "nanogpt", "modded-nanogpt", "fairseq", "torchtitan",
             "olmo", "colon", "lightning", "kv-kubectl", "kv-ranks")
COLUMN_WISE_BYTES = 300 << 10  # (over base.SMALL_BYTES: read column-wise, not line by line)


def generated(folder: Path) -> list[Path]:
    """A log of each of GENERATED, written to ``folder``, each over COLUMN_WISE_BYTES."""
    out = []
    for name in GENERATED:
        n = 4000
        while len(text := "\n".join(_lines(name, n)) + "\n") < COLUMN_WISE_BYTES:
            n *= 2
        path = folder / f"generated-{name}.log"
        path.write_text(text)
        out.append(path)
    return out


def sources(limit: int | None, folder: Path | None = None) -> list[Path]:
    out = [p for p in sorted((ROOT / "fixtures").iterdir()) if p.is_file() and p.suffix in TEXT]
    if REAL.is_dir():
        out += [p for d in sorted(REAL.iterdir()) if d.is_dir() for p in sorted(d.iterdir())
                if p.is_file() and p.suffix in TEXT and p.name != "SOURCE.md"]
    if folder is not None:
        out += generated(folder)
    return out[:limit]


def injections(path: Path, metric: str, seeds: int):
    """(damaged lines, step, earliest non-finite step already there) for ``seeds`` random records
    whose line holds the metric's value once."""
    try:
        log = read_log(path)
    except LossLensError:
        return
    frame = log.eval if metric.startswith("eval_") else log.train
    if metric not in frame.columns or "line" not in frame.columns or log.format in RECORD_FORMATS:
        return
    ok = frame.filter(frame[metric].is_finite() & (frame[metric] != 0) & (frame["segment"] == 0))
    if not ok.height:
        return
    before = frame.filter(~frame[metric].is_finite() & (frame["segment"] == 0))["step"].to_list()
    lines = path.read_bytes().decode("utf-8", "replace").split("\n")
    for s in range(seeds):
        rng = random.Random(f"{path.name}/{metric}/{s}")
        row = ok.row(rng.randrange(ok.height), named=True)
        text = lines[row["line"] - 1]
        value = row[metric]
        hits = [m for m in NUMBER.finditer(text)
                if abs(float(m.group()) - value) <= 1e-9 * max(1.0, abs(value))]
        if len(hits) != 1:
            continue
        spell = rng.choice(["NaN", "Infinity"] if path.suffix == ".jsonl" else ["nan", "inf", "NaN"])
        m = hits[0]
        damaged = [*lines[:row["line"] - 1], text[:m.start()] + spell + text[m.end():], *lines[row["line"]:]]
        yield damaged, row["step"], min([row["step"], *before])


def judged(findings, metric: str, expect: int) -> tuple[bool, bool]:
    nf = [f for f in findings
          if f.kind == "nonfinite" and f.metric == metric and f.severity >= Severity.WARNING]
    return bool(nf), any(f.start_step == expect for f in nf)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--metrics", default="loss,grad_norm,eval_loss")
    ap.add_argument("--limit", type=int, default=None, help="first N logs only")
    ap.add_argument("--no-generated", action="store_true", help="fixtures and real logs only")
    args = ap.parse_args()
    registry = load(None, cwd=Path("/")).registry()
    rows: dict[tuple[str, str], list[int]] = {}
    missed = []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory() as gen:
        for path in sources(args.limit, None if args.no_generated else Path(gen)):
            for metric in args.metrics.split(","):
                for damaged, step, expect in injections(path, metric, args.seeds):
                    for capture, write in CAPTURES.items():
                        if capture == "torchrun rank" and any(map(RANK_PREFIX.match, damaged[:100])):
                            continue  # (ranked already: torchrun puts one prefix, not two)
                        out = Path(tmp) / (path.name + (".gz" if capture == "gzip" else ""))
                        out.write_bytes(write(damaged))
                        text = gzip.decompress(out.read_bytes()).decode() if capture == "gzip" \
                            else out.read_bytes().decode()
                        for how in ("check", "watch lines", "watch batch"):
                            if how == "check":
                                try:
                                    findings = analyze(read_log(out)).findings
                                except LossLensError:
                                    findings = []
                            else:
                                w = Watcher(str(out), None, registry, frozenset())
                                lines = text.split("\n")
                                if how == "watch batch":
                                    w.feed_batch(lines)
                                else:
                                    for line in lines:
                                        w.feed(line)
                                w.finish_input()
                                w.analyse(now=0.0)
                                findings = w.report.findings if w.report else []
                            found, located = judged(findings, metric, expect)
                            row = rows.setdefault((how, capture), [0, 0, 0])
                            row[0] += 1
                            row[1] += found
                            row[2] += located
                            if not found:
                                where = path.relative_to(ROOT.parent) if path.is_relative_to(ROOT.parent) \
                                    else path.name
                                missed.append(f"{how} / {capture}: {where} {metric} at step {step}")
    print(f"{'path':12s} {'capture':22s} {'injected':>8s} {'found':>7s} {'located':>8s}")
    for (how, capture), (n, found, located) in rows.items():
        print(f"{how:12s} {capture:22s} {n:8d} {found / n:7.1%} {located / n:8.1%}")
    total = sum(r[0] for r in rows.values())
    print(f"\n{total:,} injections, {len(missed)} missed ({time.perf_counter() - t0:.0f} s)")
    for m in missed[:20]:
        print("  missed:", m)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
