"""JSON records: JSON Lines (one object per line) and a JSON array of records (W&B
run.history() / pandas dumps), decoded one record at a time."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

from losslens.errors import FormatError
from losslens.logs.base import COMMON_NOISE, Format, LineParser, RegexLineParser
from losslens.logs.mappings import emit_mapping, json_errors, load_json, loads_object
from losslens.logs.sink import Accounting, Sink


class _JsonlParser(RegexLineParser):
    noise = COMMON_NOISE

    def feed(self, lineno: int, line: str) -> str | None:
        text = line.strip()
        if not text.startswith("{"):
            return self.classify_noise(text)
        try:
            obj = loads_object(text)  # (a bare 'nan' or 'inf' value read as JSON's NaN, Infinity)
        except (ValueError, RecursionError):  # also nested too deeply, or a 5,000-digit number
            return "invalid JSON"
        if not isinstance(obj, dict):
            return "invalid JSON"
        try:
            return emit_mapping(self.sink, lineno, obj)
        except RecursionError:
            return "JSON nested too deeply"


class JsonLines(Format):
    """--format jsonl: one JSON object per line."""
    name = "jsonl"
    rows = "jsonl_columns:jsonl_rows"  # column-wise for large files
    title = ("JSON Lines metrics, any key naming (LLaMA-Factory trainer_log.jsonl, ms-swift "
             "logging.jsonl, train/loss, NaN/Infinity literals, bare nan/inf)")
    example = '{"current_steps": 10, "total_steps": 8660, "loss": 2.4977, "learning_rate": 5.77e-07}'

    def sniff(self, lines: list[str]) -> int:
        n = 0
        for x in lines:
            t = x.strip()
            if t.startswith("{") and t.endswith("}"):
                try:
                    n += isinstance(loads_object(t), dict)
                except (ValueError, RecursionError):
                    pass
        return n

    def parser(self, sink: Sink) -> LineParser:
        return _JsonlParser(sink)



# --- JSON array of records (W&B run.history() / pandas dumps) ---------------------------------
class JsonRecords(Format):
    """--format json-records: one JSON array of records, decoded a record at a time."""
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


def read_json_records(text: str, lines: list[str], sink: Sink, acc: Accounting, source: str) -> None:
    """A JSON array of records (pandas/W&B `run.history()` dumps: `_step`, `train/loss`, …),
    decoded one record at a time (the records of a 250 MB array as Python objects at once took
    15 times the file's size); pandas' orient="split" document too."""
    items: Iterable[Any]
    if text.lstrip().startswith("["):
        items = array_items(text, source)
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


def array_items(text: str, source: str) -> Iterator[Any]:
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
