"""Structured logs: JSON Lines, CSV, Hugging Face trainer_state.json and Trainer stdout dicts."""

from __future__ import annotations

import ast
import csv
import json
import math
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from losslens.errors import FormatError
from losslens.logs.base import COMMON_NOISE, Format, LineParser, RegexLineParser
from losslens.logs.names import STEP_KEYS, parse_number
from losslens.logs.records import MAX_KEYS, TOO_WIDE, Accounting, Sink, TooWide

SUMMARY_KEYS = ("train_runtime", "total_flos")


def flatten(obj: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for k, v in obj.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.extend(flatten(v, key + "/"))
        else:
            out.append((key, v))
    return out


def as_text(v: Any) -> str | None:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, float):
        return "nan" if math.isnan(v) else repr(v)
    if isinstance(v, list):
        if all(isinstance(x, int | float) and not isinstance(x, bool) for x in v):
            return "[" + ", ".join(repr(float(x)) for x in v) + "]"
        return None
    return str(v)


def emit_mapping(sink: Sink, lineno: int, obj: dict[str, Any], step: int | None = None) -> str | None:
    """Emit one dict-shaped record; the skip reason when it holds none."""
    if any(k in obj for k in SUMMARY_KEYS):
        return "run summary"
    if len(obj) > MAX_KEYS:
        return TOO_WIDE
    pairs = [(k, t) for k, v in flatten(obj) if (t := as_text(v)) is not None]
    try:
        found, metrics = sink.metrics_from_pairs(pairs)
    except TooWide:
        return TOO_WIDE
    if not sink.emit(lineno, found if found is not None else step, metrics):
        return "no training metric"
    return None


# --- JSON Lines ------------------------------------------------------------------------------
@contextmanager
def json_errors(source: str) -> Iterator[None]:
    """Decoding errors as a FormatError naming the file (and line) — also for a document nested
    too deeply to decode or a number too long for Python's int."""
    try:
        yield
    except json.JSONDecodeError as exc:
        raise FormatError(f"invalid JSON: {exc.msg}", source=source, line=exc.lineno) from None
    except RecursionError:
        raise FormatError("invalid JSON: nested too deeply to read", source=source) from None
    except ValueError as exc:  # 'Exceeds the limit (4300 digits) for integer string conversion'
        raise FormatError(f"invalid JSON: {str(exc).split(';')[0]}", source=source) from None


def load_json(text: str, source: str) -> Any:
    """A whole JSON document, or a FormatError (see ``json_errors``)."""
    with json_errors(source):
        return json.loads(text)


class _JsonlParser(RegexLineParser):
    noise = COMMON_NOISE

    def feed(self, lineno: int, line: str) -> str | None:
        text = line.strip()
        if not text.startswith("{"):
            return self.classify_noise(text)
        try:
            obj = json.loads(text)
        except (ValueError, RecursionError):  # also nested too deeply, or a 5,000-digit number
            return "invalid JSON"
        if not isinstance(obj, dict):
            return "invalid JSON"
        try:
            return emit_mapping(self.sink, lineno, obj)
        except RecursionError:
            return "JSON nested too deeply"


class JsonLines(Format):
    name = "jsonl"
    title = ("JSON Lines metrics, any key naming (LLaMA-Factory trainer_log.jsonl, ms-swift "
             "logging.jsonl, train/loss, NaN/Infinity literals)")
    example = '{"current_steps": 10, "total_steps": 8660, "loss": 2.4977, "learning_rate": 5.77e-07}'

    def sniff(self, lines: list[str]) -> int:
        n = 0
        for x in lines:
            t = x.strip()
            if t.startswith("{") and t.endswith("}"):
                try:
                    n += isinstance(json.loads(t), dict)
                except (ValueError, RecursionError):
                    pass
        return n

    def parser(self, sink: Sink) -> LineParser:
        return _JsonlParser(sink)


# --- trainer_state.json ----------------------------------------------------------------------
STEP_LINE = re.compile(r'^\s*"step":\s*(\d+)')


class TrainerState(Format):
    name = "trainer-state"
    title = "Hugging Face trainer_state.json (log_history: train and eval entries)"
    example = '{"log_history": [{"epoch": 0.0, "learning_rate": 0.0199, "loss": 2.6644, "step": 10}]}'
    whole_file = True

    def sniff(self, lines: list[str]) -> int:
        head = "\n".join(lines[:400])
        return len(lines) if head.lstrip().startswith("{") and '"log_history"' in head else 0

    def parse_text(self, text: str, lines: list[str], sink: Sink, acc: Accounting,
                   source: str) -> None:
        doc = load_json(text, source)
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


# --- CSV -------------------------------------------------------------------------------------
WANDB_PREFIX = re.compile(r"^.+? - ")


class _CsvParser(RegexLineParser):
    def __init__(self, sink: Sink, delimiter: str):
        super().__init__(sink)
        self.delimiter = delimiter
        self.header: list[str] | None = None
        self.step_col: int | None = None
        self.epoch_as_step = False

    def _set_header(self, cells: list[str]) -> None:
        names = [WANDB_PREFIX.sub("", c.strip()) for c in cells]
        self.header = names
        lowered = [n.lower() for n in names]
        for key in STEP_KEYS:
            if key in lowered:
                self.step_col = lowered.index(key)
                break
        if self.step_col is None and "epoch" in lowered:
            self.step_col, self.epoch_as_step = lowered.index("epoch"), True

    def feed(self, lineno: int, line: str) -> str | None:
        cells = next(csv.reader([line.rstrip("\r")], delimiter=self.delimiter))
        if self.header is None:
            self._set_header(cells)
            return None
        if len(cells) != len(self.header):
            return "wrong number of CSV fields"
        pairs = []
        step = None
        for i, (name, cell) in enumerate(zip(self.header, cells, strict=True)):
            if not cell.strip() or name.endswith(("__MIN", "__MAX", "__step")):
                continue
            if i == self.step_col:
                try:
                    step = int(float(cell))
                except (ValueError, OverflowError):  # 'abc', 'inf', 'nan'
                    return "step is not a number"
                if not self.epoch_as_step:
                    continue
            pairs.append((name, cell))
        found, metrics = self.sink.metrics_from_pairs(pairs)
        if not self.sink.emit(lineno, step if step is not None else found, metrics):
            return "no training metric"
        return None


HEADER_CELL = re.compile(r'^"?[\w\s/.\-()%:@\[\]]{1,120}"?$')


def _numeric_share(cells: list[str]) -> float:
    filled = [c for c in cells if c.strip()]
    if not filled:
        return 0.0
    return sum(1 for c in filled if parse_number(c) is not None) / len(filled)


def _csv_header(lines: list[str]) -> str | None:
    """The delimiter when the first line is a metrics header followed by numeric rows."""
    if len(lines) < 2:
        return None
    for d in (",", "\t"):
        head = lines[0].split(d)
        if len(head) < 2 or not all(HEADER_CELL.match(h) for h in head):
            continue
        if not any(t in h.lower() for h in head for t in ("loss", "step", "epoch", "acc")):
            continue
        rows = [x.split(d) for x in lines[1:20]]
        if all(len(r) == len(head) and _numeric_share(r) >= 0.5 for r in rows):
            return d
    return None


class Csv(Format):
    name = "csv"
    title = "CSV with a header (W&B export, Lightning metrics.csv with sparse rows, Keras CSVLogger)"
    example = "epoch,accuracy,learning_rate,loss,val_accuracy,val_loss"

    def sniff(self, lines: list[str]) -> int:
        return len(lines) if _csv_header([x.rstrip("\r") for x in lines]) else 0

    def parser(self, sink: Sink) -> LineParser:
        return _CsvParser(sink, ",")

    def parser_for(self, sink: Sink, first_line: str) -> LineParser:
        return _CsvParser(sink, "\t" if first_line.count("\t") > first_line.count(",") else ",")


# --- Hugging Face Trainer stdout -------------------------------------------------------------
PYDICT = re.compile(r"\{'[^{}]*\}")
# Python prints a non-finite float bare ('grad_norm': nan, 'loss': inf): not a literal, so such a
# dict is read again with those values quoted (the sink reads 'nan' as NaN)
BARE_NONFINITE = re.compile(r"(?<=[:,\[])(\s*)([-+]?(?:nan|inf(?:inity)?))(?=\s*[,}\]])", re.IGNORECASE)


def python_dict(text: str) -> object:
    """``ast.literal_eval`` of a printed dict, with bare nan/inf values read as strings."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        quoted = BARE_NONFINITE.sub(r"\1'\2'", text)
        if quoted == text:
            raise
        return ast.literal_eval(quoted)
TQDM = re.compile(r"(\d+)/(\d+) \[[^\]]*?(?:it/s|s/it)\]")


class _HFParser(RegexLineParser):
    """Dict lines among tqdm bars. The step is the training bar's count when the dict was
    printed, or the dict's own 'step'; with buffered stdout (nohup) many dicts land after one bar,
    and then the step is rebuilt from the logging interval (see ``finish``)."""

    noise = COMMON_NOISE

    def __init__(self, sink: Sink):
        super().__init__(sink)
        self.bars: dict[int, list[int]] = {}  # total -> [updates, last count]
        self.train: list[dict[str, Any]] = []
        self.evals: list[dict[str, Any]] = []
        self.own_steps = False

    def _track_bar(self, text: str) -> None:
        for m in TQDM.finditer(text):
            n, total = int(m.group(1)), int(m.group(2))
            state = self.bars.setdefault(total, [0, 0])
            state[0] += 1
            state[1] = n

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
        steps = [r["step"] for r in self.train]
        if self.own_steps or None in steps or all(b > a for a, b in zip(steps, steps[1:], strict=False)):
            return  # (steps the dicts print themselves are kept: a step going back is a restart)
        # buffered output: records logged every `interval` steps, the last near the bar's end
        last = max(max(s for s in steps if s is not None), self.bar_step or 0)
        interval = max(1, round(last / len(steps)))
        for k, rec in enumerate(self.train, 1):
            rec["step"] = k * interval
        self.sink.notes.append(f"stdout was buffered (several records after one progress bar): "
                               f"steps rebuilt as every {interval} steps")
        by_line = sorted((r["line"], r["step"]) for r in self.train)
        for ev in self.evals:
            before = [s for ln, s in by_line if ln <= ev["line"]]
            ev["step"] = before[-1] if before else 0


class HFStdout(Format):
    name = "hf"
    keeps_records = True  # finish() may rebuild the steps of buffered output
    title = ("Hugging Face Trainer / TRL / ms-swift stdout: {'loss': ...} dicts (string values "
             "too) among tqdm redraws")
    example = ("{'loss': 2.0592, 'grad_norm': 0.6914, 'learning_rate': 7.17e-05, "
               "'mean_token_accuracy': 0.5715, 'epoch': 0.03}")

    def sniff(self, lines: list[str]) -> int:
        return sum(1 for x in lines if "{'" in x and PYDICT.search(x))

    def parser(self, sink: Sink) -> LineParser:
        return _HFParser(sink)


# --- JSON array of records (W&B run.history() / pandas dumps) ---------------------------------
class JsonRecords(Format):
    name = "json-records"
    title = "a JSON array of metric records (W&B run.history() or pandas to_json dumps: _step, train/loss)"
    example = '[{"_step": 0, "train/loss": 3.12, "lr": 0.0001}, {"_step": 1, "train/loss": 3.05}]'
    whole_file = True

    def sniff(self, lines: list[str]) -> int:
        head = "".join(lines[:5]).lstrip()
        return len(lines) if head.startswith("[") and head[1:].lstrip().startswith("{") else 0

    def parse_text(self, text: str, lines: list[str], sink: Sink, acc: Accounting,
                   source: str) -> None:
        read_json_records(text, lines, sink, acc, source)


# --- MLflow metric file: "timestamp value step" ------------------------------------------------
MLFLOW_LINE = re.compile(r"^(\d{10,13}) ([-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf|-inf|NaN|Infinity))"
                         r"(?: (\d+))?$")


class _MlflowMetricParser(RegexLineParser):
    noise = COMMON_NOISE

    def feed(self, lineno: int, line: str) -> str | None:
        m = MLFLOW_LINE.match(line.strip())
        if not m:
            return "not 'timestamp value step'"
        from datetime import datetime

        name = self.sink.source_name or "value"
        found, metrics = self.sink.metrics_from_pairs([(name, m.group(2))])
        t = datetime.fromtimestamp(int(m.group(1)) / (1000 if len(m.group(1)) > 10 else 1))
        if not self.sink.emit(lineno, int(m.group(3) or 0), metrics, time=t):
            return "no training metric"
        return None


class MlflowMetric(Format):
    name = "mlflow"
    title = ("MLflow file store: a run folder (mlruns/<exp>/<run>/metrics/*) or one metric file "
             "('timestamp value step' lines; the file name is the metric)")
    example = "1701361200123 2.4977 10"

    def sniff(self, lines: list[str]) -> int:
        return sum(1 for x in lines if MLFLOW_LINE.match(x.strip()))

    def parser(self, sink: Sink) -> LineParser:
        return _MlflowMetricParser(sink)


class TensorBoard(Format):
    name = "tensorboard"
    title = ("TensorBoard event files (events.out.tfevents.*): scalars, tensor-encoded too; needs "
             "the tensorboard extra")
    example = "events.out.tfevents.1701361200.host.1234.0  (binary: add_scalar('train/loss', 2.49, 10))"
    whole_file = True

    def sniff(self, lines: list[str]) -> int:
        return 0  # binary: recognised by its bytes in read_log, never by text sniffing


def read_json_records(text: str, lines: list[str], sink: Sink, acc: Accounting, source: str) -> None:
    """A JSON array of records (pandas/W&B `run.history()` dumps: `_step`, `train/loss`, …),
    decoded one record at a time (the records of a 250 MB array as Python objects at once took
    15 times the file's size); pandas' orient="split" document too."""
    items: Iterable[Any]
    if text.lstrip().startswith("["):
        items = _array_items(text, source)
    else:
        doc = load_json(text, source)
        if not (isinstance(doc, dict) and isinstance(doc.get("data"), list)
                and isinstance(doc.get("columns"), list)):
            raise FormatError("expected a JSON array of records", source=source)
        items = (dict(zip(doc["columns"], row, strict=False)) for row in doc["data"])
    for i, rec in enumerate(items, 1):
        if isinstance(rec, dict):
            emit_mapping(sink, i, {k: v for k, v in rec.items() if v is not None}, step=None)
        if i % 1000 == 0:
            sink.compact()
    account_document(lines, acc)


def account_document(lines: list[str], acc: Accounting) -> None:
    """A whole document's lines: each is part of it (parsed) or blank."""
    blank = sum(1 for x in lines if not x.strip())
    acc.blank += blank
    acc.parsed += len(lines) - blank


_SPACE = re.compile(r"\s*")


def _array_items(text: str, source: str) -> Iterator[Any]:
    """The elements of the JSON array ``text``, decoded one by one (json.loads' rules: NaN and
    Infinity read); a FormatError naming the line where it stops being JSON."""
    decoder = json.JSONDecoder()
    i = _SPACE.match(text, text.index("[") + 1).end()  # type: ignore[union-attr]
    if text.startswith("]", i):
        return _array_end(text, i, source)
    while True:
        with json_errors(source):
            item, i = decoder.raw_decode(text, i)
        yield item
        i = _SPACE.match(text, i).end()  # type: ignore[union-attr]
        if text.startswith(",", i):
            i = _SPACE.match(text, i + 1).end()  # type: ignore[union-attr]
            continue
        if text.startswith("]", i):
            return _array_end(text, i, source)
        raise FormatError("invalid JSON: expecting ',' or ']' between records", source=source,
                          line=text.count("\n", 0, i) + 1)


def _array_end(text: str, i: int, source: str) -> None:
    if text[i + 1:].strip():
        raise FormatError("invalid JSON: extra data after the array", source=source,
                          line=text.count("\n", 0, i + 1) + 1)
