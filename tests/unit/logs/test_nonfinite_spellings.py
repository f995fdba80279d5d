"""A line that holds a non-finite loss is a parsed record in every reader, however the program
spelled it: Python's bare `nan`/`inf` inside a printed dict (HF Trainer, TRL, ms-swift), C's
`-nan`, `NaN`, `Infinity`, and `nan%` where a percentage is printed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from losslens import analyze, read_log

SPELLINGS = ["nan", "NaN", "-nan", "inf", "-inf", "Infinity"]
LINES = {
    "kv": lambda s, v: f"step={s} loss={v} lr=1e-4",
    "colon": lambda s, v: f"Step {s} | loss: {v} | lr: 0.0001",
    "nanogpt": lambda s, v: f"iter {s}: loss {v}, time 100.00ms, mfu 1.00%",
    "hf": lambda s, v: f"{{'loss': {v}, 'grad_norm': {v}, 'learning_rate': 5e-05, 'epoch': {s / 40:.2f}}}",
    "csv": lambda s, v: f"{s},{v}",
    "jsonl": lambda s, v: json.dumps({"step": s, "loss": v}) if not v[-1].isdigit() else
    f'{{"step": {s}, "loss": {v}}}',
}


@pytest.mark.parametrize("spelling", SPELLINGS)
@pytest.mark.parametrize("fmt", list(LINES))
def test_nonfinite_loss_is_a_record_and_an_error(tmp_path: Path, fmt: str, spelling: str) -> None:
    _loss_error_at_31(_read_35(tmp_path, fmt, LINES[fmt], spelling))


def _read_35(tmp_path: Path, fmt: str, make, spelling: str):
    """A log of 30 finite losses, then 5 spelled ``spelling``, read as ``fmt``: all 35 records."""
    lines = [make(s, f"{2 - s / 100:.3f}") for s in range(1, 31)] + [make(s, spelling) for s in range(31, 36)]
    if fmt == "csv":
        lines.insert(0, "step,loss")
    path = tmp_path / "run.log"
    path.write_text("\n".join(lines) + "\n")
    log = read_log(path)
    assert log.format == fmt and log.train.height == 35  # the five non-finite records are parsed
    return log


def _loss_error_at_31(log) -> None:
    found = [f for f in analyze(log).findings if f.kind == "nonfinite" and f.metric == "loss"]
    assert len(found) == 1 and found[0].start_step == 31 and str(found[0].severity) == "error"


def test_hf_dict_with_bare_nan_was_read_as_healthy(tmp_path: Path) -> None:
    """The shape HF's Trainer prints once the loss goes NaN; before, these lines were skipped as
    'no training metric' and `check` said ok."""
    lines = [f"{{'loss': {2 - s / 100:.4f}, 'grad_norm': 1.2, 'learning_rate': 5e-05, 'epoch': {s / 40:.3f}}}"
             for s in range(1, 30)]
    lines += [f"{{'loss': nan, 'grad_norm': nan, 'learning_rate': 5e-05, 'epoch': {s / 40:.3f}}}"
              for s in range(30, 41)]
    lines.append("{'train_runtime': 100.0, 'train_samples_per_second': 3.2, 'train_loss': nan, 'epoch': 1.0}")
    path = tmp_path / "stdout.log"
    path.write_text("\n".join(lines) + "\n")
    log = read_log(path)
    assert dict(log.lines.skipped) == {"run summary": 1} and log.train.height == 40
    kinds = {(f.kind, f.metric, f.start_step) for f in analyze(log).findings}
    assert ("nonfinite", "loss", 30) in kinds and ("nonfinite", "grad_norm", 30) in kinds


def test_percent_spelling_and_strings_stay_strings() -> None:
    from losslens.logs.formats.huggingface import python_dict
    from losslens.logs.names import parse_number

    assert str(parse_number("nan%")) == "nan" and parse_number("-Infinity") == float("-inf")
    assert python_dict("{'loss': nan, 'note': 'nan: not a number', 'x': [1, inf]}") == \
        {"loss": "nan", "note": "nan: not a number", "x": [1, "inf"]}


WRAPPERS = {  # a number inside its type's repr, as a loop that forgot .item() prints it
    "torch": lambda v: f"tensor({v}, device='cuda:0', grad_fn=<NllLossBackward0>)",
    "numpy": lambda v: f"np.float64({v})",
    "jax": lambda v: f"Array({v}, dtype=float32)",
}


@pytest.mark.parametrize("wrapper", list(WRAPPERS))
@pytest.mark.parametrize("fmt", ["kv", "colon", "hf"])
@pytest.mark.parametrize("columnwise", [False, True])
def test_a_number_printed_inside_its_type_is_read(tmp_path: Path, monkeypatch, fmt: str, wrapper: str,
                                                  columnwise: bool) -> None:
    """'{'loss': tensor(nan, device='cuda:0')}' (a real PPO log on GitHub prints such dicts) was
    skipped whole: a NaN there read as 'no records' or, among plain lines, as healthy. Plain and
    wrapped lines mixed, read line by line and column-wise alike."""
    from tests.naive import assert_same_as_per_line

    if columnwise:
        monkeypatch.setattr("losslens.logs.base.SMALL_BYTES", 0)
    wrap = WRAPPERS[wrapper]
    lines = [LINES[fmt](s, wrap(f"{2 - s / 1000:.4f}") if s % 3 else f"{2 - s / 1000:.4f}")
             for s in range(1, 400)] + [LINES[fmt](s, wrap("nan")) for s in range(400, 403)]
    path = tmp_path / "run.log"
    path.write_text("\n".join(lines) + "\n")
    log = read_log(path)
    assert log.format == fmt and log.train.height == 402 and log.train["loss"].null_count() == 0
    assert log.train["loss"][266] == 2 - 267 / 1000
    found = [f for f in analyze(log).findings if f.kind == "nonfinite" and f.metric == "loss"]
    assert len(found) == 1 and found[0].start_step == 400 and str(found[0].severity) == "error"
    assert_same_as_per_line(path, fmt)


def test_a_wrapped_loss_beside_a_plain_metric_column_wise(tmp_path: Path, monkeypatch) -> None:
    """'Step 5 | acc: 0.5 | loss: tensor(1.995, device='cuda:0')': the colon reader's column-wise
    pass made a template of the line from its plain 'acc' and dropped every loss but the first;
    such lines are read by the parser, which unwraps them."""
    from tests.naive import assert_same_as_per_line

    monkeypatch.setattr("losslens.logs.base.SMALL_BYTES", 0)
    path = tmp_path / "run.log"
    path.write_text("".join(f"Step {s} | acc: 0.5 | loss: tensor({2 - s / 1000:.4f}, device='cuda:0') | "
                            "lr: 1e-4\n" for s in range(1, 500)))
    log = read_log(path)
    assert log.format == "colon" and log.train["loss"].null_count() == 0 and log.train["loss"][-1] == 1.501
    assert_same_as_per_line(path, "colon")


@pytest.mark.parametrize("columnar", [False, True])
@pytest.mark.parametrize("spelling", [*SPELLINGS, "NAN", "+inf", "-Infinity", "INF"])
def test_jsonl_value_written_bare_is_a_nan_not_a_skipped_line(tmp_path: Path, monkeypatch, spelling: str,
                                                              columnar: bool) -> None:
    """A JSON line written by an f-string or a C++ logger holds a NaN bare ('"loss": nan'), which
    json.loads refuses: it was skipped as 'invalid JSON' and `check` said ok. It is read as JSON's
    NaN or Infinity, line by line and column-wise (the line goes to the parser), and a string
    that holds such text stays as written."""
    if columnar:
        monkeypatch.setattr("losslens.logs.base.SMALL_BYTES", 0)
    lines = [f'{{"step": {s}, "loss": {2 - s / 100:.3f}, "note": "a: nan, b"}}' for s in range(1, 31)]
    lines += [f'{{"step": {s}, "loss": {spelling}, "grad_norm": [1.0, {spelling}], "note": "a: nan, b"}}'
              for s in range(31, 36)]
    path = tmp_path / "run.jsonl"
    path.write_text("\n".join(lines) + "\n")
    log = read_log(path)
    assert log.format == "jsonl" and log.train.height == 35 and not log.lines.skipped
    assert log.train["loss"][30:].is_nan().all() if "nan" in spelling.lower() else \
        log.train["loss"][30:].is_infinite().all()
    found = [f for f in analyze(log).findings if f.kind == "nonfinite" and f.metric == "loss"]
    assert len(found) == 1 and found[0].start_step == 31 and str(found[0].severity) == "error"


def test_bare_nonfinite_json_is_read_outside_strings_only() -> None:
    from losslens.logs.mappings import loads_object

    assert loads_object('{"a": "x: nan, y", "b": -inf, "c": [nan, 1]}')["a"] == "x: nan, y"
    got = loads_object('{"a": "x:nan]", "b": -INF , "c": [NaN, +Infinity]}')
    assert got["a"] == "x:nan]" and got["b"] == float("-inf") and got["c"][1] == float("inf")
    for bad in ['{"a": nan1}', '{"a": nanx, "b": 1}', '{"a": "nan}', "{'a': nan}"]:
        with pytest.raises(ValueError):
            loads_object(bad)


WINDOWS = ["-nan(ind)", "nan(snan)", "1.#QNAN0", "-1.#IND00", "1.#INF00", "-1.#INF"]
OLD_CRT = ("kv", "csv", "megatron")  # (the formats that take a value whole read the older spellings too)
WINDOWS_LINES = {
    "kv": LINES["kv"], "colon": LINES["colon"], "nanogpt": LINES["nanogpt"], "csv": LINES["csv"],
    "darknet": lambda s, v: f" {s}: {v}, {v} avg loss, 0.001000 rate, 3.212345 seconds, {s * 64} images",
    "megatron": lambda s, v: f" iteration {s:8d}/ 1000 | consumed samples: {s * 8} | lm loss: {v} | "
                             "grad norm: 1.0 |",
}


@pytest.mark.parametrize("columnar", [False, True])
@pytest.mark.parametrize("spelling", WINDOWS)
@pytest.mark.parametrize("fmt", list(WINDOWS_LINES))
def test_windows_spellings_are_nonfinite(tmp_path: Path, monkeypatch, fmt: str, spelling: str,
                                         columnar: bool) -> None:
    """Windows' C runtime prints a NaN as '-nan(ind)' (Visual C++ 2015 on) or '1.#QNAN0' /
    '-1.#IND00' (before it), an infinity as '1.#INF00': darknet's 'avg loss' on Windows
    (AlexeyAB/darknet#1563). Each is a non-finite record, line by line and column-wise; before,
    darknet skipped such lines. The older spellings are read where a value is taken whole."""
    if "#" in spelling and fmt not in OLD_CRT:
        pytest.skip("the older C runtime's spellings are read where a value is taken whole")
    if columnar:
        monkeypatch.setattr("losslens.logs.base.SMALL_BYTES", 0)
    log = _read_35(tmp_path, fmt, WINDOWS_LINES[fmt], spelling)
    loss = log.train["loss"][30:]
    assert (loss.is_infinite() if "INF" in spelling else loss.is_nan()).all()
    _loss_error_at_31(log)
