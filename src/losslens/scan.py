"""Fleet scan: every log under many run folders read and analysed once, into one table: a row per
log (what was read, the worst finding, or why it could not be read) and a row per finding.

``discover`` lists the logs under the roots (local folders through the same walk as ``check``;
URLs such as ``s3://`` or ``file://`` through fsspec, where its backend is installed), with each
one's size and modification time. ``scan_one`` reads and analyses one log and returns plain rows:
it runs in this process, in worker processes (``--jobs``) or on a Dask cluster (``--dask``),
and the table is the same whichever ran it. ``scan`` puts it together: a log whose size and
modification time are those the state file recorded is not read again (a nightly scan costs
what changed), and every finished log is appended to the state at once, so that an interrupted
scan resumes where it stopped.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from losslens.errors import LossLensError, MissingExtra, UsageError
from losslens.findings import ExitCode, Gate, Judgement, Severity

if TYPE_CHECKING:
    import polars as pl

    from losslens.runner import Options

STATE_VERSION = 1
LOG_COLUMNS = {  # a log's row (polars dtype names)
    "run": "String", "log": "String", "format": "String", "records": "Int64", "first_step": "Int64",
    "last_step": "Int64", "eval_records": "Int64", "loss_column": "String", "findings": "Int64",
    "kinds": "String", "worst": "String", "status": "String", "error": "String", "size": "Int64",
    "mtime": "Datetime",
}
FINDING_COLUMNS = {  # a finding's row
    "run": "String", "log": "String", "kind": "String", "severity": "String", "metric": "String",
    "start_step": "Int64", "end_step": "Int64", "summary": "String", "evidence": "String",
}
# the table written: a "row" column says which ("log" or "finding"); each log's row comes first,
# then its findings' rows; the other kind's columns are empty
TABLE_COLUMNS = {"row": "String", **LOG_COLUMNS, **FINDING_COLUMNS}


@dataclass(frozen=True)
class Entry:
    """A log to scan: its path or URL, the run folder it belongs to, its size and mtime."""

    log: str
    run: str
    size: int
    mtime_ns: int


@dataclass
class Found:
    """What ``discover`` found: the logs, and the folders or files that could not be listed."""

    entries: list[Entry] = field(default_factory=list)
    errors: list[Entry] = field(default_factory=list)  # (log = the folder) with why in ``why``
    why: dict[str, str] = field(default_factory=dict)
    older: list[Entry] = field(default_factory=list)  # left out by --since (their state is kept)
    linked_out: list[str] = field(default_factory=list)  # links to files outside a root: not read


def parse_since(value: str | None) -> float | None:
    """``--since 7d``: seconds (s, m, h, d, w); None for no limit."""
    if value is None:
        return None
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*", value)
    if m is None:
        raise UsageError(f"--since takes a number and a unit (s, m, h, d, w), e.g. 7d or 12h; got {value!r}")
    return float(m.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}[m.group(2)]


def is_url(root: str) -> bool:
    """A root or log given as a URL (s3://, gs://, file://...), read through fsspec."""
    return "://" in root


def _run_of(path: str, root: str, folder: bool = False) -> str:
    """The run folder a log (or a ``folder``) belongs to: the first folder below the root (the
    root's own name for a log directly in it, or for a root that is a log)."""
    if path == root:
        return os.path.basename(os.path.normpath(os.path.abspath(path if folder else os.path.dirname(path))))
    parts = Path(os.path.relpath(path, root)).parts
    if len(parts) > 1 or folder:
        return parts[0]
    return os.path.basename(os.path.normpath(os.path.abspath(root)))


def discover(roots: list[str], since: float | None = None, now: float | None = None) -> Found:
    """The logs under ``roots`` (modified within ``since`` seconds of ``now``, when given)."""
    found = Found()
    for root in roots:
        if is_url(root):
            _discover_url(root, found)
        else:
            _discover_local(root, found)
    if since is not None:
        cut = ((now if now is not None else time.time()) - since) * 1e9
        found.older = [e for e in found.entries if e.mtime_ns < cut]
        found.entries = [e for e in found.entries if e.mtime_ns >= cut]
    found.entries.sort(key=lambda e: (e.run, e.log))
    return found


def _discover_local(root: str, found: Found) -> None:
    from losslens.discover import expand

    if not os.path.exists(root):
        raise UsageError(f"{root}: no such file or folder")
    from losslens.discover import LINKED_OUT

    walk = expand([root])
    found.linked_out += [path for path, why in walk.ignored if why == LINKED_OUT]
    for folder, why in walk.unlisted:
        e = Entry(folder, _run_of(folder, root, folder=True), 0, 0)
        found.errors.append(e)
        found.why[folder] = why
    for t in walk.targets:
        try:
            size, mtime = _stat_local(t.path)
        except OSError as exc:  # a dangling link, a file gone since the walk
            e = Entry(t.path, _run_of(t.path, root), 0, 0)
            found.errors.append(e)
            found.why[t.path] = f"cannot read the file: {exc.strerror or exc}"
            continue
        found.entries.append(Entry(t.path, _run_of(t.path, root), size, mtime))


def _stat_local(path: str) -> tuple[int, int]:
    """Size and mtime (ns) of a log; of a run folder (MLflow, W&B): its files' total and newest."""
    st = os.stat(path)
    if not os.path.isdir(path):
        return st.st_size, st.st_mtime_ns
    size, mtime = 0, st.st_mtime_ns
    for dirpath, _, files in os.walk(path):
        for name in files:
            s = os.stat(os.path.join(dirpath, name))
            size, mtime = size + s.st_size, max(mtime, s.st_mtime_ns)
    return size, mtime


def _filesystem(url: str) -> tuple[Any, str]:
    try:
        import fsspec
    except ImportError:
        raise MissingExtra("scanning a URL needs fsspec: pip install 'losslens[fleet]'") from None
    try:
        return fsspec.core.url_to_fs(url)
    except (ImportError, ValueError) as exc:  # e.g. s3:// without s3fs installed
        raise MissingExtra(f"{url}: {exc}") from None


def _discover_url(root: str, found: Found) -> None:
    """Files below a URL that the folder walk would select (by name; a JSON file by its first
    bytes), with the size and mtime the filesystem reports. MLflow/W&B run folders are read from
    local paths only."""
    from losslens.discover import SKIP_DIRS, _not_a_log

    fs, base = _filesystem(root)
    try:
        listing = fs.find(base, detail=True)
    except OSError as exc:
        found.errors.append(Entry(root, os.path.basename(base.rstrip("/")), 0, 0))
        found.why[root] = f"cannot list: {exc}"
        return
    for path, info in sorted(listing.items()):
        rel = os.path.relpath(path, base)
        parts = Path(rel).parts
        if any(p in SKIP_DIRS or p.startswith(".") for p in parts[:-1]):
            continue

        def head(n: int, path: str = path) -> bytes:
            with fs.open(path, "rb") as f:
                return f.read(n)

        if _not_a_log(path, parts[-1], head) is not None:
            continue
        url = fs.unstrip_protocol(path)
        run = parts[0] if len(parts) > 1 else os.path.basename(base.rstrip("/"))
        size, mtime = int(info.get("size") or 0), _mtime_ns(info)
        if type(fs).__name__ == "LocalFileSystem":  # to the nanosecond, as a local path has it
            size, mtime = _stat_local(path)
        found.entries.append(Entry(url, run, size, mtime))


def _mtime_ns(info: dict) -> int:
    """A filesystem's modification time in ns (local: mtime; S3: LastModified; GCS: updated)."""
    from datetime import datetime

    for key in ("mtime", "LastModified", "last_modified", "updated", "modified", "created"):
        v = info.get(key)
        if v is None:
            continue
        if isinstance(v, int | float):
            return int(v * 1e9)
        if isinstance(v, str):
            v = datetime.fromisoformat(v.replace("Z", "+00:00"))
        if isinstance(v, datetime):
            return int(v.timestamp() * 1e9)
    return 0


Rows = tuple[dict[str, Any], list[dict[str, Any]]]  # (the log's row, its findings' rows)


def scan_one(entry: Entry, options: Options) -> Rows:
    """Read and analyse one log; its row and its findings' rows (plain values: they travel from
    worker processes and Dask workers). A log that cannot be read is a row with its error, never
    an exception: one bad log must not end a scan of thousands."""
    from losslens.analysis import analyze_log
    from losslens.logs import read_log

    row: dict[str, Any] = {"run": entry.run, "log": entry.log, "format": None, "records": None,
                           "first_step": None, "last_step": None, "eval_records": None,
                           "loss_column": None, "findings": None, "kinds": None, "worst": None,
                           "error": None, "size": entry.size, "mtime_ns": entry.mtime_ns}
    try:
        with _local_copy(entry.log) as path:
            log, report = analyze_log(read_log(path, options.format), options.settings.registry(),
                                      options.ignore, options.metrics)
    except (LossLensError, OSError) as exc:
        row["error"] = str(exc) if isinstance(exc, LossLensError) else f"{entry.log}: {exc.strerror or exc}"
        return row, []
    except Exception as exc:  # a bug must not end the scan either: the row says what happened
        row["error"] = f"{entry.log}: internal error ({type(exc).__name__}: {exc}); please report it"
        return row, []
    row.update(format=report.format, records=report.steps["count"], first_step=report.steps["first"],
               last_step=report.steps["last"], eval_records=report.eval_records,
               loss_column=(report.loss or {}).get("column"), read_errors=list(report.read_errors),
               **_counted(report))
    return row, _finding_rows(entry, report)


def _counted(report: Any) -> dict[str, Any]:
    """A log row's counts of its findings: how many, their kinds, the worst severity."""
    worst = report.worst()
    return {"findings": len(report.findings),
            "kinds": ",".join(sorted({f.kind for f in report.findings})) or None,
            "worst": str(worst) if worst is not None else None}


def _finding_rows(entry: Entry, report: Any) -> list[dict[str, Any]]:
    """A report's findings as the table's rows (plain values)."""
    return [{"run": entry.run, "log": entry.log, "kind": f.kind, "severity": str(f.severity),
             "metric": f.metric, "start_step": f.start_step, "end_step": f.end_step,
             "summary": f.summary, "evidence": json.dumps(d["evidence"], sort_keys=True)}
            for f in report.findings for d in (f.as_dict(),)]


@contextmanager
def _local_copy(log: str) -> Iterator[str]:
    """A local path for a log: itself, or a temporary copy of a remote URL (same file name, so that
    ``.gz`` and the format sniffing see what they would)."""
    if not is_url(log):
        yield log
        return
    fs, path = _filesystem(log)
    if type(fs).__name__ == "LocalFileSystem":
        yield path
        return
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(prefix="losslens-scan-")
    try:
        local = os.path.join(folder, os.path.basename(path.rstrip("/")) or "log")
        fs.get(path, local)
        yield local
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# --- engines --------------------------------------------------------------------------------------
def _local(entries: list[Entry], options: Options, jobs: int) -> Iterator[Rows]:
    """In this process (one job) or over spawned worker processes, in the entries' order."""
    if jobs <= 1 or len(entries) <= 1:
        yield from (scan_one(e, options) for e in entries)
        return
    from functools import partial

    from losslens.workers import in_order

    chunk = max(1, min(16, len(entries) // (8 * jobs)))
    # Ctrl-C, SIGTERM, SIGHUP stop the workers too (what finished is in the state file already)
    yield from in_order(partial(scan_one, options=options), entries, jobs, chunk)


def _dask(entries: list[Entry], options: Options, address: str, jobs: int) -> Iterator[Rows]:
    """On a Dask distributed cluster (``local``: a LocalCluster of ``jobs`` one-thread worker
    processes on this machine), in the order the logs finish."""
    try:
        from dask.distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise MissingExtra("--dask needs dask.distributed: pip install 'losslens[fleet]'") from None
    cluster = None
    try:
        if address == "local":
            cluster = LocalCluster(n_workers=jobs, threads_per_worker=1, processes=True,
                                   dashboard_address=None)
            client = Client(cluster)
        else:
            client = Client(address, timeout=30)
    except OSError as exc:
        raise UsageError(f"--dask {address}: cannot reach the scheduler ({exc})") from None
    try:
        if not entries:
            return
        futures = client.map(scan_one, entries, options=options, pure=False)
        for fut in as_completed(futures):
            yield fut.result()
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


# --- the state file -------------------------------------------------------------------------------
def fingerprint(options: Options) -> str:
    """What a stored row depends on besides the log: losslens's version and the options that
    shape reading and analysis. Another fingerprint means every log is read again."""
    from losslens import __version__

    settings = dataclasses.asdict(options.settings)
    settings.pop("source", None)
    settings.pop("given", None)
    return json.dumps({"version": __version__, "format": options.fmt, "metrics": list(options.metrics),
                       "ignore": sorted(options.ignore), "settings": settings}, sort_keys=True, default=str)


class State:
    """``<out>.scan-state.jsonl``: a header line, then one line per log scanned (its size, mtime and
    rows), appended as each finishes; rewritten with only the current logs at the end."""

    def __init__(self, path: Path, print_: str):
        self.path, self.print = path, print_
        self.rows: dict[str, tuple[int, int, Rows]] = {}
        self._out: Any = None

    def load(self) -> None:
        """The rows of an earlier scan with the same fingerprint (a torn last line is dropped)."""
        if not self.path.exists():
            return
        with open(self.path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
        if not lines:
            return
        try:
            head = json.loads(lines[0])
        except (ValueError, RecursionError):
            return  # not a state file this version wrote: every log is read again
        if not isinstance(head, dict) or head.get("losslens_scan_state") != STATE_VERSION \
                or head.get("fingerprint") != self.print:
            return
        for line in lines[1:]:
            try:
                item = json.loads(line)
                self.rows[item["log"]] = (int(item["size"]), int(item["mtime_ns"]),
                                          (dict(item["row"]), list(item["findings"])))
            except (ValueError, RecursionError, TypeError, KeyError):
                continue  # the line being written when the scan was stopped, or a damaged one

    def fresh(self, e: Entry) -> Rows | None:
        """The stored rows of a log whose size and mtime have not changed since."""
        got = self.rows.get(e.log)
        if got is None or got[0] != e.size or got[1] != e.mtime_ns or not e.mtime_ns:
            return None
        row, findings = got[2]
        return {**row, "run": e.run}, [{**f, "run": e.run} for f in findings]

    def begin(self) -> None:
        """Open for appending; a state of another fingerprint (or none) starts over."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.rows and self.path.exists():
            self._out = open(self.path, "a", encoding="utf-8")
            return
        self._out = open(self.path, "w", encoding="utf-8")
        self._out.write(json.dumps({"losslens_scan_state": STATE_VERSION, "fingerprint": self.print}) + "\n")
        self._out.flush()

    def add(self, e: Entry, rows: Rows) -> None:
        self.rows[e.log] = (e.size, e.mtime_ns, rows)
        if e.mtime_ns:  # (a folder that could not be listed has none: always looked at again)
            self._out.write(json.dumps({"log": e.log, "size": e.size, "mtime_ns": e.mtime_ns,
                                        "row": rows[0], "findings": rows[1]}) + "\n")
            self._out.flush()

    def finish(self, current: Iterable[str]) -> None:
        """Rewrite with the current logs only (atomically)."""
        if self._out is not None:
            self._out.close()
            self._out = None
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(json.dumps({"losslens_scan_state": STATE_VERSION, "fingerprint": self.print}) + "\n")
            for log in current:
                got = self.rows.get(log)
                if got is not None and got[1]:
                    f.write(json.dumps({"log": log, "size": got[0], "mtime_ns": got[1],
                                        "row": got[2][0], "findings": got[2][1]}) + "\n")
        os.replace(tmp, self.path)

    def close(self) -> None:
        if self._out is not None:
            self._out.close()
            self._out = None


# --- the scan -------------------------------------------------------------------------------------
@dataclass
class ScanResult:
    """The logs and the findings (the table written holds both), where it was written, and what the
    scan did."""

    logs: pl.DataFrame
    findings: pl.DataFrame
    paths: dict[str, str]
    analysed: int
    reused: int
    seconds: float
    exit_code: ExitCode
    gate: Gate
    rows: list[Rows] = field(default_factory=list)  # each log's row and its findings' rows
    linked_out: list[str] = field(default_factory=list)  # links out of a root, passed over

    @property
    def fail_on(self) -> Severity | None:
        return self.gate.fail_on


def outputs(out: str) -> dict[str, Path]:
    """``--out X.parquet``: the table in X.parquet and X.csv, the state in X.scan-state.jsonl."""
    p = Path(out)
    if p.suffix != ".parquet":
        raise UsageError(f"--out names the table, a .parquet file (e.g. findings.parquet); got {out}")
    stem = p.with_suffix("")
    return {"table": p, "csv": stem.with_suffix(".csv"), "state": Path(f"{stem}.scan-state.jsonl")}


def judge(row: dict[str, Any], findings: list[dict[str, Any]], gate: Gate) -> Judgement:
    """The gate's verdict on one log's row and its findings' rows (``check``'s, through the same
    ``Gate``): ok, FAIL, or ERROR (unreadable, read short, no loss column)."""
    if row["error"] is not None:
        return gate.judge(None, row["error"])
    return gate.judge_parts(row["log"], _findings(findings), row["loss_column"] is not None,
                            row.get("read_errors") or ())


def _findings(rows: list[dict[str, Any]]) -> list[Any]:
    """Findings again from their rows (the evidence parsed back; no figures, no line)."""
    from losslens.findings import Finding

    return [Finding(f["kind"], Severity.parse(f["severity"]), f["metric"], f["start_step"], f["end_step"],
                    f["summary"], json.loads(f["evidence"]) if f.get("evidence") else {}) for f in rows]


def scan(roots: list[str], options: Options, out: str, gate: Gate, since: float | None = None,
         dask: str | None = None, rescan: bool = False,
         on_row: Callable[[Entry, Rows, bool], None] | None = None, same_data: bool = False) -> ScanResult:
    """Scan the logs under ``roots`` and write the table (and the state) at ``out``.
    ``same_data``: the runs in sibling folders read the same data in the same order (a sweep's
    runs): the spikes they share are said as such (``shared_by_folder``)."""
    started = time.monotonic()
    where = outputs(out)
    found = discover(roots, since)
    if not found.entries and not found.errors:
        raise UsageError(f"no log files found in {', '.join(roots)}")
    state = State(where["state"], fingerprint(options))
    if not rescan:
        state.load()
    todo, done = [], []
    for e in found.entries:
        kept = state.fresh(e)
        if kept is None:
            todo.append(e)
        else:
            done.append((e, kept))
            if on_row:
                on_row(e, kept, True)
    state.begin()
    by_log = {e.log: e for e in todo}
    engine = _dask(todo, options, dask, options.jobs) if dask else _local(todo, options, options.jobs)
    try:
        for rows in engine:
            e = by_log[rows[0]["log"]]
            state.add(e, rows)
            done.append((e, rows))
            if on_row:
                on_row(e, rows, False)
    finally:
        state.close()
    for e in found.errors:  # folders that could not be listed: rows with the error
        done.append((e, _error_row(e, found.why[e.log])))
    state.finish(e.log for e in found.entries + found.older)
    logs_rows, finding_rows, table, judgements = [], [], [], []
    done.sort(key=lambda d: (d[0].run, d[0].log))
    if same_data:
        done = shared_by_folder(done, options)
    ordered = [rows for _, rows in done]
    for row, findings in ordered:
        verdict = judge(row, findings, gate)
        # an unreadable log counts for nothing with --skip-unreadable (its row keeps its error)
        judgements.append(None if row["error"] is not None and options.skip_unreadable else verdict)
        logs_rows.append({**row, "status": str(verdict.word), "error": row["error"] or verdict.why})
        finding_rows += findings
        table += [{**logs_rows[-1], "row": "log"}] + [{**f, "row": "finding"} for f in findings]
    logs = _frame(logs_rows, LOG_COLUMNS)
    findings_frame = _frame(finding_rows, FINDING_COLUMNS)
    _write(_frame(table, TABLE_COLUMNS), where["table"], where["csv"])
    return ScanResult(logs, findings_frame, {k: str(v) for k, v in where.items()}, len(todo),
                      len(found.entries) - len(todo), time.monotonic() - started, gate.exit_code(judgements),
                      gate, ordered, found.linked_out)


def shared_by_folder(done: list[tuple[Entry, Rows]], options: Options) -> list[tuple[Entry, Rows]]:
    """``scan --same-data``: the logs of sibling folders (two or more, read without an error) read
    again for their losses, and the spikes they share at a step said in their findings' rows
    (``analysis.same_data``: cause ``data``), each log's row counted again."""
    from losslens.analysis import analyze_log, same_data
    from losslens.logs import read_log

    # a group: the logs of sibling folders (sweep/a/..., sweep/b/...), one log a folder (the one
    # with the most records: two logs of one run are the same run, not two sharing data)
    per_folder: dict[str, int] = {}
    for i, (e, (row, _)) in enumerate(done):
        if row["error"] is None:
            folder = os.path.dirname(e.log)
            j = per_folder.get(folder)
            if j is None or (row["records"] or 0) > (done[j][1][0]["records"] or 0):
                per_folder[folder] = i
    groups: dict[str, list[int]] = {}
    for folder, i in sorted(per_folder.items()):
        groups.setdefault(os.path.dirname(folder), []).append(i)
    out = list(done)
    for members in groups.values():
        if len(members) < 2:
            continue
        analysed = []
        for i in members:
            with _local_copy(done[i][0].log) as path:
                analysed.append(analyze_log(read_log(path, options.format), options.settings.registry(),
                                            options.ignore, options.metrics))
        for i, report in zip(members, same_data(analysed), strict=True):
            e, (row, _) = done[i]
            out[i] = (e, ({**row, **_counted(report)}, _finding_rows(e, report)))
    return out


@dataclass(frozen=True)
class Outcome:
    """A scanned log as the CI reporters take it (``reporters.ci.Outcome``)."""

    source: str
    report: Any
    error: str | None
    seconds: float = 0.0


def outcomes(result: ScanResult) -> list[Outcome]:
    """Each scanned log as the CI reporters take it: its report rebuilt from its rows."""
    from losslens.findings import Report

    out = []
    for row, findings in result.rows:
        if row["error"] is not None:
            out.append(Outcome(row["log"], None, row["error"]))
            continue
        steps = {"first": row["first_step"], "last": row["last_step"], "count": row["records"]}
        report = Report(row["log"], row["format"], {}, {}, steps, row["eval_records"] or 0, 1, [],
                        _findings(findings),
                        loss={"column": row["loss_column"], "why": ""} if row["loss_column"] else None,
                        read_errors=list(row.get("read_errors") or ()))
        out.append(Outcome(row["log"], report, None))
    return out


def _error_row(e: Entry, why: str) -> Rows:
    row = {"run": e.run, "log": e.log, "format": None, "records": None, "first_step": None,
           "last_step": None, "eval_records": None, "loss_column": None, "findings": None, "kinds": None,
           "worst": None, "error": f"{e.log}: {why}", "size": None, "mtime_ns": None}
    return row, []


def _frame(rows: list[dict[str, Any]], columns: dict[str, str]) -> pl.DataFrame:
    """The rows as a frame of ``columns`` (a row's missing columns are empty)."""
    import polars as pl

    schema = {c: pl.Datetime("us", "UTC") if t == "Datetime" else getattr(pl, t) for c, t in columns.items()}
    data: dict[str, list] = {c: [] for c in columns}
    for r in rows:
        for c in columns:
            if c == "mtime":
                ns = r.get("mtime_ns")
                data[c].append(None if not ns else _utc(ns))
            else:
                data[c].append(r.get(c))
    return pl.DataFrame(data, schema=schema)


def _utc(ns: int) -> Any:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ns / 1e9, UTC)


def _write(frame: pl.DataFrame, parquet: Path, csv: Path) -> None:
    """Both files, each atomically (a reader never sees half a table)."""
    parquet.parent.mkdir(parents=True, exist_ok=True)
    for path, write in ((parquet, frame.write_parquet), (csv, frame.write_csv)):
        tmp = path.with_name(path.name + ".tmp")
        write(tmp)
        os.replace(tmp, path)
