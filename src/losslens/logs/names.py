"""Canonical metric names and value parsing shared by every reader."""

from __future__ import annotations

import math
import re
from functools import lru_cache

# original key (lower-case, spaces as '_') -> canonical name
ALIASES: dict[str, str] = {}


def _alias(canonical: str, *names: str) -> None:
    for n in names:
        ALIASES[n] = canonical


_alias("loss", "loss", "train_loss", "train/loss", "loss/train", "lm_loss", "trl", "training_loss",
       "train/crossentropyloss", "train_loss_step", "train/loss_step", "train_lm_loss", "total_loss",
       "loss/train/total", "xent", "cross_entropy", "cross-entropy", "ce-mean-words", "ce-mean", "ce-sum")
_alias("acc", "acc", "accuracy", "train_acc", "train_accuracy", "train/acc", "train/accuracy",
       "token_acc", "mean_token_accuracy", "train/mean_token_accuracy", "acc/train")
_alias("lr", "lr", "learning_rate", "train/learning_rate", "train/lr", "lr-adamw", "lr-adam", "optim0_lr0",
       "l.r.")
_alias("grad_norm", "grad_norm", "gnorm", "train/grad_norm", "optim/total_grad_norm",
       "total_grad_norm", "grad_norm/total", "norm")
_alias("epoch", "epoch", "train/epoch")
_alias("tokens_per_s", "tokens_per_s", "tok/s", "tokens/s", "tokens_per_second", "tokens_per_sec", "tps",
       "wps", "throughput/device/tokens_per_second", "tokens_global_per_sec", "train/tokens_per_second",
       "tokens/s/device", "tok/sec", "tokens/sec")
_alias("samples_per_s", "samples_per_second", "train_samples_per_second", "samples_per_sec", "samples/sec",
       "throughput/device/samples_per_second")
_alias("step_time_s", "step_time_s", "time", "iter_time", "elapsed_time_per_iteration_(ms)",
       "train_speed(s/it)", "dt", "rtime", "itime", "step_time", "time(s)", "time_s", "iter_time_s",
       "batch_time", "time/step", "time_per_step", "sec/it", "s/it", "secs_per_step",
       "seconds_per_step", "iteration_time", "train_step_time", "perf/step_time")
_alias("step_time_ms", "step_time_ms", "dt_ms", "iter_time_ms", "time_ms", "step_time(ms)",
       "time(ms)", "ms/it", "ms_per_step", "elapsed_time_per_iteration_ms")
_alias("data_time", "data_time", "data_time_s", "dtime", "data_load_time", "dataloader_time",
       "time/data", "perf/data_time")
_alias("eval_loss", "eval_loss", "val_loss", "valid_loss", "validation_loss", "val/loss",
       "eval/loss", "loss/val", "tel", "lm_loss_value", "test_loss", "metrics/eval/languagecrossentropy")
_alias("eval_acc", "eval_acc", "val_acc", "val_accuracy", "eval_accuracy", "valid_acc",
       "eval/accuracy", "eval_mean_token_accuracy")
_alias("eval_ppl", "eval_ppl", "lm_loss_ppl", "val_ppl")
_alias("eta_s", "eta", "remaining_time")
_alias("elapsed_s", "elapsed_time", "elapsed")
_alias("perplexity", "ppl", "perplexity", "train/perplexity", "train_perplexity_step")

# keys that count a position in training rather than measure it
STEP_KEYS = ("step", "global_step", "num_updates", "current_steps", "_step", "iteration",
             "iter", "trainer/global_step", "train/global_step", "global_step/max_steps", "s",
             "time/batch", "steps", "completed step", "training_iteration")

_SANITISE = re.compile(r"[^0-9a-z]+")
_LR_MONITOR = re.compile(r"^lr-[a-z0-9_]+(?:/(?:group|pg)0)?$")


# metric words of Chinese logs ('训练损失: 1.5476, 训练准确率: 36.46%', '验证损失: 1.3829'), in English
_CJK_WORDS = sorted({"训练": "train", "验证": "val", "测试": "test", "评估": "eval", "损失": "loss",
                     "准确率": "acc", "准确度": "acc", "正确率": "acc", "精度": "acc", "学习率": "lr",
                     "平均": "avg", "梯度范数": "grad_norm", "困惑度": "ppl", "奖励": "reward",
                     "最佳": "best", "集": "set", "大小": "size"}.items(),
                    key=lambda kv: -len(kv[0]))


def _english(key: str) -> str:
    """A key with its Chinese metric words in English ('验证损失' → 'val loss'); others as they are."""
    for word, english in _CJK_WORDS:
        if word in key:
            key = key.replace(word, f" {english} ")
    return " ".join(key.split())


_EVAL_PREFIXES = ("eval_", "eval/", "val_", "val/", "valid_", "valid/", "validation_", "validation/",
                  "full_validation_", "test_", "test/")


@lru_cache(maxsize=4096)  # per-line readers ask for the same few keys on every line
def canonical(key: str) -> str:
    """Map an original metric key to its canonical name (unknown keys: lower snake case)."""
    if any("\u4e00" <= c <= "\u9fff" for c in key):
        key = _english(key)
    k = key.strip().lower().replace(" ", "_")
    if k in ALIASES:
        return ALIASES[k]
    if _LR_MONITOR.match(k):  # Lightning's / Composer's LR monitors: 'lr-AdamW', 'lr-X/group0'
        return "lr"
    for prefix in _EVAL_PREFIXES:
        if k.startswith(prefix):
            return _eval_name(k[len(prefix):])
    if (phase := _PHASE_SUFFIX.match(k)) is not None and \
            _TOKEN_CUT.split(phase.group(1))[-1] not in _COUNT_WORDS:  # 'Loss Train', 'loss_val', 'Loss/test'
        base = phase.group(1)
        return canonical(base) if phase.group(2).startswith("train") else _eval_name(base)
    return unreserved(snake(k) or "value")


# a phase named after the metric: 'Loss Train: 0.31 | Loss Val: 0.42 | AUC Val: 0.81' (a print
# style of many hand-written loops), TensorBoard's 'Loss/train' and 'Loss/test' (its tutorial)
_PHASE_SUFFIX = re.compile(
    r"^([a-z].*?)[_/.\-](train|training|val|valid|validation|eval|evaluation|test|testing)$")


# what a set holds, not a measurement of the model: 'Query Images Test: 37855' is no evaluation
_COUNT_WORDS = frozenset({"images", "samples", "examples", "sentences", "tokens", "words", "batches", "steps",
                          "size", "num", "count", "number", "len", "length", "files", "items", "instances",
                          "pairs", "ids", "set", "data", "dataset"})


def _eval_name(base: str) -> str:
    base = ALIASES.get(base, base)
    return "eval_" + (snake(base) or "value")


def snake(name: str) -> str:
    """``name`` in lower snake case: runs of anything but letters and digits made one '_'."""
    return _SANITISE.sub("_", name.lower()).strip("_")


# the columns a record frame holds besides its metrics: a metric of one of these names is renamed
RESERVED = frozenset({"step", "line", "time", "rank", "segment"})


def unreserved(name: str) -> str:
    """``name``, or ``name_value`` where it is the name of a record's own column (a JSON key
    'line', a pair 'step:7' on a damaged line) that a metric must not overwrite."""
    return f"{name}_value" if name in RESERVED else name


def is_eval(name: str) -> bool:
    """An evaluation metric: its canonical name starts with ``eval_`` (``canonical`` maps
    val_*, valid/*, eval/* and the like there)."""
    return name.startswith("eval_")


_METRIC_SUFFIXES = ("loss", "acc", "accuracy", "perplexity", "ppl", "reward", "score")
# words that make a '*loss*' column a setting, not a measured loss ('loss_scale', 'loss_weight')
_NOT_METRICS = ("scale", "window", "power", "hysteresis", "weight", "coef", "factor")
_TOKEN_CUT = re.compile(r"[_/.\-]")


@lru_cache(maxsize=4096)
def is_training_metric(name: str) -> bool:
    """A record is a training record only if it measures something the model does (a loss, an
    accuracy…), not a setting that merely mentions one (``loss_scale_window``)."""
    if any(t in name for t in _NOT_METRICS) or name.startswith(("best_", "best/")):
        return False  # (a 'best_val_acc' is the best so far, a summary of records already read)
    # the grad norm alone makes a record too (Megatron prints 'grad norm: nan' on lines whose
    # loss it leaves out): a NaN there is the first sign of a run blowing up
    return (name.split("_")[-1] in _METRIC_SUFFIXES or name.rsplit("/", 1)[-1] in _METRIC_SUFFIXES
            or name == "grad_norm" or _part_loss(name))


# last words of a setting's name: a config printed as 'eval_steps: 500' is no evaluation
_SETTING_WORDS = frozenset({"steps", "strategy", "delay", "size", "freq", "frequency", "interval", "every",
                            "batches"})


def is_setting(name: str) -> bool:
    """A name that configures how often or how much ('eval_steps', 'eval_accumulation_steps',
    'eval_batch_size'), not a measurement ('eval_steps_per_second' is one)."""
    return _TOKEN_CUT.split(name)[-1] in _SETTING_WORDS


def loss_like(column: str) -> bool:
    """A canonical column that measures a loss ('loss', 'train/box_loss', 'reduced_train_loss',
    'loss_unchosen'), not a setting that names one ('loss_scale')."""
    return "loss" in column.split("_") and not any(w in column for w in _NOT_METRICS)


_DISCRIMINATOR = frozenset({"d", "dis", "disc", "discriminator", "netd"})  # (a name's words)


def discriminator(column: str) -> bool:
    """The loss of a GAN's discriminator ('loss_D', 'd_loss', 'disc_loss'): it holds near ln 2
    (or 2 ln 2) at equilibrium, by design, and is no plateau there."""
    return loss_like(column) and any(t in _DISCRIMINATOR for t in _TOKEN_CUT.split(column))


_STATS = frozenset({"min", "max", "median", "std", "var", "avg", "mean"})


def _part_loss(name: str) -> bool:
    """The loss of one part of a model or objective, named after it: a GAN's 'Loss_G' / 'loss_D',
    mmdet's 'loss_cls' / 'loss_rpn_bbox' (one or two short words after 'loss', not a summary's
    'loss min/median/max')."""
    tokens = _TOKEN_CUT.split(name)
    if "loss" not in tokens:
        return False
    rest = tokens[tokens.index("loss") + 1:]
    return 1 <= len(rest) <= 2 and all(0 < len(t) <= 4 and t not in _STATS for t in rest)


# (its digits split only at a '.': '\d+\.?\d*', which matches the same first, split a damaged run of
# n digits n²/2 ways before a pattern refused what followed: 20,000 digits took 12 s)
NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
# how programs print a non-finite float: nan, -nan (C's printf), NaN, inf, -inf, Infinity, and
# Windows' C runtime since Visual C++ 2015: -nan(ind), nan(snan) (darknet's 'avg loss' on Windows,
# AlexeyAB/darknet#1563). Its older 1.#QNAN0 / -1.#IND00 / 1.#INF00 are parse_number's only (where
# a reader takes the value whole: key=value, CSV, Megatron's fields): as a branch here they halve
# polars' speed on every pattern that holds a number (its branches would both start with '1')
NONFINITE = r"[-+]?(?i:nan(?:\((?:ind|snan)\))?|inf(?:inity)?)"
NUMERIC = rf"(?:{NUMBER}|{NONFINITE})"  # a number or a non-finite spelling
# NUMBER taken whole (possessive digits), for a pattern that may refuse what follows it: NUMBER
# gives back a run's digits one by one first (a search from each digit of a run: quadratic). A
# shorter number is followed by a digit or a '.', so where nothing after it takes those, no match
# is lost. (`columnar` of it is NUMBER, for polars)
WHOLE_NUMBER = r"[-+]?(?:\d++(?:\.\d*+)?|\.\d++)(?:[eE][-+]?\d++)?"
WHOLE_NUMERIC = rf"(?:{WHOLE_NUMBER}|{NONFINITE})"
_POSSESSIVE = re.compile(r"(?<!\\)([*+?}])\+")


def columnar(pattern: re.Pattern[str]) -> str:
    """A pattern for polars' string kernels (Rust's regex crate, which has no possessive
    quantifiers, and needs none: it never backtracks): the pattern with its possessive
    quantifiers ('\\d++', '\\s*+') made greedy. Where a pattern is possessive only so that Python
    does not try every split of a long run, the two match alike (tests/unit/logs/test_readers.py
    checks each on random strings)."""
    return _POSSESSIVE.sub(r"\1", pattern.pattern)


_WITH_UNIT = re.compile(rf"^({WHOLE_NUMBER})\s*([A-Za-z%/()]+)$")
_NONFINITE = {"nan": math.nan, "+nan": math.nan, "-nan": math.nan, "inf": math.inf,
              "+inf": math.inf, "-inf": -math.inf, "infinity": math.inf, "-infinity": -math.inf,
              "+infinity": math.inf}
# Windows' spellings (NONFINITE's, and the older C runtime's), lower-cased
_WINDOWS_NONFINITE = re.compile(r"^([-+]?)(?:nan\((?:ind|snan)\)|1\.#(qnan|snan|ind|inf)\d*)$")
# (possessive: its three '\s*' in a row tried every split of a run of whitespace: cubic)
_DURATION = re.compile(r"^(?:(\d++)d)?\s*+(?:(\d++)h)?\s*+(?:(\d++)m)?\s*+(?:(\d++(?:\.\d++)?)s)?$")
_CLOCK = re.compile(r"^(?:(\d+) days?, )?(\d+):(\d\d):(\d\d(?:\.\d+)?)$")

# unit suffix -> multiplier to the canonical unit (seconds for times, plain counts for rates)
UNIT_SCALE: dict[str, float] = {
    "ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0,
    "%": 1.0, "b/s": 1.0, "it/s": 1.0, "s/it": 1.0, "tok/s": 1.0, "ktok/s": 1e3, "mtok/s": 1e6,
    "gtok/s": 1e9, "k": 1e3, "gib": 1.0, "gb": 1.0, "mb": 1.0,
}


# upper-case magnitude suffixes ('1.05M' tokens, '7B'); lower-case 'm' stays minutes
MAGNITUDE = {"M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}


def unit_scale(unit: str) -> float | None:
    """The factor a unit suffix multiplies a value by (K, M, ms, %...), or None for no known unit."""
    if unit in MAGNITUDE:
        return MAGNITUDE[unit]
    u = unit.lower()
    if u in UNIT_SCALE:
        return UNIT_SCALE[u]
    if u.startswith("(") and u.endswith(")"):
        return unit_scale(u[1:-1])
    return None


def parse_number(text: str) -> float | None:
    """'0.8183' → 0.8183; '2,097,152' → 2097152; 'NaN' → nan; '4.0d' → 345600; '1m 60s' → 120."""
    t = text.strip().strip("'\"")
    if not t:
        return None
    try:
        return float(t)
    except ValueError:
        pass
    low = t.lower()
    if low.rstrip("%") in _NONFINITE:  # 'nan', '-nan', 'Infinity', and 'nan%' for a percentage
        return _NONFINITE[low.rstrip("%")]
    if m := _WINDOWS_NONFINITE.match(low):  # '-nan(ind)', '1.#QNAN0', '-1.#INF00'
        return math.nan if m.group(2) != "inf" else -math.inf if m.group(1) == "-" else math.inf
    if "," in t:
        try:
            return float(t.replace(",", ""))
        except ValueError:
            pass
    m = _WITH_UNIT.match(t)
    if m:
        scale = unit_scale(m.group(2))
        if scale is not None:
            return float(m.group(1)) * scale
        return None
    m = _DURATION.match(low.replace(" ", ""))
    if m and any(m.groups()):
        d, h, mi, s = (float(g) if g else 0.0 for g in m.groups())
        return d * 86400 + h * 3600 + mi * 60 + s
    m = _CLOCK.match(low)
    if m:
        d = float(m.group(1) or 0)
        return d * 86400 + float(m.group(2)) * 3600 + float(m.group(3)) * 60 + float(m.group(4))
    return None


def parse_list(text: str) -> list[float] | None:
    """'[50, 50, 46]' → [50.0, 50.0, 46.0]; None when any element is not a number."""
    inner = text.strip()[1:-1].strip()
    if not inner:
        return []
    out = []
    for part in inner.split(","):
        v = parse_number(part)
        if v is None:
            return None
        out.append(v)
    return out


def parse_value(text: str) -> float | list[float] | None:
    """A printed value: a number (nan/inf spellings included), a [..] list of numbers, or None."""
    t = text.strip()
    if t.startswith("[") and t.endswith("]"):
        return parse_list(t)
    return parse_number(t)


# a number printed inside its type's repr: torch's 'tensor(2.31, device='cuda:0', grad_fn=<…>)',
# numpy 2's 'np.float64(0.23)', JAX's 'Array(0.5, dtype=float32)' (a dict of such values is
# what a training loop prints when it forgets .item())
WRAPPED = re.compile(r"\b(?:tensor|(?:np|numpy)\.(?:float|int|uint)(?:16|32|64|128)?|Array|DeviceArray)"
                     rf"\(\s*({NUMERIC})\s*"
                     r"(?:,[^()]*)?\)")


WRAPPER_MARKS = ("tensor(", "np.", "numpy.", "Array(")  # a line without one has nothing to unwrap


def unwrapped(line: str) -> str:
    """``line`` with each number printed inside its type's repr (see WRAPPED) as the bare number."""
    if "(" in line and any(m in line for m in WRAPPER_MARKS):
        return WRAPPED.sub(r"\1", line)
    return line
