"""The terminal summary of a fleet scan: what was scanned, runs by their worst finding, the kinds
found most, and where the table is."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from losslens.scan import ScanResult

TOP_KINDS = 10
SHOWN_ERRORS = 5


def summary(r: ScanResult) -> dict[str, Any]:
    """The numbers the view shows, as plain values (also ``scan --json``)."""
    import polars as pl

    logs, findings = r.logs, r.findings
    rank = {"info": 1, "warning": 2, "error": 3}
    runs: dict[str, tuple[int, bool]] = {}  # run -> (its worst finding's rank, a log unreadable)
    for run, w, st in zip(logs["run"], logs["worst"], logs["status"], strict=True):
        was = runs.get(run, (0, False))
        runs[run] = (max(was[0], rank.get(w or "", 0)), was[1] or st == "ERROR")
    names = {v: k for k, v in rank.items()} | {0: "none"}
    worst = dict.fromkeys(("error", "warning", "info", "none"), 0)
    for w_rank, _ in runs.values():
        worst[names[w_rank]] += 1
    kinds = (findings.group_by("kind").agg(pl.col("run").n_unique().alias("runs"), pl.len().alias("findings"))
             .sort(["runs", "findings", "kind"], descending=[True, True, False]))
    status = {s: int((logs["status"] == s).sum()) for s in ("ok", "FAIL", "ERROR")}
    return {"logs": logs.height, "runs": len(runs), "analysed": r.analysed, "reused": r.reused,
            "seconds": round(r.seconds, 2),
            "logs_per_s": round(r.analysed / r.seconds, 1) if r.seconds else None,
            "runs_by_worst": worst, "runs_with_unreadable_log": sum(u for _, u in runs.values()),
            "logs_by_status": status, "fail_on": str(r.fail_on), "findings": findings.height,
            "top_kinds": kinds.head(TOP_KINDS).to_dicts(), "tables": r.paths, "exit_code": int(r.exit_code),
            "linked_out": list(r.linked_out)}


def render(r: ScanResult, verbose: bool = False) -> Group:
    """The summary for a terminal: what was scanned, runs by their worst finding, the top kinds,
    the first logs that could not be read (all with ``verbose``) and where the table is."""
    s = summary(r)
    head = Text(f"scanned {s['logs']:,} logs in {s['runs']:,} runs: {s['analysed']:,} read and analysed, "
                f"{s['reused']:,} unchanged since the last scan (not read again); {s['seconds']:.1f} s"
                + (f", {s['logs_per_s']:,} logs/s" if s["analysed"] and s["logs_per_s"] else ""))
    runs = Table(title="runs by their worst finding", title_justify="left")
    for col in ("worst", "runs"):
        runs.add_column(col)
    style = {"error": "bold red", "warning": "yellow", "info": "blue", "none": "green"}
    for k, n in s["runs_by_worst"].items():
        runs.add_row(Text(k if k != "none" else "no finding", style=style[k]), f"{n:,}")
    runs.add_row(Text("a log could not be read", style="bold red"), f"{s['runs_with_unreadable_log']:,}")
    parts: list[Any] = [head, runs]
    if s["top_kinds"]:
        kinds = Table(title=f"finding kinds (top {TOP_KINDS})", title_justify="left")
        for col in ("kind", "runs", "findings"):
            kinds.add_column(col)
        for k in s["top_kinds"]:
            kinds.add_row(Text(k["kind"]), f"{k['runs']:,}", f"{k['findings']:,}")
        parts.append(kinds)
    errors = r.logs.filter(r.logs["status"] == "ERROR")
    shown = errors if verbose else errors.head(SHOWN_ERRORS)
    for row in shown.iter_rows(named=True):
        why = row["error"] or f"{row['log']}: no loss metric found (pass --metric NAME)"
        parts.append(Text(f"ERROR {why}", style="red"))
    if errors.height > shown.height:
        parts.append(Text(f"… {errors.height - shown.height} more logs with status ERROR in the logs "
                          "table (--verbose lists them)"))
    for path in r.linked_out if verbose else r.linked_out[:SHOWN_ERRORS]:
        parts.append(Text(f"passed over {path}: a link to a file outside the root (name its target to "
                          "scan it)", style="yellow"))
    if not verbose and len(r.linked_out) > SHOWN_ERRORS:
        parts.append(Text(f"… {len(r.linked_out) - SHOWN_ERRORS} more links out of the roots (--verbose "
                          "lists them)"))
    st = s["logs_by_status"]
    t = s["tables"]
    parts.append(Text(f"logs: {st['ok']:,} ok, {st['FAIL']:,} FAIL (a finding at or above {s['fail_on']}), "
                      f"{st['ERROR']:,} ERROR; table: {t['table']} and {t['csv']} ({s['logs']:,} log rows, "
                      f"{s['findings']:,} finding rows)"))
    return Group(*parts)
