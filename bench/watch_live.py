"""`losslens watch` as a process: alert latency (append the line that completes a pattern →
the JSON event arrives; goal <= 1 s at default settings, against the poll interval in the same
run) and memory (RSS after 100k vs after N appended lines; goal: flat within 10 %).

    python bench/watch_live.py [--lines 1000000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from losslens import synth
from losslens.config import WATCH


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def start(path: Path) -> tuple[subprocess.Popen, queue.Queue]:
    p = subprocess.Popen([sys.executable, "-m", "losslens", "watch", str(path), "--json"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    q: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [q.put(x) for x in p.stdout], daemon=True).start()  # type: ignore[union-attr]
    return p, q


def latency(repeat: int) -> list[float]:
    out = []
    lines = list(synth.dflash_lines(2000))
    for r in range(repeat):
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "run.log"
            path.write_text("\n".join(lines) + "\n")
            p, q = start(path)
            time.sleep(3.0)  # settled on a clean log
            nan = f"[2026-05-15 23:00:00] step={2000 + r} loss=nan acc=0.1"
            t0 = time.perf_counter()
            with open(path, "a") as f:
                f.write(nan + "\n")
            while True:
                ev = json.loads(q.get(timeout=30))
                if ev.get("event") == "appeared" and ev["finding"]["kind"] == "nonfinite":
                    out.append(time.perf_counter() - t0)
                    break
            p.send_signal(signal.SIGINT)
            p.wait(timeout=30)
    return out


def memory(n: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "run.log"
        path.write_text("")
        p, _ = start(path)
        gen = synth.dflash_lines(n)
        written, at_100k = 0, float("nan")
        batch = 20_000
        while written < n:
            chunk = [next(gen) for _ in range(min(batch, n - written))]
            with open(path, "a") as f:
                f.write("\n".join(chunk) + "\n")
            written += len(chunk)
            time.sleep(0.5)
            if written == 100_000:
                time.sleep(3)
                at_100k = rss_mb(p.pid)
        time.sleep(5)
        end = rss_mb(p.pid)
        p.send_signal(signal.SIGINT)
        p.wait(timeout=60)
        os.sync()
    return at_100k, end


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    lat = latency(args.repeat)
    print(f"poll interval (default)      {WATCH['interval_s'][0]:.2f} s")
    print(f"alert latency, {len(lat)} runs     median {sorted(lat)[len(lat) // 2]:.2f} s, max "
          f"{max(lat):.2f} s (goal <= 1 s)")
    a, b = memory(args.lines)
    print(f"RSS after 100k lines          {a:.0f} MiB")
    print(f"RSS after {args.lines:,} lines   {b:.0f} MiB  ratio {b / a:.3f} (goal <= 1.10)")


if __name__ == "__main__":
    main()
