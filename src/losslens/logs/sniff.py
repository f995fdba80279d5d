"""Which format a log's lines are: each format scores the first non-blank lines it reads (as they
are, and without the prefixes a capture put before them), the best wins (``sniff``), read further
where the first lines say little (``choose``); and whether the chosen format reads the lines
better without those prefixes (``strips``). ``read_log`` and ``watch`` choose by these same
rules (see ``stream.LineStream``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import islice

from losslens.logs import registry
from losslens.logs.base import LONG_LINE, RANK_PREFIX, Format, strip_prefixes
from losslens.logs.names import unwrapped

SNIFF_LINES = 400


def sniff(lines: list[str], limit: int = SNIFF_LINES) -> tuple[Format | None, dict[str, int]]:
    """The format that reads most of the first ``limit`` non-blank lines, and the scores of the
    formats tried: in registry order, up to the first specific format that reads every line (no
    later one can win: ties keep the first, and a generic one yields to it)."""
    return _sniff(Samples.of(lines, limit))


@dataclass
class Samples:
    """The first ``limit`` non-blank lines without rank prefixes: as they are (``raw``), and also
    without the prefixes a capture put before them (``stripped``, see ``strip_prefixes``); each
    format's score on either is counted once (sniffing, then ``strips``, ask the same)."""
    raw: list[str]
    stripped: list[str]
    timed: int = 0  # lines whose prefixes hold a capture's time
    scores: dict[tuple[str, bool], int] = field(default_factory=dict)

    @classmethod
    def of(cls, lines: list[str], limit: int = SNIFF_LINES) -> Samples:
        raw = [x if len(x) >= LONG_LINE else unwrapped(RANK_PREFIX.sub("", x, count=1))
               for x in islice((x for x in lines if x.strip()), limit)]
        cut = [(x, None) if len(x) >= LONG_LINE else strip_prefixes(x) for x in raw]
        return cls(raw, [RANK_PREFIX.sub("", rest, count=1) for rest, _ in cut],
                   sum(when is not None for _, when in cut))

    def score(self, fmt: Format, stripped: bool = False) -> int:
        """``fmt``'s sniff score on the lines as they are, or without a capture's prefixes; a
        line longer than any of its records is not shown to it (see ``base.LONG_LINE``)."""
        stripped = stripped and self.stripped != self.raw
        key = (fmt.name, stripped)
        if key not in self.scores:
            lines = self.stripped if stripped else self.raw
            if not fmt.long_lines and any(len(x) >= LONG_LINE for x in lines):
                lines = [x for x in lines if len(x) < LONG_LINE]
            self.scores[key] = fmt.sniff(lines)
        return self.scores[key]


def _score(samples: Samples, fmt: Format) -> int:
    """``fmt``'s sniff score: a format may know the prefixes itself (fairseq's 'time | INFO |
    fairseq.trainer |'), so the better of its score on the lines as they are and without the
    capture's prefixes."""
    score = samples.score(fmt)
    return score if score == len(samples.raw) else max(score, samples.score(fmt, stripped=True))


def _sniff(samples: Samples) -> tuple[Format | None, dict[str, int]]:
    """``sniff`` on the sample lines as they are and without a capture's prefixes. A generic
    format is not tried once a specific one has read a quarter of the lines: it could not win
    (the scores returned are those of the formats tried)."""
    scores: dict[str, int] = {}
    tried = []
    n = len(samples.raw)
    most = 0  # the best score of a specific format so far
    for f in registry.FORMATS:  # (read here: a format added to the registry is tried)
        if f.generic and 4 * most >= n:
            continue  # whatever it scores, the best specific format is taken (below): not tried
        score = scores[f.name] = _score(samples, f)
        tried.append(f)
        if not f.generic:
            most = max(most, score)
        if n and score == n and not f.generic:
            break
    best = max(tried, key=lambda f: scores[f.name])  # max keeps the first on ties
    if best.generic:
        specific = max((f for f in tried if not f.generic), key=lambda f: scores[f.name])
        if scores[specific.name] > 0 and 4 * scores[specific.name] >= scores[best.name]:
            best = specific
    return (best if scores[best.name] > 0 else None), scores


def strips(fmt: Format, lines: list[str], limit: int = SNIFF_LINES,
           samples: Samples | None = None) -> bool:
    """Whether ``fmt`` reads ``lines`` (the first ``limit`` non-blank ones: those the format was
    sniffed on) better without the capture's prefixes (then every line is fed to it without them).
    ``samples``: those lines as ``Samples.of`` gives them, when already made."""
    samples = samples or Samples.of(lines, limit)
    if samples.stripped == samples.raw:
        return False
    better, same = samples.score(fmt, stripped=True), samples.score(fmt)
    # a torchrun rank prefix behind the capture's ('2024-05-01T10:00:00Z [rank3]: step=…'): only
    # with the capture's prefixes cut off are the ranks told apart (else their records mix); and
    # the generic 'key: value' reader reads pairs out of a prefix too (glog's 'solver.cpp:228]')
    return better > same or (better == same and (
        fmt.generic or 2 * sum(map(_rank_behind, lines[:limit])) > len(samples.raw)))


def _rank_behind(line: str) -> bool:
    # (a rank prefix ends in ']:', and what the capture's prefixes leave is the line's own end)
    return "]:" in line and RANK_PREFIX.match(line) is None and \
        RANK_PREFIX.match(strip_prefixes(line)[0]) is not None


def choose(lines: list[str], limit: int = SNIFF_LINES) -> tuple[Format | None, Samples, int]:
    """The format of a log that opens with ``lines``, the samples it was chosen on and how many
    lines they span: the first ``limit`` non-blank lines, or all of ``lines`` where those first
    ones read as nothing, or as a format that read fewer than a quarter of them (a long preamble:
    a config's 'eval_steps: 500' before the Trainer's dicts yields to the format that reads more
    of all the lines)."""
    samples = Samples.of(lines, limit)
    fmt, scores = _sniff(samples)
    if fmt is None or (4 * scores[fmt.name] < len(samples.raw) and len(lines) > limit):
        wide = Samples.of(lines, len(lines))
        better, wide_scores = _sniff(wide)
        if fmt is None or (better is not None and wide_scores[better.name] > _score(wide, fmt)):
            return better, wide, len(lines)
    return fmt, samples, limit
