"""`losslens watch` under the faults a live log meets: a writer process appends `step=N loss=X`
lines at a set rate, with one planted NaN, while the log is rotated (rename, twice within a
poll), copy-truncated, truncated and rewritten larger (also by a restart that prints the same
preamble first), or written in pieces that cut lines; and rotated while watch is far behind.

For each scenario: the lines written; the lines `watch` accounted for (its JSON summary) and
its notes (a possible loss it could not rule out); the NaN alert's latency (the NaN line written
→ its JSON event read); the watcher's peak RSS; how far behind the writer it finished (its last
output after the last write, less the 4 s this script waits to be sure it is quiet). The
baseline in the same run is `tail -F` on the same file into `wc -l`: what the classic follower
delivers under the same faults.

    python bench/watch_faults.py [--lines 20000] [--rates 5000,20000,50000] [--burst-lines 200000]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path


def rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


PREAMBLE = "".join(f"config.{k} = {k * 7}  # the run's settings, printed at each start\n" for k in range(60))


def sample_rss(pid: int, every: float = 0.1) -> tuple[list[float], threading.Event]:
    """Sample a process's RSS in a thread: ([its peak so far], the event that stops it)."""
    peak, stop = [0.0], threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], rss_mb(pid))
            time.sleep(every)

    threading.Thread(target=sample, daemon=True).start()
    return peak, stop


def watch_json(path: Path) -> tuple[subprocess.Popen, queue.Queue]:
    """`losslens watch PATH --json`, its output lines in a queue with the time each arrived."""
    p = subprocess.Popen([sys.executable, "-m", "losslens", "watch", str(path), "--json"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    q: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [q.put((time.perf_counter(), x)) for x in p.stdout],  # type: ignore[union-attr]
                     daemon=True).start()
    return p, q


def line(i: int, nan_at: int) -> str:
    value = 2.0 + 0.5 * math.exp(-i / 5000) + 0.01 * ((i * 7919) % 13 - 6) / 6
    return f"step={i} loss={'nan' if i == nan_at else f'{value:.4f}'} lr=3.0e-04\n"


def writer(path: Path, n: int, rate: float, fault: str, nan_at: int, nan_time: list[float]) -> int:
    """Append ``n`` lines at ``rate`` lines/s with ``fault`` half-way; the lines written in all
    (a rewrite counts what it writes)."""
    written = 0
    batch = max(1, int(rate / 100))  # a write every ~10 ms
    t0 = time.perf_counter()
    f = open(path, "a")  # noqa: SIM115
    i = 0
    while i < n:
        if i >= n // 2 and fault:
            f.flush()
            if fault == "rename":
                f.close()
                os.rename(path, str(path) + ".1")
                f = open(path, "a")  # noqa: SIM115
            elif fault == "double-rename":
                f.close()
                os.rename(path, str(path) + ".2")
                with open(path, "a") as g:
                    g.write("".join(line(j, nan_at) for j in range(i, i + 50)))
                written += 50
                i += 50
                os.rename(path, str(path) + ".1")
                f = open(path, "a")  # noqa: SIM115
            elif fault == "copytruncate":
                shutil.copy(path, str(path) + ".1")
                os.truncate(path, 0)  # the writer's O_APPEND handle goes on at the new end
            elif fault in ("rewrite", "same-head-rewrite"):
                f.close()
                f = open(path, "w")  # noqa: SIM115 - a new run truncates the log...
                if nan_at in range(i, i + n // 2 + 1000):
                    nan_time.append(time.perf_counter())
                if fault == "same-head-rewrite":  # ...printing the same 3 KB preamble first
                    f.write(PREAMBLE)
                f.write("".join(line(j, nan_at) for j in range(i, i + n // 2 + 1000)))
                written += n // 2 + 1000  # ...and writes past the old size at once
                i += n // 2 + 1000
                f.flush()
            fault = ""
            if i >= n:
                break
        k = min(batch, n - i)
        chunk = "".join(line(j, nan_at) for j in range(i, i + k))
        if nan_at in range(i, i + k):
            nan_time.append(time.perf_counter())
        if fault == "" and k > 2:  # pieces that cut a line in two
            cut = len(chunk) // 2 + 3
            f.write(chunk[:cut])
            f.flush()
            f.write(chunk[cut:])
        else:
            f.write(chunk)
        f.flush()
        written += k
        i += k
        ahead = (i / rate) - (time.perf_counter() - t0)
        if ahead > 0:
            time.sleep(ahead)
    f.close()
    return written


def scenario(fault: str, n: int, rate: float) -> dict:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "run.log"
        path.write_text(PREAMBLE if fault == "same-head-rewrite" else "")
        nan_at = int(n * 0.75)
        p, q = watch_json(path)
        tail_out = Path(d) / "tail.out"
        with open(tail_out, "wb") as sink:
            tail = subprocess.Popen(["tail", "-n", "+1", "-F", str(path)], stdout=sink,
                                    stderr=subprocess.DEVNULL)
        time.sleep(2.0)  # both followers started
        peak, stop = sample_rss(p.pid, 0.2)
        nan_time: list[float] = []
        t0 = time.perf_counter()
        written = writer(path, n, rate, fault, nan_at, nan_time)
        write_s = time.perf_counter() - t0
        # settle: until the watcher has been quiet for 2 s (or 120 s in all)
        events, last = [], time.perf_counter()
        while time.perf_counter() - last < 2.0 and time.perf_counter() - t0 < 120:
            try:
                events.append(q.get(timeout=0.5))
                last = time.perf_counter()
            except queue.Empty:
                pass
        time.sleep(2.0)
        behind_s = time.perf_counter() - t0 - write_s
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=60)
        stop.set()
        while not q.empty():
            events.append(q.get())
        tail.terminate()
        tail.wait(timeout=30)
        tail_lines = tail_out.read_bytes().count(b"\n")
    parsed = [json.loads(x) for _, x in events if x.startswith("{")]
    summary = next((e for e in parsed if e.get("event") == "summary"), {})
    alert = next((t for t, x in events if '"nonfinite"' in x and '"appeared"' in x), None)
    return {"fault": fault or "append", "rate": rate, "written": written,
            "seen": summary.get("lines", {}).get("total"), "notes": summary.get("notes", []),
            "nan_latency_s": round(alert - nan_time[0], 2) if alert and nan_time else None,
            "peak_rss_mb": round(peak[0]), "tail_F": tail_lines, "settle_s": round(behind_s, 1),
            "achieved": round(written / write_s)}


def behind(mb: int) -> dict:
    """Rotation while watch is behind: a log of ``mb`` MB is there when watch starts; 1 s later it
    is renamed (as logrotate does) and a new file gets 1,000 lines with a NaN. Peak RSS while the
    rest of the old file is read, the lines accounted, the NaN alert."""
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "run.log"
        n = 0
        with open(path, "w") as f:
            while f.tell() < mb << 20:
                f.write("".join(line(j, -1) for j in range(n, n + 10_000)))
                n += 10_000
        p, q = watch_json(path)
        peak, stop = sample_rss(p.pid)
        time.sleep(1.0)
        os.rename(path, str(path) + ".1")
        with open(path, "w") as f:
            f.write("".join(line(j, n + 500) for j in range(n, n + 1000)))
        nan_written = time.perf_counter()
        alert = None
        deadline = time.perf_counter() + 300
        while alert is None and time.perf_counter() < deadline:
            try:
                t, x = q.get(timeout=1.0)
            except queue.Empty:
                continue
            if '"nonfinite"' in x and '"appeared"' in x:
                alert = t
        time.sleep(3.0)
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=60)
        stop.set()
        events = []
        while not q.empty():
            events.append(q.get()[1])
    summary = next((json.loads(x) for x in events if '"summary"' in x), {})
    return {"mb": mb, "written": n + 1000, "seen": summary.get("lines", {}).get("total"),
            "nan_alert_s": round(alert - nan_written, 1) if alert else None, "peak_rss_mb": round(peak[0])}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=20_000)
    ap.add_argument("--rates", default="5000,20000,50000")
    ap.add_argument("--burst-lines", type=int, default=200_000, help="lines of each burst (2nd, 3rd rate)")
    ap.add_argument("--behind-mb", type=int, default=300, help="size of the log rotated while watch is "
                    "behind (0: skip)")
    ap.add_argument("--json", help="write the rows here too")
    args = ap.parse_args()
    rows = []
    rates = [float(r) for r in args.rates.split(",")]
    for fault in ("", "rename", "double-rename", "copytruncate", "rewrite", "same-head-rewrite"):
        rows.append(scenario(fault, args.lines, rates[0]))
    for rate in rates[1:]:
        rows.append(scenario("", args.burst_lines, rate))
    print(f"{'fault':17} {'lines/s':>8} {'achieved':>8} {'written':>8} {'watch':>8} {'tail -F':>8} "
          f"{'NaN alert':>10} "
          f"{'RSS MiB':>8} {'behind':>7}  notes")
    for r in rows:
        lat = f"{r['nan_latency_s']:.2f} s" if r["nan_latency_s"] is not None else "never"
        print(f"{r['fault']:17} {r['rate']:8.0f} {r['achieved']:8} {r['written']:8} {r['seen'] or 0:8} "
              f"{r['tail_F']:8} "
              f"{lat:>10} {r['peak_rss_mb']:8} {max(0.0, r['settle_s'] - 4.0):6.1f}s  "
              f"{'; '.join(r['notes'])[:90]}")
    if args.behind_mb:
        b = behind(args.behind_mb)
        print(f"rotated while behind: a {b['mb']} MB log renamed 1 s after watch started: {b['seen']:,} of "
              f"{b['written']:,} lines accounted; NaN in the new file alerted "
              f"{b['nan_alert_s']} s after it was written; peak RSS {b['peak_rss_mb']} MiB")
        rows.append(b)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
