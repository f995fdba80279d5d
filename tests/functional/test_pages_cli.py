"""analyze --html / --plot through the command line, and the page in headless Chromium when it
is installed."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from losslens import read_log, synth
from losslens.analysis import analyze
from losslens.reporters import html
from tests.unit.reporters.test_reports import SEED

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")



@pytest.mark.slow
def test_cli_writes_html_png_and_sparkline(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    page, png = tmp_path / "r.html", tmp_path / "r.png"
    proc = subprocess.run([sys.executable, "-m", "losslens", "analyze", str(SEED), "--html", str(page),
                           "--plot", str(png)], capture_output=True, text=True, env={"COLUMNS": "120",
                                                                                       "PATH": "/usr/bin"})
    assert proc.returncode == 0, proc.stderr
    assert page.stat().st_size > 2000 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    spark = [x for x in proc.stdout.splitlines() if x.startswith("loss ") and "▁" in x]
    assert len(spark) == 1 and spark[0].endswith("  0.8183 to 37.23") and len(spark[0]) <= 120
    assert f"losslens: wrote {page}" in proc.stderr and f"losslens: wrote {png}" in proc.stderr
    assert "^" in proc.stdout.splitlines()[proc.stdout.splitlines().index(spark[0]) + 1]


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed "
                    "(apt-get install chromium) — the page is checked structurally above")
@pytest.mark.parametrize("source", ["seed", "spiky"])
def test_page_renders_in_headless_chromium(tmp_path: Path, source: str) -> None:
    if source == "seed":
        log = read_log(SEED)
    else:
        c = synth.with_spikes(n=20_000, at=(7000, 15000))
        path = tmp_path / "spiky.jsonl"
        path.write_text("".join(f'{{"step": {s}, "loss": {v}}}\n' for s, v in zip(c.steps, c.loss,
                                                                                  strict=True)))
        log = read_log(path)
    page = tmp_path / "report.html"
    page.write_text(html.render(analyze(log), log))
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run",
             f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=2000"]
    dom = subprocess.run([CHROMIUM, *flags, "--enable-logging=stderr", "--v=0", "--dump-dom",
                          page.as_uri()], capture_output=True, text=True, timeout=120)
    assert 'data-ready="1"' in dom.stdout  # the script ran to its end
    assert "Uncaught" not in dom.stderr and "SyntaxError" not in dom.stderr
    assert dom.stdout.count('class="panel"') >= 1 and "<polyline" in dom.stdout
    shots = Path(tempfile.gettempdir()) / "losslens-screenshots"
    shots.mkdir(exist_ok=True)
    shot = shots / f"{source}.png"
    subprocess.run([CHROMIUM, *flags, "--window-size=1200,900", f"--screenshot={shot}", page.as_uri()],
                   capture_output=True, timeout=120)
    assert shot.exists() and shot.stat().st_size > 10_000
