"""`losslens watch` strips the prefixes a capture adds (timestamps, logging levels) as the readers do."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.unit.logs.test_prefixes import NANOGPT, PREFIXES


@pytest.mark.slow
def test_watch_strips_them_too() -> None:
    lines = "\n".join(PREFIXES["kubectl --timestamps"](i) + x for i, x in enumerate(NANOGPT)) + "\n"
    proc = subprocess.run([sys.executable, "-m", "losslens", "watch", "-", "-q"], input=lines.encode(),
                          capture_output=True, check=False)
    assert proc.returncode == 1
    assert proc.stdout.decode().startswith("APPEARED <stdin>:31: step 150: error nonfinite [loss]")
