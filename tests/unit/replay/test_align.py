"""A log is laid on a replay only when their steps agree: per epoch when the log counts epochs,
in all otherwise; a mismatch is refused with what to pass, never aligned silently."""

from __future__ import annotations

import numpy as np
import pytest

from losslens.errors import UsageError
from losslens.replay.align import check_alignment, log_steps_per_epoch


def test_steps_per_epoch_from_hf_fractions_and_from_epoch_indices() -> None:
    steps = np.arange(10, 1001, 10)
    assert log_steps_per_epoch(steps, np.round(steps / 375, 2)) == pytest.approx(375, rel=0.01)
    assert log_steps_per_epoch(steps, (steps // 250).astype(float)) == 250
    assert log_steps_per_epoch(steps, None) is None
    assert log_steps_per_epoch(steps, np.zeros(len(steps))) is None  # one epoch: cannot tell
    assert log_steps_per_epoch(steps, (steps // 600).astype(float)) is None  # one transition only


def test_grad_accum_mismatch_is_refused_with_the_value_to_pass() -> None:
    """An HF log (epoch = step / 375) against a replay that assumed one micro-batch per step."""
    steps = np.arange(0, 750, 5)
    with pytest.raises(UsageError, match=r"the log counts 375 steps per epoch, the replay 1,500; the "
                       r"replay makes 1,500 micro-batches per epoch, 4.00 per logged step .it assumes 1.: "
                       r"pass --grad-accum × --world-size = 4"):
        check_alignment(steps, steps / 375, 3000, 2, 1500, 1)
    ok = check_alignment(steps, steps / 375, 750, 2, 1500, 4)
    assert ok == {"replayed_steps": 750, "replayed_steps_per_epoch": 375.0, "logged_steps": [0, 745],
                  "logging_interval": 5, "log_steps_per_epoch": 375.0, "implied_micro_batches_per_step": 4.0}


def test_a_log_past_the_replay_is_refused_and_a_short_one_noted() -> None:
    with pytest.raises(UsageError, match=r"the log reaches step 6,255 but the replay has 5,495 steps "
                       r"\(5,495 per epoch × 1\): pass --epochs 2"):
        check_alignment(np.arange(6256), None, 5495, 1, 5495, 1)
    allowed = check_alignment(np.arange(6256), None, 5495, 1, 5495, 1, allow=True)
    assert allowed["warning"].startswith("the log reaches step 6,255")
    short = check_alignment(np.arange(5495), None, 6256, 1, 6256, 1)
    assert "warning" not in short and short["note"].startswith("the log stops at step 5,494, 12% before")
    assert "note" not in check_alignment(np.arange(6200), None, 6256, 1, 6256, 1)  # within 3 %
