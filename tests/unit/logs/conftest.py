from __future__ import annotations

import pytest


@pytest.fixture
def columnar(monkeypatch) -> None:
    """Small files are read line by line in use (polars' per-query cost); with this fixture every
    file takes the vectorised path under test."""
    monkeypatch.setattr("losslens.logs.base.SMALL_BYTES", 0)


@pytest.fixture
def chunks_of(monkeypatch):
    """``chunks_of(n)``: files read in chunks of about ``n`` bytes from their start (without it, a
    file under the 1 MiB head read for sniffing is one chunk whatever the chunk size)."""
    from losslens.logs import source

    def setting(size: int) -> None:
        monkeypatch.setattr(source, "HEAD_BYTES", size)
        monkeypatch.setattr(source.Source.chunks, "__defaults__", (size, source.MAX_LINE))
    return setting


@pytest.fixture(params=["polars", "numba"])
def kv_reader(request, monkeypatch) -> str:
    """Each key=value test twice: the template lines read with polars, and with the numba kernels
    of the ``fast`` extra (``kv.fast``; skipped where numba is not installed)."""
    if request.param == "numba":
        pytest.importorskip("numba")
    monkeypatch.setenv("LOSSLENS_FAST", "on" if request.param == "numba" else "off")
    return request.param
