"""The key=value format's patterns, shared by its line parser (``kv``) and its column-wise
reader (``kv.columns``)."""

from __future__ import annotations

import re

from losslens.logs.names import WHOLE_NUMBER

# 'key=value', and 'key = value' with one space on each side (Python's print(f"{k} = {v}")); a phase
# word before a loss or an accuracy is part of its key (OpenAI fine-tuning's events: 'Step 100/1000:
# training loss=0.21, validation loss=0.33, full validation loss=0.30')
KV = re.compile(r"(?<![\w/.\-])((?:(?i:full )?(?i:training|train|validation|valid|val|eval|test) "
                r"(?=(?i:loss|acc|accuracy)[ =~]))?[A-Za-z_][\w/.\-]*)(?: ?([=~]) ?)"
                r"(\[[^\]]*\]|[^\s|,;\[\]()=]+)")


TOKRATE = re.compile(rf"\(\s*+({WHOLE_NUMBER})\s*([KMG]?)tok/s\s*\)")  # (`columnar` for polars)


TOKRATE_SCALE = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9}


def kv_pairs(line: str) -> list[tuple[str, str]]:
    """The (key, value) pairs of a key=value line."""
    return [(k, v) for k, _, v in KV.findall(line)]


# a tqdm bar's count: '450/1000 [02:15<02:45, 3.33it/s, loss=2.31]'
# (a count starts where a run of digits does, or where the last match's '[' and digit end: the
# pattern searched from each digit of a long run, quadratic; a later digit of a run ends it where
# its first does, and fails where the first does)
BAR_COUNT = re.compile(r"(?:(?<!\d)|(?<=\[\d))(\d++)/(\d++) \[\d")
# ESPnet2's reporter: '3epoch:train:501-600batch: iter_time=1.2e-04, loss=34.6, ...' (the batches
# counted within the epoch), and '3epoch results: [train] loss=33.2, ..., [valid] loss=28.2, ...'
ESPNET_BATCH = re.compile(r"\b(\d+)epoch:(\w+):\d+-(\d+)batch: ")
ESPNET_RESULTS = re.compile(r"\b(\d+)epoch results: ")
ESPNET_SECTION = re.compile(r"\[(\w+)\] ")
