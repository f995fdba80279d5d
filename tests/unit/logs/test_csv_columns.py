"""The vectorised CSV reader gives exactly what the per-line parser gives."""

from __future__ import annotations

import random

import pytest

from tests.conftest import FIXTURES, reallog
from tests.naive import assert_same_as_per_line as assert_same

pytestmark = pytest.mark.usefixtures("columnar")


@pytest.mark.parametrize("name", ["lightning_metrics.csv", "keras_csvlogger.csv", "wandb_export.csv"])
def test_fixtures(name: str) -> None:
    assert_same(FIXTURES / name, "csv")


@pytest.mark.parametrize("name", ["keras-csvlogger-mnist-cnn", "lightning-slm-gpt-stuck-run-metrics-csv"])
def test_real_logs(name: str) -> None:
    assert_same(reallog(name), "csv")


ODD = [
    "",
    "   ",
    "{step},abc,0.1,0.9",  # a step that is no number
    "{step},,0.1,",  # blank cells
    "{step}.7,1.5,0.1,0.9",  # a fractional step (truncated)
    "inf,1.5,0.1,0.9",
    "{step},1.5,0.1",  # too few fields
    "{step},1.5,0.1,0.9,7",  # too many
    '{step},"1,234",0.1,0.9',  # a quoted field with the delimiter
    '"{step}","1.5","0.1","0.9"',  # every field quoted
    '{step},1.5",0.1,0.9',  # a quote inside a field
    '{step},"1.5,0.1,0.9',  # a quoted field running over the line's end
    "{step},nan,0.1,0.9",
    "{step},1.2ms,5%,0:00:24",
    "step,loss,lr,grad_norm",  # the header again
    "{step},n/a,0.1,0.9",
    " {step} ,1.5,0.1,0.9",
]


@pytest.mark.parametrize("seed", [0, 1])
def test_generated_with_odd_lines(tmp_path, seed: int) -> None:
    rng = random.Random(seed)
    lines = ["step,loss,lr,grad_norm"]
    for i in range(3000):
        if rng.random() < 0.05:
            lines.append(rng.choice(ODD).format(step=i))
        else:
            lines.append(f"{i},{3 - i / 2000:.4f},1e-4,{rng.uniform(0.5, 1.5):.3f}")
    path = tmp_path / "odd.csv"
    path.write_text("\n".join(lines) + ("\n" if seed else ""))
    assert_same(path, "csv")


def test_tabs_wandb_columns_and_epoch_as_step(tmp_path) -> None:
    rng = random.Random(3)
    tsv = ["global_step\ttrain/loss\tval_loss"] + [
        f"{i}\t{rng.uniform(1, 3):.3f}\t" + (f"{rng.uniform(1, 3):.3f}" if i % 50 == 0 else "")
        for i in range(2000)]
    (tmp_path / "a.tsv").write_text("\n".join(tsv) + "\n")
    assert_same(tmp_path / "a.tsv", "csv")
    wandb = ['"Step","run-a - train/loss","run-a - train/loss__MIN","run-a - train/loss__MAX"'] + [
        f'"{i}","{rng.uniform(1, 3):.3f}","1.0","3.0"' for i in range(2000)]
    (tmp_path / "w.csv").write_text("\n".join(wandb) + "\n")
    assert_same(tmp_path / "w.csv", "csv")
    keras = ["epoch,accuracy,loss,val_loss"] + [f"{i},{i / 100:.2f},{3 - i / 100:.3f},{3.1 - i / 100:.3f}"
                                                 for i in range(200)]
    (tmp_path / "k.csv").write_text("\n".join(keras) + "\n")
    assert_same(tmp_path / "k.csv", "csv")


@pytest.mark.parametrize("prefix", ["[rank0]: ", "2024-05-01 10:00:00,123 - INFO - "])
def test_prefixed_rows(tmp_path, prefix: str) -> None:
    lines = [prefix + "step,loss,lr"] + [f"{prefix}{i},{3 - i / 1000:.4f},1e-4" for i in range(1500)]
    lines.insert(700, prefix + ODD[6].format(step=700))
    (tmp_path / "p.csv").write_text("\n".join(lines) + "\n")
    assert_same(tmp_path / "p.csv", "csv")


def test_rows_the_csv_module_cannot_read(tmp_path) -> None:
    """A lone '\\r' inside a row and a field over the csv module's limit made csv.reader raise (a
    traceback from `check`): each is a skip with its reason, on both paths."""
    from losslens import read_log

    rows = ["step,loss,lr"] + [f"{i},{3 - i / 1000:.4f},1e-4" for i in range(2000)]
    rows[5], rows[9] = "4,2.99\r6,1e-4", "8\r,2.9,1e-4"
    rows[7] = '6,"' + "x" * 200_000 + '",1e-4'
    rows[11] = '10,"2.8\r",1e-4'  # inside quotes the csv module keeps it
    path = tmp_path / "cr.csv"
    path.write_bytes(("\n".join(rows) + "\n").encode())
    assert_same(path, "csv")
    log = read_log(path)
    assert dict(log.lines.skipped) == {"a line break inside a CSV row": 2, "unreadable CSV row": 1}
    assert log.train.height == 1997
