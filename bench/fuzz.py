"""Hostile inputs for every command, generated without end (or for --seconds / --cases): each run
must end within its time limit with exit 0, 1 or 2 and no Python traceback. The inputs are the
fixtures damaged (bytes flipped, cut, NUL runs, lines glued, a huge line), random bytes, deeply
nested JSON, odd Unicode (lone surrogate escapes, BOMs, UTF-16), and the same for the settings
file, replay's --batches record, the scan state and standard input.

    python bench/fuzz.py [--seconds 60] [--cases N] [--seed 0]

Prints a line per failure (the command, the input kept under bench/out/fuzz/) and a count; exits
1 when any failed. The baseline is the undamaged fixture: it must pass the same checks.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
OUT = Path(__file__).parent / "out" / "fuzz"
SUFFIXES = (".log", ".csv", ".jsonl", ".json")
LOGS = sorted(p for p in FIXTURES.iterdir() if p.is_file() and p.suffix in SUFFIXES)


def damage(data: bytes, rng: random.Random) -> bytes:
    """One of the ways a real file goes wrong."""
    kind = rng.choice(["flip", "cut", "nul", "glue", "huge", "bytes", "nest", "unicode", "utf16", "empty",
                       "crlf", "dup"])
    n = len(data)
    if kind == "flip" and n:
        b = bytearray(data)
        for _ in range(rng.randint(1, 20)):
            b[rng.randrange(n)] ^= 1 << rng.randrange(8)
        return bytes(b)
    if kind == "cut" and n:
        return data[: rng.randrange(n)]
    if kind == "nul" and n:
        at = rng.randrange(n)
        return data[:at] + b"\x00" * rng.randint(1, 4096) + data[at:]
    if kind == "glue":
        return data.replace(b"\n", b"", rng.randint(1, 50))
    if kind == "huge":
        at = data.find(b"\n", rng.randrange(max(1, n))) + 1
        return data[:at] + bytes([rng.randrange(32, 127)]) * rng.randint(1 << 16, 3 << 20) + b"\n" + data[at:]
    if kind == "bytes":
        return rng.randbytes(rng.randint(1, 1 << 16))
    if kind == "nest":
        depth = rng.randint(1000, 200_000)
        return data[: n // 2] + b'{"step": 1, "loss": ' + b"[" * depth + b"]" * depth + b"}\n" + data[n // 2:]
    if kind == "unicode":
        return data.replace(b"loss", rb'lo\ud800ss\xe2\x80\x8f', rng.randint(1, 5))
    if kind == "utf16":
        return data.decode("utf-8", "replace").encode(rng.choice(["utf-16", "utf-16-le"]))
    if kind == "crlf":
        return data.replace(b"\n", rng.choice([b"\r\n", b"\r"]))
    if kind == "dup":
        lines = data.split(b"\n")
        return b"\n".join(lines[:1] * rng.randint(2, 4) + lines[1:])
    return b""


def commands(path: Path, folder: Path) -> list[list[str]]:
    return [["check", str(path)], ["analyze", str(path), "--json"], ["check", str(folder), "-j", "2"],
            ["scan", str(folder), "--out", str(folder.parent / "t.parquet"), "-q"],
            ["analyze", str(path), "--html", str(folder.parent / "p.html")]]


def run(args: list[str], stdin: bytes | None = None, limit: float = 120) -> str | None:
    """Why the run failed, or None."""
    try:
        proc = subprocess.run([sys.executable, "-m", "losslens", *args], input=stdin, capture_output=True,
                              timeout=limit, env={**os.environ, "COLUMNS": "100"})
    except subprocess.TimeoutExpired:
        return f"no end within {limit:.0f} s"
    err = proc.stderr.decode(errors="replace")
    if "Traceback" in err:
        return "a traceback: " + err.strip().splitlines()[-1][:200]
    if proc.returncode not in (0, 1, 2):
        return f"exit {proc.returncode}"
    return None


def case(i: int, rng: random.Random, work: Path) -> list[tuple[list[str], str, Path]]:
    """One damaged input through every command; the failures (command, why, the input kept)."""
    source = rng.choice(LOGS)
    data = damage(source.read_bytes(), rng)
    folder = work / f"case{i}" / "runs" / "a"
    folder.mkdir(parents=True)
    path = folder / source.name
    path.write_bytes(data)
    config = work / f"case{i}" / "c.toml"
    config.write_bytes(damage(b'fail_on = "warning"\n[watch]\nwindow = 500\n', rng))
    batches = work / f"case{i}" / "b.jsonl"
    batches.write_bytes(damage(b"".join(b'{"step": %d, "lengths": [%d, %d]}\n' % (s, s % 90 + 10, s % 70 + 5)
                                        for s in range(1260)), rng))
    state = work / f"case{i}" / "t.scan-state.jsonl"
    state.write_bytes(damage(b'{"losslens_scan_state": 1, "fingerprint": "x"}\n', rng))
    runs = [(cmd, None) for cmd in commands(path, folder.parent)]
    runs += [(["watch", "-"], data),
             (["check", str(FIXTURES / "nanogpt_nan.log"), "--config", str(config)], None),
             (["replay", "--batches", str(batches), "--log", str(FIXTURES / "bucketed_run.log")], None)]
    failures = []
    for cmd, stdin in runs:
        why = run(cmd, stdin)
        if why is not None:
            kept = OUT / f"case{i}_{source.name}"
            OUT.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, kept)
            failures.append((cmd, why, kept))
    return failures


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--cases", type=int, default=0, help="stop after this many (0: when the time is up)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    import tempfile

    rng = random.Random(args.seed)
    started, done, failed = time.monotonic(), 0, []
    base = [run(cmd) for cmd in commands(FIXTURES / "seed004_dflash.log", FIXTURES)[:2]]
    assert base == [None, None], base  # the baseline: the undamaged fixture passes the same checks
    with tempfile.TemporaryDirectory() as d:
        def more() -> bool:
            return done < args.cases if args.cases else time.monotonic() - started < args.seconds

        while more():
            for cmd, why, kept in case(done, rng, Path(d)):
                failed.append(why)
                print(f"FAILED losslens {' '.join(cmd)}: {why} (input kept in {kept})", flush=True)
            done += 1
    took = time.monotonic() - started
    print(f"{done} damaged inputs x 8 commands in {took:.0f} s: {len(failed)} failure(s)")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
