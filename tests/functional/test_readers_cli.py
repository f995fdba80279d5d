"""Readers through the command line: a gzip log found by its content, and standard input."""

from __future__ import annotations

import subprocess
import sys

import pytest

from losslens import read_log
from tests.conftest import FIXTURES


@pytest.mark.slow
def test_gzip_by_content_and_stdin() -> None:
    plain = read_log(FIXTURES / "seed004_dflash.log")
    gz = read_log(FIXTURES / "seed004_dflash.gz.bin")
    assert gz.train.equals(plain.train)
    out = subprocess.run([sys.executable, "-m", "losslens", "analyze", "--json", "-"],
                         input=(FIXTURES / "seed004_dflash.log").read_bytes(), capture_output=True,
                         check=True)
    assert b'"source":"<stdin>"' in out.stdout and b'"count":30' in out.stdout
