"""Darknet's training output (pjreddie's and AlexeyAB's YOLO trainers, ``detector.c``): one line an
iteration ('… avg, …' in pjreddie's, '… avg loss, …' in AlexeyAB's),

    1000: 2.345678, 2.456789 avg loss, 0.001000 rate, 3.212345 seconds, 64000 images, 12.3 hours left

(the value before 'avg loss' is the iteration's loss, the next its running average; '… hours left'
only in AlexeyAB's fork), among the YOLO layers' own lines (' v3 (mse loss, Normalizer: …) Region 82
Avg (IOU: 0.3), count: 5, class_loss = 1.2, iou_loss = 3.4, total_loss = 4.6'), and with '-map' the
accuracy: ' Last accuracy mAP@0.5 = 45.23 %, best = 47.00 % ' (an evaluation at that iteration)."""

from __future__ import annotations

import re

from losslens.logs.base import COMMON_NOISE, Format, LineParser, RegexLineParser, count_matching, whole
from losslens.logs.names import WHOLE_NUMERIC, parse_number
from losslens.logs.sink import Sink

# (numbers taken whole: see names.WHOLE_NUMBER)
ITERATION = re.compile(rf"^\s*(\d+): ({WHOLE_NUMERIC}), ({WHOLE_NUMERIC}) avg(?: loss)?, "
                       rf"({WHOLE_NUMERIC}) rate, ({WHOLE_NUMERIC}) seconds, \d+ images(?:, .*)?$")
# the YOLO layers' lines (AlexeyAB: ' v3 (mse loss, …) Region 82 Avg (IOU: …), count: 5, class_loss = 1.2,
# …'; pjreddie: 'Region 82 Avg IOU: 0.32, Class: 0.45, Obj: 0.12, …', YOLOv2's 'Region Avg IOU: …'):
# details of the iteration line after; their '-nan' is a scale that saw no object ('count: 0'),
# not a failure
LAYER = re.compile(r"\bRegion (?:\d+ )?Avg[ (]|^\s*v3 \(")
MAP = re.compile(rf"Last accuracy mAP@([\d.]+) = ({WHOLE_NUMERIC}) ?%")


class _DarknetParser(RegexLineParser):
    noise = ((LAYER, "a YOLO layer's detail"),
             (re.compile(r"^\s*Loaded: [\d.]+ seconds|\(next mAP calculation at |^\s*Tensor Cores are"),
              "the loader's or the trainer's message"),
             *COMMON_NOISE)

    def __init__(self, sink: Sink):
        super().__init__(sink)
        self.last: int | None = None

    def feed(self, lineno: int, line: str) -> str | None:
        if (m := ITERATION.match(line)) is not None:
            self.last = whole(m.group(1))
            self.sink.names.update(loss="loss", avg_loss="avg loss", lr="rate", step_time_s="seconds")
            self.sink.emit(lineno, self.last, {
                "loss": parse_number(m.group(2)), "avg_loss": parse_number(m.group(3)),
                "lr": parse_number(m.group(4)), "step_time_s": parse_number(m.group(5))})
            return None
        if "mAP@" in line and (a := MAP.search(line)) is not None:
            name = "eval_map_" + a.group(1).replace(".", "")
            self.sink.names.setdefault(name, f"mAP@{a.group(1)}")
            self.sink.emit(lineno, self.last, {name: parse_number(a.group(2))}, kind="eval")
            return None
        return self.classify_noise(line)


class Darknet(Format):
    """--format darknet: Darknet's 'N: loss, avg avg loss, lr rate, T seconds, I images' lines."""
    name = "darknet"
    title = "Darknet YOLO training output (pjreddie / AlexeyAB)"
    example = (" 1000: 2.345678, 2.456789 avg loss, 0.001000 rate, 3.212345 seconds, 64000 images, "
               "12.3 hours left")

    def sniff(self, lines: list[str]) -> int:
        """Its iteration lines and the YOLO layers' lines between them (these read as key=value
        pairs too: 'class_loss = 1.2, iou_loss = 3.4'), when there is an iteration line."""
        iterations = count_matching((ITERATION,), lines)
        return iterations + count_matching((LAYER,), lines) if iterations else 0

    def parser(self, sink: Sink) -> LineParser:
        return _DarknetParser(sink)
