"""docs/architecture.md's promises: a new format and a new detector are their own code plus one
registry entry each, through the public API; the CLI's literal names match the registries."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from losslens import cli, read_log
from losslens.analysis import analyze
from losslens.detectors import REGISTRY
from losslens.logs import BY_NAME, registry
from tests.unit.toys.above_three import AboveThree
from tests.unit.toys.toy import Toy

ROOT = Path(__file__).resolve().parents[2]
TOYS = Path(__file__).parent / "toys"

def test_a_toy_format_and_detector_are_their_own_code_plus_a_registry_line(tmp_path: Path,
                                                                           monkeypatch) -> None:
    monkeypatch.setattr(registry, "FORMATS", (*registry.FORMATS, Toy()))  # the one registry line
    path = tmp_path / "toy.log"
    path.write_text("".join(f"toy #{i}: loss is {2 + (i % 10 == 9) * 1.5:.1f}\n" for i in range(40))
                    + "a line the toy format does not read\n")
    log = read_log(path)
    assert log.format == "toy" and log.train.height == 40
    assert dict(log.lines.skipped) == {"not a toy line": 1}
    report = analyze(log, detectors=(*REGISTRY, AboveThree()))  # the other registry line
    hits = [f for f in report.findings if f.kind == "above_three"]
    assert [(f.start_step, f.end_step, f.evidence["records"]) for f in hits] == [(9, 39, 4)]
    assert hits[0].line == 10  # the file's line, attached by the analysis for every kind


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts}


def _add_line(path: Path, after: str, line: str) -> None:
    text = path.read_text()
    assert after in text, (path, after)
    path.write_text(text.replace(after, after + line, 1))


@pytest.mark.slow
def test_a_newcomer_adds_a_format_and_a_detector_touching_four_files(tmp_path: Path) -> None:
    """In a copy of the project, as a newcomer would: the toy format and the toy detector each in a
    new module plus its registry entry (an import and a line in the registry's tuple), then
    ``python -m losslens.doc_tables`` rewrites the documentation's tables. The CLI then reads the
    toy log with ``--format toy``, lists both, gates on the detector's finding, and no table is out
    of step: the four files are all a person touched; the three documents were generated."""
    copy = tmp_path / "project"
    shutil.copytree(ROOT / "src", copy / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for doc in ("README.md", "docs/findings.md", "docs/contract.md"):
        (copy / doc).parent.mkdir(exist_ok=True)
        shutil.copy(ROOT / doc, copy / doc)
    before = _files(copy)
    pkg = copy / "src" / "losslens"
    shutil.copy(TOYS / "toy.py", pkg / "logs" / "formats" / "toy.py")
    _add_line(pkg / "logs" / "registry.py", "from losslens.logs.formats.torchtitan import TorchTitan\n",
              "from losslens.logs.formats.toy import Toy\n")
    _add_line(pkg / "logs" / "registry.py", "    TensorBoard(),\n", "    Toy(),\n")
    shutil.copy(TOYS / "above_three.py", pkg / "detectors" / "above_three.py")
    _add_line(pkg / "detectors" / "__init__.py", "from __future__ import annotations\n\n",
              "from losslens.detectors.above_three import AboveThree\n")
    _add_line(pkg / "detectors" / "__init__.py", "    ThroughputDrop(),\n", "    AboveThree(),\n")
    by_hand = {p for p, data in _files(copy).items() if before.get(p) != data}

    env = {**os.environ, "PYTHONPATH": str(copy / "src"), "COLUMNS": "200"}

    def losslens(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", *args], cwd=copy, env=env, capture_output=True,
                              text=True, timeout=120, check=False)

    wrote = losslens("losslens.doc_tables")
    assert wrote.returncode == 0, wrote.stderr
    generated = {p for p, data in _files(copy).items() if before.get(p) != data} - by_hand
    assert by_hand == {"src/losslens/logs/formats/toy.py", "src/losslens/logs/registry.py",
                       "src/losslens/detectors/above_three.py", "src/losslens/detectors/__init__.py"}
    assert generated == {"README.md", "docs/findings.md", "docs/contract.md"}
    assert "| `toy` | toy #N: loss is X |" in (copy / "README.md").read_text()
    assert "| `above_three` | error | `records` |" in (copy / "docs" / "findings.md").read_text()

    log = tmp_path / "toy.log"
    log.write_text("".join(f"toy #{i}: loss is {2 + (i % 10 == 9) * 1.5:.1f}\n" for i in range(40)))
    check = losslens("losslens", "check", "--format", "toy", str(log))
    assert check.returncode == 1 and "above_three" in check.stdout, check.stdout + check.stderr
    listed = losslens("losslens", "formats").stdout + losslens("losslens", "detectors").stdout
    assert "toy #1: loss is 2.5" in listed and "the loss above 3" in listed
    fresh = losslens("losslens.doc_tables")
    assert fresh.returncode == 0 and fresh.stdout == ""  # nothing left to rewrite


def test_the_cli_names_match_the_registries() -> None:
    from losslens.replay.strategies import STRATEGIES

    assert cli._format_names("") == ["auto", *BY_NAME] and cli._format_names("mega") == ["megatron"]
    assert set(cli.STRATEGY_NAMES) == set(STRATEGIES)


class Tally:
    """A toy reporter: a count per log as it is done, a total at the end."""

    name = "tally"

    def log(self, result, ctx) -> str | None:
        return None if result.report is None else f"{result.source}: {len(result.report.findings)}\n"

    def close(self, results, ctx) -> str:
        return f"{sum(len(r.report.findings) for r in results if r.report)} in {len(results)} log(s)\n"


def test_a_toy_reporter_is_its_own_code_plus_a_registry_line(monkeypatch) -> None:
    from losslens import runner
    from losslens.reporters import registry
    from losslens.reporters.base import Context
    from tests.conftest import FIXTURES

    monkeypatch.setitem(registry.REPORTERS, "tally", Tally())  # the registry line
    options = runner.Options.make(None, None, None, None)
    seed = str(FIXTURES / "seed004_dflash.log")
    results = list(runner.results(runner.walk([seed]), options, [seed]))
    reporter, ctx = registry.REPORTERS["tally"], Context("check")
    assert reporter.log(results[0], ctx) == f"{seed}: 1\n"
    assert reporter.close(results, ctx) == "1 in 1 log(s)\n"


def test_the_output_formats_match_the_reporters() -> None:
    from losslens.reporters.registry import REPORTERS

    assert {f.value for f in cli.OutputFormat} | {"markdown"} == set(REPORTERS)


LAYERS = ["errors", "findings", "progress", "logs", "detectors", "analysis", "config", "discover",
          "runner", "synth", "replay", "watch", "reporters", "cli"]
LOWER = {"findings": {"errors"}, "logs": {"errors", "findings", "progress"},
         "detectors": {"errors", "findings", "logs"},
         "analysis": {"errors", "findings", "logs", "detectors", "progress"}}


def test_imports_run_downwards() -> None:
    """The layers in docs/architecture.md: logs/ never imports detectors/ or above, detectors/
    never the analysis or above, the analysis never a runner, watch, replay or reporter."""
    import ast

    root = Path(cli.__file__).parent
    wrong = []
    for path in root.rglob("*.py"):
        part = path.relative_to(root).parts[0].removesuffix(".py")
        if part not in LOWER:
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom):
                continue
            if (node.module or "").startswith("losslens."):
                target = node.module.split(".")[1]
                if target != part and target not in LOWER[part]:
                    wrong.append(f"{path.relative_to(root)} imports losslens.{target}")
    assert wrong == []


def import_graph() -> dict[str, set[str]]:
    """Every module of the package and the modules it imports, at its top or inside a function
    (an import made on first use is an import all the same); not those under ``TYPE_CHECKING``,
    which never run. ``from package import name`` imports ``package.name`` where that is a
    module, else ``package``."""
    import ast

    root = Path(cli.__file__).parent

    def name_of(path: Path) -> str:
        parts = path.relative_to(root.parent).with_suffix("").parts
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    modules = {name_of(p): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text())
        typing_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If)
                       and "TYPE_CHECKING" in ast.unparse(block.test) for n in ast.walk(block)}
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges = set()
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, *([node.module] if node.module else [])])
                subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in modules]
                targets = subs + ([base] if len(subs) < len(node.names) else [])
            else:
                continue
            for t in targets:
                while t not in modules and "." in t:
                    t = t.rpartition(".")[0]
                if t in modules and t != name:
                    edges.add(t)
        graph[name] = edges
    return graph


def test_no_module_imports_itself_through_others() -> None:
    """No import circle, lazy imports counted: each module can be read knowing only those below
    it (a circle, found depth first, is named module by module)."""
    graph = import_graph()
    assert len(graph) > 100 and "losslens.logs.formats.fairseq" in graph["losslens.logs.registry"]
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    circles: list[list[str]] = []

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for t in sorted(graph[m]):
            if state.get(t) == 1:
                circles.append([*path[path.index(t):], t])
            elif t not in state:
                visit(t, [*path, t])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert circles == []


@pytest.mark.slow
def test_light_imports_stay_light() -> None:
    """`losslens --help` loads no polars, numpy or reader; `import losslens.replay` no torch."""
    import subprocess
    import sys

    code = ("import sys, losslens.cli, losslens.replay; "
            "print(sorted(m for m in ('polars', 'numpy', 'torch', 'losslens.logs') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_public_code_says_what_it_is() -> None:
    """Every module, public class and public function has a docstring; every package lists its
    public API in ``__all__``, and each name listed is there."""
    import ast
    import importlib

    root = Path(cli.__file__).parent
    missing = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text())
        name = str(path.relative_to(root))
        if not ast.get_docstring(tree):
            missing.append(name)
        missing += [f"{name}: {n.name}" for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)
                    and not n.name.startswith("_") and not ast.get_docstring(n)]
        if path.name == "__init__.py" and "formats" not in path.parts:  # (a format is a module)
            module = "losslens" + "".join(f".{p}" for p in path.parent.relative_to(root).parts)
            package = importlib.import_module(module)
            assert package.__all__, module
            assert all(hasattr(package, n) for n in package.__all__), module
    assert missing == []
