"""The numba kernels of the key=value reader (``kv.kernels``, the ``fast`` extra) against what they
stand in for: Python's float for numbers, ``columnar.times`` for time stamps, the TOKRATE pattern
for token rates, ``count_lines`` and polars' blanks for lines. The frames they make are checked
against the per-line parser in test_kv_columns.py (each test there runs with both readers)."""

from __future__ import annotations

import datetime as dt
import random

import numpy as np
import polars as pl
import pytest

pytest.importorskip("numba")

from losslens.logs.base import TIMESTAMP  # noqa: E402
from losslens.logs.columnar import times  # noqa: E402
from losslens.logs.formats.kv import fast, kernels  # noqa: E402
from losslens.logs.formats.kv.patterns import TOKRATE, TOKRATE_SCALE  # noqa: E402
from losslens.logs.source import count_lines  # noqa: E402


def arr(text: str) -> np.ndarray:
    return np.frombuffer(text.encode(), dtype=np.uint8)


def decimal(text: str, integer: bool = False) -> float:
    return kernels._decimal(arr(text), 0, len(text), integer)


def random_number(rng: random.Random) -> str:
    sign = rng.choice(["", "", "-", "+"])
    whole = "".join(rng.choice("0123456789") for _ in range(rng.randint(0, 12)))
    frac = "".join(rng.choice("0123456789") for _ in range(rng.randint(0, 10)))
    text = sign + whole + (rng.choice([".", ""]) + frac if frac or rng.random() < 0.2 else "")
    if rng.random() < 0.3:
        text += rng.choice("eE") + rng.choice(["", "-", "+"]) + str(rng.randint(0, 40))
    if rng.random() < 0.05:
        text = text[: rng.randint(0, len(text))] + rng.choice([" ", "x", ",", "..", "e"])
    return text


def test_a_number_is_read_as_python_reads_it_or_left_alone() -> None:
    rng = random.Random(0)
    read = 0
    for _ in range(20_000):
        text = random_number(rng)
        got = decimal(text)
        if np.isnan(got):
            continue
        read += 1
        assert not text.startswith("+")
        want = float(text)
        assert got == want and np.signbit(got) == np.signbit(want), text
    assert read > 8_000  # most plain numbers are read here, not left to the parser


@pytest.mark.parametrize(("text", "value"), [
    ("0.5512", 0.5512), ("2.52e-07", 2.52e-07), ("-.5", -0.5), ("5.", 5.0), ("-0", -0.0),
    ("123456789012345", 123456789012345.0), ("1e22", 1e22), ("0e99", 0.0),
])
def test_plain_numbers(text: str, value: float) -> None:
    assert decimal(text) == value


@pytest.mark.parametrize("text", ["", "-", ".", "+5", "nan", "inf", "1e", "1e+", "1,024", "0x10", " 1",
                                  "1 ", "1e-30", "5m", "1_000", "1234567890123456789"])
def test_what_is_left_to_the_parser(text: str) -> None:
    assert np.isnan(decimal(text))


def test_integers_for_steps() -> None:
    assert decimal("338", integer=True) == 338 and decimal("-4", integer=True) == -4
    assert np.isnan(decimal("12.0", integer=True)) and np.isnan(decimal("1e3", integer=True))


def test_time_stamps_as_polars_reads_them() -> None:
    """Random dates and times, some out of range: each read as ``columnar.times`` reads base.TIMESTAMP's
    group, or left to the parser where polars would find none."""
    rng = random.Random(1)
    lines = []
    for _ in range(3000):
        y, mo, d = rng.randint(1, 2999), rng.randint(0, 13), rng.randint(0, 32)
        h, mi, s = rng.randint(0, 24), rng.randint(0, 60), rng.randint(0, 60)
        frac = rng.choice(["", ".5", ",123", ".123456", ".1234567"])
        lines.append(f"[{y:04d}-{mo:02d}-{d:02d}{rng.choice(' T')}{h:02d}:{mi:02d}:{s:02d}{frac}] step=1")
    wanted = times(pl.Series([TIMESTAMP.match(x).group(1) for x in lines])).to_list()
    kept = 0
    for line, want in zip(lines, wanted, strict=True):
        us, state = kernels._stamp(arr(line), 0, line.index("="))
        if state == -1:  # out of range: the parser decides
            continue
        kept += 1
        assert state == 1 and want is not None, line
        assert us == (want - dt.datetime(1970, 1, 1)) // dt.timedelta(microseconds=1), line
    assert kept > 300


def test_no_stamp_is_no_time() -> None:
    for text in ["step=1", "2026-05-15 step=1", "[2026-05-15 20:53] x", "2026/05/15 20:53:06 x"]:
        assert kernels._stamp(arr(text), 0, len(text)) == (0, 0)


def test_token_rates_as_the_pattern_reads_them() -> None:
    rng = random.Random(2)
    pieces = ["(", ")", " ", "32.1", "5", "-3", "+7", ".5", "1e3", "K", "M", "G", "tok/s", "b/s", "x"]
    for _ in range(5000):
        cell = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 8)))
        got = kernels._rate(arr(cell), 0, len(cell))
        m = TOKRATE.search(cell)
        if m is None:
            assert np.isnan(got), cell
        elif got != -1.0:
            assert got == float(m.group(1)) * TOKRATE_SCALE[m.group(2)], cell
        else:
            assert m.group(1).startswith("+") or float(m.group(1)) * TOKRATE_SCALE[m.group(2)] == -1.0 \
                or np.isnan(decimal(m.group(1))), cell


def test_lines_and_blanks() -> None:
    rng = random.Random(3)
    for _ in range(300):
        pieces = ["", " ", "\t \x0b", "step=1 loss=2", "x", "\x0c"]
        lines = [rng.choice(pieces) for _ in range(rng.randint(1, 9))]
        chunk = "\n".join(lines).encode() + rng.choice([b"", b"\n"])
        lines = fast.split_lines(chunk)
        assert lines is not None and len(lines.starts) == count_lines(chunk)
        got = [chunk[a:b].decode() for a, b in zip(lines.starts, lines.ends, strict=True)]
        assert got == chunk.decode().split("\n")[: len(got)]
        assert list(lines.blank) == [not x.strip() for x in got]
    assert len(fast.split_lines(b"").starts) == 0
    # which lines start behind a torchrun rank prefix, as the pattern the polars path uses says
    from losslens.logs.columnar import _RANK_LINE

    checked = 0
    for _ in range(2000):
        text = "".join(rng.choice([" ", "\t", "\x0b", "\x0c", "[", "]", ":", "rank", "_", "7", "12", "x",
                                   "default", "[rank1]:", "\u00e9"]) for _ in range(rng.randint(0, 7)))
        lines = fast.split_lines(text.encode() + b"\n")
        if lines is not None:  # (None: text past ASCII and spaces only, which polars reads)
            assert bool(lines.ranked[0]) == bool(_RANK_LINE.match(text.encode())), text
            checked += 1
    assert checked > 1900
    # a line of Unicode spaces only: polars decides whether it is blank
    assert fast.split_lines("a=1\n\u3000\n".encode()) is None


def test_the_accelerator_is_used_on_large_files_or_when_asked(monkeypatch) -> None:
    monkeypatch.delenv("LOSSLENS_FAST", raising=False)
    assert not fast.wanted(1 << 20) and not fast.wanted(None) and fast.wanted(fast.MIN_BYTES)
    monkeypatch.setenv("LOSSLENS_FAST", "off")
    assert not fast.wanted(fast.MIN_BYTES)
    monkeypatch.setenv("LOSSLENS_FAST", "on")
    assert fast.wanted(10)


def test_no_writable_cache_folder_is_none(tmp_path, monkeypatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("LOSSLENS_CACHE", str(blocker))
    assert fast.cache_dir() is None
    monkeypatch.setenv("LOSSLENS_CACHE", str(tmp_path / "cache"))
    assert fast.cache_dir() == tmp_path / "cache" / "numba"
