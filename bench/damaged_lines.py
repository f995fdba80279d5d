"""Every reader on damaged lines: each format's sniff and line parser (what `check` and `watch` run
on a line) on lines holding a long run of one piece of text, against one plain pass over the
same line (`str.split`) in the same run.

The lines: each format's example line and the first loss line of each fixture and real log
(../shared/reallogs, where present), each with a run of ``--chars`` characters of a piece (a
space, a tab, a digit, a letter, 'a_', 'a:a', 'a: 1 ', '| ', '9.', 'a=') inserted after each of
its first separators and at its end, followed by ' !' (so that a pattern that wants more after
the run is refused there). A pattern that tries every split of a run is quadratic or worse on
such a line: seconds at 20,000 characters, hours at a million. Each call has a minute at most (an
alarm); the script exits 1 when one took over ``--limit`` seconds.

    python bench/damaged_lines.py [--chars 100000] [--cuts 4] [--limit 1.0]
"""

from __future__ import annotations

import argparse
import re
import signal
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from losslens.logs.registry import FORMATS  # noqa: E402
from losslens.logs.sink import Sink, feed_line  # noqa: E402

PIECES = (" ", "\t", "9", "a", "a_", "a:a", "a: 1 ", "| ", "9.", "a=")
SEPARATORS = re.compile(r"[\s:=|,\[(]+")


class _Late(Exception):
    pass


def _alarm(*_: object) -> None:
    raise _Late


def lines_to_damage() -> list[str]:
    """The formats' example lines and the first loss line of each fixture and real log."""
    lines = [x for f in FORMATS for x in f.example.split("\n") if x.strip()]
    files = sorted((ROOT / "fixtures").glob("*.log"))
    real = ROOT.parent / "shared" / "reallogs"
    if real.is_dir():
        files += sorted(p for p in real.glob("*/*") if p.is_file() and p.suffix != ".md")
    for path in files:
        with open(path, "rb") as f:
            head = f.read(1 << 20)
        if head[:2] == b"\x1f\x8b":
            continue
        for line in head.decode("utf-8", "replace").splitlines()[:3000]:
            if "loss" in line.lower() and any(c.isdigit() for c in line) and len(line) < 800:
                lines.append(line)
                break
    return list(dict.fromkeys(lines))


def timed(fn: object, *args: object) -> float:
    """Seconds of one call (60 at most: an alarm stops it)."""
    signal.setitimer(signal.ITIMER_REAL, 60)
    t = time.perf_counter()
    try:
        fn(*args)  # type: ignore[operator]
    except _Late:
        pass
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return time.perf_counter() - t


def _read(fmt: object, line: str) -> None:
    parser = fmt.parser_for(Sink(), line)  # type: ignore[attr-defined]
    feed_line(parser, 1, line)
    parser.finish()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chars", type=int, default=100_000)
    ap.add_argument("--cuts", type=int, default=4, help="separators after which a run is inserted")
    ap.add_argument("--limit", type=float, default=1.0)
    ap.add_argument("--pieces", type=int, default=len(PIECES), help="the first N of the pieces")
    args = ap.parse_args()
    pieces = PIECES[:args.pieces]
    signal.signal(signal.SIGALRM, _alarm)
    lines = lines_to_damage()
    worst: dict[str, tuple[float, float, str, str]] = {}
    plain_total, calls, started = 0.0, 0, time.perf_counter()
    for line in lines:
        cuts = sorted({m.end() for m in SEPARATORS.finditer(line)})[:args.cuts] + [len(line)]
        for piece in pieces:
            for cut in cuts:
                damaged = line[:cut] + piece * (args.chars // len(piece)) + " !" + line[cut:]
                plain = timed(str.split, damaged)
                plain_total += plain
                for fmt in FORMATS:
                    spent = timed(fmt.sniff, [damaged])
                    if not fmt.whole_file:
                        spent += timed(_read, fmt, damaged)
                    calls += 1
                    if spent > worst.get(fmt.name, (-1.0,))[0]:
                        worst[fmt.name] = (spent, plain, piece, line[:50])
    print(f"{len(lines)} lines, {len(pieces)} pieces of {args.chars:,} characters after up to {args.cuts} "
          f"separators and at the end: {calls:,} (format, line) reads in "
          f"{time.perf_counter() - started:.0f} s")
    print("baseline: one str.split of the damaged line")
    print(f"{'format':<15} {'worst read':>10} {'str.split':>10} {'ratio':>7}  worst piece, line")
    over = 0
    for name, (spent, plain, piece, head) in sorted(worst.items(), key=lambda kv: -kv[1][0]):
        over += spent > args.limit
        ratio = spent / max(plain, 1e-9)
        print(f"{name:<15} {spent:>9.4f}s {plain:>9.4f}s {ratio:>7.1f}  {piece!r}, {head!r}")
    print(f"{over} format(s) over {args.limit} s")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
