"""'key: value' logs: Keras fit() stdout, home-grown trainers ('Step 100 | loss: 2.31 | lr: 1e-4'),
timm, torchvision/DeiT/MAE's MetricLogger, pytorch/examples' ProgressMeter (tab-separated
'Loss 6.9 (6.9)' fields), MosaicML Composer's console ('[batch=12/100]:' then indented
'Train loss/train/total: 2.3'), torchtune's bar, nanotron.

A line with metrics and a step (a 'step' pair or words like 'Step 100', 'iter 5/1000') is a record.
A line with a step or an epoch but no metric ('Epoch 3/10', '[batch=12/100]:') opens a record that
the following step-less metric lines fill (indented ones may also give its true step, as
Composer's 'time/batch' does), until the next such line or, for Keras, the epoch's closing
progress line. Evaluation lines (timm's 'Test:', Composer's '[Eval batch=N/N]:') are eval
records at the step of the last train record.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache

import numpy as np
import polars as pl

from losslens.logs.base import (
    ANSI,
    COMMON_NOISE,
    TIMESTAMP,
    Format,
    LineParser,
    RegexLineParser,
    leading_time,
    strip_prefixes,
    whole,
)
from losslens.logs.columnar import (
    add_rows,
    any_of,
    leading_times,
    metric_columns,
)
from losslens.logs.names import (
    ALIASES,
    NONFINITE,
    NUMBER,
    WHOLE_NUMBER,
    WRAPPER_MARKS,
    canonical,
    is_eval,
    is_training_metric,
    parse_number,
    unit_scale,
)
from losslens.logs.regex import lazy
from losslens.logs.sink import Sink, TooWide, Value

# units written after a space ('iter time: 123.45 ms', 'Peak mem 5.6 GB'): a closed list, so that
# the next key is never taken for one
SPACED_UNITS = r"(?:ms|s|secs?|seconds|min|h|GB|GiB|MB|MiB|%)(?![\w:/.])"

# 'loss: 0.2345', 'loss = 67.7' (a spaced '=' only: 'k=v' is the kv reader's), 'val loss: 2.4',
# 'lr: 1.0e-04', 'time: 0.35s', 'Epoch: 3/10'; the key is one
# or two words (not quoted: JSON and Python dicts have their own readers); after the number no
# letter, digit or ':digit' (a clock '0:05:12'); torchtune's 'Loss: 1.55:' ends in a colon; the
# number taken whole (see names.WHOLE_NUMBER: the look-ahead would refuse a shorter one)
PAIR = lazy(
    rf"(?<![\w/.\-@'\"])([^\W\d][\w/.\-@]*(?: [^\W\d][\w/.\-@]*)?)(?:\s*\([^()]{{1,12}}\))?"
    rf"(?:\s*[:：]\s*| = )"
    rf"({NONFINITE}(?![A-Za-z])|\d{{1,3}}(?:,\d{{3}})+(?:\.\d+)?|{WHOLE_NUMBER})(?:\s*/\s*\d+)?"
    rf"(?:([A-Za-z%]+(?:/[A-Za-z]+)?)|\s({SPACED_UNITS}))?"
    rf"(?![\w.]|:\d)", re.IGNORECASE)
# a qualifier in parentheses after the key ('Test Loss (MSE): 0.67', DeepSpeed's 'iter time (s):
# 0.512'): a unit there is the value's unit; any other is left out of the name
QUALIFIER = lazy(r"\(([^()]{1,12})\)\s*(?:[:：]|=)")
# a rate written as a number, a space and its unit, with no key: 'step 100 | loss 2.31 | 12,345 tok/s',
# OpenNMT's '3456/4567 tok/s' (source/target), '1234.5 samples/s', '0.52 s/it' (tqdm's own '1.50s/it',
# no space, is a bar's, not read here)
# (possessive: a damaged line's 5,000-digit '…/…' must not backtrack through every split of its digits)
RATE = lazy(r"(?<![\w.:/=,\-])(\d{1,3}(?:,\d{3})++(?:\.\d++)?|\d++(?:\.\d++)?)(?:/\d++(?:\.\d++)?)?+ "
            r"(tok/s|tokens/s|tok/sec|tokens/sec|words/s|wps|samples/s|samples/sec|img/s|images/s|s/it)"
            r"(?![\w/])")
RATE_NAMES = {"tok/s": "tok/s", "tokens/s": "tok/s", "tok/sec": "tok/s", "tokens/sec": "tok/s",
              "words/s": "tok/s", "wps": "tok/s", "samples/s": "samples/sec", "samples/sec": "samples/sec",
              "img/s": "samples/sec", "images/s": "samples/sec", "s/it": "iter_time"}


def _may_rate(line: str) -> bool:
    return "/s" in line or "s/it" in line or "wps" in line
# 'Step 100', 'iter 5/1000', 'Iter [  10/1487]', 'Epoch: [ 0/200]', 'Epoch [2/5]'
# (each run of spaces read once: the spaces around an optional '#'/'=' and '[' were three '\s*' in a
# row, which tried every split of a run: 'Step' and 400 spaces took 0.17 s, 3,000 minutes)
STEP_WORD = lazy(r"\b(?:global step|step|iteration|iter|update|batch)\s*+(?:[#=]\s*+)?(?:\[\s*+)?(\d++)"
                 r"(?:\s*+/\s*+\d++)?\b", re.IGNORECASE)
# '[1,  2000] loss: 2.211' (PyTorch's CIFAR-10 tutorial), '[1/10, 100/600] Loss = 0.23': [epoch, step]
EPOCH_STEP = lazy(r"^\s*\[\s*(\d+)(?:\s*/\s*\d+)?\s*,\s*(\d+)(?:\s*/\s*\d+)?\s*\]")
EPOCH_WORD = lazy(r"\bepoch\s*+(?:[#=:]\s*+)?(?:\[\s*+)?(\d++)(?:\s*+/\s*+\d++)?\b", re.IGNORECASE)
# 'EPOCH [BATCH/LEN]' heads: timm ('Train: 3 [ 50/1251 (4%)]'), torchvision/DeiT/MAE's
# MetricLogger ('Epoch: [3]  [ 50/1251]'), pytorch/examples' ProgressMeter ('Epoch: [3][ 50/1251]')
# (after a '[12:22:25.163846] ' or logging prefix; LAVIS/BLIP print 'Train: data epoch: [0]  [..]')
TRAIN_HEAD = lazy(
    r"(?:^|[\s\]])(?:Train: (\d+) |(?:Train: data )?[Ee]poch: \[(\d+)\]\s*)\[\s*(\d+)/(\d+)\]?")
# mmengine (mmdet, mmseg, mmpretrain): 'Epoch(train)  [3][ 50/1833]' (1-based epochs) or
# 'Iter(train) [ 50/90000]'; '(val)'/'(test)' heads are evaluation
MM_HEAD = lazy(r"\b(?:Epoch\((train|val|test)\)\s*\[(\d+)\]\[\s*(\d+)/(\d+)\]"
               r"|Iter\((train|val|test)\)\s*\[\s*(\d+)/(\d+)\])")
# mmcv 1.x's text logger (mmdet 2, mmocr 0.x): 'Epoch [1][100/62598]\tlr: ...' (1-based epochs)
MMCV_HEAD = lazy(r"\bEpoch \[(\d+)\]\[\s*(\d+)/(\d+)\]")
TEST_HEAD = lazy(r"(?:^|[\s\]])(?:Test:|Eval: data epoch: \[\d+\])\s+\[\s*\d+/\d+\]")
# ProgressMeter's tab-separated 'Loss 6.9077e+00 (6.9077e+00)' fields (no colon)
SPACED = lazy(rf"^\s*([A-Za-z][\w@/.\-]*)\s+({NONFINITE}(?![A-Za-z])|{NUMBER})\b")
# bare 'word number' fields, for printers with no ':' or '=' ('step 10 | loss 1.4021 | lr 1e-4',
# 'step 10: loss 1.4021, tok/s 30512'): a field is whole 'key value' pairs and nothing else; two
# spaces part fields ('step 10  loss 1.4'), unless a number follows them: then they pad it
# ('Epoch 005 loss   9.5198 | train 2.2s', a value printed right-aligned)
# Written to read each run of spaces once: it is what r"\s*(?:[|,;\t]|\s{2,}(?!\s*[-+]?\.?\d)|\s-\s|
# (?<=\d):\s)\s*" splits at (tests/unit/logs/test_readers.py checks the two agree), whose nested
# \s* and \s{2,} tried every split of a run against the next character: a line with a few
# thousand spaces in a row took minutes. A cut starts at a run's first space (or at a
# separator): a run holding a tab; else '|', ',' or ';' after the run; ' - '; a run of two or
# more before no number; a digit's ': '.
FIELD_CUT = lazy(
    r"(?:(?<!\s)|(?!\s))(?:[^\S\t]*+\t\s*+(?:[|,;]|(?<!\t)-(?=\s)|)|[^\S\t]*+[|,;]"
    r"|[^\S\t]++(?:(?<=\s)-(?=\s)|(?<=\s\s)(?![-+]?\.?\d))|(?<=\d):(?=\s))\s*+")
# (a key starts where no key character stands before it, and is taken whole: a damaged line's
# run of a million letters is scanned once, not once from each of its letters)
WORD_PAIR = lazy(rf"(?<![\w/.\-@])([A-Za-z_][\w/.\-@]*+)\s+({NONFINITE}(?![A-Za-z])|{WHOLE_NUMBER})"
                 rf"([A-Za-z%]+)?(?=\s|$)", re.IGNORECASE)
# a field of two or three words and a number: 'Train loss 2.345', 'Learning Rate 1.000e-05'
NAMED_FIELD = lazy(rf"^([A-Za-z_][\w/.\-@]*(?: [A-Za-z_][\w/.\-@]*){{1,2}})\s+"
                   rf"({NONFINITE}(?![A-Za-z])|{WHOLE_NUMBER})([A-Za-z%]+)?$", re.IGNORECASE)
# (not a sentence's 'val loss is 0.05': the 'key is value' pairs below read those)
LINK_WORDS = frozenset({"is", "was", "are", "were", "of", "to", "at", "in", "on", "for", "by", "with",
                        "from"})
# 'key is value' in a sentence's fields, for printers that write prose: 'Epoch 0, Step 25, avg loss
# so far is 0.1097', 'grpo_loss is -0.0 and kl is 0.0085', 'Epoch 0, val loss is 0.0477'
IS_PAIR = lazy(rf"(?:^|[,;|]\s*|\band\s+)([A-Za-z_][\w/.\-@]*(?:\s+[A-Za-z_][\w/.\-@]*){{0,4}})"
               rf"\s+is\s+({NONFINITE}(?![A-Za-z])|{NUMBER})(?!\w|\.\d)", re.IGNORECASE)
FILLER = frozenset({"the", "a", "an", "so", "far", "now", "current", "currently", "this", "my", "our", "of"})
EVAL_HEAD = lazy(r"\[Eval batch=\d+/\d+\]")
TORCHTUNE = lazy(r"^\s*(\d+)\|(\d+)\|Loss: ")
WORD = lazy(r"[A-Za-z]{2,}")
KERAS_END = lazy(r"^\s*(\d+)/\1 (?:\[=+\]|━+)")
# a 'key: word' pair ('l : total loss'): a legend that names what the keys mean
WORD_VALUED = lazy(r"(?<![\w/.\-@'\"])[A-Za-z_][\w/.\-@]*\s*:\s*[A-Za-z]{2,}")


EVAL_PROGRESS = {"eta_s", "step_time_s", "data_time", "data", "memory", "max_mem", "epoch"}
_PHASES = r"(?:validation|valid|val|evaluation|eval|testing|test)"
PHASE_WORD = lazy(rf"\b{_PHASES}\b", re.IGNORECASE)
# a message that opens with its phase: 'Validation - Loss: 0.2009, F1: 0.99', '[val] epoch:3
# miou:0.6', 'Test | loss 0.3', 'Eval: loss: 0.41', Flax's 'eval epoch: 3, loss: 0.05, accuracy: 98.3'
# PyTorch Ignite's 'Validation Results - Epoch: 1  Avg accuracy: 0.93 Avg loss: 0.24' (not 'Val loss:
# 0.3': that key says it itself)
EVAL_LEAD = lazy(
    rf"^\s*(?:\[\s*{_PHASES}\s*\]|{_PHASES}(?:\s+(?:results|metrics|summary|set))?\s*"
    rf"(?:-\s|\||:(?=\s*[A-Za-z_][\w ]{{0,30}}[:=]))"
    rf"|{_PHASES}\s+(?:epoch|step|iter|iteration|batch|round)\b)", re.IGNORECASE)
# a head that opens an evaluation ('***** Evaluating perplexity, Epoch 1/3 *****', DeepSpeed-Chat): the
# lines after it are the evaluation's, at the last train step
EVAL_OPENS = lazy(r"\b(?:evaluat|validat)(?:ing|ion)\b|\btesting\b", re.IGNORECASE)


def eval_lead(line: str) -> bool:
    """The line's message (after a capture's prefixes) opens with an evaluation phase word."""
    return PHASE_WORD.search(line) is not None and EVAL_LEAD.match(strip_prefixes(line)[0]) is not None


PHASE = {"train": "", "training": "", "eval": "eval_", "val": "eval_", "valid": "eval_",
         "validation": "eval_", "test": "eval_"}


@lru_cache(maxsize=4096)
def _key(key: str) -> str:
    """A two-word key stays whole when it is a known name ('learning rate', 'val loss'); a
    phase word in front is a prefix ('Train loss/train/total', 'Eval loss'); else it stays."""
    first, _, last = key.partition(" ")
    if not last or key.lower().replace(" ", "_") in ALIASES:
        return key
    if first.lower() in PHASE:
        # 'Eval metrics/eval/LanguageCrossEntropy' is eval_loss already: no second prefix
        return last if is_eval(canonical(last)) else PHASE[first.lower()] + last
    return key


def colon_pairs(line: str) -> list[tuple[str, str]]:
    """(key, value text) pairs; a number with a known unit keeps it ('3ms' → 0.003 later)."""
    found = list(PAIR.finditer(line))
    out = [(_key(m.group(1)), pair_text(m)) for m in found]
    if _may_rate(line):
        out.extend((key, number) for key, number, _ in rate_pairs(line, found))
    if not any(_measures(canonical(k)) for k, _ in out):  # ('val time: 12 ms' alone measures nothing)
        out.extend(_word_pairs(line))
    if " is " in line and not any(_is_metric(canonical(k)) for k, _ in out):
        out.extend(_is_pairs(line))
    return out


def rate_pairs(line: str, found: list[re.Match[str]]) -> list[tuple[str, str, re.Match[str]]]:
    """(name, number, match) of the rates written as 'number unit' (see RATE), but for a number
    that a 'key: value' pair in ``found`` reads already ('throughput: 12345 tok/s')."""
    taken = [(m.start(2), m.end(2)) for m in found]
    return [(RATE_NAMES[r.group(2)], r.group(1), r) for r in RATE.finditer(line)
            if not any(a < r.end(1) and r.start(1) < b for a, b in taken)]


def pair_text(m: re.Match[str]) -> str:
    """The text a PAIR match reads: the number with its unit, written after it, after a space or
    in parentheses after the key; an unknown unit ('9.12GiB') left off."""
    number, unit = m.group(2), m.group(3) or m.group(4) or ""
    if not unit and "(" in m.group(0):
        q = QUALIFIER.search(m.group(0), 0, m.start(2) - m.start(0) + 1)
        unit = q.group(1).strip() if q is not None and unit_scale(q.group(1).strip()) is not None else ""
    text = number + unit
    return number if unit and parse_number(text) is None else text


def _is_pairs(line: str) -> list[tuple[str, str]]:
    """'key is value' pairs (see IS_PAIR) of a line where one names a metric (prose, 'the total is
    5', is not a record); the key without filler words ('avg loss so far' → 'avg loss'), a phase
    word in front a prefix as in 'key: value' pairs ('val loss' → eval loss)."""
    out = []
    for words, number in IS_PAIR.findall(line):
        kept = [w for w in words.split() if w.lower() not in FILLER]
        if kept:
            out.append((_key(" ".join(kept)) if len(kept) <= 2 else "_".join(kept), number))
    return out if any(_is_metric(canonical(k)) for k, _ in out) else []


def _word_pairs(line: str) -> list[tuple[str, str]]:
    """'key value' pairs of fields made of nothing else (see WORD_PAIR); a field of a few words and
    one number is one pair, its words the key (MLX's 'Iter 10: Train loss 2.345, Learning Rate
    1.000e-05, Tokens/sec 567.8')."""
    out = []
    for field in FIELD_CUT.split(line.strip()):
        pairs = list(WORD_PAIR.finditer(field))
        if pairs and sum(m.end() - m.start() for m in pairs) + len(pairs) - 1 == len(field) and all(
                pairs[i].end() + 1 == pairs[i + 1].start() for i in range(len(pairs) - 1)):
            for m in pairs:
                text = m.group(2) + (m.group(3) or "")
                out.append((m.group(1), text if parse_number(text) is not None else m.group(2)))
        elif (named := NAMED_FIELD.match(field)) is not None and \
                named.group(1).rsplit(" ", 1)[-1].lower() not in LINK_WORDS:
            text = named.group(2) + (named.group(3) or "")
            out.append((named.group(1), text if parse_number(text) is not None else named.group(2)))
    return out


def _is_metric(name: str) -> bool:
    return is_training_metric(name) or is_eval(name)


def _measures(name: str) -> bool:
    """A metric that measures the model, not an evaluation loop's progress ('val time')."""
    return is_training_metric(name) or is_eval(name) and name[5:] not in EVAL_PROGRESS


@dataclass
class _Record:
    """A record being assembled over several lines."""

    line: int
    step: int | None
    metrics: dict[str, Value]
    time: datetime | None
    kind: str | None = None


class _ColonParser(RegexLineParser):
    noise = COMMON_NOISE

    def __init__(self, sink: Sink):
        super().__init__(sink)
        self.pending: _Record | None = None
        self.last_step: int | None = None  # of the last train record (eval records take it)
        # the records a column-wise pass read (line numbers ascending, their steps), from the
        # first one not yet passed by a line fed here (see ``read_elsewhere``)
        self._elsewhere: tuple[list[int], list[int]] = ([], [])
        self._passed = 0
        self._names: list[tuple[int, str, str]] = []  # (line, name, key) they named first

    def read_elsewhere(self, lines: list[int], steps: list[int], names: list[tuple[int, str, str]]
                       ) -> None:
        """Single-line records that ``line_columns.colon_rows`` read (lines ascending, after every
        line fed so far; none of them the first of a run, which is fed here and closes the record
        being assembled): each is the last train step for the lines fed after it; ``names``: the
        metrics they name and the line naming each first, named in the sink in line order with
        the lines fed here."""
        done = self._passed
        self._elsewhere = (self._elsewhere[0][done:] + lines, self._elsewhere[1][done:] + steps)
        self._passed = 0
        self._names = sorted(self._names + names)

    def _catch_up(self, lineno: int) -> None:
        at = bisect_left(self._elsewhere[0], lineno, lo=self._passed)
        if at > self._passed:
            self.last_step = self._elsewhere[1][at - 1]
            self._passed = at
        self._name_upto(lineno)

    def _name_upto(self, lineno: float) -> None:
        named = 0
        for line, name, key in self._names:
            if line >= lineno:
                break
            self.sink.names.setdefault(name, key)
            named += 1
        if named:
            del self._names[:named]

    def finish(self) -> None:
        self._close()
        self._name_upto(float("inf"))

    def _close(self) -> None:
        """Emit the record being assembled, if any."""
        r, self.pending = self.pending, None
        if r is not None:
            self._emit(r)

    def _emit(self, r: _Record) -> bool:
        if r.kind != "eval" and r.step is not None and any(_is_metric(k) for k in r.metrics):
            self.last_step = r.step
        return self.sink.emit(r.line, r.step, r.metrics, time=r.time, kind=r.kind)

    def feed(self, lineno: int, line: str) -> str | None:
        if self._passed < len(self._elsewhere[0]) or self._names:
            self._catch_up(lineno)
        if "\x1b" in line:
            line = ANSI.sub("", line)
        if "\x08" in line:  # Keras erases its bar with backspaces before redrawing it
            line = line.replace("\x08", "")
        if "\r" not in line:
            return self._feed(lineno, line)
        # a progress bar redrawn in place: every state counts (torchtune's bar shows a new step
        # and loss in each; Keras's, newer values of the same epoch)
        reasons = [self._feed(lineno, x) for x in line.split("\r") if x.strip()]
        return None if not reasons or None in reasons else reasons[-1]

    def _feed(self, lineno: int, line: str) -> str | None:
        time = leading_time(line)
        if "[Eval" in line and EVAL_HEAD.search(line):  # Composer's '[Eval batch=3/10] Eval on eval data'
            if not line.rstrip().endswith(":"):
                return "progress line"
            self._close()  # the end of an eval: its metrics follow, at the last train step
            self.pending = _Record(lineno, self.last_step, {}, time, "eval")
            return None
        pairs = colon_pairs(line)
        step, metrics = self.sink.metrics_from_pairs(pairs)
        if "Averaged stats:" in line:
            return "epoch average"  # MetricLogger's summary of the records already read
        if step is None and metrics and _is_legend(line, len(pairs)):
            return "a legend of metric names"
        phase, head_step, metrics = self._head(line, metrics)
        if phase == "eval":  # an evaluation loop's line: its metrics at the last train step
            measured = {k: v for k, v in metrics.items() if k not in EVAL_PROGRESS}
            if not measured or not self.sink.emit(lineno, self.last_step, measured, time=time,
                                                  kind="eval"):
                return "progress line"  # it only tells the loop's progress (time, memory)
            return None
        step = head_step if head_step is not None else step
        if self.pending is not None and line[:1].isspace() and (metrics or step is not None):
            # an indented line inside a record (Composer): more metrics, perhaps its true step
            if step is not None:
                self.pending.step = step
            self._extend(metrics)
            return None
        if step is None and (m := STEP_WORD.search(line)):
            step = whole(m.group(1))
        elif step is None and "[" in line[:8] and (m := EPOCH_STEP.match(line)):
            step = whole(m.group(2))
            if "epoch" not in metrics:
                metrics["epoch"] = float(m.group(1))
        epoch_word = EPOCH_WORD.search(line) if "poch" in line or "POCH" in line else None
        epoch = whole(epoch_word.group(1)) if epoch_word else None
        if epoch_word is not None and "epoch" not in metrics:
            metrics["epoch"] = float(epoch_word.group(1))
            self.sink.names.setdefault("epoch", "Epoch")
        if not any(_is_metric(k) for k in metrics):
            if (step is not None or epoch is not None) and _is_header(line):
                # 'Epoch 3/10', '[epoch=1][batch=16/100]:' open a record the next lines fill
                self._close()
                if EVAL_OPENS.search(line):  # an evaluation's head: its metrics at the last train step
                    self.pending = _Record(lineno, self.last_step, {}, time, "eval")
                else:
                    self.pending = _Record(lineno, step if step is not None else epoch, metrics, time)
                return None
            if self.pending is not None and metrics:
                self._extend(metrics)
                return None
            return self.classify_noise(line)
        if step is None and self.pending is not None:  # Keras: the metrics of 'Epoch 3/10'
            self._extend(metrics)  # (a later progress line of the epoch has the newer values)
            if KERAS_END.match(line):  # the epoch's closing progress line: the record is whole
                self._close()  # (now, not at the next 'Epoch' line: `watch` sees it at once)
            return None
        if step is None and self.last_step is not None and KERAS_END.match(line):
            # a closing progress line outside any epoch: model.evaluate() on some other data
            return "evaluate() after training"
        self._close()
        if not self._emit(_Record(lineno, step, metrics, time)):
            return "no training metric"
        return None

    def _head(self, line: str, metrics: dict[str, Value]
              ) -> tuple[str | None, int | None, dict[str, Value]]:
        """Known line heads: ('eval' | 'train' | None, the step they give, the metrics)."""
        if (tune := TORCHTUNE.match(line) if "|Loss: " in line else None) is not None:
            # torchtune's bar: 'EPOCH|STEP|Loss: X:  2%|▏ | 25/1000 [...]'
            return "train", whole(tune.group(2)), {**metrics, "epoch": float(tune.group(1))}
        if (mm := MM_HEAD.search(line) if "(train)" in line or "(val)" in line or "(test)" in line
                else None) is not None:  # mmengine
            if (mm.group(1) or mm.group(5)) != "train":
                return "eval", None, metrics
            if mm.group(2):  # 1-based epochs
                step = (whole(mm.group(2)) - 1) * whole(mm.group(4)) + whole(mm.group(3))
                return "train", step, {**metrics, "epoch": float(mm.group(2))}
            return "train", whole(mm.group(6)), metrics
        if (mmcv := MMCV_HEAD.search(line) if "Epoch [" in line else None) is not None:
            epoch = whole(mmcv.group(1))
            step = (epoch - 1) * whole(mmcv.group(3)) + whole(mmcv.group(2))
            return "train", step, {**metrics, "epoch": float(mmcv.group(1))}
        if ("Test:" in line or "Eval: " in line) and TEST_HEAD.search(line):
            metrics = self._spaced(line, metrics)
            metrics.pop("test", None)
            return "eval", None, metrics
        if (head := TRAIN_HEAD.search(line) if "poch: [" in line or "Train: " in line
                else None) is not None:  # timm, MetricLogger, ProgressMeter: E × N + B
            n_epoch = whole(head.group(1) or head.group(2))
            metrics = {**self._spaced(line, metrics), "epoch": float(head.group(1) or head.group(2))}
            metrics.pop("train", None)  # 'Train: 0' is timm's epoch, not a metric
            return "train", n_epoch * whole(head.group(4)) + whole(head.group(3)), metrics
        if eval_lead(line):  # 'Validation - Loss: 0.2009, F1: 0.9989': at the last train step
            return "eval", None, metrics
        return None, None, metrics

    def _spaced(self, line: str, metrics: dict[str, Value]) -> dict[str, Value]:
        """ProgressMeter's tab-separated 'Name value (mean)' fields, when no 'key: value' pair
        gave a metric."""
        if "\t" not in line or any(_is_metric(k) for k in metrics):
            return metrics
        pairs = [(m.group(1), m.group(2)) for m in map(SPACED.match, line.split("\t")[1:]) if m]
        return {**metrics, **self.sink.metrics_from_pairs(pairs)[1]}

    def _extend(self, metrics: dict[str, Value]) -> None:
        assert self.pending is not None
        self.pending.metrics.update(metrics)


def _is_header(line: str) -> bool:
    """A line that only names a position ('Epoch 3/10', '[epoch=1][batch=16/100]:', after a
    logging prefix), not a sentence that mentions one ('Starting training from iteration 0')."""
    rest = EPOCH_WORD.sub("", STEP_WORD.sub("", line))
    return len(WORD.findall(TIMESTAMP.sub("", rest))) <= 2


def _is_legend(line: str, numbers: int) -> bool:
    """A line that says what the keys mean ('- avg_loss : 1 epoch average loss , l : total loss, f :
    flow loss'): more 'key: word' pairs than 'key: number' ones, and no step word (a record with a
    step is read as one, here and column-wise)."""
    return ":" in line and len(WORD_VALUED.findall(line)) > numbers and STEP_WORD.search(line) is None


def _is_colon_record(line: str) -> bool:
    line = ANSI.sub("", line)
    if "oss" in line and TRAIN_HEAD.search(line):
        return True
    return any(_is_metric(canonical(k)) for k, _ in colon_pairs(line))


# lines the per-line parser reads by a head of their own, or as part of a record over several
# lines (an indented line), or after cleaning them (colours, backspaces, numbers inside their
# type's repr): never single-line records in a template
NOT_SIMPLE = ("[Eval", "Averaged stats:", "|Loss: ", "(train)", "(val)", "(test)", "Epoch [", "Test:",
              "Eval: ", "poch: [", "Train: ", "\x1b", "\x08", "\r", *WRAPPER_MARKS)
DIGITS = lazy(r"\d+")  # (line_columns.colon_rows groups lines by what is left)
_META = frozenset("\\.+*?()|[]{}^$#&-~")


@dataclass(frozen=True)
class Shape:
    """The shape of a single-line record (Step 100 | loss: 2.31 | lr: 1e-4): a regex for the lines
    that differ from it only in their digits, where the per-line parser reads the same pairs;
    its groups v0, v1… hold each pair's number (the text it reads is that plus ``suffixes``), s
    the step a step word gives ('Step 100', 'iter 5/1000'), e an epoch word's number."""

    pattern: str
    keys: tuple[str, ...]
    suffixes: tuple[str, ...]
    step_word: bool
    epoch_word: bool


def _escaped(text: str) -> str:
    """``text`` as regex source that matches it as it stands."""
    return "".join("\\" + c if c in _META else c for c in text)


def _literal(text: str) -> str:
    """``text`` as regex source: its digit runs any digits, the rest as it stands."""
    return r"\d+".join(map(_escaped, DIGITS.split(text)))


def shape(line: str) -> Shape | None:
    """The line's shape when it is a single-line record that the parser reads from its pairs
    alone (a step, a metric, no head, not indented); None for every other line."""
    if not line or line[:1].isspace() or any(x in line for x in NOT_SIMPLE) or eval_lead(line):
        return None
    found = list(PAIR.finditer(line))
    pairs: list[tuple[str, str]] = []
    spans: list[tuple[int, int, str, str]] = []  # (start, end, group, text) of each number read
    suffixes: list[str] = []
    for m in found:
        key, number = m.group(1), m.group(2)
        if not number[-1:].isdigit() or line[m.end(2):m.end(2) + 1] == "," and \
                line[m.end(2) + 1:m.end(2) + 2].isdigit():
            return None  # nan/inf, or '2,5' (a '2,500' would read as one number)
        text = pair_text(m)
        pairs.append((_key(key), text))
        suffixes.append(text[len(number):])
        spans.append((m.start(2), m.end(2), f"v{len(spans)}", number))
    if _may_rate(line):
        for key, number, r in rate_pairs(line, found):  # (as colon_pairs adds them: after the pairs)
            if "," in number:
                return None
            pairs.append((key, number))
            suffixes.append("")
            spans.append((r.start(1), r.end(1), f"v{len(spans)}", number))
    try:
        step, metrics = Sink().metrics_from_pairs(pairs)
    except TooWide:
        return None  # (the parser's: a record too wide to hold)
    if not any(_measures(k) for k in metrics):
        return None  # no measured metric: the bare 'word number' fields are read too (the parser's)
    word = STEP_WORD.search(line)  # the step where the pairs give none (or one past int64)
    if word is not None and not any(a < word.end(1) and word.start(1) < b for a, b, _, _ in spans):
        spans.append((word.start(1), word.end(1), "s", word.group(1)))
    elif step is None:
        return None
    epoch = EPOCH_WORD.search(line) if "poch" in line or "POCH" in line else None
    if epoch is not None and "epoch" not in metrics:
        spans.append((epoch.start(1), epoch.end(1), "e", epoch.group(1)))
    spans.sort()
    if any(a[1] > b[0] for a, b in zip(spans, spans[1:], strict=False)):
        return None
    out, at = ["^"], 0
    keep = sorted((m.start(1), m.end(1)) for m in found)  # keys stand as they are
    for start, end, name, number in spans:
        out.append(_outside(line, at, start, keep))
        body = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?" if "," in number else _literal(number)
        out.append(f"(?<{name}>{body})")
        at = end
    out.append(_outside(line, at, len(line), keep) + "$")
    return Shape("".join(out), tuple(k for k, _ in pairs), tuple(suffixes), any(x[2] == "s" for x in spans),
                 any(x[2] == "e" for x in spans))


def _outside(line: str, start: int, end: int, keep: list[tuple[int, int]]) -> str:
    """``line[start:end]`` as regex source, the digits of keys in it kept as they are."""
    out, at = [], start
    for a, b in keep:
        if b <= start or a >= end:
            continue
        a, b = max(a, start), min(b, end)
        out.append(_literal(line[at:a]))
        out.append(_escaped(line[a:b]))
        at = b
    out.append(_literal(line[at:end]))
    return "".join(out)



COLON_SAMPLE = 500  # lines of a chunk whose shapes are counted


COLON_SHAPES = 4  # the commonest shapes read column-wise (each a regex pass over the chunk)


def colon_rows(text: pl.Series, lineno: pl.Series, sink: Sink, parser: object = None) -> pl.Series:
    """The 'key: value' reader's single-line records ('Step 100 | loss: 2.31 | lr: 1e-4'): the
    commonest line shapes among the chunk's first lines (``colon.shape``), each read by one regex
    into the pairs the per-line parser reads. The parser reads every other line (multi-line
    records, heads, evaluation lines) and the first record of each run of such lines (it closes
    any record being assembled, which takes that line's rank and capture time); it is told
    where the others stood (``read_elsewhere``)."""
    from collections import Counter

    # the commonest skeletons (the lines' text, digits aside), each shaped from its first line
    first: dict[str, str] = {}
    counts: Counter[str] = Counter()
    for line in text.head(COLON_SAMPLE).drop_nulls().to_list():
        skeleton = DIGITS.sub("0", line)
        first.setdefault(skeleton, line)
        counts[skeleton] += 1
    forms: list[Shape] = []
    for skeleton, seen in counts.most_common():
        if seen < 2 or len(forms) == COLON_SHAPES:
            break
        if (form := shape(first[skeleton])) is not None:
            forms.append(form)
    hits: list[np.ndarray] = []
    found: list[pl.DataFrame] = []
    simple = np.zeros(len(text), dtype=bool)
    for form in forms:
        groups = text.str.extract_groups(form.pattern).struct.unnest()
        hit = groups["v0"].is_not_null().fill_null(False).to_numpy() & ~simple
        simple |= hit
        hits.append(hit)
        found.append(groups)
    # a run's first record goes to the parser: the line before it (blank lines aside) is one of
    # the parser's, or in the chunk before
    filled = np.flatnonzero(~(text.is_null() | (text.str.strip_chars().str.len_bytes() == 0)).to_numpy())
    follows = np.zeros(len(text), dtype=bool)
    follows[filled[1:]] = simple[filled[:-1]]
    done = np.zeros(len(text), dtype=bool)
    read_lines: list[np.ndarray] = []
    read_steps: list[np.ndarray] = []
    names: list[tuple[int, str, str]] = []
    for form, hit, groups in zip(forms, hits, found, strict=True):
        hit &= follows
        if not hit.any():
            continue
        mask = pl.Series(hit)
        g = groups.filter(mask)
        raws = [g[f"v{i}"] + suffix if suffix else g[f"v{i}"] for i, suffix in enumerate(form.suffixes)]
        known = dict(sink.names)  # the names these rows give are the parser's to set, in line order
        step, cols, unread = metric_columns(sink, form.keys, raws, exact=True)
        if form.step_word:  # 'Step 100': where no pair gave a step
            step = step.fill_null(g["s"].cast(pl.Int64, strict=False))
        if form.epoch_word and "epoch" not in cols:
            cols["epoch"] = g["e"].cast(pl.Float64)
            sink.names.setdefault("epoch", "Epoch")
        given = [(n, k) for n, k in sink.names.items() if n not in known]
        sink.names = known
        bad = any_of([*unread, step.is_null()], len(g))
        lines = lineno.filter(mask)
        add_rows(sink, {"step": step, "line": lines, "time": leading_times(text.filter(mask))}, cols, bad)
        took = ~bad.to_numpy()
        if not took.any():
            continue
        done[np.flatnonzero(hit)[took]] = True
        read_lines.append(lines.to_numpy()[took])
        read_steps.append(step.to_numpy()[took])
        names += [(int(read_lines[-1][0]), n, k) for n, k in given]  # every row read names them all
    if read_lines and parser is not None:
        order_lines, order_steps = np.concatenate(read_lines), np.concatenate(read_steps)
        order = np.argsort(order_lines, kind="stable")
        parser.read_elsewhere(order_lines[order].tolist(), order_steps[order].tolist(),  # type: ignore[attr-defined]
                              names)
    return pl.Series(done)


class Colon(Format):
    """--format colon: loose console lines of 'key: value' or 'word number' pairs around a step (Keras,
    timm, mmengine, custom prints); generic, chosen only when no specific format reads the log."""
    name = "colon"
    generic = True  # Megatron, torchtitan, modded-nanogpt lines have 'key: value' pairs too
    title = ("'key: value' lines (Keras fit() stdout, 'Step 100 | loss: 2.31 | lr: 1e-4' loggers, "
             "timm, Composer's console)")
    example = ("1875/1875 [==============================] - 5s 3ms/step - loss: 0.2345 - accuracy: "
               "0.9312 - val_loss: 0.1789 - val_accuracy: 0.9467")

    rows = staticmethod(colon_rows)  # column-wise for large files
    single_line = staticmethod(lambda line: shape(line) is not None)  # (the skeleton reader's)

    def sniff(self, lines: list[str]) -> int:
        return sum(1 for x in lines if _is_colon_record(x))

    def parser(self, sink: Sink) -> LineParser:
        return _ColonParser(sink)
