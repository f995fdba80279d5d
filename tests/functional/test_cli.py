"""The CLI: exact user-facing text and exit codes; help on every command; docs match code."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
import typer
from typer.testing import CliRunner

from losslens import __version__
from losslens.cli import app
from losslens.errors import UsageError
from losslens.logs import FORMATS
from tests.conftest import FIXTURES, ROOT

runner = CliRunner()
SEED = str(FIXTURES / "seed004_dflash.log")


def test_json_report_follows_the_contract() -> None:
    result = runner.invoke(app, ["analyze", "--json", SEED, str(FIXTURES / "metrics.jsonl")])
    assert result.exit_code == 0
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 2
    rep = json.loads(lines[0])
    assert list(rep) == ["schema", "source", "format", "lines", "steps", "eval_records",
                         "segments", "metrics", "loss", "findings", "skipped", "notes", "read_errors"]
    assert rep["skipped"] == [  # a check that could not run is said, always, in JSON
        {"detector": "multimodal", "metric": "loss", "reason": "only 30 points; needs 100"},
        {"detector": "periodicity", "metric": "loss", "reason": "only 30 points; needs 64"},
        {"detector": "plateau", "metric": "loss", "reason": "only 30 points; needs 50"},
        {"detector": "accuracy_drop", "metric": "acc", "reason": "only 30 points; needs 50"}]
    assert rep["notes"] == []
    assert rep["loss"] == {"column": "loss", "metric": "loss", "why": "a known loss name"}
    assert rep["findings"][0]["line"] == 11  # the line of step 144's record
    assert rep["schema"] == "losslens.report/1"
    assert rep["lines"] == {"total": 30, "parsed": 30, "skipped": 0, "blank": 0}
    assert rep["steps"] == {"first": 0, "last": 349, "count": 30}
    assert rep["metrics"][:3] == ["loss", "acc", "streak"] and "q_pre" in rep["metrics"]
    assert json.loads(lines[1])["eval_records"] == 3


def test_analyze_human_report() -> None:
    result = runner.invoke(app, ["analyze", str(FIXTURES / "drafter_restart.log")],
                           env={"COLUMNS": "200"})
    assert result.exit_code == 0
    out = result.stdout
    assert "format kv; 14 lines: 12 parsed, 2 skipped, 0 blank" in out
    assert "12 (steps 0-80)" in out
    assert "2 (restarts) — #0: steps 0-50 (6 records, from line 2); #1: steps 30-80" in out
    assert "skipped: unrecognised line  2 (first at line 1:" in out


def test_check_terse_and_exit_codes() -> None:
    result = runner.invoke(app, ["check", SEED])
    assert result.exit_code == 1
    assert result.stdout.startswith(f"{SEED}:11: steps 144-349: error ladder [loss] loss climbs in ~5 "
                                    "near-equal increments of ~0.91 then resets")
    assert len(result.stdout.splitlines()) == 1
    assert result.stderr.strip() == (f"{SEED}: 1 finding(s), worst error; 30 records; "
                                     "FAIL (--fail-on error)")
    ignored = runner.invoke(app, ["check", "--ignore", "ladder", SEED])
    assert ignored.exit_code == 0 and ignored.stdout == ""
    clean = runner.invoke(app, ["check", str(FIXTURES / "wandb_export.csv")])
    assert clean.exit_code == 0


def test_several_logs_worst_exit_code(tmp_path) -> None:
    result = runner.invoke(app, ["check", SEED, str(tmp_path / "missing.log")])
    assert result.exit_code == 2
    assert f"losslens: error: {tmp_path / 'missing.log'}: no such file" in result.stderr


def test_formats_lists_the_registry() -> None:
    result = runner.invoke(app, ["formats"], env={"COLUMNS": "250"})
    assert result.exit_code == 0
    for f in FORMATS:
        assert f.name in result.stdout


COMMANDS = sorted(c.name or (c.callback.__name__ if c.callback else "") for c in app.registered_commands)


def test_the_commands_are_the_contracts() -> None:
    assert COMMANDS == ["analyze", "check", "detectors", "formats", "replay", "scan", "watch"]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(command: str) -> None:
    """Every registered command (a new one is covered without editing this test): its usage, a
    description, and every option it takes is described."""
    result = runner.invoke(app, [command, "--help"], prog_name="losslens", terminal_width=200)
    assert result.exit_code == 0
    text = result.stdout
    assert text.startswith(f"Usage: losslens {command} ") and len(text) > 100
    cmd = typer.main.get_command(app).commands[command]  # type: ignore[attr-defined]
    for param in cmd.params:
        if param.param_type_name == "option":
            assert param.opts[0] in text and param.help, (command, param.opts[0])


@pytest.mark.slow
def test_version_and_module_entry() -> None:
    assert runner.invoke(app, ["--version"]).stdout.strip() == f"losslens {__version__}"
    proc = subprocess.run([sys.executable, "-m", "losslens", "--help"], capture_output=True,
                          text=True, check=True)
    assert "analyze" in proc.stdout and "check" in proc.stdout


def test_documentation_tables_are_the_registries() -> None:
    """The README's formats and findings tables, docs/findings.md's and docs/contract.md's kinds
    are what ``python -m losslens.doc_tables`` writes from the registries; docs/formats.md
    describes every format."""
    from losslens import doc_tables

    assert doc_tables.stale(ROOT) == []
    detail = (ROOT / "docs" / "formats.md").read_text()
    assert re.findall(r"^\| `([\w-]+)` \|", detail, re.M)[1:] == [f.name for f in FORMATS]


def test_readme_transcript_is_what_the_commands_print() -> None:
    """Every `$ losslens ...` in the README's transcript, run from the clone's root at 100
    columns, prints the lines shown (`…` elides) and exits as shown."""
    readme = (ROOT / "README.md").read_text()
    block = readme.split("## What it looks like", 1)[1].split("```text\n", 1)[1].split("```", 1)[0]
    for part in block.split("$ ")[1:]:
        command, *shown = part.rstrip("\n").splitlines()
        proc = subprocess.run(command, shell=True, executable="/bin/bash", cwd=ROOT, capture_output=True,
                              text=True, timeout=120, env={**__import__("os").environ, "COLUMNS": "100"})
        printed = [x.rstrip() for x in (proc.stdout + proc.stderr).splitlines()]
        for line in shown:
            if line != "…":
                assert line in printed, f"{line!r} not printed by {command}"


def test_contract_copy_is_faithful() -> None:
    """docs/contract.md holds every line of the shared contract, plus documented extensions."""
    shared = ROOT.parent / "shared" / "CONTRACT.md"
    if not shared.exists():
        pytest.skip("no ../shared/CONTRACT.md here")
    ours = (ROOT / "docs" / "contract.md").read_text().splitlines()
    missing = [line for line in shared.read_text().splitlines() if line not in ours]
    assert missing == []


@pytest.mark.slow
def test_cli_start_up_loads_neither_scipy_nor_torch() -> None:
    code = ("import sys, losslens.cli; bad = [m for m in ('scipy', 'torch', 'matplotlib', 'polars') "
            "if m in sys.modules]; "
            "print(','.join(bad))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == ""


@pytest.mark.slow
def test_check_run_loads_no_heavy_module(tmp_path) -> None:
    """A whole `check` (parse, detect, report), of a small log read line by line and of a 5,000-line
    one read by columns, stays off scipy, torch, matplotlib and pydantic (typer 0.29 validates every
    parameter through pydantic: 0.2-0.3 s a call; pinned below it), and off what its start-up does
    not need: xml and urllib (the JUnit reporter's escaping), the TOML parser in a folder whose
    pyproject.toml does not mention losslens, rich's tables and emoji codes (a one-line verdict
    draws no table, and a log's name is printed as it is). (numpy.ma stays: np.unique, np.median
    and every polars Series made from a numpy array load it.)"""
    from losslens import synth

    big = tmp_path / "run.log"
    big.write_text("\n".join(synth.dflash_lines(5000)) + "\n")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "someone-elses"\n')
    heavy = ("scipy", "torch", "matplotlib", "pydantic", "xml.sax", "urllib.request", "tomllib",
             "rich.table", "rich._emoji_codes")
    code = ("import sys\nfrom losslens.cli import main\ntry:\n    main()\nexcept SystemExit:\n    pass\n"
            f"print('loaded:' + ','.join(m for m in {heavy!r} if m in sys.modules))")
    for log in (SEED, str(big)):
        proc = subprocess.run([sys.executable, "-c", code, "check", log], cwd=tmp_path,
                              capture_output=True, text=True, check=False)
        assert proc.stdout.strip().splitlines()[-1] == "loaded:", (log, proc.stderr[-300:])


def test_the_command_line_makes_collections_rare_and_the_library_does_not() -> None:
    """The entry point (the `losslens` script and `python -m losslens`) raises the collector's
    thresholds before its imports (they cost ~90 ms of re-scanning in a 0.8 s check); importing
    the library, the CLI module included, leaves the host's collector as it was."""
    code = ("import gc, losslens, losslens.cli; before = gc.get_threshold(); "
            "import losslens.__main__; print(before, gc.get_threshold())")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "(700, 10, 10) (100000, 20, 10)"


def test_a_log_name_with_an_emoji_code_is_printed_as_it_is_named(tmp_path) -> None:
    """rich's consoles would print ':fire:' in a log's name as 🔥: names are shown as they are."""
    log = tmp_path / "run:fire:.log"
    log.write_bytes((FIXTURES / "nanogpt_nan.log").read_bytes())
    check = runner.invoke(app, ["check", str(log)])
    assert check.exit_code == 1
    assert check.stderr.startswith(f"{log}: 1 finding(s), worst error; 41 records; FAIL")
    assert "🔥" not in check.output
    analyze = runner.invoke(app, ["analyze", str(log)])
    assert str(log) in analyze.stdout and "🔥" not in analyze.stdout


def test_the_command_line_ends_without_teardown_once_its_exit_code_is_known(tmp_path) -> None:
    """After a command's exit code, every atexit handler runs (one registered before losslens was
    imported, as coverage's is, and one after), the output is flushed whole and the process ends
    with that code, without freeing each object (a module global's __del__ does not run); an
    exit that is not a code, or a thread still running, takes the ordinary way."""
    code = ("import atexit, sys\n"
            "atexit.register(lambda: print('first registered'))\n"
            "import losslens.__main__ as m\n"
            "class Torn:\n    def __del__(self): print('torn down', flush=True)\n"
            "keep = Torn()\n"
            "atexit.register(lambda: print('handler ran'))\n"
            "sys.argv = ['losslens', *sys.argv[1:]]\nm.main()\n")
    nan = str(FIXTURES / "nanogpt_nan.log")
    proc = subprocess.run([sys.executable, "-c", code, "check", "--output-format", "json", SEED, nan],
                          cwd=tmp_path, capture_output=True, text=True, check=False)
    assert proc.returncode == 1, proc.stderr[-300:]
    *reports, ran, first = proc.stdout.strip().splitlines()
    assert [json.loads(r)["source"] for r in reports] == [SEED, nan]
    assert (ran, first) == ("handler ran", "first registered")
    for args, rc in ((["check", "nope.log"], 2), (["--version"], 0)):
        proc = subprocess.run([sys.executable, "-c", code, *args], cwd=tmp_path, capture_output=True,
                              text=True, check=False)
        assert (proc.returncode, proc.stdout.splitlines()[-2:]) == (rc, ["handler ran", "first registered"])
    ordinary = ["handler ran", "first registered", "torn down"]
    stop = subprocess.run([sys.executable, "-c", code.replace("m.main()", "sys.exit('stopped')")],
                          capture_output=True, text=True, check=False)  # an exit that is not a code
    assert (stop.returncode, stop.stdout.splitlines(), stop.stderr) == (1, ordinary, "stopped\n")
    thread = ("import threading, time; threading.Thread(target=time.sleep, args=(0.3,)).start(); m.main()")
    late = subprocess.run([sys.executable, "-c", code.replace("m.main()", thread), "--version"],
                          capture_output=True, text=True, check=False)  # a thread still running
    assert (late.returncode, late.stdout.splitlines()[-3:]) == (0, ordinary)

def test_readme_config_reference_matches_code() -> None:
    from losslens.config import reference

    readme = (ROOT / "README.md").read_text()
    block = readme.split("<!-- config-reference:", 1)[1].split("<!-- end config-reference -->")[0]
    assert block.split("\n", 1)[1].strip() == reference().strip()


def test_config_file_and_precedence(tmp_path) -> None:
    from losslens.config import load

    (tmp_path / "pyproject.toml").write_text('[tool.losslens]\nfail_on = "warning"\n'
                                             '[tool.losslens.detectors.spike]\nz = 12\n')
    s = load(None, cwd=tmp_path)
    assert s.fail_on == "warning" and s.source == "pyproject.toml [tool.losslens]"
    spike = next(d for d in s.registry() if d.name == "spike")
    assert spike.z == 12.0
    (tmp_path / "losslens.toml").write_text('fail_on = "info"\n')
    assert load(None, cwd=tmp_path).fail_on == "info"  # losslens.toml before pyproject
    result = runner.invoke(app, ["check", "--config", str(tmp_path / "losslens.toml"), "--fail-on",
                                 "error", str(FIXTURES / "olmo_console.log")])
    assert result.exit_code == 0  # the command line wins over the file
    # --config pointing at a pyproject.toml reads its [tool.losslens] table
    given = load(str(tmp_path / "pyproject.toml"))
    assert given.fail_on == "warning" and given.source.endswith("pyproject.toml [tool.losslens]")
    # a project's pyproject.toml that does not mention losslens is not losslens's to read (nor to
    # refuse when it does not parse); one that does must parse
    other = tmp_path / "other"
    other.mkdir()
    (other / "pyproject.toml").write_text("[project\nname = broken\n")
    assert load(None, cwd=other).source == "built-in defaults"
    (other / "pyproject.toml").write_text("[tool.losslens\nfail_on = 1\n")
    with pytest.raises(UsageError, match="invalid TOML"):
        load(None, cwd=other)


def test_log_text_is_never_rich_markup(tmp_path) -> None:
    """A skipped line like '[/bold] oops' is shown as it is, not parsed (nor crashing) as markup."""
    path = tmp_path / "m.log"
    path.write_text("step=1 loss=2.0\n[/bold] oops [red]x\nstep=2 loss=1.9\n")
    result = runner.invoke(app, ["analyze", str(path)], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "'[/bold] oops [red]x'" in result.stdout
    formats = runner.invoke(app, ["formats"], env={"COLUMNS": "250"})
    assert "[step=N/T,epoch=E]" in formats.stdout and "[titan]" in formats.stdout


GOLDEN = sorted((FIXTURES / "expected").glob("*.json"))


@pytest.mark.parametrize("golden", GOLDEN, ids=[g.stem for g in GOLDEN])
def test_golden_reports(golden) -> None:
    """`analyze --json` of every fixture equals its golden report (regenerate with
    `python fixtures/make_fixtures.py` when a change is meant)."""
    from losslens import read_log
    from losslens.analysis import analyze
    from losslens.reporters import jsonl

    log_path = FIXTURES / golden.name.removesuffix(".json")
    got = json.loads(jsonl.render(analyze(read_log(log_path))))
    got["source"] = f"fixtures/{log_path.name}"
    assert got == json.loads(golden.read_text())


def test_readme_library_block_runs_as_written(tmp_path) -> None:
    """The README's library block, run as a user pastes it into python from a fresh clone's
    folder; and run from the folder above a clone named losslens, the package is the one
    installed (a src layout), never the clone's folder."""
    text = (ROOT / "README.md").read_text()
    block = text.split("## As a library", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    proc = subprocess.run([sys.executable, "-c", block], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["kv {'total': 30, 'parsed': 30, 'skipped': 0, 'blank': 0}",
                                        "[('ladder', 144, 11)]", "1", "accumulator"]
    (tmp_path / "losslens").symlink_to(ROOT)
    code = "import losslens; print(losslens.read_log.__name__, 'read_log' in dir(losslens))"
    above = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                           timeout=60)
    assert above.stdout == "read_log True\n", above.stderr
