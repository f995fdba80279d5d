"""`losslens scan`: a fleet of run folders -> the logs and findings tables, the exit code, the
incremental re-run, an interrupted scan resumed, broken folders as rows, file:// URLs and Dask."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import time
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from losslens.cli import app
from losslens.findings import Gate, Severity
from tests.conftest import FIXTURES

runner = CliRunner()


def fleet(root: Path) -> Path:
    """Six run folders: a ladder, a NaN grad norm (HF trainer_state.json), a NaN loss (nanoGPT in
    a logs/ subfolder), a clean JSON Lines run with a config.json beside it (passed over), a .gz
    copy that stopped half-way and an empty log."""
    (root / "a-ladder").mkdir(parents=True)
    shutil.copy(FIXTURES / "seed004_dflash.log", root / "a-ladder" / "train.log")
    (root / "b-hf").mkdir()
    shutil.copy(FIXTURES / "trainer_state.json", root / "b-hf" / "trainer_state.json")
    (root / "b-hf" / "config.json").write_text('{"learning_rate": 0.0003}')
    (root / "c-nanogpt" / "logs").mkdir(parents=True)
    shutil.copy(FIXTURES / "nanogpt_nan.log", root / "c-nanogpt" / "logs" / "stdout.log")
    (root / "d-clean").mkdir()
    (root / "d-clean" / "metrics.jsonl").write_text(
        "".join(json.dumps({"step": s, "loss": round(3.0 * 0.99 ** s + 0.5, 4)}) + "\n" for s in range(120)))
    (root / "d-clean" / "config.json").write_text('{"seed": 1}')
    (root / "e-cut").mkdir()
    text = "".join(f"step={s} loss={2 + (s * 7919 % 97) / 97:.4f}\n" for s in range(400))
    whole = gzip.compress(text.encode())
    (root / "e-cut" / "train.log.gz").write_bytes(whole[:8])  # cut in its header: nothing to read
    (root / "f-empty").mkdir()
    (root / "f-empty" / "train.log").write_bytes(b"")
    return root


def tables(out: Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(the finding rows, the log rows) of the table, each with its own columns."""
    from losslens.scan import FINDING_COLUMNS, LOG_COLUMNS

    table = pl.read_parquet(out)
    return (table.filter(pl.col("row") == "finding").select(list(FINDING_COLUMNS)),
            table.filter(pl.col("row") == "log").select(list(LOG_COLUMNS)))


def test_scan_writes_a_row_per_log_and_per_finding_and_exits_like_check(tmp_path: Path) -> None:
    root, out = fleet(tmp_path / "fleet"), tmp_path / "out" / "findings.parquet"
    res = runner.invoke(app, ["scan", str(root), "--out", str(out), "--jobs", "1"])
    assert res.exit_code == 2, res.output  # two logs cannot be read: never 'ok'
    findings, logs = tables(out)
    assert logs.select("run", "format", "records", "kinds", "worst", "status").rows() == [
        ("a-ladder", "kv", 30, "ladder", "error", "FAIL"),
        ("b-hf", "trainer-state", 3, "nonfinite", "error", "FAIL"),
        ("c-nanogpt", "nanogpt", 41, "nonfinite", "error", "FAIL"),
        ("d-clean", "jsonl", 120, None, None, "ok"),
        ("e-cut", None, None, None, None, "ERROR"),
        ("f-empty", None, None, None, None, "ERROR")]
    errors = logs.filter(pl.col("status") == "ERROR")["error"].to_list()
    assert errors[0].endswith("train.log.gz: the gzip data ends before its end marker, after 8 compressed "
                              "bytes (a file cut short): nothing decompresses")
    assert errors[1].endswith("train.log: empty file: no lines to read")
    assert findings.select("run", "kind", "severity", "start_step").rows() == [
        ("a-ladder", "ladder", "error", 144), ("b-hf", "nonfinite", "error", 20),
        ("c-nanogpt", "nonfinite", "error", 180)]
    assert json.loads(findings["evidence"][0])["episodes"] == 3
    # each log's row, then its findings'; the CSV twin holds the same rows
    assert pl.read_parquet(out)["row"].to_list()[:4] == ["log", "finding", "log", "finding"]
    csv = pl.read_csv(out.with_suffix(".csv"))
    assert csv.select("row", "run", "kind").rows() == pl.read_parquet(out).select("row", "run", "kind").rows()
    assert "scanned 6 logs in 6 runs: 6 read and analysed, 0 unchanged" in res.output
    assert "logs: 1 ok, 3 FAIL (a finding at or above error), 2 ERROR" in res.output
    # --skip-unreadable: the broken logs stay rows, the exit code is the findings'
    res = runner.invoke(app, ["scan", str(root), "--out", str(out), "--skip-unreadable", "-q"])
    assert res.exit_code == 1 and res.output == ""
    # --json: the summary as one object
    res = runner.invoke(app, ["scan", str(root), "--out", str(out), "--json"])
    summary = json.loads(res.stdout)
    assert (summary["logs"], summary["analysed"], summary["reused"], summary["exit_code"]) == (6, 0, 6, 2)
    assert summary["runs_by_worst"] == {"error": 3, "warning": 0, "info": 0, "none": 3}
    assert summary["top_kinds"] == [{"kind": "nonfinite", "runs": 2, "findings": 2},
                                    {"kind": "ladder", "runs": 1, "findings": 1}]
    # only the clean run: 0
    res = runner.invoke(app, ["scan", str(root / "d-clean"), "--out", str(tmp_path / "d.parquet"), "-q"])
    assert res.exit_code == 0


def test_a_rerun_reads_only_what_changed(tmp_path: Path) -> None:
    from losslens import scan
    from losslens.runner import Options

    root, out = fleet(tmp_path / "fleet"), str(tmp_path / "f.parquet")
    options = Options.make(None, None, None, None, jobs=1)
    first = scan.scan([str(root)], options, out, Gate(Severity.ERROR))
    assert (first.analysed, first.reused) == (6, 0)
    again = scan.scan([str(root)], options, out, Gate(Severity.ERROR))
    assert (again.analysed, again.reused) == (0, 6)
    assert again.logs.equals(first.logs) and again.findings.equals(first.findings)
    # a log that grows is read again; one that is gone leaves the tables
    log = root / "d-clean" / "metrics.jsonl"
    with open(log, "a") as f:
        f.write(json.dumps({"step": 120, "loss": float("nan")}).replace("NaN", "NaN") + "\n")
    os.remove(root / "f-empty" / "train.log")
    third = scan.scan([str(root)], options, out, Gate(Severity.ERROR))
    assert (third.analysed, third.reused) == (1, 4)
    assert third.logs.filter(pl.col("run") == "d-clean")["kinds"].to_list() == ["nonfinite"]
    assert "f-empty" not in third.logs["run"].to_list()
    # other options (another --ignore) make every stored row stale
    other = Options.make(None, None, "ladder", None, jobs=1)
    assert scan.scan([str(root)], other, out, Gate(Severity.ERROR)).analysed == 5


def test_an_interrupted_scan_goes_on_where_it_stopped(tmp_path: Path) -> None:
    from losslens import scan
    from losslens.runner import Options

    root, out = fleet(tmp_path / "fleet"), str(tmp_path / "f.parquet")
    options = Options.make(None, None, None, None, jobs=1)
    seen: list[str] = []

    def stop_after_three(entry: scan.Entry, rows: scan.Rows, reused: bool) -> None:
        seen.append(entry.log)
        if len(seen) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        scan.scan([str(root)], options, out, Gate(Severity.ERROR), on_row=stop_after_three)
    state = Path(out).with_name("f.scan-state.jsonl").read_text().splitlines()
    assert len(state) == 1 + 3  # the header and the three logs that finished
    state_lines = Path(out).with_name("f.scan-state.jsonl")
    with open(state_lines, "a") as f:
        f.write('{"log": "torn by the interruption", "si')  # a line cut in the middle
    resumed = scan.scan([str(root)], options, out, Gate(Severity.ERROR))
    assert (resumed.analysed, resumed.reused) == (3, 3)
    assert resumed.logs.height == 6


def test_since_takes_only_recent_logs(tmp_path: Path) -> None:
    root, out = fleet(tmp_path / "fleet"), tmp_path / "f.parquet"
    old = time.time() - 10 * 86400
    for p in root.rglob("*"):
        if p.is_file() and "a-ladder" not in str(p):
            os.utime(p, (old, old))
    res = runner.invoke(app, ["scan", str(root), "--since", "7d", "--out", str(out), "-q"])
    assert res.exit_code == 1
    assert tables(out)[1]["run"].to_list() == ["a-ladder"]
    # the older logs keep their state: a scan without --since after one with it reads nothing again
    runner.invoke(app, ["scan", str(root), "--out", str(out), "-q"])
    runner.invoke(app, ["scan", str(root), "--since", "7d", "--out", str(out), "-q"])
    res = runner.invoke(app, ["scan", str(root), "--out", str(out)])
    assert "0 read and analysed, 6 unchanged" in res.output
    bad = runner.invoke(app, ["scan", str(root), "--since", "7 days", "--out", str(out)])
    assert bad.exit_code == 2 and "--since takes a number and a unit" in bad.output


def test_folders_that_cannot_be_listed_are_rows_not_silence(tmp_path: Path, monkeypatch) -> None:
    """Permission denied on a run folder (root reads everything here, so the walk is made to fail
    as it would for another user) is a row with the error, and check exits 2 on it too."""
    root, out = fleet(tmp_path / "fleet"), tmp_path / "f.parquet"
    real = os.scandir

    def scandir(path: object = ".") -> object:
        if str(path).endswith("c-nanogpt"):
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "scandir", scandir)
    res = runner.invoke(app, ["scan", str(root), "--out", str(out), "--jobs", "1"])
    assert res.exit_code == 2
    logs = tables(out)[1]
    row = logs.filter(pl.col("run") == "c-nanogpt").select("status", "error").row(0)
    assert row == ("ERROR", f"{root / 'c-nanogpt'}: cannot list the folder: Permission denied")
    chk = runner.invoke(app, ["check", str(root / "c-nanogpt"), str(root / "a-ladder")])
    assert chk.exit_code == 2 and "cannot list the folder: Permission denied" in chk.output


def test_a_file_url_gives_the_same_rows(tmp_path: Path) -> None:
    pytest.importorskip("fsspec")
    root = fleet(tmp_path / "fleet")
    runner.invoke(app, ["scan", str(root), "--out", str(tmp_path / "a.parquet"), "-q", "-j", "1"])
    res = runner.invoke(app, ["scan", f"file://{root}", "--out", str(tmp_path / "b.parquet"), "-q",
                              "-j", "1"])
    assert res.exit_code == 2
    (fa, la), (fb, lb) = tables(tmp_path / "a.parquet"), tables(tmp_path / "b.parquet")
    assert lb["log"].to_list() == [f"file://{p}" for p in la["log"]]
    assert la.drop("log", "error").equals(lb.drop("log", "error"))
    assert fa.drop("log").equals(fb.drop("log"))


def test_the_output_must_be_a_parquet_file(tmp_path: Path) -> None:
    res = runner.invoke(app, ["scan", str(FIXTURES), "--out", str(tmp_path / "f.csv")])
    assert res.exit_code == 2
    assert "--out names the table, a .parquet file" in res.output


@pytest.mark.slow
def test_worker_processes_and_a_dask_cluster_give_the_same_tables(tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    root = fleet(tmp_path / "fleet")
    one = runner.invoke(app, ["scan", str(root), "--out", str(tmp_path / "one.parquet"), "-j", "1", "-q"])
    two = runner.invoke(app, ["scan", str(root), "--out", str(tmp_path / "two.parquet"), "-j", "2", "-q"])
    dask = runner.invoke(app, ["scan", str(root), "--out", str(tmp_path / "dask.parquet"), "-j", "2", "-q",
                               "--dask", "local"])
    assert one.exit_code == two.exit_code == dask.exit_code == 2
    base = tables(tmp_path / "one.parquet")
    for name in ("two", "dask"):
        other = tables(tmp_path / f"{name}.parquet")
        assert other[0].equals(base[0]) and other[1].equals(base[1])


def test_the_readme_reads_the_table_as_it_shows(tmp_path: Path, monkeypatch) -> None:
    """The README's polars lines run on a scan's table (the cron line's --out, then its code)."""
    from tests.conftest import ROOT

    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Fleet scan", 1)[1].split("\n## ", 1)[0]
    cron = next(line for line in section.splitlines() if "losslens scan" in line and "--since" in line)
    assert "--out nightly/findings.parquet" in cron
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    root = fleet(tmp_path / "fleet")
    monkeypatch.chdir(tmp_path)
    res = runner.invoke(app, ["scan", str(root), "--since", "7d", "--out", "nightly/findings.parquet", "-q"])
    assert res.exit_code == 2
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)  # noqa: S102 - the README's own example
    assert sorted(scope["nan_runs"].to_list()) == ["b-hf", "c-nanogpt"]
    assert scope["logs"].height == 6 and scope["findings"].height == 3


def test_scan_same_data_says_the_spikes_a_sweeps_runs_share(tmp_path: Path) -> None:
    """Two runs of one sweep folder (the same data order, other seeds of the noise), a ×1.5 batch
    at step 700 in both, heavy-tailed noise: alone each is at most information; with
    --same-data both get a warning with cause data. A run in another folder is not compared
    (scan names the folder under the root as the run: both logs are run "sweep")."""
    import numpy as np

    def write(path: Path, seed: int, spike: int | None) -> None:
        rng = np.random.default_rng(seed)
        steps = np.arange(1, 2001)
        v = (0.8 + 2.5 * np.exp(-steps / 300)) * np.exp(0.03 * rng.standard_t(3, 2000))
        if spike:
            v[spike - 1] *= 1.5
        path.parent.mkdir(parents=True)
        path.write_text("step,loss\n" + "".join(f"{s},{x:.5f}\n" for s, x in zip(steps, v, strict=True)))

    root = tmp_path / "runs"
    write(root / "sweep" / "a" / "metrics.csv", 1, 700)
    write(root / "sweep" / "b" / "metrics.csv", 2, 700)
    write(root / "other" / "c" / "metrics.csv", 3, 700)
    out = tmp_path / "out" / "scan.parquet"

    def shared(*extra: str) -> dict[str, list[tuple[int, str]]]:
        r = CliRunner().invoke(app, ["scan", str(root), "--out", str(out), "--rescan", *extra])
        assert r.exit_code == 0, r.output
        rows = pl.read_parquet(out).filter(pl.col("row") == "finding")
        got: dict[str, list[tuple[int, str]]] = {}
        for run, step, sev, ev in rows.select("run", "start_step", "severity", "evidence").iter_rows():
            if json.loads(ev).get("cause") == "data":
                got.setdefault(run, []).append((step, sev))
        return got

    assert shared() == {}
    assert shared("--same-data") == {"sweep": [(700, "warning"), (700, "warning")]}  # (a, b: one run)
