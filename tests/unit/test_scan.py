"""losslens.scan: the logs under a fleet's roots found (run folder, --since), each one's row and
its findings' rows judged by the same gate as ``check``."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from losslens import runner, scan
from losslens.errors import UsageError
from losslens.findings import Gate, Severity, Word
from tests.conftest import FIXTURES


@pytest.mark.parametrize(("text", "seconds"), [("7d", 604800.0), ("12h", 43200.0), (" 1.5 m ", 90.0),
                                               ("2w", 1209600.0), (None, None)])
def test_since_takes_a_number_and_a_unit(text: str | None, seconds: float | None) -> None:
    assert scan.parse_since(text) == seconds


def test_since_without_a_unit_is_one_line() -> None:
    with pytest.raises(UsageError, match=r"--since takes a number and a unit .* got '7'"):
        scan.parse_since("7")


def test_discover_names_each_log_s_run_folder_and_leaves_out_old_ones(tmp_path: Path) -> None:
    for run in ("run-a", "run-b"):
        (tmp_path / run).mkdir()
        shutil.copy(FIXTURES / "seed004_dflash.log", tmp_path / run / "train.log")
    old = tmp_path / "run-b" / "train.log"
    os.utime(old, (1_000_000, 1_000_000))
    found = scan.discover([str(tmp_path)])
    assert [(e.run, Path(e.log).name) for e in found.entries] == [("run-a", "train.log"),
                                                               ("run-b", "train.log")]
    recent = scan.discover([str(tmp_path)], since=86400)
    assert [e.run for e in recent.entries] == ["run-a"] and [e.run for e in recent.older] == ["run-b"]


def test_a_log_s_rows_are_judged_as_check_judges_its_report(tmp_path: Path) -> None:
    """The seed log's error ladder fails the gate from its rows as from its report; a log that
    could not be read is ERROR."""
    (tmp_path / "run").mkdir()
    shutil.copy(FIXTURES / "seed004_dflash.log", tmp_path / "run" / "train.log")
    [entry] = scan.discover([str(tmp_path)]).entries
    row, findings = scan.scan_one(entry, runner.Options.make(None, None, None, None))
    assert (row["run"], row["format"], row["records"], row["kinds"]) == ("run", "kv", 30, "ladder")
    gate = Gate(fail_on=Severity.ERROR)
    assert scan.judge(row, findings, gate).word is Word.FAIL
    assert scan.judge(row, findings, Gate(fail_on=None)).word is Word.OK
    assert scan.judge({**row, "error": "no such file"}, [], gate).word is Word.ERROR
