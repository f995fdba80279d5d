"""Reports people look at: the HTML page (checked in headless Chromium when it is installed),
the PNG, Markdown and the terminal sparkline."""

from __future__ import annotations

import re

import numpy as np

from losslens import read_log
from losslens.analysis import analyze
from losslens.logs import from_arrays
from losslens.reporters import html, markdown
from losslens.reporters.chart import minmax_downsample
from losslens.reporters.text import loss_sparkline
from tests.conftest import FIXTURES

SEED = FIXTURES / "seed004_dflash.log"


def test_minmax_downsampling_keeps_spikes() -> None:
    x = np.arange(100_000, dtype=float)
    y = np.ones(100_000)
    y[54_321] = 50.0
    xs, ys = minmax_downsample(x, y, 500)
    assert len(xs) <= 4 * 500 and ys.max() == 50.0 and 54_321.0 in xs


def test_a_frame_is_downsampled_a_block_at_a_time_to_the_same_points(monkeypatch) -> None:
    """A long run's columns are drawn a block at a time (``chart.downsampled``): the points are
    those of ``minmax_downsample`` on the whole columns, with runs of one pixel column across
    blocks, a restart (steps going back), nulls, NaNs and tied values; the sparkline too."""
    import polars as pl

    from losslens.reporters import chart

    rng = np.random.default_rng(3)
    steps = np.r_[np.arange(1, 3001), np.arange(1, 1501)] * 2
    y = np.round(rng.normal(3, 1, len(steps)), 1)
    y[rng.integers(0, len(y), 200)] = np.nan
    frame = pl.DataFrame({"step": steps, "loss": pl.Series(y).fill_nan(None)})
    frame = frame.with_columns(pl.when(pl.int_range(pl.len()) % 97 == 0).then(float("nan"))
                               .otherwise(pl.col("loss")).alias("loss"))
    log = from_arrays(steps, loss=frame["loss"].to_numpy())
    whole = minmax_downsample(steps.astype(float), frame["loss"].cast(float).to_numpy(), 100)
    line = loss_sparkline(analyze(log), log, 80).renderables[0].plain
    for block in (5, 333):
        monkeypatch.setattr(chart, "BLOCK", block)
        xs, ys = chart.downsampled(frame, "loss", 100)
        assert np.array_equal(xs, whole[0]) and np.array_equal(ys, whole[1])
        assert loss_sparkline(analyze(log), log, 80).renderables[0].plain == line
    assert 100 < len(whole[0]) < len(steps) / 3  # (down-sampled)


def test_the_sparkline_has_no_holes_between_evenly_logged_records() -> None:
    """300 records every 10 steps filled a 60-column line every other column (two points per
    quarter-width bucket); each column is now the highest loss of the records under it."""
    steps = np.arange(300) * 10
    loss = 3.0 * np.exp(-steps / 1000) + 0.5
    loss[150] = 9.0
    log = from_arrays(steps, loss=loss)
    line = loss_sparkline(analyze(log), log, 80).renderables[0].plain
    bars = line.removeprefix("loss ").split("  ")[0]
    assert len(bars) == 80 - len("loss ") - len("  0.5199 to 9") and " " not in bars
    assert bars.count("█") == 1 and bars[0] == "▃"
    short = from_arrays(np.arange(12), loss=np.linspace(2, 1, 12))
    assert loss_sparkline(analyze(short), short, 80).renderables[0].plain == "loss █▇▆▆▅▄▄▃▂▂▁▁  1 to 2"


def test_html_is_self_contained_with_shaded_findings() -> None:
    log = read_log(SEED)
    page = html.render(analyze(log), log)
    assert "http://" not in page and "https://" not in page  # nothing fetched at view time
    assert page.count('<svg class="panel"') == 3  # loss, acc, lr; the flat ones get one line:
    assert "constant over the run: tokens_per_s = 3.21e+04, q_pre_min = 44, q_hs_mean = 0" in page
    assert page.count('class="shade" data-kind="ladder"') == 1
    assert re.search(r'<td class="error">error</td><td>ladder</td>', page)
    assert "<script>" in page and "dataset.ready" in page


def test_pages_carry_the_notes_and_skipped_lines() -> None:
    log = read_log(SEED.parent / "torchrun_ranks.log")
    report = analyze(log)
    page = html.render(report, log)
    assert "skipped lines: 180 another rank&#x27;s record (rank 0 analysed); 1 framework log line" in page
    assert "note: lines from 4 ranks (0, 1, 2, 3): rank 0 analysed" in page
    assert "> note: lines from 4 ranks (0, 1, 2, 3)" in markdown.render(report)


def test_markdown_summary() -> None:
    text = markdown.render(analyze(read_log(SEED)))
    assert "| error | ladder | loss | 144-349 |" in text
    assert "- **ladder** (error): loss climbs in ~5 near-equal increments" in text




def test_the_page_draws_the_periodogram_the_detector_computed() -> None:
    """A spectral periodicity finding carries its periodogram (left out of the JSON): the page
    draws it without recomputing, marked at the period found."""
    import json

    from losslens.logs import from_arrays
    from losslens.reporters import jsonl

    rng = np.random.default_rng(3)
    steps = np.arange(2000)
    loss = 2.0 + 0.3 * np.sin(2 * np.pi * steps / 50) + rng.normal(0, 0.1, len(steps))
    log = from_arrays(steps, loss=loss)
    report = analyze(log)
    found = [f for f in report.findings if f.kind == "periodicity"]
    assert len(found) == 1 and abs(found[0].evidence["period_steps"] - 50) < 1
    figure = found[0].figures["periodogram"]
    assert len(figure["periods"]) == len(figure["power"]) > 100
    assert abs(figure["periods"][np.argmax(figure["power"])] - 50) < 1  # the peak is the period
    assert "periodogram" not in json.dumps(json.loads(jsonl.render(report)))
    page = html.render(report, log)
    assert "periodogram of de-trended loss" in page and "period ≈ 50" in page
