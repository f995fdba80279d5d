"""Health detectors: found and located on seeded curves and on the real logs that show them."""

from __future__ import annotations

import numpy as np
import pytest

from losslens import read_log, synth
from losslens.analysis import analyze
from losslens.detectors.spike import spikes
from losslens.detectors.stats import level_shift
from losslens.findings import Severity
from losslens.logs import from_arrays
from tests.conftest import FIXTURES, reallog


def kinds(report, at_least=Severity.INFO):
    return [(f.kind, str(f.severity), f.metric, f.start_step, f.end_step)
            for f in report.findings if f.severity >= at_least]


def only(report, kind):
    hits = [f for f in report.findings if f.kind == kind]
    assert len(hits) == 1, report.findings
    return hits[0]


def test_nonfinite_first_step_exact() -> None:
    c = synth.with_nan(at=437)
    f = only(analyze(from_arrays(c.steps, loss=c.loss)), "nonfinite")
    assert (f.start_step, f.severity, f.evidence["to_end"]) == (437, Severity.ERROR, True)


def test_hf_hidden_nan_via_grad_norm() -> None:
    f = only(analyze(read_log(FIXTURES / "trainer_state.json")), "nonfinite")
    assert f.metric == "grad_norm" and f.start_step == 20
    assert f.severity == Severity.ERROR and "Trainer logs a running mean in its place" in f.summary


def test_frozen_loss_is_a_hidden_nan() -> None:
    loss = np.r_[np.linspace(3, 2, 30), np.full(8, 1.9876)]
    f = only(analyze(from_arrays(np.arange(38), loss=loss)), "nonfinite")
    assert f.severity == Severity.WARNING and f.start_step == 30 and "frozen at 1.988" in f.summary
    # a loss that turns inf and stays inf is one finding (the error), not also a 'frozen' value
    inf = np.r_[np.linspace(3, 2, 30), np.full(8, np.inf)]
    f = only(analyze(from_arrays(np.arange(38), loss=inf)), "nonfinite")
    assert f.severity == Severity.ERROR and f.start_step == 30 and "loss is inf from step 30" in f.summary


def test_spikes_located_and_grad_norm_first() -> None:
    c = synth.with_spikes(at=(600, 1500))
    grad = np.ones(len(c.steps)) + np.random.default_rng(0).normal(0, 0.02, len(c.steps))
    grad[598] = 9.0
    report = analyze(from_arrays(c.steps, loss=c.loss, grad_norm=grad))
    found = [f for f in report.findings if f.kind == "spike"]
    assert [f.evidence["peak_step"] for f in found] == [600, 1500]
    assert found[0].evidence["grad_norm_spike_step"] == 598
    assert "grad_norm spiked first (9 at step 598)" in found[0].summary
    assert all(f.severity == Severity.WARNING for f in found)


def test_spike_rule_is_causal() -> None:
    v = synth.with_spikes(at=(500,)).loss
    full, *_ = spikes(v, 64, 8.0, 1.4, 3)
    prefix, *_ = spikes(v[:501], 64, 8.0, 1.4, 3)
    assert full[500] and prefix[500]  # the same decision without the future


@pytest.mark.parametrize("turn", [700, 1300])
def test_divergence_turn_within_10_percent(turn: int) -> None:
    c = synth.diverging(turn=turn)
    f = only(analyze(from_arrays(c.steps, loss=c.loss)), "divergence")
    assert abs(f.start_step - turn) <= 0.1 * len(c.steps) and f.severity == Severity.ERROR


def test_plateau_stuck_high_vs_converged() -> None:
    c = synth.stuck()
    assert only(analyze(from_arrays(c.steps, loss=c.loss)), "plateau").severity == Severity.WARNING
    lr = np.r_[np.full(400, 1e-3), np.linspace(1e-3, 1e-6, 100)]
    flat = 2.0 + np.random.default_rng(0).normal(0, 0.01, 500)
    report = analyze(from_arrays(np.arange(500), loss=flat, lr=lr))
    assert [f for f in report.findings if f.kind == "plateau"] == []  # the schedule has decayed


def test_accuracy_drop_and_throughput_turns() -> None:
    c, acc = synth.accuracy_drop(turn=600)
    f = only(analyze(from_arrays(c.steps, loss=c.loss, acc=acc)), "accuracy_drop")
    assert abs(f.start_step - 600) <= 100
    c, tps = synth.throughput_drop(turn=1300)
    f = only(analyze(from_arrays(c.steps, loss=c.loss, tokens_per_s=tps)), "throughput_drop")
    assert abs(f.start_step - 1300) <= 5 and f.evidence["drop"] == pytest.approx(0.35, abs=0.03)


def test_level_shift_finds_the_change() -> None:
    x = np.r_[np.full(300, 10.0), np.full(700, 6.0)]
    assert level_shift(x, 50) == (300, 10.0, 6.0)


@pytest.mark.parametrize("block", [1, 7, 256])
def test_level_shift_in_blocks_picks_the_split_one_pass_would(block: int) -> None:
    """Scored a block at a time: the same first best split, ties (a flat series: every score 0)
    and a running sum past float64 (NaN scores) included."""
    rng = np.random.default_rng(5)
    for x in (np.r_[rng.normal(5, 1, 700), rng.normal(3, 1, 900)], np.ones(500),
              np.r_[rng.normal(0, 1, 300), [1e308, 1e308], rng.normal(0, 1, 300)]):
        with np.errstate(over="ignore", invalid="ignore"):
            assert level_shift(x, 40, block=block) == level_shift(x, 40, block=len(x))
    assert level_shift(np.ones(500), 40, block=block)[0] == 40  # (the first of the tied)


def test_starved_queue_from_dflash_lists(tmp_path) -> None:
    lines = list(synth.dflash_lines(400))
    for i in range(200, 240):
        lines[i] = lines[i].replace("q_pre=[", "q_pre=[0, 0, 0, 0, 0, 0] q_old=[")
    path = tmp_path / "q.log"
    path.write_text("\n".join(lines) + "\n")
    f = only(analyze(read_log(path)), "pipeline_stall")
    assert (f.metric, f.start_step, f.evidence["longest_empty"]) == ("q_pre", 200, 40)


def test_overfitting_eval_rises_train_falls() -> None:
    log = from_arrays(np.arange(0, 1000, 10), loss=np.linspace(3, 1, 100))
    import polars as pl

    evals = pl.DataFrame({"step": [100, 300, 500, 700, 900], "line": [1, 2, 3, 4, 5],
                          "eval_loss": [2.5, 2.0, 1.9, 2.1, 2.3]})
    log = type(log)(**{**log.__dict__, "eval": evals.with_columns(pl.lit(0, pl.Int32).alias("segment"))})
    f = only(analyze(log), "overfitting")
    assert f.start_step == 500 and f.evidence["train_still_falling"] is True


def _noisy_evals(rise: float) -> tuple[np.ndarray, np.ndarray]:
    """300 evals of a converged run, 2 % noise, the best of them three from the end (0.845, three
    noise widths low, as the lowest of 300 draws lies) and the last two above it; ``rise``: a
    rise of the last 90 evals."""
    rng = np.random.default_rng(5)
    v = 0.9 * np.exp(rng.normal(0, 0.02, 300)).clip(0.85, None)
    v[-3:] = [0.845, 0.88, 0.91]
    v[-90:] *= 1 + rise * np.linspace(0, 1, 90)
    return np.arange(1, 301) * 100, v


def test_overfitting_is_a_rise_above_the_eval_noise() -> None:
    """A converged run's eval loss, noisy (2 %), whose lowest draw is three evals from the end: the
    last two stand 4 % and 8 % above that best, which the best of 300 noisy evals is (a low
    draw), not a rise: no finding (the rule before this test: an overfitting warning). The same
    evals rising by 15 % over their last 90: overfitting, from the best eval on, with the noise
    it was measured against."""
    train = np.linspace(3, 1, 30_000)
    steps, v = _noisy_evals(0.0)
    log = from_arrays(np.arange(30_000), loss=train, evals={"step": steps, "eval_loss": v})
    assert [f.kind for f in analyze(log).findings] == []
    steps, v = _noisy_evals(0.15)
    f = only(analyze(from_arrays(np.arange(30_000), loss=train, evals={"step": steps, "eval_loss": v})),
             "overfitting")
    assert f.start_step == int(steps[np.argmin(v)]) and f.evidence["train_still_falling"] is True
    assert 0.015 < f.evidence["noise"] < 0.03  # (2 % of 0.9: 0.018)


# the real logs that show each kind (labels in ../shared/reallogs/README.md)
@pytest.mark.parametrize(("name", "expected"), [
    ("nanogpt-termux-cpu-nan", [("nonfinite", "error", "loss", 425, 450)]),
    ("bloom-tr1-13b-chronicles-loss-spike", [("spike", "warning", "loss", 29050, 29070)]),
    ("bloom-tr8-104b-chronicles-divergence", [("divergence", "error", "loss", 6900, 6940)]),
    # a model that learns nothing shows its data order: every 30-record (1,500-step) stretch of the
    # de-trended loss correlates 0.2-0.72 with every other, and records 745 steps apart do not
    # (ACF -0.14): the period is ~1,500 steps, strong (51 % of the variance)
    # SOURCE.md: not learning; num_epochs 1 and the run never finished an epoch, so no batch order
    # repeats: the ~1,500-step "period" (p 1e-4 under a null that took a bin's median of a few
    # ordinates as exact) is gone with the exact null
    ("lightning-slm-gpt-stuck-run-metrics-csv", [("plateau", "warning", "loss", 49, 10999)]),
    ("mistral7b-translator-lora-llamafactory-jsonl", [("periodicity", "info", "loss", 10, 8660)]),
    # SOURCE.md: run 3 "is strongly periodic: detrended ACF peaks at lag 10 (0.77) — one epoch
    # is 1,021 updates" (the within-epoch climb and reset): info, at the epoch length
    ("fairseq-iwslt14-lm-three-restarts", [("periodicity", "info", "loss", 100, 100000)]),
])
def test_real_logs(name: str, expected: list) -> None:
    assert kinds(analyze(read_log(reallog(name)))) == expected


def test_modded_nanogpt_big_spike() -> None:
    report = analyze(read_log(reallog("modded-nanogpt-2024-11-14-run-932bbe0e")))
    peaks = [f.evidence["peak_step"] for f in report.findings if f.kind == "spike"]
    assert 14257 in peaks and len(peaks) <= 10


@pytest.mark.parametrize("name", [
    "llmc-old-format-adamw-baseline", "megatron-ds-qwen7b-v100-dynamic-freq",
    "gemma4-26b-deepspeed-swift-sft-stdout", "qwen3-8b-qlora-hf-trainer-nohup",
    "chatglm2-ptuning-trainer-state", "olmo-1b-continued-pretrain-console",
    "vispec-eagle1-draft-keyvalue-nemo-automodel-pr3173", "keras-csvlogger-mnist-cnn"])
def test_clean_real_logs_silent_at_warning(name: str) -> None:
    assert kinds(analyze(read_log(reallog(name))), Severity.WARNING) == []


def test_lr_schedule_evidence() -> None:
    from losslens.detectors.stats import lr_schedule

    warm_cosine = np.r_[np.linspace(1e-6, 1e-3, 50), 1e-3 * np.cos(np.linspace(0, 1.5, 150)) + 1e-5]
    sched = lr_schedule(warm_cosine)
    assert sched is not None and sched["warmup"] and sched["decays"]
    assert sched["peak_lr"] == pytest.approx(1e-3, rel=0.02)
    flat = lr_schedule(np.full(100, 3e-4))
    assert flat is not None and not flat["warmup"] and not flat["decays"]
    c = synth.stuck()
    f = only(analyze(from_arrays(c.steps, loss=c.loss, lr=np.full(len(c.steps), 3e-4))), "plateau")
    assert "the LR stays at 0.0003 (it never decays)" in f.summary
    c = synth.diverging(turn=1200)
    f = only(analyze(from_arrays(c.steps, loss=c.loss, lr=np.full(len(c.steps), 3e-4))), "divergence")
    assert f.evidence["lr_schedule"]["warmup"] is False and "no LR warm-up" in f.summary


def test_wall_time_pauses_in_a_log_printed_in_bursts() -> None:
    """Records printed in bursts (two ranks' lines a millisecond apart, then nothing until the next
    epoch 100 s later): the usual spacing is the bursts', so the epochs are not 'pauses' of 1,000x
    the usual 0.01 s; a stall of three hours among them still is a hang."""
    from losslens.detectors import PipelineStall
    from losslens.detectors.base import Series

    t = np.sort(np.concatenate([np.arange(60) * 100.0, np.arange(60) * 100.0 + 0.01]))
    steps = np.arange(1, 121)
    assert PipelineStall().detect(Series("time", steps, t)) == []
    t[80:] += 3 * 3600
    (f,) = PipelineStall().detect(Series("time", steps, t))
    assert (f.start_step, f.severity) == (81, Severity.WARNING)
    assert f.evidence["usual_s"] == pytest.approx(100, 0.01)


@pytest.mark.parametrize("block", [1, 5, 64])
def test_wall_time_gaps_taken_in_blocks_are_the_same(block: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The steps' gaps are taken a block at a time on a long run: the same pauses, the same
    numbers, steps logged unevenly (every 1 to 3) and a step repeated (a gap of 0 counts as 1)."""
    from losslens.detectors import PipelineStall
    from losslens.detectors.base import Series

    rng = np.random.default_rng(4)
    steps = np.cumsum(rng.integers(1, 4, 400))
    steps[200] = steps[199]
    t = np.cumsum(rng.uniform(5, 7, 400))
    t[150:] += 900.0
    t[300:] += 120.0
    whole = PipelineStall().detect(Series("time", steps, t))
    monkeypatch.setattr("losslens.detectors.pipeline.GAP_BLOCK", block)
    assert PipelineStall().detect(Series("time", steps, t)) == whole
    assert [f.evidence["steps"] for f in whole] == [[int(steps[150]), int(steps[300])]]


def test_a_detector_changes_no_array_of_the_series_or_its_context() -> None:
    """The epoch staircase and the epoch length are taken in place on the detector's own copy of
    the epoch column (``Series.own``): the caller's arrays, and a log's columns, stay as they were."""
    from losslens.analysis import series_of
    from losslens.detectors import Periodicity
    from losslens.detectors.base import Series

    steps = np.arange(1, 3001)
    epoch = steps / 1000.0
    loss = 3.0 - 0.5 * np.floor(epoch) + np.random.default_rng(0).normal(0, 0.01, 3000)
    kept = epoch.copy()
    Periodicity().detect(Series("loss", steps, loss, context={"epoch": epoch}))
    assert np.array_equal(epoch, kept)
    log = from_arrays(steps, loss=loss, epoch=epoch)
    (s,) = series_of(log, "loss")
    a, b = s.own("epoch"), s.own("epoch")
    assert a is not b and a.flags.writeable and np.array_equal(a, kept)
    a[:] = -1.0  # (changes neither the log nor a later read)
    assert np.array_equal(s.context["epoch"], kept) and np.array_equal(log.train["epoch"].to_numpy(), kept)
    assert s.own("lr") is None
