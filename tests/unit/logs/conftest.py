from __future__ import annotations

import pytest


@pytest.fixture
def columnar(monkeypatch) -> None:
    """Small files are read line by line in use (polars' per-query cost); with this fixture every
    file takes the vectorised path under test."""
    monkeypatch.setattr("losslens.logs.base.SMALL_BYTES", 0)
