"""nanoGPT's console (iter N: loss X, time Yms) and modded-nanogpt / llm.c main.log lines."""

from __future__ import annotations

import re

from losslens.logs.base import (
    COMMON_NOISE,
    Format,
    LineParser,
    RegexLineParser,
    count_matching,
    whole,
)
from losslens.logs.names import WHOLE_NUMBER, WHOLE_NUMERIC, parse_number, unreserved
from losslens.logs.sink import Sink

# --- nanoGPT ---------------------------------------------------------------------------------
# (numbers taken whole, as in every pattern here: see names.WHOLE_NUMBER; polars reads
# `columnar` of them)
NANO_ITER = re.compile(
    rf"^iter (\d+): loss ({WHOLE_NUMERIC}), time ({WHOLE_NUMBER})ms(?:, mfu ({WHOLE_NUMBER})%)?",
    re.IGNORECASE)


NANO_EVAL = re.compile(rf"^step (\d+): train loss ({WHOLE_NUMERIC}), val loss ({WHOLE_NUMERIC})",
                       re.IGNORECASE)


class _NanoParser(RegexLineParser):
    noise = ((re.compile(r"^saving checkpoint"), "checkpoint message"), *COMMON_NOISE)

    def feed(self, lineno: int, line: str) -> str | None:
        m = NANO_ITER.match(line)
        if m:
            metrics: dict[str, float | None] = {"loss": parse_number(m.group(2)),
                                                "step_time_s": float(m.group(3)) / 1000}
            if m.group(4) is not None and float(m.group(4)) != -100.0:  # -100: nanoGPT's "unset"
                metrics["mfu"] = float(m.group(4))
            self.sink.names.update(loss="loss", step_time_s="time", mfu="mfu")
            self.sink.emit(lineno, whole(m.group(1)), metrics)
            return None
        m = NANO_EVAL.match(line)
        if m:
            self.sink.names.update(eval_loss="val loss", eval_train_loss="train loss")
            self.sink.emit(lineno, whole(m.group(1)), {"eval_train_loss": parse_number(m.group(2)),
                                                     "eval_loss": parse_number(m.group(3))})
            return None
        return self.classify_noise(line)


class NanoGPT(Format):
    """--format nanogpt: 'iter N: loss X, time Yms' and 'step N: train loss X, val loss Y'."""
    name = "nanogpt"
    rows = "line_columns:nanogpt_rows"  # column-wise for large files
    title = "nanoGPT train.py stdout"
    example = "iter 425: loss nan, time 1431.27ms, mfu 0.01%"

    def sniff(self, lines: list[str]) -> int:
        return count_matching((NANO_ITER, NANO_EVAL), lines)

    def parser(self, sink: Sink) -> LineParser:
        return _NanoParser(sink)



# --- modded-nanogpt and llm.c ----------------------------------------------------------------
# (each pair taken whole: '(?:\w+:\S+\s*)+' split a token 'a:b:c…' into pairs every way before
# refusing the line, exponential: a damaged line with 'a:a' 22 times took 21 s)
MODDED = re.compile(r"^step:(\d+)/(\d+) ((?:\w++:\S++\s*+)+)$")


MODDED_PAIR = re.compile(r"(\w+):(\S+)")


LLMC = re.compile(rf"^s:(\d+) (trl|tel):({WHOLE_NUMERIC})\s*$")


LLMC_NEW = re.compile(
    rf"^step\s+(\d+)/(\d+) \| (?:train )?loss ({WHOLE_NUMERIC}) \| norm ({WHOLE_NUMERIC}) "
    rf"\| lr ({WHOLE_NUMBER})(?: \| ({WHOLE_NUMBER}) ms)?(?: \| ({WHOLE_NUMBER})% bf16 MFU)?"
    rf"(?: \| ({WHOLE_NUMBER}) tok/s)?")


class _ModdedParser(RegexLineParser):
    noise = COMMON_NOISE

    def feed(self, lineno: int, line: str) -> str | None:
        m = MODDED.match(line.strip())
        if m:
            pairs = MODDED_PAIR.findall(m.group(3))
            metrics: dict[str, float] = {}
            for key, raw in pairs:
                v = parse_number(raw)
                if v is None:
                    continue
                name = unreserved({"train_loss": "loss", "val_loss": "eval_loss",
                                   "train_time": "train_time_s", "step_avg": "step_avg_s"}.get(key, key))
                metrics[name] = v
                self.sink.names.setdefault(name, key)
            if not self.sink.emit(lineno, whole(m.group(1)), metrics):
                return "no training metric"
            return None
        m = LLMC.match(line.strip())
        if m:
            name = "loss" if m.group(2) == "trl" else "eval_loss"
            self.sink.names.setdefault(name, m.group(2))
            self.sink.emit(lineno, whole(m.group(1)), {name: parse_number(m.group(3))})
            return None
        m = LLMC_NEW.match(line.strip())
        if m:
            new: dict[str, float | None] = {"loss": parse_number(m.group(3)),
                                            "grad_norm": parse_number(m.group(4)),
                                            "lr": float(m.group(5))}
            if m.group(6):
                new["step_time_s"] = float(m.group(6)) / 1000
            if m.group(8):
                new["tokens_per_s"] = float(m.group(8))
            self.sink.emit(lineno, whole(m.group(1)), new)
            return None
        return self.classify_noise(line)


class ModdedNanoGPT(Format):
    """--format modded-nanogpt: 'step:N/T train_loss:X ...' and llm.c's 's:N trl:X' lines."""
    name = "modded-nanogpt"
    rows = "line_columns:modded_rows"  # column-wise for large files
    title = "modded-nanogpt / llm.c main.log (step:N/T train_loss:X, s:N trl:X)"
    example = "step:14257/19073 train_loss:6.2790 train_time:5586124ms step_avg:391.87ms"

    def sniff(self, lines: list[str]) -> int:
        return count_matching((MODDED, LLMC, LLMC_NEW), [x.strip() for x in lines])

    def parser(self, sink: Sink) -> LineParser:
        return _ModdedParser(sink)
