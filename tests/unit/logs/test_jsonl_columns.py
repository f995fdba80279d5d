"""The vectorised JSON Lines reader gives exactly what the per-line parser gives."""

from __future__ import annotations

import json
import random

import pytest

from losslens import read_log, synth
from tests.conftest import FIXTURES, reallog
from tests.naive import assert_same_as_per_line, sprinkle

pytestmark = pytest.mark.usefixtures("columnar")


def assert_same(path, format: str = "jsonl") -> None:
    assert_same_as_per_line(path, format)


def test_fixture_and_real_llamafactory_log() -> None:
    assert_same(FIXTURES / "metrics.jsonl")
    real = reallog("mistral7b-translator-lora-llamafactory-jsonl")
    assert_same(real)
    log = read_log(real)
    assert log.train.height == 866 and log.train["elapsed_s"][0] == 24.0  # "0:00:24"


ODD = [
    "",
    "  ",
    '{"step": 5, "loss": NaN, "lr": 1e-4}',  # Python's json reads NaN; polars does not
    '{"step": 6, "loss": Infinity}',
    '{"step": 7, "train": {"loss": 1.5, "acc": 0.4}, "eval": {"loss": 1.7}}',  # nested
    '{"step": 8, "loss": "0.75", "throughput": "1,024", "elapsed": "0:01:05"}',  # text numbers
    '{"step": 9, "loss": "n/a", "done": false, "note": null}',  # text that is no number
    '{"step": "10/300", "loss": 1.2, "q": [1, 2, 3], "tags": ["a", "b"]}',  # lists
    '{"step": 11.0, "loss": 1.1, "train/loss": 1.0}',  # one name, two keys
    '{"train/loss": 1.05, "step": 12, "loss": 1.3}',  # the other order
    '{"global_step": 13, "step": 99, "loss": 1.0}',  # the step key order
    '{"step": 14, "eval_loss": 1.4, "epoch": 0.5}',  # eval only
    '{"step": 15, "lr": 1e-05}',  # no training metric
    '{"train_runtime": 100.0, "train_loss": 1.2}',  # a run summary
    "[1, 2, 3]",  # not an object
    '{"step": 16, "loss": 1.0',  # cut short
    "Traceback (most recent call last):",
    '{"step": 17, "loss": 1e400}',  # overflows to inf
    '{"step": 18, "loss": 12345678901234567890}',
    '{"step": 19, "loss": [], "acc": 0.5}',
    '  {"step": 20, "loss": 0.9}  ',
    '{"step": 21, "loss": -0.5, "grad_norm": "nan", "ppl": "inf%"}',
    '{"step": true, "loss": 0.8}',
    '{"step": 22, "loss": 1.0, "lr": 1e-4, "lost": 3, "loss": 2.0}',  # a key twice: json keeps the last
    '{"step": 23, "train": {"loss": 1.0, "loss": 2.0}, "acc": 0.5}',  # twice in a nested object
    '{"step": 24, "eval": {"step": 5, "loss": 1.1}, "loss": 0.7}',  # a nested object reusing names
    '{"step": 25, "loss": 0.6, "note": "a\\": b", "x": "\\"c\\":"}',  # '":' inside text
    '{"step": 26, "loss": null, "acc": 0.3}',  # a null loss
    '{"step": 27, "loss": 0.5}{"step": 28, "loss": 0.4}',  # two lines glued
]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_generated_with_odd_lines(tmp_path, seed: int) -> None:
    rng = random.Random(seed)
    lines = synth.jsonl_lines(3000, seed=seed)
    sprinkle(lines, ODD, 150, rng)
    path = tmp_path / "odd.jsonl"
    path.write_text("\n".join(lines) + ("\n" if seed else ""))
    assert_same(path)


def test_each_odd_line_alone_among_clean_ones(tmp_path) -> None:
    """Each shape in a chunk of its own (a chunk polars cannot read goes line by line as a whole)."""
    clean = synth.jsonl_lines(200, seed=4)
    for i, odd in enumerate(ODD):
        path = tmp_path / f"odd{i}.jsonl"
        path.write_text("\n".join(clean[:100] + [odd] + clean[100:]) + "\n")
        assert_same(path)


def test_mixed_number_and_text_values_and_key_orders(tmp_path) -> None:
    rng = random.Random(7)
    lines = []
    for i in range(2000):
        rec = {"step": i, "loss": rng.choice([round(rng.uniform(0, 3), 4), str(round(rng.uniform(0, 3), 3))]),
               "lr": rng.choice([1e-4, 2e-4, "3e-4"]), "epoch": i / 1000}
        keys = list(rec)
        rng.shuffle(keys)
        lines.append(json.dumps({k: rec[k] for k in keys}))
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(lines) + "\n")
    assert_same(path)


LATE = [  # what the first 1,000 rows' schema cannot hold, first seen after them
    {"eval_loss": 2.5},  # a key first seen late
    {"stats": {"gnorm": 1.0, "acc": 0.5}},  # a nested key first seen late
    {"tokens": 1.5},  # an int column that turns float
    {"tokens": "12"},  # ... or text
    {"lr": None},  # a null value
    {"lr": [1e-4, 2e-4]},  # a list where a number stood
    {"note": 'say "hi": now'},  # a quote and a colon in a text value
    {"stats": {}},  # an empty object
]


@pytest.mark.parametrize("late", range(len(LATE)))
def test_schema_of_the_first_rows_or_of_all(tmp_path, late: int) -> None:
    """The first rows' types are inferred and read every row where each row's count of keys
    shows that nothing was dropped; a key, a nested key or a type first seen late reads what
    the per-line parser reads."""
    rows = [{"step": i, "loss": 3 - i / 3000, "lr": 1e-4, "tokens": 4096 + i, "stats": {"gnorm": 1.0}}
            for i in range(3000)]
    rows[2500].update(LATE[late])
    path = tmp_path / "late.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert_same(path)
    log = read_log(path)
    assert log.train.height == 3000 and log.lines.parsed == 3000


@pytest.mark.parametrize("prefix", ["[rank{r}]: ", "2024-05-01T10:00:{s:02d}.5Z ", "> INFO:root:"])
def test_captured_and_ranked_lines(tmp_path, prefix: str) -> None:
    rng = random.Random(1)
    lines = [prefix.format(r=i % 2, s=i % 60) + x for i, x in enumerate(synth.jsonl_lines(2000))]
    sprinkle(lines, ODD, 60, rng)
    path = tmp_path / "p.jsonl"
    path.write_text("\n".join(lines) + "\n")
    assert_same(path)
