"""The loss log of the image-translation trainers built on one visualizer: pytorch-CycleGAN-and-pix2pix,
CUT, pix2pixHD and SPADE print (and write to loss_log.txt) '(epoch: 1, iters: 100, time: 0.123, data:
0.004) D_A: 0.251 G_A: 0.342 cycle_A: 1.229 idt_A: 0.601 ' — every name after the parenthesis is a loss
(the model's ``loss_names``: 'G_GAN', 'D_real', 'cycle_A', 'KLD'), none of them 'the' loss. 'iters'
counts images within the epoch (the frame makes the steps count across the run); 'time' is the
compute time per image, 'data' the time spent waiting for data. 'learning rate 0.0002000 ->
0.0001000' between epochs sets the LR of the records after it."""

from __future__ import annotations

import re

from losslens.logs.base import COMMON_NOISE, Format, LineParser, RegexLineParser, count_matching, whole
from losslens.logs.names import WHOLE_NUMBER, WHOLE_NUMERIC, canonical, loss_like, parse_number
from losslens.logs.sink import Sink

# (numbers taken whole: see names.WHOLE_NUMBER)
RECORD = re.compile(rf"^\(epoch: (\d+), iters: (\d+), time: ({WHOLE_NUMERIC})"
                    rf"(?:, data: ({WHOLE_NUMERIC}))?\)(.*)$")
PAIR = re.compile(rf"([A-Za-z_][\w.\-]*): ({WHOLE_NUMERIC})(?=\s|$)")
# a record's pairs and nothing else, read once (PAIR's search tried a key from each letter of a long
# run of letters: quadratic); a record's rest is read by PAIR only when this matches it
PAIRS = re.compile(rf"\s*+(?:[A-Za-z_][\w.\-]*+: {WHOLE_NUMERIC}(?=\s|$)\s*+)*+$")
HEADER = re.compile(r"^=+ Training Loss \(.*\) =+$")
LR = re.compile(rf"^(?:update )?learning rate:? ({WHOLE_NUMBER}) -> ({WHOLE_NUMBER})\s*$", re.IGNORECASE)


def loss_column(name: str) -> str:
    """The canonical column of a printed loss name: 'G_GAN' → 'g_gan_loss', 'loss_G' → 'loss_g'."""
    column = canonical(name)
    return column if loss_like(column) else f"{column}_loss"


class _GanParser(RegexLineParser):
    noise = ((re.compile(r"^saving the (?:latest )?model|^saving the model at the end of epoch"),
              "checkpoint message"),
             (re.compile(r"^End of epoch \d+ / \d+"), "end-of-epoch summary"),
             *COMMON_NOISE)

    def __init__(self, sink: Sink):
        super().__init__(sink)
        self.lr: float | None = None

    def feed(self, lineno: int, line: str) -> str | None:
        text = line.strip()
        m = RECORD.match(text)
        if m is None:
            if HEADER.match(text):
                return None
            if (lr := LR.match(text)) is not None:
                self.lr = float(lr.group(2))
                self.sink.names.setdefault("lr", "learning rate")
                return None
            return self.classify_noise(line)
        pairs = PAIR.findall(m.group(5)) if PAIRS.match(m.group(5)) else []
        if not pairs:
            return "not a loss log line (text besides 'name: value' pairs)"
        metrics: dict[str, float | None] = {"epoch": float(m.group(1)),
                                            "step_time_s": parse_number(m.group(3))}
        if m.group(4) is not None:
            metrics["data_time"] = parse_number(m.group(4))
        for name, value in pairs:
            column = loss_column(name)
            metrics[column] = parse_number(value)
            self.sink.names.setdefault(column, name)
        if self.lr is not None:
            metrics["lr"] = self.lr
        self.sink.names.update(epoch="epoch", step_time_s="time", data_time="data")
        if not self.sink.emit(lineno, whole(m.group(2)), metrics):
            return "no training metric"
        return None


class CycleGan(Format):
    """--format cyclegan: '(epoch: E, iters: I, time: T[, data: D]) name: value ...' loss lines."""
    name = "cyclegan"
    title = "pytorch-CycleGAN-and-pix2pix / CUT / pix2pixHD / SPADE loss_log.txt and stdout"
    example = ("(epoch: 1, iters: 100, time: 0.123, data: 0.004) D_A: 0.251 G_A: 0.342 cycle_A: 1.229 "
               "idt_A: 0.601")

    def sniff(self, lines: list[str]) -> int:
        return count_matching((RECORD, HEADER), [x.strip() for x in lines])

    def parser(self, sink: Sink) -> LineParser:
        return _GanParser(sink)
