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
from losslens.logs.tqdm import RATE, Redraws, rate_of, step_times

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
        self.bars: dict[int, int] = {}  # total -> its last count
        self.rates: dict[int, Redraws] = {}  # total -> each redraw's count and rate
        self.train: list[dict[str, Any]] = []
        self.evals: list[dict[str, Any]] = []
        self.own_steps = False
        self.stepless = False  # dicts read column-wise (hf_rows) with no step
        # the redraws of lines hf_rows read (line, count, total, rate or NaN), taken in line order
        self._elsewhere = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0))
        self._passed = 0

    def read_elsewhere(self, lines: np.ndarray, events: pl.DataFrame) -> None:
        """The bar redraws of lines ``hf_rows`` read (``lines``, ascending, after every line fed
        so far; ``events``: each one's count, total and rate), taken in line order with the lines
        fed here."""
        new = (lines, events["n"].to_numpy(), events["total"].to_numpy(),
               events["rate"].fill_null(np.nan).to_numpy())
        self._elsewhere = tuple(np.concatenate([old[self._passed:], add])  # type: ignore[assignment]
                                for old, add in zip(self._elsewhere, new, strict=True))
        self._passed = 0

    def catch_up(self, lineno: float = float("inf")) -> None:
        """Take the redraws read elsewhere from lines before ``lineno`` (all by default), as
        ``_redraw`` takes each in turn: each bar's last count, and its rates."""
        lines, ns, totals, rates = self._elsewhere
        start = self._passed
        self._passed = end = int(np.searchsorted(lines, lineno, side="left"))
        ns, totals, rates = ns[start:end], totals[start:end], rates[start:end]
        for total in dict.fromkeys(totals.tolist()):
            mine = totals == total
            counts, values = ns[mine], rates[mine]
            self.bars[total] = int(counts[-1])
            rated = ~np.isnan(values)
            if rated.any():
                self.rates.setdefault(total, Redraws()).extend(counts[rated].tolist(), values[rated].tolist())

    def _track_bar(self, text: str) -> None:
        for m in TQDM.finditer(text):
            self._redraw(whole(m.group(1)), whole(m.group(2)), rate_of(m.group(0)))

    def _redraw(self, n: int, total: int, rate: float | None) -> None:
        self.bars[total] = n
        if rate is not None:
            self.rates.setdefault(total, Redraws()).add(n, rate)

    @property
    def bar_step(self) -> int | None:
        if not self.bars:
            return None
        # the training bar: the longest one counting iterations (eval bars count batches)
        return self.bars[max(self.bars)]

    def feed(self, lineno: int, line: str) -> str | None:
        if self._passed < len(self._elsewhere[0]):
            self.catch_up(lineno)
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
        self.catch_up()
        records = _TrainRecords(self.sink.frames, self.train)
        self._rebuild_steps(records)
        self._time_steps(records)

    def _time_steps(self, records: _TrainRecords) -> None:
        """Each training record's mean seconds per step since the one before, from the training
        bar's redraws (``logs.tqdm``), where the records carry no time of their own."""
        steps = records.steps()
        if not self.rates or steps.is_empty() or steps.null_count() or not _rising(steps) \
                or records.hold("step_time_s", "step_time_ms"):
            return
        times = step_times(self.rates[max(self.rates)], steps.to_numpy())
        if np.count_nonzero(~np.isnan(times)) < 10:
            return
        records.set(pl.Series("step_time_s", times).fill_nan(None))
        self.sink.notes.append("step times read from the progress bar's redraws (tqdm's rate)")

    def _rebuild_steps(self, records: _TrainRecords) -> None:
        steps = records.steps()
        if self.own_steps or self.stepless or steps.null_count() or _rising(steps):
            return  # (steps the dicts print themselves are kept: a step going back is a restart)
        # buffered output: records logged every `interval` steps, the last near the bar's end
        last = max(int(steps.max()), self.bar_step or 0)  # type: ignore[arg-type]
        interval = max(1, round(last / len(steps)))
        records.set(pl.Series("step", np.arange(1, len(steps) + 1, dtype=np.int64) * interval))
        self.sink.notes.append(f"several records after one progress bar (stdout buffered apart from "
                               f"the bar's stderr): steps rebuilt as every {interval} steps")
        lines, rebuilt = records.lines(), records.steps().to_list()
        for ev in self.evals:  # the step of the last train record at or before the eval's line
            k = bisect.bisect_right(lines, ev["line"])
            ev["step"] = rebuilt[k - 1] if k else 0


def _rising(steps: pl.Series) -> bool:
    """Whether each step is past the one before."""
    return bool((steps.diff().drop_nulls() > 0).all())


class _TrainRecords:
    """The training records of a log read both ways, in line order: the rows ``hf_rows`` read
    (``frames``) and the dicts the parser made (``dicts``, in the order it made them)."""

    def __init__(self, frames: list[pl.DataFrame], dicts: list[dict[str, Any]]) -> None:
        self.frames, self.dicts = frames, dicts
        if not frames:
            self.order = np.arange(len(dicts))
            return
        lines = np.concatenate([f["line"].to_numpy() for f in frames] + [np.array([r["line"] for r in dicts],
                                                                                 dtype=np.int64)])
        self.order = np.argsort(lines, kind="stable")  # (the dicts' own order on a line of several)
        self._lines = lines

    def lines(self) -> list[int]:
        if not self.frames:
            return [r["line"] for r in self.dicts]
        return self._lines[self.order].tolist()

    def steps(self) -> pl.Series:
        dicts = pl.Series("step", [r["step"] for r in self.dicts], dtype=pl.Int64)
        if not self.frames:
            return dicts
        return pl.concat([f["step"].cast(pl.Int64) for f in self.frames] + [dicts]).gather(self.order)

    def hold(self, *names: str) -> bool:
        """Whether any record holds one of ``names``."""
        return any(k in f.columns for f in self.frames for k in names) or \
            any(k in r for r in self.dicts for k in names)

    def set(self, values: pl.Series) -> None:
        """Each record's value of the column ``values`` is named after (in line order; null: left
        out)."""
        placed = values.scatter(self.order, values)
        at = 0
        for k, f in enumerate(self.frames):
            self.frames[k] = f.with_columns(placed.slice(at, f.height))
            at += f.height
        for rec, v in zip(self.dicts, placed.slice(at).to_list(), strict=True):
            if v is not None:
                rec[values.name] = v


# a dict Python printed that JSON reads the same once its quotes are swapped: string keys, values
# that are numbers, strings with no quote or backslash, or lists of numbers
_NUM = r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?"


_STR = r"'[^'\"\\{}]*'"  # (no brace: PYDICT finds no dict where a key holds one)


_VALUE = rf"(?:{_NUM}|{_STR}|\[(?:{_NUM}(?:, {_NUM})*)?\])"


HF_FLAT = rf"^\{{{_STR}: {_VALUE}(?:, {_STR}: {_VALUE})*\}}$"


HF_SUMMARY = "|".join(f"'{k}'" for k in SUMMARY_KEYS)


BAR = r"\d+/\d+ \[[^\]]*?(?:it/s|s/it)\]"  # huggingface.TQDM


# the per-line parser's reason for a line with no dict (its last redraw's, ``classify_noise``),
# column-wise: a progress bar where the two rules before that one do not claim the line first
_NOT_BAR = [pattern.pattern for pattern, _ in COMMON_NOISE[:2]]
assert COMMON_NOISE[2][1] == "progress bar"
_PROGRESS = r"\d+%\|.*\|\s*\d+/\d+"  # COMMON_NOISE's, without the guards the regex crate lacks
_RATE = RATE.pattern  # (tqdm.rate_of)
# a redraw as BAR matches it: its count, total, and the rate that follows its first '['
_REDRAW = (r"^(?<n>\d+)/(?<total>\d+) (?:"
           + _RATE.replace(r"(\d{1,12}", r"(?<rate>\d{1,12}", 1)
           .replace("(it/s|s/it)", "(?<unit>it/s|s/it)", 1) + ")?")
_AFTER_REDRAWS = "^[^{}]*" + HF_FLAT.removeprefix("^")  # one dict ending the line, no brace before it


def hf_rows(text: pl.Series, lineno: pl.Series, sink: Sink, parser: Any) -> pl.Series:
    """The Trainer's printed dicts read column-wise, each at the step the per-line parser gives it
    (its own, or the training bar's count when it was printed: see ``_bar_steps``), and the lines
    that only redraw a bar skipped as the parser skips them; the bars' redraws of the lines read
    here are handed to the parser, which takes them in line order with the lines it reads
    (``_HFParser.read_elsewhere``). The parser learns whether the dicts carried steps of their
    own (see ``_HFParser.finish``)."""
    read = np.zeros(text.len(), dtype=bool)
    parser.catch_up()
    line = pl.col("text")
    cut = line.str.splitn("{'", 2)  # (the text before a line's first dict, and from it on)
    before, dict_text = cut.struct.field("field_0"), "{'" + cut.struct.field("field_1")
    no_dict = cut.struct.field("field_1").is_null()
    body = dict_text.str.replace_all("'", '"', literal=True)
    # a line whose one dict ends it, after redraws: the parser takes the redraws, then the dict
    flat = (line.str.contains(_AFTER_REDRAWS) & ~line.str.contains(HF_SUMMARY)).fill_null(False)
    parts = pl.LazyFrame({"text": text}).select(  # (one query: polars' cost is per query)
        flat.alias("flat"), body.alias("body"), body.str.count_matches('": ', literal=True).alias("keys"),
        no_dict.alias("no_dict"),
        # the lines that may redraw a bar (a dict line mostly does not)
        (no_dict | line.str.contains("it/s", literal=True) | line.str.contains("s/it", literal=True))
        .fill_null(False).alias("may_redraw"),
    ).collect(engine=ENGINE)
    maybe = parts["may_redraw"].arg_true()
    head = pl.when(pl.col("flat")).then(before).otherwise(line)  # (the redraws before a dict)
    bars = pl.LazyFrame({"text": text.gather(maybe), "flat": parts["flat"].gather(maybe)}).select(
        head.str.extract_all(BAR).alias("bars")).collect(engine=ENGINE)
    # the lines with no dict that only redraw a bar (the parser's reason for them: 'progress bar')
    plain = parts["no_dict"].arg_true()
    last = line.str.extract(r"([^\r]*)$", 1)
    progress = plain.filter(pl.LazyFrame({"text": text.gather(plain)}).select(
        (~pl.any_horizontal([last.str.contains(p) for p in _NOT_BAR]) & last.str.contains(_PROGRESS))
        .fill_null(False)).collect(engine=ENGINE).to_series()).to_numpy()
    events = _events(bars["bars"], maybe.to_numpy())
    if events is None:
        return pl.Series(read)  # (a count past int64: the parser's)
    is_flat = parts["flat"]
    rows = is_flat.arg_true().to_numpy()
    if len(rows):
        given = _bar_steps(events, rows, parser)
        n_idle = len(sink.idle_lines)
        done, steps, own = read_objects(parts["body"].filter(is_flat), lineno.filter(is_flat), sink,
                                        parts["keys"].filter(is_flat), evals=False, given=given)
        read[rows] = done
        own_lines = lineno.filter(is_flat).to_numpy()[own]
        parser.own_steps |= bool(len(np.setdiff1d(own_lines, sink.idle_lines[n_idle:])))
        parser.stepless |= bool(steps.is_null().any())
    if len(progress):
        read[progress] = True
        sink.passed_lines.append(("progress bar", lineno.to_numpy()[progress]))
    # the redraws of the lines read here, for the parser (it reads the others' itself)
    at_row = events["row"].to_numpy()
    mine = read[at_row]
    if mine.any():
        parser.read_elsewhere(lineno.to_numpy()[at_row[mine]], events.filter(pl.Series(mine)))
    return pl.Series(read)


def _events(bars: pl.Series, rows: np.ndarray) -> pl.DataFrame | None:
    """Each bar redraw of a chunk's lines in order (``bars``: each line's, on ``rows``): its row,
    count, total and rate (None where a count does not fit int64)."""
    found = pl.DataFrame({"row": rows.astype(np.int64), "bar": bars}).explode("bar").drop_nulls("bar")
    bar = pl.col("bar")
    # a redraw's rate follows its first '[' (``tqdm.RATE`` searched in the redraw, where it has one)
    parts = bar.str.extract_groups(_REDRAW)
    events = found.select(
        "row", parts.struct.field("n").cast(pl.Int64, strict=False).alias("n"),
        parts.struct.field("total").cast(pl.Int64, strict=False).alias("total"),
        parts.struct.field("rate").alias("value"), parts.struct.field("unit").alias("unit"),
        (bar.str.count_matches("[", literal=True) > 1).alias("more"))
    if events["n"].null_count() or events["total"].null_count():
        return None
    if events["more"].any():  # (a '[' inside the times: the rate searched for as the parser does)
        again = found.filter(events["more"]).select(bar.str.extract_groups(_RATE)).to_series()
        more = events["more"].arg_true()
        events = events.with_columns(events["value"].scatter(more, again.struct.field("1")),
                                     events["unit"].scatter(more, again.struct.field("2")))
    value = pl.col("value").cast(pl.Float64, strict=False)
    return events.select("row", "n", "total", pl.when(value <= 0).then(None).when(pl.col("unit") == "it/s")
                         .then(value).otherwise(1.0 / value).alias("rate"))


def _bar_steps(events: pl.DataFrame, rows: np.ndarray, parser: Any) -> pl.Series:
    """The step the per-line parser gives a dict on each of ``rows`` where the dict names none:
    the training bar's count after every redraw before it (the training bar: the one with the
    largest total seen so far, as ``_HFParser.bar_step``)."""
    total = events["total"].to_numpy()
    n = events["n"].to_numpy()
    before = max(parser.bars) if parser.bars else -1
    largest = np.maximum.accumulate(np.concatenate(([before], total)))[1:]
    count = np.where(total == largest, n, -1)  # (counts are never negative: a bar's digits)
    start = parser.bars[before] if parser.bars else -1
    # the last training-bar count at or before each redraw, forward-filled
    where = np.where(count >= 0, np.arange(len(count)), -1)
    np.maximum.accumulate(where, out=where)
    filled = np.where(where >= 0, count[np.maximum(where, 0)], start)
    k = np.searchsorted(events["row"].to_numpy(), rows, side="right") - 1
    steps = np.where(k >= 0, filled[np.maximum(k, 0)] if len(filled) else start, start)
    return pl.Series("step", steps, dtype=pl.Int64).replace(-1, None)


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
