"""Non-finite values whose severity depends on the run: a rare NaN grad norm under fp16."""


from __future__ import annotations

from pathlib import Path

from losslens import read_log
from losslens.analysis import analyze
from losslens.findings import Severity
from tests.unit.shapes import of


def test_a_rare_nan_grad_norm_under_fp16_is_a_warning(tmp_path: Path) -> None:
    """mmcv's 'Epoch [1][100/62598]' lines (a public issue paste) with one NaN grad norm under
    fp16: the loss goes on, so the step was skipped by the loss scaler: a warning."""
    mm = tmp_path / "mmocr.log"
    mm.write_text("".join(
        f"2021-11-22 01:32:34,502 - mmocr - INFO - Epoch [1][{k * 100}/62598]\tlr: 1.000e-03, eta: "
        f"6 days, 15:22:46, time: 0.539, data_time: 0.051, memory: 7239, loss_ce: 1.2757, "
        f"loss: {1.9 - 0.02 * k + 0.003 * (k % 3):.4f}, grad_norm: {'nan' if k == 1 else 3.5 + k % 4}\n"
        for k in range(1, 30)))
    (f,) = of(analyze(read_log(mm)), "nonfinite")
    assert (f.metric, f.start_step, f.severity) == ("grad_norm", 100, Severity.WARNING)
    assert "dynamic loss scaling" in f.summary
