"""Run folders: TensorBoard event files written by PyTorch, an MLflow file-store run, W&B
exports; each gives the same findings as the equivalent JSONL log of the same values."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from losslens import read_log, synth
from losslens.analysis import analyze
from losslens.errors import InputError

CURVE = synth.diverging(n=400, turn=250, seed=2)  # a divergence the detectors must find
STEPS, LOSS = CURVE.steps * 10, CURVE.loss
LR = np.full(len(STEPS), 3e-4)


def kinds(log):
    return [(f.kind, str(f.severity), f.start_step, f.end_step) for f in analyze(log).findings]


@pytest.fixture(scope="module")
def jsonl_reference(tmp_path_factory) -> list:
    path = tmp_path_factory.mktemp("ref") / "metrics.jsonl"
    path.write_text("".join(json.dumps({"step": int(s), "train/loss": float(np.float32(v)),
                                        "lr": float(np.float32(3e-4))}) + "\n"
                            for s, v in zip(STEPS, LOSS, strict=True)))
    found = kinds(read_log(path))
    assert [k[0] for k in found] == ["divergence"]
    return found


@pytest.mark.slow
def test_tensorboard_folder_from_pytorch(tmp_path: Path, jsonl_reference: list) -> None:
    pytest.importorskip("tensorboard")
    from torch.utils.tensorboard import SummaryWriter

    for run in ("run_a", "run_b"):
        w = SummaryWriter(str(tmp_path / "tb" / run))
        for s, v in zip(STEPS, LOSS, strict=True):
            w.add_scalar("train/loss", float(v), int(s))
            w.add_scalar("lr", 3e-4, int(s))
        w.add_histogram("weights", np.arange(10), 0)
        w.close()
    files = sorted((tmp_path / "tb").rglob("events.out.tfevents.*"))
    assert len(files) == 2
    log = read_log(files[0])
    assert log.format == "tensorboard" and log.train.height == len(STEPS)
    assert log.train["step"].to_list() == STEPS.tolist()
    assert log.train["loss"].to_list() == [float(np.float32(v)) for v in LOSS]
    assert log.names["loss"] == "train/loss"
    assert log.lines.skipped["no scalar (histogram, image, text or graph)"] == 1
    assert kinds(log) == jsonl_reference
    proc = subprocess.run([sys.executable, "-m", "losslens", "check", "--json", str(tmp_path / "tb")],
                          capture_output=True, text=True)
    assert proc.returncode == 1  # a divergence is an error
    reports = [json.loads(x) for x in proc.stdout.splitlines()]
    assert [r["format"] for r in reports] == ["tensorboard", "tensorboard"]


def write_mlflow(root: Path) -> Path:
    run = root / "mlruns" / "0" / "abc123"
    (run / "metrics" / "train").mkdir(parents=True)
    (run / "meta.yaml").write_text("run_id: abc123\n")
    (run / "metrics" / "train" / "loss").write_text(
        "".join(f"{1700000000000 + int(s)} {float(np.float32(v))!r} {int(s)}\n"
                for s, v in zip(STEPS, LOSS, strict=True)))
    (run / "metrics" / "lr").write_text("".join(f"{1700000000000 + int(s)} {float(np.float32(3e-4))!r} "
                                                f"{int(s)}\n" for s in STEPS))
    return run


@pytest.mark.slow
def test_mlflow_run_folder(tmp_path: Path, jsonl_reference: list) -> None:
    run = write_mlflow(tmp_path)
    log = read_log(run)
    assert log.format == "mlflow" and log.train.height == len(STEPS)
    assert log.lines.as_dict() == {"total": 2 * len(STEPS), "parsed": 2 * len(STEPS), "skipped": 0,
                                   "blank": 0}
    assert kinds(log) == jsonl_reference
    single = read_log(run / "metrics" / "train" / "loss")  # one metric file, a line format
    assert single.format == "mlflow" and single.train.height == len(STEPS)
    assert kinds(single) == jsonl_reference
    proc = subprocess.run([sys.executable, "-m", "losslens", "analyze", "--json", "--pick",
                           str(tmp_path / "mlruns")], capture_output=True, text=True)
    assert json.loads(proc.stdout)["format"] == "mlflow"


def test_wandb_exports_and_offline_run(tmp_path: Path, jsonl_reference: list) -> None:
    rows = [{"_step": int(s), "train/loss": float(np.float32(v)), "lr": float(np.float32(3e-4)),
             "_runtime": 1.5} for s, v in zip(STEPS, LOSS, strict=True)]
    (tmp_path / "history.json").write_text(json.dumps(rows))
    log = read_log(tmp_path / "history.json")
    assert log.format == "json-records" and kinds(log) == jsonl_reference
    csv = ['"Step","myrun - train/loss","myrun - train/loss__MIN","myrun - train/loss__MAX"']
    csv += [f'"{int(s)}","{float(np.float32(v))!r}","0","9"' for s, v in zip(STEPS, LOSS, strict=True)]
    (tmp_path / "export.csv").write_text("\n".join(csv) + "\n")
    log = read_log(tmp_path / "export.csv")
    assert log.format == "csv" and kinds(log) == jsonl_reference
    offline = tmp_path / "wandb" / "offline-run-20260101_000000-xyz"
    offline.mkdir(parents=True)
    (offline / "run-xyz.wandb").write_bytes(b"\x00binary")
    with pytest.raises(InputError, match="W&B offline run: its history is in the binary run-"):
        read_log(offline)


@pytest.mark.slow
def test_missing_tensorboard_extra_is_one_clear_line(tmp_path: Path) -> None:
    event = tmp_path / "events.out.tfevents.1.host"
    event.write_bytes(b"\x18\x00\x00\x00\x00\x00\x00\x00\xa3\x7fK\"\t\x00\x00\x00\x00\x00\x00\x00"
                      b"\x00\x1a\rbrain.Event:2")
    code = ("import sys; sys.modules['tensorboard'] = None; from losslens.cli import main; "
            f"sys.argv = ['losslens', 'check', {str(event)!r}]; main()")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (f"losslens: error: {event}: reading TensorBoard event files needs "
                                   "the tensorboard package: pip install 'losslens[tensorboard]' "
                                   "(or: pip install tensorboard)")


@pytest.mark.slow
def test_watch_mlflow_metric_file_follows_appends(tmp_path: Path) -> None:
    run = write_mlflow(tmp_path)
    path = run / "metrics" / "train" / "loss"
    head = path.read_text().splitlines()[:200]
    path.write_text("\n".join(head) + "\n")
    p = subprocess.Popen([sys.executable, "-m", "losslens", "watch", str(path), "--json", "--exit-on",
                          "error"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    import time

    time.sleep(2)
    with open(path, "a") as f:
        f.write(f"{1700000009999} nan 2000\n")
    out, _ = p.communicate(timeout=60)
    assert p.returncode == 1
    ev = json.loads(out.splitlines()[0])
    assert ev["finding"]["kind"] == "nonfinite" and ev["finding"]["start_step"] == 2000


@pytest.mark.slow
def test_watch_event_file_rereads_as_it_grows(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    import time

    from torch.utils.tensorboard import SummaryWriter

    w = SummaryWriter(str(tmp_path / "tb"))
    for s in range(200):
        w.add_scalar("train/loss", 3.0 - s / 1000, s)
    w.flush()
    (event,) = (tmp_path / "tb").glob("events.out.tfevents.*")
    p = subprocess.Popen([sys.executable, "-m", "losslens", "watch", str(event), "--json", "--exit-on",
                          "error"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(3)
    w.add_scalar("train/loss", float("nan"), 200)
    w.flush()
    out, _ = p.communicate(timeout=60)
    w.close()
    assert p.returncode == 1
    ev = json.loads(out.splitlines()[0])
    assert (ev["event"], ev["finding"]["kind"], ev["finding"]["start_step"]) == ("appeared", "nonfinite", 200)


@pytest.mark.slow
@pytest.mark.parametrize("half_written", [False, True])
def test_watch_trainer_state_rereads_when_rewritten(tmp_path: Path, half_written: bool) -> None:
    """The Trainer rewrites trainer_state.json whole, in place: watch re-reads it, and a read that
    catches it half written is tried again (it ended watch with exit 2)."""
    import time

    path = tmp_path / "trainer_state.json"
    hist = [{"loss": 2.0 - i / 100, "step": i * 10, "epoch": i / 100} for i in range(1, 60)]
    path.write_text(json.dumps({"log_history": hist}, indent=2))
    p = subprocess.Popen([sys.executable, "-m", "losslens", "watch", str(path), "--json", "--exit-on",
                          "error"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(2.5)
    hist.append({"loss": 1.4, "grad_norm": float("nan"), "step": 600, "epoch": 0.6})
    whole = json.dumps({"log_history": hist}, indent=2)
    if half_written:
        path.write_text(whole[: len(whole) // 2])  # caught mid-rewrite
        time.sleep(1.5)
    path.write_text(whole)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 1, err
    ev = json.loads(out.splitlines()[0])
    assert (ev["finding"]["kind"], ev["finding"]["metric"], ev["finding"]["start_step"]) == \
        ("nonfinite", "grad_norm", 600)


@pytest.mark.slow
def test_many_logs_over_several_processes_report_as_one(tmp_path: Path) -> None:
    """check and analyze over a folder of logs with --jobs 2: the same output, in the same order,
    and the same exit code as with --jobs 1 (an unreadable log and a NaN among them)."""
    import shutil

    from tests.conftest import FIXTURES

    for name in ("nanogpt_nan.log", "hf_stdout.log", "seed004_dflash.log", "fairseq.log",
                 "metrics.jsonl", "drafter_restart.log"):
        shutil.copy(FIXTURES / name, tmp_path / name)
    (tmp_path / "broken.log").write_bytes(b"step=1 loss=\x00\x01\x02")  # binary: an error row
    (tmp_path / "notes.txt").write_text("hello\nworld\n")  # prose, not a log: passed over

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "losslens", *args], capture_output=True, text=True,
                              timeout=300)

    for command in (["check"], ["analyze", "--json"]):
        one = run(*command, str(tmp_path), "--jobs", "1")
        two = run(*command, str(tmp_path), "--jobs", "2")
        assert one.returncode == two.returncode == 2  # the broken log: never 'ok'
        assert one.stdout == two.stdout and one.stderr == two.stderr
    assert "nanogpt_nan.log" in one.stdout
    bad = run("check", str(tmp_path), "--jobs", "0")
    assert bad.returncode == 2 and bad.stderr.strip() == "losslens: error: --jobs must be >= 1, got 0"
