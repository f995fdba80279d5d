"""CSV metric logs: Lightning CSVLogger, Keras CSVLogger, W&B exports, step,loss tables."""

from __future__ import annotations

import csv
import re

from losslens.logs.base import Format, LineParser, RegexLineParser
from losslens.logs.names import STEP_KEYS, parse_number
from losslens.logs.sink import Sink

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
        seen: dict[str, int] = {}
        for i, name in enumerate(names):  # a name twice: the second column kept under its own name
            if name in seen and name:
                k = 2
                while f"{name}_{k}" in names:
                    k += 1
                names[i] = f"{name}_{k}"
                self.sink.notes.append(f"the header names {name!r} twice (columns {seen[name] + 1} and "
                                       f"{i + 1}): the second is read as {names[i]!r}")
            seen.setdefault(name, i)
        self.header = names
        lowered = [n.lower() for n in names]
        for key in STEP_KEYS:
            if key in lowered:
                self.step_col = lowered.index(key)
                break
        if self.step_col is None and "epoch" in lowered:
            self.step_col, self.epoch_as_step = lowered.index("epoch"), True

    def feed(self, lineno: int, line: str) -> str | None:
        try:
            cells = next(csv.reader([line.rstrip("\r")], delimiter=self.delimiter))
        except csv.Error as exc:  # a lone '\r' inside the row, a field over the csv module's limit
            return "a line break inside a CSV row" if "new-line" in str(exc) else "unreadable CSV row"
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


# a column name: any text but a quote or a control character ('eval/acc@k=5', 'loss{rank=0}',
# 'train/loss__MIN'); what tells a header from a text line is the numeric rows under it
HEADER_CELL = re.compile(r'^"?[^"\x00-\x08\x0a-\x1f]{1,120}"?$')


def _numeric_share(cells: list[str]) -> float:
    filled = [c for c in cells if c.strip()]
    if not filled:
        return 0.0
    return sum(1 for c in filled if parse_number(c) is not None) / len(filled)


def _csv_header(lines: list[str]) -> str | None:
    """The delimiter when the first line is a metrics header followed by numeric rows (four in
    five of the next 19 lines)."""
    if len(lines) < 2:
        return None
    for d in (",", "\t"):
        # a delimiter after every cell, the header's too ('total loss<TAB>score loss<TAB>', as a
        # loop printing each value with end='\t' writes): no empty last column
        trailing = lines[0].endswith(d)
        head = lines[0].removesuffix(d).split(d)
        if len(head) < 2 or not all(HEADER_CELL.match(h) for h in head) or _numeric_share(head):
            continue  # (a line a comma cuts into numbers is no header: '[50, 50, 46]')
        if not any(t in h.lower() for h in head for t in ("loss", "step", "epoch", "acc")):
            continue
        rows = [(x.removesuffix(d) if trailing else x).split(d) for x in lines[1:20]]
        fit = sum(1 for r in rows if len(r) == len(head) and _numeric_share(r) >= 0.5)
        if 5 * fit >= 4 * len(rows):  # (a damaged row or two among them is the reader's to skip)
            return d
    return None


class Csv(Format):
    """--format csv: a header row and one row per logged step."""
    name = "csv"
    rows = "csv_columns:csv_rows"  # column-wise for large files
    title = "CSV with a header (W&B export, Lightning metrics.csv with sparse rows, Keras CSVLogger)"
    example = "epoch,accuracy,learning_rate,loss,val_accuracy,val_loss"

    def sniff(self, lines: list[str]) -> int:
        return len(lines) if _csv_header([x.rstrip("\r") for x in lines]) else 0

    def parser(self, sink: Sink) -> LineParser:
        return _CsvParser(sink, ",")

    def parser_for(self, sink: Sink, first_line: str) -> _CsvParser:
        return _CsvParser(sink, "\t" if first_line.count("\t") > first_line.count(",") else ",")
