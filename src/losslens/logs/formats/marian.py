"""Marian NMT's training log (marian-dev ``training/scheduler.h``): a report every ``--disp-freq``
updates,

    Ep. 1 : Up. 1000 : Sen. 123,456 : Cost 5.12345678 * 1,234,567 @ 12,345 after 12,345,678 :
    Time 123.45s : 12345.67 words/s : gNorm 1.2345 : L.r. 3.0000e-04

(one line; the cost's label counts and gNorm / L.r. only with some options; older versions print
'Cost 5.12'), and one line per validator at each validation,
'[valid] Ep. 1 : Up. 5000 : cross-entropy : 123.456 : new best' or
': perplexity : 12.34 : stalled 2 times (last best: 11.2)'. 'Up.' is the update (the step),
'Cost' the training loss as ``--cost-type`` defines it, 'Time' the seconds since the last report
(``--disp-freq`` updates), 'Ep.' the (logical) epoch."""

from __future__ import annotations

import re

from losslens.logs.base import COMMON_NOISE, Format, LineParser, RegexLineParser, count_matching, whole
from losslens.logs.names import WHOLE_NUMERIC, canonical, parse_number
from losslens.logs.sink import Sink

_HEAD = r"Ep\. ([\d.]+) : Up\. (\d+) : "
# (numbers taken whole: see names.WHOLE_NUMBER)
TRAIN = re.compile(rf"{_HEAD}Sen\. [\d,]+ : Cost ({WHOLE_NUMERIC})(?: \* [\d,]+)?(?: @ [\d,]+)?"
                   rf"(?: after [\d,]+)?(?: : Time ({WHOLE_NUMERIC})s)?(?: : ({WHOLE_NUMERIC}) words/s)?"
                   rf"(?: : gNorm ({WHOLE_NUMERIC}))?"
                   rf"(?: : L\.r\. ({WHOLE_NUMERIC}))?\s*$")
VALID = re.compile(rf"{_HEAD}([\w\-]+) : ({WHOLE_NUMERIC}) : (?:new best|stalled \d+ times?)")


class _MarianParser(RegexLineParser):
    noise = ((re.compile(r"\b(?:Seen [\d,]+ samples|Starting (?:data )?epoch \d+"
                         r"|Training (?:started|finished)|Saving (?:model|Adam|training checkpoint))"),
              "Marian's progress message"),
             (re.compile(r"\[(?:marian|memory|data|config|comm|training|valid|scorers?|gpu|logits)\] "),
              "Marian's setup message"),
             # a translation validator's script (Moses' detokenizer) writes to the same stream
             (re.compile(r"^Detokenizer Version |^Language: \w+$|^Tokenizer Version "),
              "a validation script's message"),
             *COMMON_NOISE)

    def feed(self, lineno: int, line: str) -> str | None:
        if (m := TRAIN.search(line)) is not None:
            metrics = {"epoch": parse_number(m.group(1)), "loss": parse_number(m.group(3))}
            for group, name in ((4, "report_time_s"), (5, "tokens_per_s"), (6, "grad_norm"), (7, "lr")):
                if m.group(group) is not None:
                    metrics[name] = parse_number(m.group(group))
            self.sink.names.update(epoch="Ep.", loss="Cost", report_time_s="Time", tokens_per_s="words/s",
                                   grad_norm="gNorm", lr="L.r.")
            self.sink.emit(lineno, whole(m.group(2)), metrics)
            return None
        if "[valid]" in line and (v := VALID.search(line)) is not None:
            name = canonical("valid_" + v.group(3))  # 'cross-entropy' → eval_loss, 'bleu' → eval_bleu
            self.sink.names.setdefault(name, v.group(3))
            if not self.sink.emit(lineno, whole(v.group(2)), {name: parse_number(v.group(4))},
                                  kind="eval"):
                return "no evaluation metric"
            return None
        return self.classify_noise(line)


class Marian(Format):
    """--format marian: Marian NMT's 'Ep. E : Up. U : Sen. S : Cost C : Time T : W words/s' reports."""
    name = "marian"
    title = "Marian NMT training log (train.log / stderr)"
    example = ("[2024-01-01 10:00:00] Ep. 1 : Up. 1000 : Sen. 123,456 : Cost 5.12345678 * 1,234,567 @ 12,345 "
               "after 12,345,678 : Time 123.45s : 12345.67 words/s : gNorm 1.2345 : L.r. 3.0000e-04")

    def sniff(self, lines: list[str]) -> int:
        return count_matching((TRAIN, VALID), lines)

    def parser(self, sink: Sink) -> LineParser:
        return _MarianParser(sink)
