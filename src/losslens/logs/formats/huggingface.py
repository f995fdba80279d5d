"""Hugging Face Trainer: trainer_state.json (log_history) and the dicts its stdout prints
(TRL, ms-swift and LLaMA-Factory print the same), bare nan/inf included. A large stdout log's
dicts are read column-wise (``hf_rows``).
"""

from __future__ import annotations

import ast
import bisect
import json
import re
import warnings
from typing import Any

import numpy as np
import polars as pl

from losslens.errors import FormatError
from losslens.logs.base import COMMON_NOISE, Format, LineParser, RegexLineParser, whole
from losslens.logs.columnar import (
    ENGINE,
)
from losslens.logs.formats.jsonl import account_document, array_items, read_objects
from losslens.logs.mappings import BARE_NONFINITE, SUMMARY_KEYS, emit_mapping, load_json, no_surrogates
from losslens.logs.names import canonical, is_training_metric
from losslens.logs.sink import Accounting, Sink
from losslens.logs.tqdm import rate_of, step_times

# --- trainer_state.json ----------------------------------------------------------------------
STEP_LINE = re.compile(r'^\s*"step":\s*(\d+)')


class TrainerState(Format):
    """--format trainer-state: trainer_state.json's log_history, read whole."""
    name = "trainer-state"
    title = "Hugging Face trainer_state.json (log_history: train and eval entries)"
    example = '{"log_history": [{"epoch": 0.0, "learning_rate": 0.0199, "loss": 2.6644, "step": 10}]}'
    whole_file = True

    def sniff(self, lines: list[str]) -> int:
        head = "\n".join(lines[:400])
        return len(lines) if head.lstrip().startswith("{") and '"log_history"' in head else 0

    def parse_text(self, text: str, lines: list[str], sink: Sink, acc: Accounting,
                   source: str) -> None:
        history: Any
        try:
            doc = load_json(text, source)
        except FormatError as exc:
            history = _history_before(text)  # a file cut short while written, or damaged
            if not history:
                raise
            where = f" from line {exc.line} on" if exc.line is not None else ""
            why = exc.message.removeprefix("invalid JSON: ")
            sink.lost.append(f"not JSON{where} ({why}): read the {len(history)} log_history entries "
                             "before it (a trainer_state.json cut short while written, or damaged)")
        else:
            history = doc.get("log_history") if isinstance(doc, dict) else None
        if not isinstance(history, list):
            raise FormatError("no log_history list in this JSON document", source=source)
        step_lines = [i + 1 for i, x in enumerate(lines) if STEP_LINE.match(x)]
        k = 0
        for entry in history:
            if not isinstance(entry, dict):
                continue
            lineno = 0
            if "step" in entry and k < len(step_lines):
                lineno = step_lines[k]
                k += 1
            reason = emit_mapping(sink, lineno, entry)
            if reason:
                sink.notes.append(f"log_history entry at line {lineno}: {reason}, ignored")
        account_document(lines, acc)


_HISTORY = re.compile(r'"log_history"\s*:\s*\[')


def _history_before(text: str) -> list[Any]:
    """The log_history entries a document that is no JSON holds whole before the point where it
    stops being JSON (none when it has no log_history list)."""
    m = _HISTORY.search(text)
    out: list[Any] = []
    if m is None:
        return out
    try:
        out.extend(array_items(text[m.start():], ""))  # (entry by entry, up to the damage)
    except FormatError:
        pass
    return out


# --- Hugging Face Trainer stdout -------------------------------------------------------------
PYDICT = re.compile(r"\{'[^{}]*\}")
# a key whose value is a number: plain, quoted (ms-swift), non-finite, or in a tensor(...) repr
NUMERIC_KEY = re.compile(
    r"'([^'\n]{1,80})':\s*'?(?:[-+]?(?:\d|\.\d|nan\b|inf)|tensor\(|np\.float\d*\(|Array\()", re.IGNORECASE)


def _metric_dict(line: str) -> bool:
    """A line holding a printed dict with a metric's number in it ({'loss': 2.06, ...}), not a
    config's ({'loss_type': 'ls', 'batch_size': 128}, which a trainer may print beside its own
    'Epoch 1/30, Train Loss: 1.5060')."""
    return "{'" in line and any(is_training_metric(canonical(k))
                                for m in PYDICT.finditer(line) for k in NUMERIC_KEY.findall(m.group(0)))


# a printed dict that JSON reads the same once its quotes are swapped: no other quote or escape,
# True/False/None only as values (json.loads is ~10x faster than ast.literal_eval)
JSON_LIKE = re.compile(r"""^\{'[^"\\]*\}$""")
PY_CONSTANT = re.compile(r"'[^']*'|(?<=: )(True|False|None)(?=[,}])")  # strings whole, then constants
JSON_CONSTANT = {"True": "true", "False": "false", "None": "null"}


def python_dict(text: str) -> object:
    """``ast.literal_eval`` of a printed dict, with bare nan/inf values read as strings."""
    if JSON_LIKE.match(text):
        try:
            swapped = PY_CONSTANT.sub(lambda m: JSON_CONSTANT[m.group(1)] if m.group(1) else m.group(0),
                                      text).replace("'", '"')
            return json.loads(swapped, parse_constant=_not_json)
        except ValueError:
            pass  # a tuple, a set, 1_000, nan: Python's own reader decides
    try:
        return _literal(text)
    except (ValueError, SyntaxError):
        # Python prints a non-finite float bare ('grad_norm': nan, 'loss': inf): no literal, so
        # the dict is read again with those values quoted (the sink reads 'nan' as NaN)
        quoted = BARE_NONFINITE.sub(r"\1'\2'", text)
        if quoted == text:
            raise
        return _literal(quoted)


def _literal(text: str) -> object:
    """``ast.literal_eval``, without the SyntaxWarning Python's compiler prints to stderr for
    text like '1and 2' (a log's odd line is a skip reason, never a stray warning); a lone
    surrogate its escapes make is U+FFFD (``no_surrogates``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        obj = ast.literal_eval(text)
    return no_surrogates(obj) if "\\" in text else obj


def _not_json(name: str) -> object:
    """json.loads would read NaN/Infinity, which Python never prints: not this path's to read."""
    raise ValueError(name)


# (a count starts where no digit stands before it, taken whole: a damaged line's run of a million
# digits is scanned once, not once from each of them)
TQDM = re.compile(r"(?<!\d)(\d++)/(\d++) \[[^\]]*?(?:it/s|s/it)\]")


class _HFParser(RegexLineParser):
    """Dict lines among tqdm bars. The step is the training bar's count when the dict was
    printed, or the dict's own 'step'; with buffered stdout (nohup) many dicts land after one bar,
    and then the step is rebuilt from the logging interval (see ``finish``)."""

    noise = COMMON_NOISE

    def __init__(self, sink: Sink):
        super().__init__(sink)
        self.bars: dict[int, list[int]] = {}  # total -> [updates, last count]
        self.rates: dict[int, list[tuple[int, float]]] = {}  # total -> each redraw's (count, rate)
        self.train: list[dict[str, Any]] = []
        self.evals: list[dict[str, Any]] = []
        self.own_steps = False
        self.stepless = False  # dicts read column-wise (jsonl_columns.hf_rows) with no step

    def _track_bar(self, text: str) -> None:
        for m in TQDM.finditer(text):
            n, total = whole(m.group(1)), whole(m.group(2))
            state = self.bars.setdefault(total, [0, 0])
            state[0] += 1
            state[1] = n
            if (rate := rate_of(m.group(0))) is not None:
                self.rates.setdefault(total, []).append((n, rate))

    @property
    def bar_step(self) -> int | None:
        if not self.bars:
            return None
        # the training bar: the longest one counting iterations (eval bars count batches)
        return self.bars[max(self.bars)][1]

    def feed(self, lineno: int, line: str) -> str | None:
        matches = list(PYDICT.finditer(line))
        if not matches:
            self._track_bar(line)
            return self.classify_noise(line.split("\r")[-1])
        reason: str | None = "no training metric"
        pos = 0
        for m in matches:
            self._track_bar(line[pos:m.start()])
            pos = m.end()
            try:
                obj = python_dict(m.group(0))
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                continue
            if isinstance(obj, dict):
                n_train, n_eval = len(self.sink.train), len(self.sink.eval)
                r = emit_mapping(self.sink, lineno, obj, step=self.bar_step)
                new = self.sink.train[n_train:]
                # a dict with its own step ('step': 300, as TRL and custom callbacks print)
                self.own_steps |= any(x["step"] is not None and x["step"] != self.bar_step for x in new)
                self.train += new
                self.evals += self.sink.eval[n_eval:]
                reason = None if r is None or reason is None else r
        self._track_bar(line[pos:])
        return reason

    def finish(self) -> None:
        self._rebuild_steps()
        self._time_steps()

    def _time_steps(self) -> None:
        """Each training record's mean seconds per step since the one before, from the training
        bar's redraws (``logs.tqdm``), where the records carry no time of their own."""
        steps = [r["step"] for r in self.train]
        if not self.rates or not steps or None in steps \
                or any(b <= a for a, b in zip(steps, steps[1:], strict=False)) \
                or any(k in r for r in self.train for k in ("step_time_s", "step_time_ms")):
            return
        times = step_times(self.rates[max(self.rates)], steps)
        if sum(t is not None for t in times) < 10:
            return
        for rec, t in zip(self.train, times, strict=True):
            if t is not None:
                rec["step_time_s"] = t
        self.sink.notes.append("step times read from the progress bar's redraws (tqdm's rate)")

    def _rebuild_steps(self) -> None:
        steps = [r["step"] for r in self.train]
        if self.own_steps or self.stepless or None in steps or \
                all(b > a for a, b in zip(steps, steps[1:], strict=False)):
            return  # (steps the dicts print themselves are kept: a step going back is a restart)
        # buffered output: records logged every `interval` steps, the last near the bar's end
        last = max(max(s for s in steps if s is not None), self.bar_step or 0)
        interval = max(1, round(last / len(steps)))
        for k, rec in enumerate(self.train, 1):
            rec["step"] = k * interval
        self.sink.notes.append(f"several records after one progress bar (stdout buffered apart from "
                               f"the bar's stderr): steps rebuilt as every {interval} steps")
        by_line = sorted((r["line"], r["step"]) for r in self.train)
        lines = [ln for ln, _ in by_line]
        for ev in self.evals:  # the step of the last train record at or before the eval's line
            k = bisect.bisect_right(lines, ev["line"])
            ev["step"] = by_line[k - 1][1] if k else 0



# a dict Python printed that JSON reads the same once its quotes are swapped: string keys, values
# that are numbers, strings with no quote or backslash, or lists of numbers
_NUM = r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?"


_STR = r"'[^'\"\\{}]*'"  # (no brace: PYDICT finds no dict where a key holds one)


_VALUE = rf"(?:{_NUM}|{_STR}|\[(?:{_NUM}(?:, {_NUM})*)?\])"


HF_FLAT = rf"^\{{{_STR}: {_VALUE}(?:, {_STR}: {_VALUE})*\}}$"


HF_SUMMARY = "|".join(f"'{k}'" for k in SUMMARY_KEYS)


BAR = r"\d+/\d+ \[[^\]]*?(?:it/s|s/it)\]"  # huggingface.TQDM


def hf_rows(text: pl.Series, lineno: pl.Series, sink: Sink, parser: Any) -> pl.Series:
    """The Trainer's printed dicts read column-wise while no progress bar has been seen (a bar's
    count is the step of the dicts after it: from the first bar on, the per-line parser reads);
    the parser learns whether the dicts carried their own steps (see ``_HFParser.finish``)."""
    read = np.zeros(text.len(), dtype=bool)
    if parser.bars:
        return pl.Series(read)
    line = pl.col("text")
    body = line.str.replace_all("'", '"', literal=True)
    parts = pl.LazyFrame({"text": text}).select(  # (one query: polars' cost is per query)
        line.str.contains(BAR).any().alias("bar"),
        (line.str.contains(HF_FLAT) & ~line.str.contains(HF_SUMMARY)).fill_null(False).alias("flat"),
        body.alias("body"), body.str.count_matches('": ', literal=True).alias("keys"),  # (flat: leaves)
    ).collect(engine=ENGINE)
    if parts["bar"].any():
        return pl.Series(read)
    flat = parts["flat"]
    if flat.any():
        done, steps = read_objects(parts["body"].filter(flat), lineno.filter(flat), sink,
                                   parts["keys"].filter(flat), evals=False)
        read[flat.arg_true().to_numpy()] = done
        parser.own_steps |= bool(steps.is_not_null().any())
        parser.stepless |= bool(steps.is_null().any())
    return pl.Series(read)


class HFStdout(Format):
    """--format hf: the Trainer's printed dicts ({'loss': ..., 'epoch': ...}) among progress bars."""
    name = "hf"
    rows = staticmethod(hf_rows)  # column-wise for large files
    keeps_records = True  # finish() may rebuild the steps of buffered output
    title = ("Hugging Face Trainer / TRL / ms-swift stdout: {'loss': ...} dicts (string values "
             "too) among tqdm redraws (step times from their rate)")
    example = ("{'loss': 2.0592, 'grad_norm': 0.6914, 'learning_rate': 7.17e-05, "
               "'mean_token_accuracy': 0.5715, 'epoch': 0.03}")

    def sniff(self, lines: list[str]) -> int:
        return sum(1 for x in lines if _metric_dict(x))

    def parser(self, sink: Sink) -> LineParser:
        return _HFParser(sink)
