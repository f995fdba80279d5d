"""Aligned tables: a header of column names, then rows of numbers under it. Ultralytics YOLO
prints its epochs so ('      Epoch    GPU_mem   box_loss   cls_loss   dfl_loss  Instances       Size'
then '      1/100      2.61G      1.183      2.437      1.253        187        640: 100%|...', every
redraw of the bar a state of the row), fastai's fit too ('epoch  train_loss  valid_loss  accuracy
time' then '0  0.523  0.412  0.85  00:12': the metrics between valid_loss and time are measured on
the validation set, the time is minutes:seconds), and so do trainers that print an aligned table
of their own. A row is read under the last header with as many columns whose first column is a
step or an epoch ('1/100', '25'): the epoch, when the column is named so, is its step. A table
whose first column is 'Class' ('Class  Images  Instances  Box(P  R  mAP50  mAP50-95)') is an
evaluation: its 'all' row is an eval record at the last train step, the rows of single classes
are skipped."""

from __future__ import annotations

import re

from losslens.logs.base import COMMON_NOISE, Format, LineParser, RegexLineParser, whole
from losslens.logs.names import STEP_KEYS, canonical, is_training_metric, parse_number
from losslens.logs.sink import Sink

# tqdm's bar after a row or a header (the spaces before it taken from their first: a damaged
# line's run of a million spaces is scanned once, not once from each of them)
BAR_TAIL = re.compile(r"(?::|(?<!\s))\s++\d{1,3}%\|.*$")
NAME = re.compile(r"^[A-Za-z][\w/.\-]*(?:\([\w.\-]*\)?|\))?:?$")  # 'box_loss', 'Box(P', 'mAP50-95)'
POSITION = re.compile(r"^(\d+)(?:/(\d+))?$")  # '1/100', '25'
MINUTES = re.compile(r"^(\d+):([0-5]\d)$")  # fastai's epoch time '00:12' (minutes:seconds)
EVAL_FIRST = ("class", "classes")
WIDE_CUT = re.compile(r"\s{2,}")
RULE = re.compile(r"^[\s\-=+|]+$")  # '---  ------  ----' under a header
STEP_FIRST = ("epoch", *STEP_KEYS)


def _without_bar(text: str) -> str:
    """``text`` without a tqdm bar after it (looked for only where one can be: a bar holds '%|')."""
    return BAR_TAIL.sub("", text) if "%|" in text else text


def _cells(line: str) -> list[str]:
    """The last state of a redrawn line, without its progress bar, in whitespace-parted cells."""
    states = [x for x in line.split("\r") if x.strip()]
    return _without_bar(states[-1]).split() if states else []


def _name(cell: str) -> str:
    """'Box(P' → 'Box_P', 'mAP50-95)' → 'mAP50-95', 'box_loss' as it is."""
    return cell.rstrip(":").replace("(", "_").rstrip(")")


def _header(cells: list[str]) -> bool:
    """Three or more names, the first a step, an epoch or 'Class', one a metric (or 'Class')."""
    if len(cells) < 3 or not all(NAME.match(c) for c in cells):
        return False
    first = cells[0].lower()
    if first in EVAL_FIRST:
        return True
    return first in STEP_FIRST and any(is_training_metric(canonical(_name(c))) for c in cells[1:])


def _wide_header(line: str) -> list[str] | None:
    """A header whose names hold a space, its columns parted by two or more: spaCy's 'E    #
    LOSS TOK2VEC  LOSS NER  ENTS_F  ENTS_P  ENTS_R  SCORE' ('E' the epoch, '#' the step). The
    names, spaces made '_', or None."""
    cells = WIDE_CUT.split(_without_bar(line).strip())
    if len(cells) < 3 or cells[0].lower() not in (*STEP_FIRST, "e", "#") or not any(" " in c for c in cells):
        return None
    names = [c.replace(" ", "_") for c in cells]
    if not all(c == "#" or all(NAME.match(w) for w in c.split()) for c in cells) or \
            not any(is_training_metric(canonical(n)) for n in names[1:]):
        return None
    return names


class _TableParser(RegexLineParser):
    noise = COMMON_NOISE

    def __init__(self, sink: Sink):
        super().__init__(sink)
        self.train: list[str] | None = None  # the header of the training table
        self.eval: list[str] | None = None  # the header of the evaluation table
        self.last_step: int | None = None

    def feed(self, lineno: int, line: str) -> str | None:
        return self.feed_cells(lineno, line, _cells(line))

    def feed_cells(self, lineno: int, line: str, cells: list[str]) -> str | None:
        if _header(cells):
            names = [_name(c) for c in cells]
            if cells[0].lower() in EVAL_FIRST:
                self.eval = names
            else:
                self.train = names
            return None
        if "  " in line and (wide := _wide_header(line)) is not None:
            self.train = wide
            return None
        if self.train is not None and "-" in line and RULE.match(line):
            return None  # the rule under the header
        if cells and self.train is not None and len(cells) == len(self.train) and \
                (pos := POSITION.match(cells[0])) is not None:
            return self._train_row(lineno, line, self.train, cells, pos)
        if cells and self.eval is not None and len(cells) == len(self.eval) and NAME.match(cells[0]):
            if cells[0].lower() != "all":
                return "a single class's result"
            metrics = self._numbers(self.eval[1:], cells[1:])
            if metrics is None:
                return self.classify_noise(line)
            self.sink.emit(lineno, self.last_step, {f"eval_{canonical(k)}": v for k, v in metrics.items()},
                           kind="eval")
            for k in metrics:
                self.sink.names.setdefault(f"eval_{canonical(k)}", k)
            return None
        return self.classify_noise(line)

    def _train_row(self, lineno: int, line: str, header: list[str], cells: list[str],
                   pos: re.Match[str]) -> str | None:
        metrics = self._numbers(header[1:], cells[1:])
        if metrics is None:
            return self.classify_noise(line)
        names = [k.lower() for k in header]
        # fastai: the metrics after 'valid_loss' (up to 'time') are the validation set's
        fastai = "train_loss" in names and "valid_loss" in names
        after = names.index("valid_loss") + 1 if fastai else len(names)
        values: dict[str, float] = {}
        for i, (k, v) in enumerate(metrics.items(), 1):
            column = canonical(f"valid_{k}" if after <= i and names[i] != "time" else k)
            values[column] = v
            self.sink.names.setdefault(column, k)
        step = whole(pos.group(1))
        if header[0].lower() in ("epoch", "e"):
            values["epoch"] = float(step)
            self.sink.names.setdefault("epoch", header[0])
        if "#" in header[1:]:  # spaCy: the step is the '#' column, 'E' the epoch
            step = int(values.pop(canonical("#")))
        if not self.sink.emit(lineno, step, values):
            return "no training metric"
        self.last_step = step
        return None

    @staticmethod
    def _numbers(names: list[str], cells: list[str]) -> dict[str, float] | None:
        """The row's numbers by column name ('2.61G' with its unit); None when a cell is no number."""
        out = {}
        for name, cell in zip(names, cells, strict=True):
            value = parse_number(cell)
            if value is None and (clock := MINUTES.match(cell)) is not None:
                value = 60.0 * int(clock.group(1)) + int(clock.group(2))
            if value is None:
                return None
            out[name] = value
        return out


class Table(Format):
    """--format table: an aligned table, a header of names then rows of numbers (Ultralytics YOLO's
    epochs, and trainers printing a table of their own)."""
    name = "table"
    title = "aligned tables: a header of column names, then rows under it (Ultralytics YOLO)"
    example = "      1/100      2.61G      1.183      2.437      1.253        187        640: 100%|##| 8/8"

    def sniff(self, lines: list[str]) -> int:
        parser, rows = _TableParser(Sink()), 0
        for i, line in enumerate(lines, 1):
            cells = _cells(line)
            if parser.train is None and parser.eval is None and not _header(cells) and \
                    ("  " not in line or _wide_header(line) is None):
                continue  # before any header, no row: the line is noise (classify_noise says which)
            rows += parser.feed_cells(i, line, cells) is None and not _header(cells)
        return rows

    def parser(self, sink: Sink) -> LineParser:
        return _TableParser(sink)
