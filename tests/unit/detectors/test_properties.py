"""Properties every detector keeps, checked on one seeded case per detector (from the registry,
so a new detector without a case fails here):

- scale: the metric times a positive factor (other units) gives the same finding;
- step shift: steps + 10,000 (a resumed run's numbering) moves the finding by 10,000;
- logging interval: steps × 5 (logging every 5th step) multiplies its steps by 5;
- offset: the metric + a constant gives the same finding, except where the detector's statistic
  is relative to the level by design (listed with the reason, and checked to change);

and what each detector says on degenerate series (empty, one point, ten points, constant, all
NaN, one inf), exactly."""

from __future__ import annotations

import dataclasses

import numpy as np
import polars as pl
import pytest

from losslens import synth
from losslens.analysis import analyze
from losslens.detectors import REGISTRY, Series
from losslens.findings import Finding, Skipped
from losslens.logs import LogData, from_arrays


@dataclasses.dataclass(frozen=True)
class Case:
    kind: str
    target: str  # the metric the transforms change
    steps: np.ndarray
    metrics: dict[str, np.ndarray]
    evals: tuple[list[int], np.ndarray] | None = None  # (steps, eval_loss)

    def log(self, scale: float = 1.0, offset: float = 0.0, shift: int = 0, every: int = 1) -> LogData:
        metrics = dict(self.metrics)
        evals = self.evals
        if self.target in metrics:
            metrics[self.target] = metrics[self.target] * scale + offset
        elif evals is not None:
            evals = (evals[0], evals[1] * scale + offset)
        log = from_arrays(self.steps * every + shift, **metrics)
        if evals is None:
            return log
        frame = pl.DataFrame({"step": [s * every + shift for s in evals[0]],
                              "line": list(range(1, len(evals[0]) + 1)), "eval_loss": evals[1]})
        return dataclasses.replace(log, eval=frame.with_columns(pl.lit(0, pl.Int32).alias("segment")))

    def found(self, **transform) -> list[Finding]:
        return [f for f in analyze(self.log(**transform)).findings if f.kind == self.kind]


def _cases() -> list[tuple[str, Case]]:
    nan, spikes, up, stuck = synth.with_nan(at=437), synth.with_spikes(), synth.diverging(), synth.stuck()
    (acc_c, acc), (tps_c, tps) = synth.accuracy_drop(), synth.throughput_drop()
    q_c, q = synth.starved_queue()
    summed = synth.ladder(period=7, seed=0)
    composed = synth.ladder(period=6, seed=1, cause="batch_composition")
    bands, period = synth.bands(seed=2), synth.periodic(period=40.0, seed=1)
    return [
        ("nonfinite", Case("nonfinite", "loss", nan.steps, {"loss": nan.loss})),
        ("spike", Case("spike", "loss", spikes.steps, {"loss": spikes.loss})),
        ("divergence", Case("divergence", "loss", up.steps, {"loss": up.loss})),
        ("plateau", Case("plateau", "loss", stuck.steps, {"loss": stuck.loss})),
        ("accuracy_drop", Case("accuracy_drop", "acc", acc_c.steps, {"loss": acc_c.loss, "acc": acc})),
        ("throughput_drop", Case("throughput_drop", "tokens_per_s", tps_c.steps,
                                 {"loss": tps_c.loss, "tokens_per_s": tps})),
        ("pipeline_stall", Case("pipeline_stall", "q_pre_min", q_c.steps,
                                {"loss": q_c.loss, "q_pre_min": q})),
        ("ladder-accumulator", Case("ladder", "loss", summed.steps, {"loss": summed.loss})),
        ("ladder-composition", Case("ladder", "loss", composed.steps, {"loss": composed.loss})),
        ("multimodal", Case("multimodal", "loss", bands.steps, {"loss": bands.loss})),
        ("periodicity", Case("periodicity", "loss", period.steps, {"loss": period.loss})),
        ("overfitting", Case("overfitting", "eval_loss", np.arange(0, 1000, 10),
                             {"loss": np.linspace(3, 1, 100)},
                             ([100, 300, 500, 700, 900], np.array([2.5, 2.0, 1.9, 2.1, 2.3])))),
    ]


CASES = _cases()
STEP_KEYS = ("peak_step", "turn_step", "eval_best_step")
SAME_KEYS = ("cause", "episodes", "modes_count", "records")
# statistics that are relative to the level by design: an offset changes what they say
NOT_OFFSET = {
    "spike": "a spike is a ratio to the local level (x2 at 1.5 is x1.3 at 4.5)",
    "pipeline_stall": "a stall is an empty queue (0); an offset queue is never empty",
    "ladder-accumulator": "an accumulator's rungs are integer multiples of the level",
}


def test_every_detector_has_a_case() -> None:
    assert {d.name for d in REGISTRY} == {c.kind for _, c in CASES}


def _same(base: list[Finding], got: list[Finding], every: int = 1, shift: int = 0) -> None:
    assert len(got) == len(base) >= 1
    for b, g in zip(base, got, strict=True):
        assert (g.start_step, g.end_step) == (b.start_step * every + shift, b.end_step * every + shift)
        assert (g.metric, g.severity) == (b.metric, b.severity)
        for key in SAME_KEYS:
            assert g.evidence.get(key) == b.evidence.get(key), key
        for key in STEP_KEYS:
            if b.evidence.get(key) is not None:
                assert g.evidence[key] == b.evidence[key] * every + shift, key
        if "period_steps" in b.evidence:
            assert g.evidence["period_steps"] == pytest.approx(b.evidence["period_steps"] * every, rel=0.01)


@pytest.mark.parametrize(("name", "case"), CASES, ids=[n for n, _ in CASES])
def test_scale_shift_and_logging_interval(name: str, case: Case) -> None:
    base = case.found()
    _same(base, case.found(scale=0.5 if case.target == "acc" else 2.0))
    _same(base, case.found(shift=10_000), shift=10_000)
    _same(base, case.found(every=5), every=5)


@pytest.mark.parametrize(("name", "case"), CASES, ids=[n for n, _ in CASES])
def test_offset(name: str, case: Case) -> None:
    base = case.found()
    got = case.found(offset=0.1 if case.target == "acc" else 3.0)
    if name in NOT_OFFSET:
        assert [(f.start_step, f.evidence.get("cause")) for f in got] != \
            [(f.start_step, f.evidence.get("cause")) for f in base], NOT_OFFSET[name]
    else:
        _same(base, got)


EDGE = {
    "empty": np.array([]),
    "one": np.array([1.0]),
    "ten": np.linspace(2, 1, 10),
    "constant": np.full(500, 2.5),
    "all_nan": np.full(300, np.nan),
    "with_inf": np.r_[np.linspace(3, 1, 200), np.inf, np.linspace(1, 0.9, 99)],
}
S, N = "skipped", []  # S: a Skipped saying why; N: nothing found
# what each detector says on each degenerate series ("kind/severity" for a finding)
EXPECTED = {
    "nonfinite": dict(empty=S, one=N, ten=N, constant=N, all_nan=["nonfinite/error"],
                      with_inf=["nonfinite/error"]),
    "ladder": dict(empty=S, one=S, ten=N, constant=N, all_nan=S, with_inf=N),
    "multimodal": dict(empty=S, one=S, ten=S, constant=N, all_nan=S, with_inf=N),
    "periodicity": dict(empty=S, one=S, ten=S, constant=N, all_nan=S, with_inf=N),
    "spike": dict(empty=S, one=S, ten=N, constant=N, all_nan=S, with_inf=N),
    "divergence": dict(empty=S, one=S, ten=N, constant=N, all_nan=S, with_inf=N),
    # a loss that never moves over 500 records is stuck (info: it may be a toy run)
    "plateau": dict(empty=S, one=S, ten=S, constant=["plateau/info"], all_nan=S, with_inf=N),
    # the with_inf series falls from 3 to 0.9: as accuracy or throughput, that is a drop
    "accuracy_drop": dict(empty=S, one=S, ten=S, constant=N, all_nan=S, with_inf=["accuracy_drop/warning"]),
    "overfitting": dict(empty=S, one=S, ten=N, constant=N, all_nan=S, with_inf=N),
    "pipeline_stall": dict(empty=S, one=S, ten=N, constant=N, all_nan=S, with_inf=N),
    "throughput_drop": dict(empty=S, one=S, ten=S, constant=N, all_nan=S,
                            with_inf=["throughput_drop/warning"]),
}


@pytest.mark.parametrize("edge", list(EDGE))
@pytest.mark.parametrize("detector", REGISTRY, ids=lambda d: d.name)
def test_every_detector_on_degenerate_series(detector, edge: str) -> None:
    values = EDGE[edge]
    metric = {"accuracy_drop": "acc", "overfitting": "eval_loss", "pipeline_stall": "q_pre_min",
              "throughput_drop": "tokens_per_s"}.get(detector.name, "loss")
    result = detector.detect(Series(metric, np.arange(len(values)), values))
    expected = EXPECTED[detector.name][edge]
    if expected == S:
        assert isinstance(result, Skipped) and result.detector == detector.name and result.reason
        assert f"only {int(np.isfinite(values).sum())}" in result.reason or result.reason == "no records"
    else:
        assert [f"{f.kind}/{f.severity}" for f in result] == expected
        assert all(f.metric == metric and f.start_step <= f.end_step for f in result)


@pytest.mark.parametrize("block", [None, 37])
def test_spike_rule_equals_its_plain_reference(block: int | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The spike rule, written to hold few arrays at once (a median taken a record late instead of
    one over the previous values with a NaN in front; a long series a block of records at a time,
    here 37), gives the plain rule's flags, levels and z-scores exactly: heavy-tailed series,
    NaNs (leading too), windows and histories longer than the series, one record."""
    import warnings

    from losslens.detectors import spike
    from losslens.detectors.spike import spikes
    from tests.naive import spikes_reference

    if block is not None:
        monkeypatch.setattr(spike, "BLOCK", block)

    rng = np.random.default_rng(0)
    for t in range(300):
        n = t + 1 if t < 3 else int(rng.integers(1, 400))
        v = np.exp(rng.standard_t(3, n) * 0.3)
        if t % 3 == 0 and t % 2:
            v[rng.integers(0, n, max(1, n // 20))] = np.nan
        if t % 5 == 0 and t % 2:
            v[:3] = np.nan
        window, history = int(rng.integers(1, 80)), int(rng.integers(0, 30))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # (all-NaN slices)
            want = spikes_reference(v.copy(), window, 3.0, 1.5, history)
            got = spikes(v.copy(), window, 3.0, 1.5, history)
        for a, b in zip(want, got, strict=True):
            assert np.array_equal(a, b, equal_nan=True), (t, n, window, history)
