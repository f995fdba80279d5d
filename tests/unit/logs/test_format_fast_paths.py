"""The column-wise nanoGPT, Megatron, fairseq, torchtitan and OLMo readers give exactly what their
per-line parsers give."""

from __future__ import annotations

import random

import pytest
from polars.testing import assert_frame_equal

from losslens import read_log, synth
from tests.conftest import FIXTURES, reallog
from tests.naive import assert_same_as_per_line as assert_same
from tests.naive import sprinkle

pytestmark = pytest.mark.usefixtures("columnar")


@pytest.mark.parametrize(("path", "format"), [
    (FIXTURES / "megatron_ranks.log", "megatron"), (FIXTURES / "nanogpt_nan.log", "nanogpt"),
    (FIXTURES / "fairseq.log", "fairseq"), (FIXTURES / "torchtitan_ansi.log", "torchtitan"),
    (FIXTURES / "olmo_console.log", "olmo")])
def test_fixtures(path, format: str) -> None:
    assert_same(path, format)


@pytest.mark.parametrize(("name", "format"), [
    ("megatron-ds-qwen7b-v100-dynamic-freq", "megatron"), ("bloom-tr1-13b-chronicles-loss-spike", "megatron"),
    ("bloom-tr8-104b-chronicles-divergence", "megatron"), ("nanogpt-termux-cpu-nan", "nanogpt"),
    ("fairseq-iwslt14-lm-three-restarts", "fairseq"), ("olmo-1b-continued-pretrain-console", "olmo")])
def test_real_logs(name: str, format: str) -> None:
    assert_same(reallog(name), format)


NANO_ODD = [
    "", "  ", "iter 7: loss nan, time 1431.27ms, mfu -100.00%", "ITER 8: LOSS 2.5, TIME 12ms",
    "iter 9: loss -inf, time 3ms, mfu 0.5%", "step 10: train loss 2.1000, val loss NaN",
    "saving checkpoint to out", "iter 11: loss 2.5", "iter 12: loss 2.5, time 3.5e2ms, mfu 1e1%",
    "Traceback (most recent call last):", "number of parameters: 10.65M", " iter 13: loss 2.5, time 3ms",
]


MEGA_ODD = [
    "", " iteration       15/   10000 | lm loss: nan | grad norm: nan |",
    " iteration       16/   10000 | consumed samples: 1,024 | learning rate: 6.000E-05 |",  # no loss
    " iteration       17/   10000 | lm loss: 2.5 | lm loss: 2.7 | grad norm: 1.0 |",  # twice
    " iteration       18/   10000 | lm loss: 2.5 2.6 | elapsed time per iteration (ms): 1e3 |",
    " iteration       19/   10000 | LM Loss: 2.5 | number of nan iterations:   1 | mystery: 3 |",
    " validation loss at iteration 20 on valid set | lm loss value: 2.9E+00 | lm loss PPL: 18.1 |",
    "validation loss at iteration 21 | lm loss value: inf | lm loss PPL: inf | ",
    "validation loss at iteration 22 | nothing: 1 |",
    "  iteration\t23/ 100 | lm loss: 2.5 |", "iteration 24 / 100 | lm loss: 2.5 |",  # odd heads
    " iteration 25/100| lm loss: 2.5 |", " iteration\u00a026/ 100 | lm loss: 2.5 |",
    "x iteration 27/ 100 | lm loss: 2 |",
    "--------------------------------------------------------------------",
    " iteration       23/   10000 | lm loss: 2.5 | elapsed time per iteration (ms): 1,5 |",
    "> building train, validation, and test datasets ...",
    " iteration       24/   10000 |",
]


FAIRSEQ_ODD = [
    "", "2024-05-31 15:45:10 | INFO | train_inner | epoch 001:    100 / 1021 loss=nan, num_updates=7",
    "| train_inner | epoch 002: 5 / 9 loss=inf, nll_loss=-inf, num_updates=8, epoch=7",  # epoch twice
    "2024-05-31 15:45:10 | INFO | train_inner | epoch 001: 9 / 9 loss=2.5, loss=2.6, num_updates=9",
    "| train_inner | epoch 001: 9 / 9 lr=1e-4, num_updates=10",  # no loss
    "| train_inner | epoch 001: 9 / 9 loss=2.5,num_updates=11 ppl=,, wall=1,024",
    "| train_inner | epoch 001: 9 / 9 loss=[2.5], num_updates=12, gnorm=1.5x",
    "| train_inner | epoch 001: 9 / 9 train_loss=2.5, loss=2.6, num_updates=13, update=14",
    "| train_inner | epoch 001: 9 / 9 ",
    "| train_inner | epoch 003: 9 / 9 loss=2.5 | train_inner | epoch 004: 1 / 9 loss=2.4, num_updates=15",
    "| train_inner |  epoch 005:9/9 loss=2.5, num_updates=16",
    "x | train_inner | epoch 006: 9 / 9   loss=2.5, num_updates=17",
    "2024-05-31 15:45:10 | INFO | fairseq.trainer | begin training epoch 2",
    "2024-05-31 15:47:24 | INFO | valid | epoch 001 | valid on 'valid' subset | loss 9.86 | num_updates 500",
    "| valid | epoch 002 | loss 9.8 | eval_loss 9.9 | num_updates 600",  # one name twice
    "| valid | epoch 002 | loss nan | line 5 | rank 2 | ppl 1,024 | num_updates 700",  # reserved names
    "| valid | epoch 002 | num_updates 800 | best_loss 9.7",  # an eval metric only
    "| valid | epoch 002 | num_updates 900 | wps 50000 |  | bsz 1 2",  # no metric
    "2024-05-31 15:47:24 | INFO | train | epoch 001 | loss 9.544 | nll_loss 8.942 | num_updates 500",
    "  (0): TransformerDecoderLayer(", "Traceback (most recent call last):",
]


TITAN_ODD = [
    "", "[titan] 2025-01-08 10:00:01,000 - root - INFO - step:  7  loss:     nan  memory:  9.12GiB(9.60%)",
    "step: 8  loss: -inf  tps: inf  mfu: NaN%", "step: 9  loss: nanx  tps: 1", "step: 10  loss: 2.5  info: 3",
    "step: 11  loss: 2.5  loss: 2.6", "step: 12  loss: 1,5  grad_norm: 0.5e1  lr: 3e-4",
    "step: 13  loss: Infinity  tps: 6,581(x)",
    "\x1b[31mstep: 14\x1b[39m  \x1b[32mloss: 2.4\x1b[39m", "step: 15  loss: -  memory: GiB",
    "[titan] 2025-01-08 10:00:01,000 - root - WARNING - Traceback (most recent call last):",
    "2025-13-45 10:00:00 step: 16  loss: 2.3", "[x] 2025-01-08 10:00:02 step: 17  loss: 2.2",
    "xstep: 18  loss: 2.1", "step:19\tloss: 2.0", "step: 20  loss: 2.0 step: 21  loss: 1.9",  # odd heads
    "2025-01-08 10:00:03 [x] step: 22  loss: 1.8", "step:  23  loss:2.0  tps: 5",
]


@pytest.mark.parametrize("seed", [0, 1])
def test_generated_with_odd_lines(tmp_path, seed: int) -> None:
    rng = random.Random(seed)
    for format, lines, odd in (("nanogpt", synth.nanogpt_lines(6000, every=2, seed=seed), NANO_ODD),
                               ("megatron", synth.megatron_lines(2000, seed=seed), MEGA_ODD),
                               ("fairseq", synth.fairseq_lines(3000, seed=seed), FAIRSEQ_ODD),
                               ("torchtitan", synth.torchtitan_lines(3000, seed=seed), TITAN_ODD)):
        lines = list(lines)
        sprinkle(lines, odd, 120, rng)
        path = tmp_path / f"{format}.log"
        path.write_text("\n".join(lines) + ("\n" if seed else ""))
        assert_same(path, format)
        assert read_log(path).format == format


@pytest.mark.parametrize("seed", range(4))
def test_fairseq_same_keys_read_as_the_long_form(seed: int) -> None:
    """fairseq's pairs read column by column when every row holds the first row's keys give the
    long form's step, columns and unread rows; a chunk with any other row (a value with a ',', a
    space or a tab, an empty one, a key missing, moved or twice) is left to the long form."""
    import polars as pl

    from losslens.logs.formats.fairseq import _fairseq_long, _same_pairs
    from losslens.logs.sink import Sink

    rng = random.Random(seed)
    keys = ["loss", "nll_loss", "ppl", "wps", "num_updates", "lr", "gnorm", "wall"]
    good = [", ".join(f"{k}={rng.choice(['1.5', '2', 'nan', '3e-4', '0:00:24', '4m', 'inf', 'x=1'])}"
                      for k in keys) for _ in range(30)]
    good[0] = "loss=1.5, nll_loss=2, ppl=3e-4, wps=2, num_updates=x=1, lr=4m, gnorm=inf, wall=0:00:24"
    base = good[0]
    odd = [base.replace("=1.5", "=1,5", 1), base.replace(", lr=", ", lr= "), base + " ",
           base.replace(", ", ",\t", 1), base.replace("wps=", "wps=,"), base.replace(", ppl=", ", lr="),
           ", ".join(reversed(base.split(", "))), base.rsplit(", ", 1)[0], "loss=", base + ", loss=1"]
    for rows in [good, *([*good[:5], o, *good[5:]] for o in odd)]:
        fast, slow = _same_pairs(pl.Series(rows), Sink()), _fairseq_long(pl.Series(rows), Sink())
        assert (fast is not None) == (rows is good)
        if fast is None:
            continue
        assert fast[0].equals(slow[0]) and fast[2].equals(slow[2])
        assert sorted(fast[1]) == sorted(slow[1])
        assert all(fast[1][c].equals(slow[1][c]) for c in fast[1])


@pytest.mark.parametrize("seed", range(3))
def test_same_keys_read_as_the_long_form(seed: int) -> None:
    """Pairs read position by position when every row holds the first row's keys (torchtitan's
    'name: value' pairs, units and all) give the long form's step, columns and unread rows; a
    row with a key missing, moved, renamed or twice leaves the whole chunk to the long form."""
    import polars as pl

    from losslens.logs.fields import key_columns as _key_columns
    from losslens.logs.fields import long_pairs as _long
    from losslens.logs.fields import same_keys as _same_keys
    from losslens.logs.formats.torchtitan import _TITAN_PAIR, _titan_pair
    from losslens.logs.sink import Sink

    rng = random.Random(seed)

    def row(step: int) -> str:
        # (the first row's tps has thousands' commas: each row's is read with them in the query,
        # then as the long form reads what that reading leaves)
        tps = "6,561" if step == 0 else rng.choice(["6,561", "6561", "1,234,567", "7.5k", "6,5,61", "+1,000",
                                                     "1,000.", "1,000e3", ",561", "6,561k", "nan", "1,0.0,0"])
        return (f"loss: {rng.choice(['7.9551', 'nan', '1e-3', '-inf', '2'])}  "
                f"memory: {rng.choice(['39.12GiB(41.18%)', '9GiB(9.6%)', '0.5GB', '12'])}  "
                f"tps: {tps}  mfu: {rng.choice(['38.52%', '0.1%', '3'])}")

    good = [row(i) for i in range(80)]
    odd = [good[0].replace("mfu:", "mfu2:"), good[0].split("  ", 1)[1], good[0] + "  loss: 3",
           "  ".join(reversed(good[0].split("  "))), good[0].replace("tps: ", "tps: (")]
    for rows in [good, *([*good[:7], o, *good[7:]] for o in odd)]:
        pairs = pl.Series(rows).str.extract_all(_TITAN_PAIR)
        fast = _same_keys(pairs, _titan_pair, Sink())
        slow = _key_columns(_long(pairs, _titan_pair), len(rows), Sink())
        assert (fast is not None) == (rows is good)
        if fast is None:
            continue
        assert fast[0].equals(slow[0]) and fast[2].equals(slow[2]) and sorted(fast[1]) == sorted(slow[1])
        assert all(fast[1][c].equals(slow[1][c]) for c in fast[1])


@pytest.mark.parametrize("seed", range(3))
def test_megatron_same_fields_read_as_the_long_form(seed: int) -> None:
    """Megatron bodies whose '|' fields name the first body's fields in order are read position
    by position: the same columns and names as the long form; a body with a field missing,
    moved, renamed, cased otherwise or twice leaves the whole chunk to the long form."""
    import polars as pl

    from losslens.logs.formats.megatron import _long_fields, _same_fields
    from losslens.logs.sink import Sink

    rng = random.Random(seed)
    lines = [x.split("|", 1)[1] for x in synth.megatron_lines(60, seed=seed) if x.startswith(" iteration ")]
    lines = [x.replace("grad norm: ", f"grad norm: {rng.choice(['nan', '', '1 2', 'inf', '3,5'])}")
             if rng.random() < 0.2 else x for x in lines]
    base = lines[0]
    odd = [base.replace("lm loss:", "LM loss:"), base.replace("| grad norm:", "| grad norm: 1 | grad norm:"),
           base.replace("lm loss:", "lm  loss:"), base.split("|", 2)[2], base + " extra: 1 |"]
    for rows in [lines, *([*lines[:5], o, *lines[5:]] for o in odd)]:
        fast_sink, slow_sink = Sink(), Sink()
        fast, slow = _same_fields(pl.Series(rows), fast_sink), _long_fields(pl.Series(rows), slow_sink)
        assert (fast is not None) == (rows is lines)
        if fast is None:
            continue
        assert sorted(fast) == sorted(slow) and fast_sink.names == slow_sink.names
        assert all(fast[c].equals(slow[c], check_names=False) for c in fast)
    twice = [x.replace("| grad norm:", "| grad norm: 0.5 | grad norm:", 1) for x in lines]  # the last wins
    assert _same_fields(pl.Series(twice), Sink()) is None


@pytest.mark.parametrize("prefix", ["[rank{r}]: ", "[default{r}]: ", "2024-05-01T10:00:{s:02d}.5Z "])
@pytest.mark.parametrize("format", ["megatron", "fairseq"])
def test_ranked_and_timestamped(tmp_path, prefix: str, format: str) -> None:
    source = synth.megatron_lines(1000) if format == "megatron" else synth.fairseq_lines(1000)
    lines = [prefix.format(r=i % 2, s=i % 60) + x for i, x in enumerate(source)]
    path = tmp_path / "p.log"
    path.write_text("\n".join(lines) + "\n")
    assert_same(path, format)


@pytest.mark.parametrize("name", ["modded-nanogpt-2024-11-14-run-932bbe0e", "llmc-old-format-adamw-baseline",
                                  "text-diffusion-lm-modded-nanogpt-fork"])
def test_real_modded_nanogpt_and_llmc_logs(name: str) -> None:
    assert_same(reallog(name), "modded-nanogpt")


MODDED_ODD = [
    "", "step:7/100 train_loss:nan train_time:3ms step_avg:nanms", "step:8/100 val_loss:3.5 train_time:9ms",
    "step:9/100 train_loss:3.5 train_loss:3.6 lr:1e-3", "step:10/100 note:x", "s:11 trl:4.25",
    "s:12 tel:inf", "  s:13 trl:4.0  ", "step 14/100 | loss 3.9 | norm 1.2 | lr 3.0e-04 | 512.25 ms | "
    "41.2% bf16 MFU | 123456 tok/s", "step 15/100 | train loss nan | norm nan | lr 3e-4",
    "Traceback (most recent call last):", "step:16/100 train_loss:3.4 train_time:1,250ms",
]


@pytest.mark.parametrize("seed", [0, 1])
def test_modded_nanogpt_with_odd_lines(tmp_path, seed: int) -> None:
    rng = random.Random(seed)
    lines = [f"step:{i}/5000 train_loss:{4 - i / 2000 + rng.gauss(0, .02):.4f} train_time:{i * 391}ms "
             f"step_avg:{391 + rng.gauss(0, 2):.2f}ms" for i in range(5000)]
    sprinkle(lines, MODDED_ODD, 100, rng)
    path = tmp_path / "modded.log"
    path.write_text("\n".join(lines) + "\n")
    assert_same(path, "modded-nanogpt")


MODDED_SHAPES = [  # each a key sequence of its own (the commonest few are read position by position)
    "step:{i}/5000 val_loss:{x:.4f} train_time:{t}ms step_avg:{a:.2f}ms",
    "step:{i}/5000 loss:{x:.4f} lr:1e-3",
    "step:{i}/5000 line:{t} step:{i} train_loss:{x:.4f}",
    "step:{i}/5000 train_loss:{x:.4f}\ttrain_time:{t}ms",
    "step:{i}/5000 train_loss:{x:.4f}  train_time:{t}ms",
    "step:{i}/5000 train_loss:{x:.4f} train_time:{t}ms step_avg:nanms",
    "step:{i}/5000 tok\u00e9n:{x:.4f} lr:1",
    "step:{i}/5000 train_loss:{x:.4f} lr:3:4 grad:",
    "step:{i}/5000 lr:{x:.4f} lr:2.5",
    "step:{i}/5000 train_loss:{x:.4f} train_time:1,250ms step_avg:5m",
    "step:{i}/5000 train_loss:{x:.4f} loss:9.5",
]


@pytest.mark.parametrize("seed", range(4))
def test_modded_nanogpt_key_sequences(tmp_path, seed: int) -> None:
    """Lines of several key sequences, in runs and mixed: the commonest sequences of a chunk are
    read position by position and the rest through the long form, with the per-line parser's
    frames and names (a name first held by 'loss:' in one sequence and 'train_loss:' in another
    is named after whichever comes first in the file; reserved keys; a tab, two spaces, text past
    ASCII, a key twice, values that need the parser)."""
    rng = random.Random(seed)
    shapes = rng.sample(MODDED_SHAPES, 4) + [MODDED_SHAPES[0]]
    lines = [rng.choice(shapes).format(i=i, x=4 - i / 2000, t=i * 391, a=391 + rng.random())
             for i in range(4000)]
    sprinkle(lines, MODDED_ODD + [s.format(i=7, x=3.5, t=9, a=1.0) for s in MODDED_SHAPES], 60, rng)
    path = tmp_path / "modded.log"
    path.write_text("\n".join(lines) + "\n")
    assert_same(path, "modded-nanogpt")


def test_modded_nanogpt_common_sequences_read_by_position() -> None:
    """The rows of a chunk's commonest key sequences go position by position, the rest (a tab,
    two spaces, a key twice, text past ASCII) to the long form."""
    import polars as pl

    from losslens.logs.formats.nanogpt import _modded_same
    from losslens.logs.sink import Sink

    body = ["step:1/9 val_loss:3.5 train_time:9ms", "step:2/9 train_loss:3.4 train_time:10ms",
            "step:3/9 train_loss:3.3 train_time:11ms", "step:4/9 train_loss:3.2\ttrain_time:12ms",
            "step:5/9 train_loss:3.1  train_time:13ms", "step:6/9 train_loss:3.0 train_loss:2.9",
            "step:7/9 train_loss:2.9 train_time:14m\u00e9", "step:8/9 train_loss:2.8 train_time:15ms"]
    named: list = []
    groups, left, step = _modded_same(pl.Series(body), Sink(), named)
    assert left.tolist() == [False, False, False, True, True, True, True, False]
    assert step.to_list() == [1, 2, 3, 4, 5, 6, 7, 8]  # (the rows left read it again by MODDED)
    by_rows = {tuple(rows.nonzero()[0]): cols for rows, cols in groups}
    assert sorted(by_rows) == [(0,), (1, 2, 7)]
    assert by_rows[(1, 2, 7)]["loss"].to_list() == [3.4, 3.3, 2.8]
    assert by_rows[(1, 2, 7)]["train_time_s"].to_list() == [0.01, 0.011, 0.015]
    assert sorted(named) == [(0, 0, "eval_loss", "val_loss"), (0, 1, "train_time_s", "train_time"),
                             (1, 0, "loss", "train_loss"), (1, 1, "train_time_s", "train_time")]
    # two keys of one name on a line: the last that reads wins, the first names it
    named = []
    twice = ["step:1/9 train_loss:3.5 loss:9.5", "step:2/9 train_loss:3.4 loss:x"]
    groups, left, _ = _modded_same(pl.Series(twice), Sink(), named)
    assert not left.any() and groups[0][1]["loss"].to_list() == [9.5, 3.4]
    assert named == [(0, 0, "loss", "train_loss")]


HUGE = "99999999999999999999"  # a step past int64: no step on either path (the step before it)
HUGE_STEPS = {
    "nanogpt": [f"iter {HUGE}: loss 2.5, time 3ms, mfu 1%", f"step {HUGE}: train loss 2.1, val loss 2"],
    "megatron": [f" iteration {HUGE}/   10000 | lm loss: 2.5 |",
                 f" validation loss at iteration {HUGE} | lm loss value: 2.9 |"],
    "modded-nanogpt": [f"step:{HUGE}/100 train_loss:3.4", f"s:{HUGE} trl:4.25"],
    "fairseq": [f"| train_inner | epoch 001: 9 / 9 loss=2.5, num_updates={HUGE}",
                f"| valid | epoch 001 | loss 2.4 | num_updates {HUGE}"],
    "torchtitan": [f"step: {HUGE}  loss: 2.5"],
}


@pytest.mark.parametrize("format", list(HUGE_STEPS))
def test_step_past_int64(tmp_path, format: str) -> None:
    lines = {"nanogpt": lambda: synth.nanogpt_lines(600, every=2),
             "megatron": lambda: synth.megatron_lines(300),
             "modded-nanogpt": lambda: [f"step:{i}/500 train_loss:{4 - i / 200:.4f}" for i in range(500)],
             "fairseq": lambda: synth.fairseq_lines(300),
             "torchtitan": lambda: synth.torchtitan_lines(500)}[format]()
    for i, x in enumerate(HUGE_STEPS[format] * 3):
        lines.insert(50 + 97 * i, x)
    path = tmp_path / "huge.log"
    path.write_text("\n".join(lines) + "\n")
    assert_same(path, format)


OLMO_ODD = [
    "", "2025-12-12 11:05:01.009\thost:0\tolmo.train:979\tINFO\tSaving checkpoint...",
    "    train/CrossEntropyLoss=nan", "    optim/total_grad_norm=abc",  # a field that is no number
    "    orphan/metric=3.5",
    "2025-12-12 11:05:01.009\thost:0\tolmo.train:979\tINFO\t[step=99999999999999999999/15000]",
    "    train/CrossEntropyLoss=2.5", "    train/CrossEntropyLoss=2.6",  # a field twice
    "[step=7]", "    epoch=3", "    throughput/total_tokens=2,097,152", "  (module): OLMo(",
    "    System/Peak GPU Memory (MB)=111,477", "\t  train/Perplexity = 12.5 ", "    =5",
]


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("chunk", [1 << 22, 700])
def test_olmo_records_across_chunks_with_odd_lines(tmp_path, chunks_of, seed: int, chunk: int) -> None:
    """OLMo's multi-line records read column-wise equal the parser's, also where a record spans
    two chunks (700-byte chunks: most records do) and among odd lines."""
    chunks_of(chunk)
    rng = random.Random(seed)
    lines = synth.olmo_lines(1500 if chunk > 700 else 500, seed=seed)  # (700 B: a chunk per record)
    sprinkle(lines, OLMO_ODD, 150 if chunk > 700 else 50, rng)
    path = tmp_path / "olmo.log"
    path.write_text("\n".join(lines) + ("\n" if seed else ""))
    assert_same(path, "olmo")
    assert read_log(path).format == "olmo"


def _olmo_record(step: int, epoch: bool = True, fields: list[str] | None = None) -> list[str]:
    head = f"2025-12-12 11:05:{step % 60:02d}.009\thost:0\tolmo.train:979\tINFO\t[step={step}/100"
    fields = OLMO_FIELDS if fields is None else fields
    return [head + (",epoch=1]" if epoch else "]"), *(f"    {f}" for f in fields)]


OLMO_FIELDS = ["train/CrossEntropyLoss=2.5", "throughput/total_tokens=2,097,152", "optim/LR=3e-4",
               "System/Peak GPU Memory (MB)=111,477", "train/Perplexity=nan", "train/Z Loss=0.5 \t"]
OLMO_SAME = {  # every record alike: read position by position
    "epoch": [_olmo_record(i) for i in range(40)],
    "no epoch": [_olmo_record(i, epoch=False) for i in range(40)],
    "a step field": [_olmo_record(i, fields=[*OLMO_FIELDS, f"global_step={i + 1}"]) for i in range(40)],
    "one field": [_olmo_record(i, fields=[f"train/CrossEntropyLoss={i}.5e-1"]) for i in range(40)],
}
OLMO_OTHER = {  # records (at 20 on) unlike the others: read apart, in long form
    "a field missing": [_olmo_record(7, fields=OLMO_FIELDS[1:])],
    "a field more": [_olmo_record(7, fields=[*OLMO_FIELDS, "optim/step_skipped=0"])],
    "fields moved": [_olmo_record(7, fields=OLMO_FIELDS[::-1])],
    "a field renamed": [_olmo_record(7, fields=["train/CELoss=2.5", *OLMO_FIELDS[1:]])],
    "a field twice": [_olmo_record(7, fields=[*OLMO_FIELDS[:-1], OLMO_FIELDS[0]])],
    "one head unlike the others": [_olmo_record(7, epoch=False)],  # (an epoch where they have none)
    "an epoch field": [_olmo_record(7, fields=[*OLMO_FIELDS[:-1], "epoch=2"])],
    "a field moved to the next record": [_olmo_record(7, fields=OLMO_FIELDS[:-1]),
                                         _olmo_record(8, fields=[OLMO_FIELDS[-1], *OLMO_FIELDS])],
}


@pytest.mark.parametrize("other", [None, "a field twice in every record", "every fifth record unlike",
                                   *OLMO_OTHER])
@pytest.mark.parametrize("same", list(OLMO_SAME))
def test_olmo_same_keys_read_as_the_long_form(tmp_path, monkeypatch, same: str, other: str | None) -> None:
    """OLMo records that hold the chunk's commonest fields, in order, are read position by
    position, a few others apart in long form, and give what the long form and the per-line
    parser give; records of one shape that position by position cannot read (a field twice, an
    epoch in some heads only) leave the chunk to the long form."""
    from losslens.logs.formats import olmo

    records = [list(r) for r in OLMO_SAME[same]]
    fields = [x.strip() for x in records[0][1:]]
    if other == "a field twice in every record":
        records = [_olmo_record(i, fields=[*fields, fields[0]]) for i in range(40)]
    elif other == "every fifth record unlike":  # more than ODD_SHARE: all in long form
        records = [_olmo_record(i, fields=[*fields, "optim/step_skipped=0"]) if i % 5 == 3 else r
                   for i, r in enumerate(records)]
    elif other is not None:
        unlike = OLMO_OTHER[other]
        if same == "one field" and other in ("a field missing", "a field moved to the next record"):
            unlike = [_olmo_record(7, fields=[]), _olmo_record(8, fields=fields * 2)]
        if same == "no epoch" and other == "one head unlike the others":
            unlike = [_olmo_record(7)]
        records[20:20 + len(unlike)] = unlike
    path = tmp_path / "olmo.log"
    path.write_text("\n".join(x for r in records for x in r) + "\n")
    took = []
    same_keys = olmo._olmo_same_keys
    monkeypatch.setattr(olmo, "_olmo_same_keys", lambda *a: took.append(same_keys(*a)) or took[-1])
    fast = read_log(path, "olmo")
    # (the unlike head's record holds the default fields: the same as the others' in two cases)
    all_long = other in ("a field twice in every record", "every fifth record unlike") or \
        (other == "one head unlike the others" and same in ("epoch", "no epoch"))
    assert [t is not None for t in took] == [not all_long]
    monkeypatch.setattr(olmo, "_olmo_same_keys", lambda *a: None)
    slow = read_log(path, "olmo")
    assert fast.lines.as_dict() == slow.lines.as_dict() and fast.names == slow.names
    assert_frame_equal(fast.train, slow.train, check_exact=True)
    assert_same(path, "olmo")


MLFLOW_ODD = [
    "", "1701361200123 nan 7", "1701361200 inf 8", "1701361200123 -inf", "1701361200123 NaN 9",
    "1701361200123 Infinity 10", "1701361200123 2.5 99999999999999999999", "1701361200123 1e-3 11",
    "  1701361200123 2.5 12  ", "1701361200123 2.5 ١٣", "170136120 2.5 14", "1701361200123 2,5 15",
    "1701361200123 +2. 16", "1701361200123 .5 17", "timestamp value step", "1701361200123\t2.5\t18",
]


def mlflow_lines(n: int, start: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    t, out = start, []
    for step in range(n):
        t += rng.randrange(500, 5000)  # milliseconds
        out.append(f"{t} {2.5 * 0.999 ** step + rng.gauss(0, 0.01):.6g} {step}")
    return out


@pytest.mark.parametrize(("name", "tz", "start"), [
    ("loss", "UTC", 1_701_361_200_000), ("train_loss", "Asia/Kolkata", 1_701_361_200_000),
    # a daylight-saving change inside the file (the chunks across it go line by line)
    ("val_loss", "America/New_York", 1_710_050_000_000)])
def test_mlflow_metric_file(tmp_path, monkeypatch, name: str, tz: str, start: int) -> None:
    import time

    from losslens.logs import source

    monkeypatch.setenv("TZ", tz)
    time.tzset()
    monkeypatch.setattr(source, "HEAD_BYTES", 8192)  # many chunks: most column-wise
    monkeypatch.setattr(source.Source.chunks, "__defaults__", (4096, source.MAX_LINE))
    try:
        lines = sprinkle(mlflow_lines(3000, start, seed=len(name)), MLFLOW_ODD, 60, random.Random(tz))
        path = tmp_path / name
        path.write_text("\n".join(lines) + "\n")
        assert_same(path, "mlflow")
        assert read_log(path).format == "mlflow"
    finally:
        monkeypatch.undo()
        time.tzset()


MLFLOW_RUN_ODD = [
    "", "   ", "1701361200123 nan 7", "1701361200123 -inf 8", "1701361200123 2.5", "1701361200123 1_0 9",
    "+1701361200123 2.5 10", "1701361200123 2.5 99999999999999999999", "99999999999999999999 2.5 7777",
    "9999999999999999 2.5 7778", "16000000000001 2.5 7779",
    "1701361200123 2.5 12 extra", "1701361200123\t2.5\t13", "1701361200123", "ts value step",
    "1701361200123 2,5 14", "1701361200123 1e400 15", "1701361200123 2.5 -3", "x 2.5 16",
]


@pytest.mark.parametrize(("tz", "start"), [("UTC", 1_701_361_200_000),
                                           ("America/New_York", 1_710_050_000_000)])
def test_mlflow_run_folder_column_wise(tmp_path, monkeypatch, tz: str, start: int) -> None:
    """The run folder read column-wise equals the line-by-line reference: records merged by step
    over the metric files (in file order), odd lines read by int/float or skipped, a timestamp
    past the year 9999 a record without a time (it used to end the read with an OSError)."""
    import time

    from losslens.logs.frame import LogData
    from tests.naive import read_mlflow_run_per_line

    monkeypatch.setenv("TZ", tz)
    time.tzset()
    try:
        run = tmp_path / "run"
        (run / "metrics" / "train").mkdir(parents=True)
        (run / "meta.yaml").write_text("artifact_uri: x\n")
        rng = random.Random(tz)
        for i, name in enumerate(["train/loss", "val_loss", "lr", "train/acc", "loss", "step"]):  # ('step':
            # a file name the frame's own columns have)
            lines = [x for x in mlflow_lines(1500, start, seed=i) if rng.random() < 0.8]  # steps missing
            (run / "metrics" / name).write_text("\n".join(sprinkle(lines, MLFLOW_RUN_ODD, 40, rng)) + "\n")
        fast, slow = read_log(run), read_mlflow_run_per_line(run)
        assert isinstance(fast, LogData) and fast.format == "mlflow"
        assert fast.lines.as_dict() == slow.lines.as_dict()
        assert dict(fast.lines.skipped) == dict(slow.lines.skipped) and fast.lines.skipped
        for a, b in ((fast.train, slow.train), (fast.eval, slow.eval)):
            assert sorted(a.columns) == sorted(b.columns)
            assert_frame_equal(a.select(sorted(a.columns)), b.select(sorted(a.columns)),
                               check_dtypes=False, check_exact=True)
        assert fast.segments == slow.segments and fast.names == slow.names
        assert fast.train["time"].null_count() == slow.train["time"].null_count() > 0
    finally:
        monkeypatch.undo()
        time.tzset()


@pytest.mark.parametrize("tz", ["America/New_York", "Australia/Lord_Howe", "Asia/Kolkata"])
def test_local_times_equal_fromtimestamp(monkeypatch, tz: str) -> None:
    """Column-wise local times (one UTC offset per hour; an hour holding a daylight-saving change,
    time by time) equal ``datetime.fromtimestamp`` in whole ms, over two centuries, around a DST
    change (Lord Howe's moves by 30 minutes) and past the year 9999 (no time)."""
    import time

    import numpy as np
    import polars as pl

    from losslens.logs.base import local_time_ms
    from losslens.logs.columnar import local_times

    monkeypatch.setenv("TZ", tz)
    time.tzset()
    try:
        rng = np.random.default_rng(0)
        ms = np.concatenate([rng.integers(-2 * 10**12, 4 * 10**12, 3000),
                             1_710_050_000_000 + rng.integers(0, 20_000_000, 3000),
                             1_712_412_000_000 + rng.integers(0, 10_000_000, 3000), [10**15, -10**15]])
        assert local_times(pl.Series(ms)).to_list() == [local_time_ms(int(t)) for t in ms]
    finally:
        monkeypatch.undo()
        time.tzset()


COLON_STYLES = [
    lambda s, r: f"Step {s} | loss: {r.uniform(1, 3):.4f} | lr: {r.uniform(1e-5, 1e-4):.2e}",
    lambda s, r: f"2024-05-01 10:00:{s % 60:02d},123 - INFO - Epoch 1 Step {s}: loss = {r.uniform(1, 3):.3f}",
    lambda s, r: f"iter {s}/1000 | loss: {r.uniform(1, 3):.4f} | time: {r.randint(1, 900)}ms | "
                 f"tokens/s: {r.randint(1000, 99999):,}",
    lambda s, r: f"step: {s}, loss: {r.uniform(1, 3):.4f}, acc: {r.uniform(50, 99):.1f}%",
    lambda s, r: f"Step {s}/500 | train loss: {r.uniform(1, 3):.4f} | val loss: {r.uniform(1, 3):.4f} "
                 "| Epoch 2",
    lambda s, r: f"global step {s}: loss: {r.uniform(1, 3):.4f} top1: {r.uniform(0, 1):.3f} "
                 f"eta: 0:0{r.randint(0, 9)}:12",
    # litgpt; DeepSpeed's pipeline engine; a phase after the metric's name and a qualifier
    lambda s, r: f"Epoch 1 | iter {s} step {s // 4} | loss train: {r.uniform(1, 3):.3f}, val: n/a | "
                 f"iter time: {r.uniform(100, 200):.2f} ms (step) remaining time: 0:10:00",
    lambda s, r: f"steps: {s} loss: {r.uniform(1, 3):.4f} iter time (s): {r.uniform(0, 1):.3f} "
                 f"samples/sec: {r.uniform(10, 99):.3f}",
    lambda s, r: f"Epoch [{s}/900] | Loss Train: {r.uniform(1, 3):.4f} | Test Loss (MSE): "
                 f"{r.uniform(1, 3):.4f} | AUC Val: {r.uniform(0, 1):.4f}",
    # rates written as 'number unit' with no key
    lambda s, r: f"Step {s}/1000, loss: {r.uniform(1, 3):.4f}, {r.randint(100, 999)} samples/s, "
                 f"{r.uniform(0, 1):.2f} s/it",
    lambda s, r: f"Step {s}; acc: {r.uniform(1, 99):.2f}; xent: {r.uniform(1, 3):.2f}; "
                 f"{r.randint(1000, 9999)}/{r.randint(1000, 9999)} tok/s; {s} sec;",
]

# the colon reader's other lines: multi-line records (Keras epochs, Composer's indented lines),
# heads, evaluation lines, and single-line records the shapes must not read as their neighbours
COLON_ODD = [
    "", "  ", "Epoch 3/10", "Epoch 2/10", "   indented: 3", "  loss: 2.5", "saving checkpoint",
    "val_loss: 2.5",
    "1875/1875 [==============================] - 5s 3ms/step - loss: 0.2345 - accuracy: 0.9312",
    "Step 5 | loss: nan | lr: 1e-4", "Step 99999999999999999999 | loss: 2.0 | lr: 1e-4",
    "Step 7 | loss: 2,5 | lr: 1.00e-04", "Step 8 | loss: 2,500 | lr: 1.00e-04",
    "Test: [ 0/10]  loss: 1.5 (1.5)  acc1: 50 (50)", "[Eval batch=1/1] Eval on eval data:",
    "\tEval metrics/eval/LanguageCrossEntropy: 2.1", "[batch=12/100]:", "\tTrain loss/train/total: 2.3",
    "\ttime/batch: 12", "Step 9 | loss: 2.0\r| lr: 1e-4", "\x1b[32mStep 10 | loss: 2.0 | lr: 1.00e-04\x1b[0m",
    "Averaged stats: loss: 2.0", "Step 11 | loss: 3 | lr: 1.00e-04", "Step 12 | loss: -3.5 | lr: 1.00e-04",
    "Step 13 | loss: 2.5ms | lr: 1.00e-04", "Step 14 | loss: 2.5GiB | lr: 1.00e-04",
    "Step 15 | Loss: 2.5 | lr: 1.00e-04", "Step 16 | loss: 1e5 | lr: 1.00e-04", "Step: 17 | loss: 2.0",
    "step = 18 | loss: 2.5 | top1: 0.3", "Step 19 | lr: 1.00e-04",
    "iter 20/1000 | loss: 2.0000 | time: 3ms | tokens/s: 1,234,567",
    "iter 21/1000 | loss: 2.0000 | time: 3ms | tokens/s: 1234",
    "iter 22: val loss 2.4000, val time: 1234.00 ms", "Step 23 | loss: 2.0 | time: 0.5 s | mem: 5.6 GB",
    "Step 24 | loss: 2.0 | s: 5 | lr: 1e-4", "Step 25 | loss (avg): 2.0 | lr (x): 1e-4",
    "Step 26 | loss: 2.0 | 1,234 tok/s", "Step 27 | loss: 2.0 | throughput: 1234 tok/s",
    "step 28 | loss 2.0 | 1234 tok/s", "Step 29 | loss: 2.0 | 1.50s/it | 12 wps",
]


def _colon_lines(seed: int) -> list[str]:
    r = random.Random(seed)
    styles = r.sample(COLON_STYLES, r.randint(1, 3))
    lines = [r.choice(styles)(s, r) for s in range(r.randint(200, 600))]
    return sprinkle(lines, COLON_ODD, r.randint(10, 80), r)


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.log")))
def test_colon_fixtures(path) -> None:
    if read_log(path).format == "colon":
        assert_same(path, "colon")


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("prefix", ["", "[rank{r}]: ", "2024-05-01T10:00:{s:02d}.5Z "])
def test_colon_with_odd_lines(tmp_path, seed: int, prefix: str) -> None:
    """Single-line records among the colon reader's other lines, behind rank and capture prefixes:
    a record being assembled over several lines is closed by the next single-line record (with
    that line's rank and time), evaluation lines take the last train step, and a metric's name is
    the first line's that names it, as line by line."""
    lines = [prefix.format(r=i % 3, s=i % 60) + x for i, x in enumerate(_colon_lines(seed))]
    path = tmp_path / "colon.log"
    path.write_text("\n".join(lines) + "\n")
    assert_same(path, "colon")


@pytest.mark.parametrize("seed", range(3))
def test_colon_across_chunks(tmp_path, chunks_of, seed: int) -> None:
    chunks_of(700)
    path = tmp_path / "colon.log"
    path.write_text("\n".join(_colon_lines(100 + seed)) + "\n")
    assert_same(path, "colon")


def test_colon_rates_with_thousands_commas(tmp_path) -> None:
    """A rate column whose first line has thousands' commas ('tokens/s: 31,000') is read with
    them in one pass; its odd values (commas out of place, a sign, a unit, a fraction, 'nan')
    come out as the parser reads them."""
    r = random.Random(3)
    odd = ["31000", "3,1,000", "+31,000", "31,000k", "31,000.5", ",310", "31,", "nan", "1,000e3", "3.1,0"]
    rates = ["31,000"] + [r.choice([f"{r.randint(1000, 999999):,}", *odd]) for _ in range(599)]
    lines = [f"Step {s} | loss: {r.uniform(1, 3):.4f} | tokens/s: {rate}" for s, rate in enumerate(rates)]
    path = tmp_path / "colon.log"
    path.write_text("\n".join(lines) + "\n")
    assert_same(path, "colon")
    assert read_log(path).train["tokens_per_s"].drop_nulls().len() > 500


def test_colon_single_line_records_are_read_column_wise() -> None:
    """All but the first of 3,000 'Step N | loss: X | lr: Y' lines (the parser's: it may close a
    record being assembled) are read by their shape's regex."""
    import polars as pl

    from losslens.logs.formats.colon import Colon, colon_rows
    from losslens.logs.sink import Sink

    r = random.Random(0)
    text = pl.Series([COLON_STYLES[0](s, r) for s in range(3000)])
    sink = Sink()
    done = colon_rows(text, pl.Series(range(1, 3001)), sink, Colon().parser(sink))
    assert done.sum() == 2999 and not done[0]


def test_colon_names_are_the_first_line_s(tmp_path) -> None:
    """One line naming the loss 'train loss' before a run of 'loss' records read column-wise:
    the loss is 'train loss', as line by line (the column-wise pass runs before the parser reads
    that first line)."""
    r = random.Random(1)
    lines = ["step: 0, train loss: 3.1"] + [COLON_STYLES[0](s, r) for s in range(1, 200)]
    path = tmp_path / "colon.log"
    path.write_text("\n".join(lines) + "\n")
    assert_same(path, "colon")
    assert read_log(path).names["loss"] == "train loss"


# Lightning's bar: redraws that are no record, or one the parser reads otherwise
LIGHTNING_ODD = [
    "Validation DataLoader 0:  50%|█████     | 5/10 [00:01<00:01,  5.00it/s]", "",
    "Sanity Checking: 0it [00:00, ?it/s]",
    "Epoch {e}:  10%|█         | {i}/{t} [00:01<00:09,  9.50it/s, v_num=0, train_loss=nan]",
    "Epoch {e}:  10%|█         | {i}/{t} [00:01<00:09,  9.50it/s, v_num=0]",
    "Epoch {e}:  10%|█         | {i}/{t} [00:01<00:09,  9.50it/s, v_num=0, train_loss=abc]",
    "Epoch {e}:  10%|█         | {i}/{t} [00:01<00:09,  9.50it/s, step=5, train_loss=1.5, Train_Loss=2.5]",
    "Epoch {e}:  10%|█         | {i}/{t} [00:01<00:09,  9.50it/s, line=5, rank=2, train_loss=1.5]",
    "Epoch {e}:  10%|█         | {i}/{t} [00:01<00:09,  9.50it/s, train_loss=1.5, val_loss=nan]",
    "Epoch {e}:  10%|█         | {i}/{t} [00:01<00:09,  9.50it/s, train_loss=1.5e-3, lr=1e-4, acc=95%]",
    "Epoch {e}:  10%|█         | {i}/{t} [00:01<00:09,  9.50it/s, train_loss=1.5, x=a=b]",
    "Epoch {e}:  10%|█         | {i}/{t} [00:01<00:09,  9.50it/s, val_acc=0.5]",
]


LIGHTNING_LINES = ["", "GPU available: True (cuda), used: True", "Traceback (most recent call last):"]


def _lightning_lines(seed: int, huge: bool = False) -> list[str]:
    """A bar redrawn with '\\r' (a step sometimes twice, an epoch sometimes over two lines), the
    eval loss in the postfix changing between epochs (to NaN too), odd redraws and lines."""
    r = random.Random(seed)
    lines: list[str] = []
    total, val = r.choice([20, 50, 200]), None
    for e in range(r.randint(2, 6)):
        segs = []
        for i in range(1, total + 1):
            if r.random() < 0.1:
                segs.append(r.choice(LIGHTNING_ODD).format(e=e, i=i, t=total))
                continue
            for _ in range(r.choice([1, 1, 2])):
                post = f"v_num=0, train_loss={r.uniform(1, 3):.3f}" + (f", val_loss={val}" if val else "")
                bar = f"Epoch {e}:  {100 * i // total}%|██ | {i}/{total}"
                segs.append(f"{bar} [00:01<00:09,  9.50it/s, {post}]")
        k = r.randrange(len(segs)) if r.random() < 0.3 else len(segs)
        lines += ["\r".join(segs[:k]), "\r".join(segs[k:])] if k < len(segs) else ["\r".join(segs)]
        val = r.choice([f"{r.uniform(1, 2):.3f}", "nan", val or "1.500"])
        lines.append(r.choice(LIGHTNING_LINES))
    if huge:  # an epoch past int64: that chunk is the parser's
        lines.insert(len(lines) // 2,
                     "Epoch 99999999999999999999:  10%|█| 5/10 [00:01<00:09,  9.50it/s, train_loss=1.5]")
    return lines


BAR_ODD = [
    "Epoch 3:  10%|█         | 5/50 [00:01<00:09,  9.50it/s, v_num=0, train_loss=2.1]",
    "Epoch 3: 10%|| 5/50 [00:01<00:09, 9.50s/it]",
    "Epoch 3:  10%|█| 5/50 [00:01<00:09,  9.50it/s,loss=1]",
    "Epoch 3:  10%|█| 5/50 [00:01, 2it/s x, 3it/s, a=1]",
    "x Epoch 3:  10%|█| 5/50 [00:01<00:09, 9.5it/s, a=[1]]",
    "Epoch 3:  10%|█| 5/50 [00:01<00:09, 9.5it/s, a=1] tail",
    "Epoch 3:  10%|█| 5/50 [s/it/s, a=1]",
    "Epoch 3:  10%|█|  5/50 [it/s]",
    "Epoch 3:  10%|a|b| 5/50 [it/s]",
    "Epoch 3:  10%|█| 5/50 [00:01|x, 9.5it/s, a=1]",
    "Epoch \uff13:  10%|█| 5/50 [it/s]",
    "Epoch 3:\t10%|█|\t5/50 [it/s, b=2]",
    "",
    "Epoch 3:  10%|█| 5/50 [00:01<00:09, 9.5it/sX, 9it/s]",
    "Epoch 3:  10%|█| 5/50 [00:01<00:09, 9.5it/s, ]",
    "Epoch 3:  10%|█| 5/50 [00:01<00:09, 9.5it/s,]",
    "Epoch 3:  10%|█| 5 /50 [it/s]",
    "Epoch 3:  10%|█| 5/50  [it/s]",
    "Epoch 3:  10%|█| 5/50 [00:01, 2.0s/it, a=1, b=3it/s, c=2]",
]


def test_lightning_bar_groups_as_the_regex_reads_them() -> None:
    """A redraw's epoch, step counts and postfix cut with string operations where its shape is
    plain, through the regex's groups otherwise: the same as LIGHTNING_BAR's groups on odd
    redraws (text before or after the bar, a ']' or '|' inside, no rate, two rates, 's/it/s')."""
    import polars as pl

    from losslens.logs.formats.lightning import LIGHTNING_BAR, bar_groups

    rng = random.Random(0)
    segs = pl.Series([rng.choice(BAR_ODD) for _ in range(3000)] + BAR_ODD + [None])
    expected = segs.str.extract_groups(LIGHTNING_BAR.pattern).struct.unnest()
    expected.columns = ["epoch", "done", "total", "postfix"]
    assert_frame_equal(bar_groups(segs), expected)
    plain = segs.str.contains(r"^Epoch \d+:\s*\d+%\|[^|]*\|\s*\d+/\d+ \[[^\]]*\]$").fill_null(False)
    assert int(plain.sum()) > 1500  # (most take the string operations)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("chunk", [1 << 22, 700])
def test_lightning_bars(tmp_path, chunks_of, seed: int, chunk: int) -> None:
    """Lightning's redraws column-wise equal the parser's: one record a step (its last redraw,
    also across lines and chunks), the eval loss only where it changed, names, accounting; a
    chunk with a redraw the columns do not read is the parser's, which takes the held step over."""
    chunks_of(chunk)
    path = tmp_path / "bar.log"
    path.write_text("\n".join(_lightning_lines(seed, huge=seed % 3 == 2)) + "\n")
    assert_same(path, "lightning")


@pytest.mark.parametrize("prefix", ["[rank{r}]: ", "2024-05-01T10:00:{s:02d}.5Z "])
def test_lightning_bars_behind_prefixes(tmp_path, prefix: str) -> None:
    lines = [prefix.format(r=i % 2, s=i % 60) + x for i, x in enumerate(_lightning_lines(7)) if x]
    path = tmp_path / "bar.log"
    path.write_text("\n".join(lines) + "\n")
    assert_same(path, "lightning")


LIGHTNING_SAME = [  # postfixes whose keys are the same in every redraw of a file (one each)
    "v_num=0, train_loss={x}, val_loss={v}",
    "train_loss={x}, step={i}, lr=1e-4, acc={x}%",  # a step key left out; a '%' unit
    "loss={x}, train_loss={v}, v_num=3",  # two keys of one name: its first number
    "v_num=0, train/loss={x}, val_acc={v}, tokens=1.5k",
]


@pytest.mark.parametrize("postfix", LIGHTNING_SAME)
@pytest.mark.parametrize("chunk", [1 << 22, 900])
def test_lightning_bars_alike_read_by_position(tmp_path, monkeypatch, chunks_of, postfix: str,
                                               chunk: int) -> None:
    """Redraws whose postfixes all hold the same 'key=value' parts in the same order are read
    position by position, without the long form: the same frames, names and accounting as the
    parser's, values that are no number ('abc', 'nan', '') and eval changes included; a chunk
    with one redraw of other keys, or a part the pair pattern reads otherwise ('a=1,b=2'), goes
    through the long form."""
    from losslens.logs.formats import lightning

    chunks_of(chunk)
    r = random.Random(len(postfix) + chunk)
    values = ["1.250", "2.5e-3", "nan", "abc", "0.75", "3"]
    lines, val = [], "1.500"
    for e in range(4):
        segs = []
        for i in range(1, 41):
            post = postfix.format(x=r.choice(values), v=val, i=i)
            segs.append(f"Epoch {e}:  {100 * i // 40}%|██ | {i}/40 [00:01<00:09,  9.50it/s, {post}]")
        lines += ["\r".join(segs), "Validation: 100%|██ | 5/5"]
        val = r.choice(["1.400", "nan", val])
    path = tmp_path / "bar.log"
    path.write_text("\n".join(lines) + "\n")
    long = []
    original = lightning._lightning_long
    monkeypatch.setattr(lightning, "_lightning_long", lambda segs: long.append(1) or original(segs))
    assert_same(path, "lightning")
    assert not long  # (every chunk read by position)
    bar, _, post = lines[2].partition("it/s, ")  # (a redraw of epoch 1: its postfix's parts glued)
    path.write_text("\n".join([*lines[:2], bar + "it/s, " + post.replace(", ", ",", 1), *lines[3:]]) + "\n")
    assert_same(path, "lightning")
    assert long


def test_lightning_fixture() -> None:
    assert_same(FIXTURES / "lightning_stdout.log", "lightning")


NOISY = {  # (format, its lines, lines a record)
    "nanogpt": (lambda: synth.nanogpt_lines(4000, every=1, seed=3), 1),
    "megatron": (lambda: synth.megatron_lines(3000, seed=3), 1),
    "fairseq": (lambda: synth.fairseq_lines(3000, seed=3), 1),
    "torchtitan": (lambda: synth.torchtitan_lines(3000, seed=3), 1),
    "olmo": (lambda: synth.olmo_lines(600, seed=3), 6),
    "jsonl": (lambda: synth.jsonl_lines(3000, seed=3), 1),
    "kv": (lambda: list(synth.dflash_lines(3000, seed=3)), 1),
}


@pytest.mark.parametrize("name", list(NOISY))
def test_a_real_run_s_noise_keeps_the_column_wise_path(tmp_path, columnar, chunks_of, monkeypatch,
                                                        name: str) -> None:
    """2 % of what a real run prints between its records (tracebacks, warnings, a rank's NCCL
    line behind '[rank3]: ', a progress bar, blank lines, checkpoint messages): the same frames
    and accounting as the per-line parser, and only the noise lines (and the records at a
    chunk's ends) go to the parser: a chunk holding a few noise lines keeps the fast path."""
    from losslens.logs import columnar as col

    make, unit = NOISY[name]
    clean = make()
    if unit == 1:  # and a record behind rank 0's prefix: the parser reads it as rank 0's
        clean[len(clean) // 2] = "[rank0]: " + clean[len(clean) // 2]
    lines = synth.with_noise(clean, 0.02, seed=5, unit=unit)
    noise = len(lines) - len(clean)
    path, plain = tmp_path / f"{name}.log", tmp_path / "clean.log"
    path.write_text("\n".join(lines) + "\n")
    plain.write_text("\n".join(clean) + "\n")
    chunks_of(1 << 16)
    fed: list[int] = []
    real = col.feed_ranked
    monkeypatch.setattr(col, "feed_ranked", lambda *a, **k: fed.append(1) or real(*a, **k))
    clean_log, clean_fed = read_log(plain, name), len(fed)
    log = read_log(path, name)
    chunks = path.stat().st_size // (1 << 16) + 1
    bars = sum("█" in x for x in lines)  # (OLMo leaves the record before a bar to the parser)
    # beyond the clean file's own (eval lines, summaries, records at a chunk's ends): the noise
    assert noise > 40 and len(fed) - 2 * clean_fed <= noise + unit * (2 * chunks + bars)
    assert log.train.height == clean_log.train.height
    monkeypatch.setattr(col, "feed_ranked", real)
    assert_same(path, name)


def test_a_few_lines_behind_a_rank_prefix_are_hidden_from_the_vectorised_reader() -> None:
    """Three of 300 lines behind '[rankN]: ': the vectorised reader sees them as one unreadable
    character at their own places, the parser gets them as the file has them."""
    from losslens.logs.columnar import HIDDEN, lines_of, without_prefixes
    from losslens.logs.sink import Sink

    lines = [f"iter {i}: loss 2.5, time 10.0ms" for i in range(300)]
    at = [7, 150, 299]
    for i in at:
        lines[i] = f"[rank{i % 4}]: NCCL WARN timeout {i}"
    chunk = ("\n".join(lines) + "\n").encode()
    data, original, text = without_prefixes(chunk, 1, False, Sink())
    assert original is not None and original.to_list() == lines
    assert text is not None and [i for i, x in enumerate(text.to_list()) if x == HIDDEN] == at
    assert lines_of(data).to_list() == text.to_list()
