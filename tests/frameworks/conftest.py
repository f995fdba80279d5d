"""Tiny real framework runs on CPU (``fixtures/frameworks``), made once per test session and
shared by the tests that read what they wrote. Skipped where the framework is not installed
(``pip install -e '.[frameworks]'``).

The README's test command runs a smoke set (the HF callback's record of a group-by-length run
replayed; a two-loss GAN under torchrun); the cases marked ``frameworks_full`` (Lightning's
among them) run with ``LOSSLENS_FRAMEWORKS=all`` (``bench/frameworks.py`` runs every case too)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FULL = os.environ.get("LOSSLENS_FRAMEWORKS") == "all"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if FULL:
        return
    skip = pytest.mark.skip(reason="a full framework case: LOSSLENS_FRAMEWORKS=all runs it")
    for item in items:
        if "frameworks_full" in item.keywords:
            item.add_marker(skip)
RUNS = ROOT / "fixtures" / "frameworks"


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_script(script: str, out: Path, *args: str, timeout: int = 300) -> Path:
    """Run ``fixtures/frameworks/<script>`` into ``out`` with stdout and stderr to
    ``out/train.log``, as a user's ``> train.log 2>&1`` does (stdout block-buffered: not a
    terminal, PYTHONUNBUFFERED unset). The log's path."""
    out.mkdir(parents=True, exist_ok=True)
    log = out / "train.log"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    env.update(OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1",
               TRANSFORMERS_OFFLINE="1", PYTHONWARNINGS="ignore")
    launch = [sys.executable]
    if script.startswith("torchrun"):  # two processes over gloo, as `torchrun --nproc_per_node 2`
        launch += ["-m", "torch.distributed.run", "--nproc_per_node", "2",
                   "--master_port", str(free_port())]
    with log.open("wb") as f:
        done = subprocess.run([*launch, str(RUNS / script), str(out), *args], stdout=f,
                              stderr=subprocess.STDOUT, env=env, timeout=timeout, cwd=out)
    assert done.returncode == 0, log.read_text(errors="replace")[-3000:]
    return log


def _runs(tmp_path_factory: pytest.TempPathFactory, script: str, *needs: str):
    for module in needs:
        pytest.importorskip(module)
    made: dict[tuple[str, ...], Path] = {}

    def get(fault: str, *args: str) -> Path:
        """The run with ``fault`` (and the script's other options ``args``), made once."""
        key = (fault, *args)
        if key not in made:
            out = tmp_path_factory.mktemp(f"{script.removesuffix('.py')}_{fault}")
            run_script(script, out, "--fault", fault, *args)
            made[key] = out
        return made[key]

    return get


@pytest.fixture(scope="session")
def hf_runs(tmp_path_factory: pytest.TempPathFactory):
    """``hf_runs(fault, *args)``: the folder of a tiny HF Trainer run with that fault (made once)."""
    return _runs(tmp_path_factory, "hf_trainer.py", "transformers", "accelerate")


@pytest.fixture(scope="session")
def lightning_runs(tmp_path_factory: pytest.TempPathFactory):
    """``lightning_runs(fault)``: the folder of a tiny Lightning run with that fault."""
    return _runs(tmp_path_factory, "lightning_run.py", "lightning", "tensorboard")


@pytest.fixture(scope="session")
def torchrun_runs(tmp_path_factory: pytest.TempPathFactory):
    """``torchrun_runs(fault)``: the folder of a tiny plain loop under torchrun (2 processes)."""
    return _runs(tmp_path_factory, "torchrun_loop.py", "torch")

