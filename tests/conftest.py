from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
REALLOGS = Path(os.environ.get("LOSSLENS_REALLOGS", ROOT.parent / "shared" / "reallogs"))


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


def reallog(name: str) -> Path:
    folder = REALLOGS / name
    if not folder.is_dir():
        pytest.skip(f"real logs not found at {REALLOGS} (set LOSSLENS_REALLOGS)")
    files = [p for p in folder.iterdir() if p.name not in ("SOURCE.md", "hparams.yaml")]
    assert len(files) == 1, files
    return files[0]
