"""Stable-Baselines3's console tables (and OpenAI baselines', whose logger it grew from): each dump is
a block between dashed lines, one '| key | value |' row per metric; SB3 groups them under a
'| train/ |  |' row, its keys indented by three spaces:

    -----------------------------------------
    | rollout/                |             |
    |    ep_rew_mean          | -1.19e+03   |
    | time/                   |             |
    |    total_timesteps      | 4096        |
    | train/                  |             |
    |    loss                 | 12.3        |
    |    value_loss           | 36.9        |
    -----------------------------------------

A block is one record ('train/loss' is the loss; 'train/value_loss', 'train/actor_loss',
'train/critic_loss' are losses too, each watched for a NaN); its step is the environment steps so
far ('time/total_timesteps'), else the iterations or updates it counts."""

from __future__ import annotations

import re

from losslens.logs.base import COMMON_NOISE, Format, LineParser, RegexLineParser
from losslens.logs.names import parse_number
from losslens.logs.sink import Sink, step_value

DASHES = re.compile(r"^\s*-{10,}\s*$")
# a row '|    value_loss    | 36.9    |': its indent, key and value (see `row`)
ROW_HEAD = re.compile(r"\s*+\| ( *+)(\S(?:\s*+[^|\s]++)*+)\s*+\| ")
# the keys that count where a dump was made, best first (the tag dropped)
STEP_NAMES = ("total_timesteps", "timesteps", "serial_timesteps", "iterations", "n_updates", "nupdates",
              "episodes")


def row(line: str) -> tuple[str, str, str] | None:
    r"""A table row's indent, key and value, as '^\s*\| ( *)(\S[^|]*?)\s*\| (.*?)\s*\|\s*$'
    matches them, each run of spaces read once: the lazy key and value before '\s*' tried every
    split of a run of spaces (20,000 took 6 s). The value runs to the last '|', which only
    whitespace follows, less the whitespace before it, on one line."""
    m = ROW_HEAD.match(line)
    if m is None:
        return None
    rest = line[m.end():]
    bar = rest.rfind("|")
    if bar < 0 or (rest[bar + 1:] and not rest[bar + 1:].isspace()):
        return None
    value = rest[:bar].rstrip()
    if "\n" in value:
        return None
    return m.group(1), m.group(2), value


def _table_row(line: str) -> bool:
    """A row of such a table: a tag ('| train/ |  |') or a key with a number."""
    m = row(line)
    if m is None:
        return False
    return m[2] == "" and m[1].endswith("/") or parse_number(m[2]) is not None


class _TableParser(RegexLineParser):
    noise = COMMON_NOISE

    def __init__(self, sink: Sink):
        super().__init__(sink)
        self.tag = ""
        self.rows: list[tuple[int, str, str]] = []  # (line, key with its tag, value)

    def finish(self) -> None:
        """Emit the block read so far (the last one, or one cut short by the end of the log)."""
        rows, self.rows, self.tag = self.rows, [], ""
        if not rows:
            return
        by_name = {key.rsplit("/", 1)[-1]: value for _, key, value in rows}
        step = next((s for s in (step_value(by_name[n]) for n in STEP_NAMES if n in by_name)
                     if s is not None), None)
        _, metrics = self.sink.metrics_from_pairs(
            [(k, v) for _, k, v in rows if k.rsplit("/", 1)[-1] not in STEP_NAMES])
        self.sink.emit(rows[0][0], step, metrics)

    def feed(self, lineno: int, line: str) -> str | None:
        if DASHES.match(line):
            self.finish()  # (a dump opens and closes with dashes: the closing ones end the record)
            return None
        m = row(line)
        if m is None:
            self.finish()
            return self.classify_noise(line)
        indent, key, value = m
        if not value and key.endswith("/"):
            self.tag = key
            return None
        name = self.tag + key if indent and self.tag else key
        if parse_number(value) is None:
            return "not a number"
        self.rows.append((lineno, name, value))
        return None


class StableBaselines(Format):
    """--format sb3: Stable-Baselines3 / OpenAI baselines console tables ('| train/loss | 0.5 |')."""
    name = "sb3"
    title = "Stable-Baselines3 / OpenAI baselines console tables ('|    loss | 12.3 |' under '| train/ |')"
    example = "|    value_loss           | 36.9        |"

    def sniff(self, lines: list[str]) -> int:
        return sum(1 for x in lines if _table_row(x))

    def parser(self, sink: Sink) -> LineParser:
        return _TableParser(sink)
