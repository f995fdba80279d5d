"""replay through the command line: JSON, the README example, the ladder cause, the page."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from losslens import synth  # noqa: E402
from losslens.cli import app
from losslens.replay import Plan, build_epochs  # noqa: E402
from losslens.replay.correlate import step_table  # noqa: E402
from tests.conftest import FIXTURES  # noqa: E402

torch = pytest.importorskip("torch")


def test_cli_replay_json(tmp_path) -> None:
    import json

    from typer.testing import CliRunner

    from losslens.cli import app

    rng = np.random.default_rng(0)
    np.save(tmp_path / "l.npy", np.clip(rng.lognormal(7.3, 0.8, 20000), 16, 8192).astype(np.int64))
    res = CliRunner().invoke(app, ["replay", "--lengths", str(tmp_path / "l.npy"), "--epochs", "2",
                                   "--grad-accum", "4", "--json", "--out", str(tmp_path / "b.csv"),
                                   "--steps-out", str(tmp_path / "s.parquet")])
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout)
    (entry,) = rep["strategies"]
    assert set(entry) >= {"name", "batches_per_epoch", "bucket_batch_share", "padding_efficiency",
                          "max_same_bucket_run"}
    import polars as pl

    table = pl.read_csv(tmp_path / "b.csv")
    assert table.height == 2 * entry["batches_per_epoch"] and table["step"].max() == (table.height - 1) // 4
    steps = pl.read_parquet(tmp_path / "s.parquet")
    assert steps.height == table["step"].max() + 1 and steps["batches"].sum() == table.height
    assert steps["tokens"].sum() == table["tokens"].sum()
    assert (steps["batches"][:-1] == 4).all() and (steps["distinct_buckets"] <= 4).all()
    # the step's bucket is its longest batch's: the bucket the correlation aligns with the loss
    first = table.filter(pl.col("step") == 0).sort("max_len", descending=True)
    assert steps["bucket"][0] == first["bucket"][0] and steps["max_len"][0] == first["max_len"][0]
    bad = CliRunner().invoke(app, ["replay", "--lengths", str(tmp_path / "l.npy"), "--bounds", "0,100,50"])
    assert bad.exit_code == 2 and "--bounds must increase" in bad.stderr


@pytest.mark.slow
@pytest.mark.parametrize(("seed", "tied"), [(0, True), (1, False)])
def test_readme_replay_ties_the_bucketed_fixture_to_its_order(seed: int, tied: bool) -> None:
    """fixtures/bucketed_run.log: loss levels ×1, ×1.5, ×2 by the bucket of each step of
    bucketed-shuffle seed 0. The replay with that seed ties them (and names the cause); another
    seed's order does not."""
    import json

    from typer.testing import CliRunner

    from losslens.cli import app

    res = CliRunner().invoke(app, ["replay", "--lengths", str(FIXTURES / "lengths_seed_shape.npy"),
                                   "--log", str(FIXTURES / "bucketed_run.log"), "--seed", str(seed),
                                   "--null-seeds", "99" if tied else "19", "--json"])
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout)
    c = rep["correlation"]
    assert c["aligned_records"] == 1260 and c["loss_level_is"] == "ratio to trend"
    (band,) = rep["findings"]
    assert band["kind"] == "multimodal" and len(band["evidence"]["modes"]) == 3
    levels = c["loss_level_by_bucket"]
    if tied:
        assert c["rho"] > 0.7 and c["p_value"] == 0.01
        assert band["evidence"]["cause"] == "batch_composition"
        # the planted ×1 : ×1.5 : ×2 levels, read back per bucket (relative to the trend)
        assert levels["3"] / levels["0"] == pytest.approx(1.5, rel=0.05)
        assert levels["5"] / levels["0"] == pytest.approx(2.0, rel=0.05)
    else:
        assert abs(c["rho"]) < 0.1 and c["p_value"] > 0.05
        assert "cause" not in band["evidence"]


@pytest.mark.slow
def test_replay_with_log_sets_ladder_cause(tmp_path) -> None:
    import json

    from typer.testing import CliRunner

    from losslens.cli import app

    rng = np.random.default_rng(0)
    lens = np.clip(rng.lognormal(6.5, 0.8, 20000), 16, 4000).astype(np.int64)
    np.save(tmp_path / "l.npy", lens)
    plan = Plan((0, 400, 800, 1600, 4001), token_budget=16000, max_batch_size=64, max_seq_len=4000)
    mean_len, _ = step_table(build_epochs("bucketed-shuffle", torch.from_numpy(lens), plan, 7, 1), plan)
    steps, loss = synth.bucket_dependent_log(mean_len, strength=3.0, seed=1)
    text = "".join(f"step={s} loss={v:.5f}\n" for s, v in zip(steps, loss, strict=True))
    (tmp_path / "run.log").write_text(text)
    res = CliRunner().invoke(app, ["replay", "--lengths", str(tmp_path / "l.npy"), "--bounds",
                                   "0,400,800,1600,4001", "--token-budget", "16000", "--max-seq-len",
                                   "4000", "--seed", "7", "--log", str(tmp_path / "run.log"),
                                   "--null-seeds", "99", "--json"])
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout)
    assert rep["correlation"]["p_value"] == 0.01 and rep["correlation"]["rho"] > 0.5
    for f in rep["findings"]:
        if f["kind"] in ("ladder", "multimodal"):
            assert f["evidence"]["cause"] == "batch_composition"


@pytest.mark.slow
def test_replay_html_shows_buckets_under_the_loss(tmp_path) -> None:
    from typer.testing import CliRunner

    from losslens.cli import app

    rng = np.random.default_rng(0)
    lens = np.clip(rng.lognormal(6.5, 0.8, 5000), 16, 4000).astype(np.int64)
    np.save(tmp_path / "l.npy", lens)
    (tmp_path / "run.log").write_text("".join(f"step={s} loss={2 + np.sin(s / 5):.4f}\n" for s in range(300)))
    args = ["replay", "--lengths", str(tmp_path / "l.npy"), "--bounds", "0,400,800,1600,4001",
            "--token-budget", "16000", "--max-seq-len", "4000", "--null-seeds", "9"]
    page_path = str(tmp_path / "r.html")
    res = CliRunner().invoke(app, [*args, "--log", str(tmp_path / "run.log"), "--html", page_path])
    assert res.exit_code == 0, res.output
    page = (tmp_path / "r.html").read_text()
    assert 'data-metric="replay buckets"' in page and "replayed length bucket of each step" in page
    # the evidence panel: one bar per bucket, with ρ and p in its title
    assert "loss ratio to trend by replayed bucket (ρ=" in page and page.count('text-anchor="middle">×') == 4
    bad = CliRunner().invoke(app, [*args, "--html", str(tmp_path / "x.html")])
    assert bad.exit_code == 2 and "--html needs --log" in bad.stderr


def _fed_run(tmp_path: Path) -> tuple[Path, Path]:
    import json

    from tests.unit.replay.test_fed import _loss, _run

    b, lengths = _run(1500)
    fed = tmp_path / "fed.jsonl"
    fed.write_text("".join(json.dumps({"step": s, "lengths": x}) + "\n" for s, x in enumerate(lengths)))
    log = tmp_path / "run.log"
    log.write_text("".join(f"step={s + 100} loss={v:.4f}\n" for s, v in enumerate(_loss(b, True))))
    return fed, log


@pytest.mark.slow
def test_replay_batches_answers_without_torch(tmp_path: Path) -> None:
    """--batches with --log: the exact record against the loss, with torch unavailable."""
    fed, log = _fed_run(tmp_path)
    code = ("import sys; sys.modules['torch'] = None\nfrom losslens.cli import main\n"
            f"sys.argv = ['losslens', 'replay', '--batches', {str(fed)!r}, '--log', {str(log)!r}, "
            "'--step-offset', '100', '--json']\nmain()")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["mode"] == "fed" and out["steps_recorded"] == 1500
    c = out["correlation"]
    assert c["aligned_records"] == 1500 and c["rho"] > 0.8 and c["p_value"] == 0.01
    assert c["null"] == "99 circular shifts of the fed sequence (none that lines it up with itself again)"


@pytest.mark.parametrize(("extra", "message"), [
    ([], "--batches needs --log"),
    (["--log", "L", "--lengths", "x.npy"], "pass --lengths (rebuild the batches a strategy makes) or"),
    (["--log", "L", "--compare"], "--compare and --optimize-bounds rebuild batches from --lengths"),
    (["--log", "L", "--out", "b.csv"], "--out and --steps-out write the batches rebuilt from --lengths"),
])
def test_replay_batches_bad_options(tmp_path: Path, extra: list[str], message: str) -> None:
    fed, log = _fed_run(tmp_path)
    args = ["replay", "--batches", str(fed), *[str(log) if a == "L" else a for a in extra]]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and message in result.stderr


def _readme_commands() -> dict[str, tuple[list[str], list[str]]]:
    """docs/replay.md's examples: the command after `$ losslens ` and the lines it shows."""
    section = (FIXTURES.parent / "docs" / "replay.md").read_text()
    out = {}
    for block in section.split("```text\n")[1:]:
        lines = block.split("```", 1)[0].splitlines()
        if lines and lines[0].startswith("$ losslens replay") and "--log" in lines[0]:
            out[lines[0]] = (lines[0].removeprefix("$ losslens ").split(), lines[1:])
    return out


@pytest.mark.slow
@pytest.mark.parametrize("command", list(_readme_commands()))
def test_readme_replay_paths_print_what_the_readme_shows(command: str) -> None:
    """Each path's example in docs/replay.md (sampler, batches, order-free, a refused misalignment), run from
    the repository root: every line the README shows (… elides) is printed as shown."""
    import os

    args, shown = _readme_commands()[command]
    proc = subprocess.run([sys.executable, "-m", "losslens", *args], capture_output=True, text=True,
                          cwd=FIXTURES.parent, env={**os.environ, "COLUMNS": "400"}, timeout=300)
    printed = [line.rstrip() for line in (proc.stdout + proc.stderr).splitlines()]
    for line in shown:
        if line != "…":
            assert line in printed, f"{line!r} not printed by {command}"
    refused = any(line.startswith("losslens: error:") for line in shown)
    assert proc.returncode == (2 if refused else 0)
