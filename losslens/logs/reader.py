"""read_log: any supported log → one canonical frame (train and eval apart) + what was found."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from losslens.errors import FormatError, InputError
from losslens.logs import kv_fast
from losslens.logs.base import RANK_PREFIX, Format, LineParser, strip_prefixes
from losslens.logs.compact import NARROW_NOTE, normalised
from losslens.logs.records import Accounting, Sink, feed_line
from losslens.logs.registry import BY_NAME, FORMATS, check_format
from losslens.logs.source import Source, decode_lines, open_source

SNIFF_LINES = 400
SNIFF_DEEP_BYTES = 8 << 20
META_COLUMNS = ("step", "line", "time", "segment")


@dataclass(frozen=True)
class Segment:
    """A stretch of records whose step never goes backwards (a restart starts the next one)."""

    index: int
    first_step: int
    last_step: int
    records: int
    first_line: int


@dataclass(frozen=True)
class LogData:
    """What ``read_log`` returns: the canonical frames and everything detected on the way.

    ``train`` / ``eval``: one row per record, columns ``step``, ``line`` (where the record was
    read), ``time`` (when logged, if the log says), ``segment`` (restart segment) and one column
    per metric under its canonical name (``loss``, ``lr``, ``grad_norm``…; ``names`` maps each back
    to the log's own key). ``lines``: the accounting (parsed + skipped by reason + blank == total).
    ``segments``: runs split where the step went backwards. ``notes``: what the reader noticed
    (restarts, ranks, buffered stdout)."""

    source: str
    format: str
    train: pl.DataFrame
    eval: pl.DataFrame
    lines: Accounting
    segments: tuple[Segment, ...]
    names: dict[str, str] = field(default_factory=dict)  # canonical → original key
    notes: tuple[str, ...] = ()
    lists: tuple[str, ...] = ()  # list columns a large log holds as their min and mean only

    @property
    def metrics(self) -> list[str]:
        """Canonical metrics of the train records (derived list min/mean columns left out; a
        list column held as those alone is named in their place)."""
        lists = [c for c, t in self.train.schema.items() if isinstance(t, pl.List)]
        derived = {f"{c}_{s}": c for c in lists + list(self.lists) for s in ("min", "mean")}
        out = [derived.get(c, c) for c in self.train.columns if c not in META_COLUMNS
               and (c not in derived or derived[c] in self.lists)]
        return list(dict.fromkeys(out))

    @property
    def eval_metrics(self) -> list[str]:
        return [c for c in self.eval.columns if c not in META_COLUMNS]


def sniff(lines: list[str], limit: int = SNIFF_LINES) -> tuple[Format | None, dict[str, int]]:
    """The format that reads most of the first ``limit`` non-blank lines, and every score."""
    raw, stripped = _samples(lines, limit)
    # a format may know the prefixes itself (fairseq's 'time | INFO | fairseq.trainer |'): the
    # better of its score on the lines as they are and without the capture's prefixes
    scores = {f.name: max(f.sniff(raw), f.sniff(stripped) if stripped != raw else 0) for f in FORMATS}
    best = max(FORMATS, key=lambda f: scores[f.name])  # max keeps the first on ties
    if best.generic:
        specific = max((f for f in FORMATS if not f.generic), key=lambda f: scores[f.name])
        if scores[specific.name] > 0 and 4 * scores[specific.name] >= scores[best.name]:
            best = specific
    return (best if scores[best.name] > 0 else None), scores


def _samples(lines: list[str], limit: int = SNIFF_LINES) -> tuple[list[str], list[str]]:
    """The first ``limit`` non-blank lines without rank prefixes: as they are, and also without
    the prefixes a capture put before them (see ``strip_prefixes``)."""
    raw = [RANK_PREFIX.sub("", x, count=1) for x in lines if x.strip()][:limit]
    return raw, [RANK_PREFIX.sub("", strip_prefixes(x)[0], count=1) for x in raw]


def strips(fmt: Format, lines: list[str]) -> bool:
    """Whether ``fmt`` reads ``lines`` better without the capture's prefixes (then every line is
    fed to it without them)."""
    raw, stripped = _samples(lines)
    return stripped != raw and fmt.sniff(stripped) > fmt.sniff(raw)


def read_log(path: str | os.PathLike[str], format: str | None = None) -> LogData:
    """Read a training log into canonical frames.

    ``format`` is a name from ``losslens formats`` or None/'auto' to detect it from content.
    Raises InputError / FormatError / UsageError (all LossLensError) on bad input.
    """
    check_format(format)
    run = _read_run(os.fspath(path), format)
    if run is not None:
        return run
    src = open_source(path)
    try:
        return _read(src, format)
    finally:
        src.close()


def _read_run(path: str, format: str | None) -> LogData | None:
    """Folders (MLflow runs, W&B offline runs) and TensorBoard event files; None for the rest."""
    from pathlib import Path

    from losslens.logs import runs

    p = Path(path)
    sink, acc = Sink(), Accounting()
    if path != "-" and p.is_dir():
        if runs.is_mlflow_run(p):
            runs.read_mlflow_run(p, sink, acc)
            return _assemble(path, "mlflow", sink, acc)
        offline = runs.wandb_offline(p)
        if offline is not None and not offline.endswith(".jsonl"):
            raise InputError(offline, source=path)
        if offline is not None:
            return read_log(offline, format)
        raise InputError("is a directory: `losslens analyze DIR` or `check DIR` read the logs inside",
                         source=path)
    if path != "-" and p.is_file() and (format == "tensorboard" or (format in (None, "auto")
                                                                     and runs.is_event_file(path))):
        runs.read_event_file(path, sink, acc)
        return _assemble(path, "tensorboard", sink, acc)
    return None


def _read(src: Source, format: str | None) -> LogData:
    if not src.head:
        raise InputError("empty file: no lines to read", source=src.name)
    if src.is_binary:
        at = src.head.index(b"\x00")
        hint = " (UTF-16 text? convert it to UTF-8)" if src.head[:2] in (b"\xff\xfe", b"\xfe\xff") else ""
        raise InputError(f"binary data (NUL byte at offset {at}), not a text log{hint}",
                         source=src.name)
    head_lines = decode_lines(src.head)
    if format in (None, "auto"):
        # the head's last line may be cut short, unless the head ends at a newline
        cut = len(head_lines) > 1 and not src.head.endswith(b"\n")
        whole = head_lines[:-1] if cut else head_lines
        fmt, _ = sniff(whole)
        if fmt is None:  # a long preamble: look at the whole head, then further once
            fmt, _ = sniff(whole, limit=len(whole))
        if fmt is None and src.extend_head(SNIFF_DEEP_BYTES):
            # some logs open with thousands of lines of start-up noise: look further once
            deep = decode_lines(src.head)
            fmt, _ = sniff(deep[:-1] if len(deep) > 1 else deep, limit=len(deep))
        if fmt is None:
            raise FormatError("no known log format recognised (see `losslens formats`, or pass "
                              "--format)", source=src.name)
    else:
        fmt = BY_NAME[format]
    sink, acc = Sink(source_name=os.path.basename(src.name)), Accounting()
    strip = not fmt.whole_file and strips(fmt, head_lines)
    if fmt.whole_file:
        data = src.read_all()
        text = data.decode("utf-8", errors="replace")
        lines = decode_lines(data)
        del data  # the text and its lines are what the format reads
        acc.total = len(lines)
        fmt.parse_text(text, lines, sink, acc, src.name)
    elif fmt.name == "kv" and not strip and not any(RANK_PREFIX.match(x) for x in head_lines[:SNIFF_LINES]):
        _parse_kv_fast(src, fmt, sink, acc)  # (per-rank lines go per line: their rank is kept)
    else:
        _parse_lines(src, fmt, sink, acc, strip)
    return _assemble(src.name, fmt.name, sink, acc)


def _parse_kv_fast(src: Source, fmt: Format, sink: Sink, acc: Accounting) -> None:
    """key=value logs, vectorised chunk by chunk (see kv_fast); odd lines go per line."""
    parser = fmt.parser(sink)
    tpls: list[kv_fast.Template] | None = None
    for chunk in src.chunks():
        if tpls is None:
            sample = decode_lines(chunk[: 1 << 20])[: kv_fast.SAMPLE_LINES]
            tpls = kv_fast.templates(sample)
        kv_fast.parse_chunk(chunk, acc.total + 1, tpls, sink, acc, parser)
    parser.finish()


def _parse_lines(src: Source, fmt: Format, sink: Sink, acc: Accounting, strip: bool = False) -> None:
    parser = None
    lineno = 0
    for chunk in src.chunks():
        if not fmt.keeps_records:
            sink.compact()
        for line in decode_lines(chunk):
            lineno += 1
            if line.endswith("\r"):
                line = line.rstrip("\r")
            if not line.strip():
                acc.blank += 1
                continue
            if "\x00" in line:
                acc.skip("binary data", lineno, line)
                continue
            if parser is None:
                maker = getattr(fmt, "parser_for", None)
                parser = maker(sink, line) if maker else fmt.parser(sink)
            reason = feed_ranked(parser, sink, lineno, line, strip)
            if reason is None:
                acc.parsed += 1
            else:
                acc.skip(reason, lineno, line)
    if parser is not None:
        parser.finish()
    acc.total = lineno


def feed_ranked(parser: LineParser, sink: Sink, lineno: int, line: str, strip: bool = False) -> str | None:
    """Feed one line to ``parser``. With ``strip`` (see ``strips``), the prefixes a capture put
    before it (a timestamp, a logging level, a '> ' quote: see ``strip_prefixes``) are cut off,
    their time kept on the records the line completes; a torchrun rank prefix ('[rank3]: ') is
    cut off too and those records are tagged with that rank (see ``_one_rank``)."""
    rest, when = strip_prefixes(line) if strip else (line, None)
    m = RANK_PREFIX.match(rest) if "]:" in rest[:32] else None
    if m is None and rest is line:
        return feed_line(parser, lineno, line)
    n_train, n_eval = len(sink.train), len(sink.eval)
    reason = feed_line(parser, lineno, rest[m.end():] if m else rest)
    for rec in sink.train[n_train:] + sink.eval[n_eval:]:
        if m:
            rec["rank"] = int(m.group(1))
        if when is not None and rec.get("time") is None:
            rec["time"] = when
    return reason


def _one_rank(train: list[pl.DataFrame], evals: list[pl.DataFrame], acc: Accounting,
              notes: list[str]) -> tuple[list[pl.DataFrame], list[pl.DataFrame]]:
    """Every rank of a torchrun job printing its own lines: the lowest rank is analysed (ranks
    interleave, so their steps would go back and forth as if the run restarted), the others'
    records are counted as skipped lines, and a non-finite value among them gets a note."""
    ranked = [p for p in train if "rank" in p.columns]
    ranks = sorted({int(r) for p in ranked for r in p["rank"].drop_nulls().unique()})
    if len(ranks) > 1:
        keep = ranks[0]
        other = pl.col("rank").is_not_null() & (pl.col("rank") != keep)
        nan_note = None
        for p in ranked:
            floats = [c for c, t in p.schema.items() if t.is_float() and c != "rank"]
            bad = p.filter(other & pl.any_horizontal([~pl.col(c).is_finite() for c in floats])) \
                if floats else p.clear()
            if bad.height:
                first = bad.row(0, named=True)
                cols = [c for c in floats if first[c] is not None and not math.isfinite(first[c])]
                nan_note = (f"rank {int(first['rank'])} logged a non-finite {', '.join(cols)} at step "
                            f"{first['step']} (line {first['line']}); rank {keep} is the one analysed")
                break
        dropped = dict(sorted((int(ln), int(r)) for p in train + evals if "rank" in p.columns
                              for ln, r in p.filter(other).select("line", "rank").iter_rows()))
        reason = f"another rank's record (rank {keep} analysed)"
        for ln, r in dropped.items():
            acc.skip(reason, ln, f"(a record of rank {r})")
        acc.parsed -= len(dropped)
        notes.append(f"lines from {len(ranks)} ranks ({', '.join(map(str, ranks))}): rank {keep} "
                     f"analysed, {len(dropped)} records of the others skipped")
        if nan_note:
            notes.append(nan_note)
        train = [p.filter(~other) if "rank" in p.columns else p for p in train]
        evals = [p.filter(~other) if "rank" in p.columns else p for p in evals]
    return ([p.drop("rank") if "rank" in p.columns else p for p in train],
            [p.drop("rank") if "rank" in p.columns else p for p in evals])


def _parts(sink: Sink, evals: bool) -> list[pl.DataFrame]:
    """The record frames in canonical types, with list columns' derived min and mean (held
    compact when the log is large: see compact.py)."""
    records = sink.eval if evals else sink.train
    frames = sink.eval_frames if evals else sink.frames
    if sink.compactors is None:  # frames a caller put in the sink itself are normalised here
        frames = [normalised(f) for f in frames]
    parts = [f for f in frames if f.height]
    if records:
        last = normalised(pl.from_dicts(records, infer_schema_length=None))
        if sink.compactors is not None:
            last = sink.compactors[1 if evals else 0].frame(last, parts)
        parts.append(last)
    return parts


def _frame(parts: list[pl.DataFrame]) -> pl.DataFrame:
    """One frame in line order. Parts are kept as chunks (no copy of a large log's columns)."""
    if not parts:
        return pl.DataFrame(schema={"step": pl.Int64, "line": pl.Int64})
    if len(parts) == 1:
        df = parts[0]
    elif all(p.schema == parts[0].schema for p in parts):
        df = pl.concat(parts, how="vertical", rechunk=False)
    else:
        df = pl.concat(parts, how="diagonal_relaxed", rechunk=False)
    if not df["line"].is_sorted():
        df = df.sort("line", maintain_order=True).rechunk()
    if "time" in df.columns and df["time"].null_count() == df.height:
        df = df.drop("time")
    return df


def _fill_steps(df: pl.DataFrame, notes: list[str], what: str) -> pl.DataFrame:
    missing = df["step"].null_count()
    if missing == 0 or df.height == 0:
        return df
    if missing == df.height:
        notes.append(f"no step numbers in the {what} records: steps are the record order (1, 2, …)")
        return df.with_columns(pl.int_range(1, df.height + 1, dtype=pl.Int64).alias("step"))
    notes.append(f"{missing} {what} records without a step number take the step before them")
    return df.with_columns(pl.col("step").forward_fill().fill_null(0))


def _segments(parts: list[pl.DataFrame]) -> tuple[list[pl.DataFrame], tuple[Segment, ...]]:
    """Number the segments (a step that goes backwards starts one), part by part so that a
    large log's columns are never copied (nor its steps gathered in one array)."""
    out: list[pl.DataFrame] = []
    starts: list[tuple[int, int, int]] = []  # (first record, first step, first line)
    lasts: list[int] = []  # the last step of each segment that is over
    prev: int | None = None
    offset = seg = 0
    for part in parts:
        steps = part["step"].to_numpy()
        if not len(steps):
            out.append(part.with_columns(pl.lit(seg, pl.Int32).alias("segment")))
            continue
        back = np.zeros(len(steps), dtype=bool)
        back[0] = prev is None or steps[0] < prev  # the log's first record starts segment 0
        back[1:] = steps[1:] < steps[:-1]
        for i in np.flatnonzero(back):
            if starts:
                lasts.append(int(steps[i - 1]) if i else prev)  # type: ignore[arg-type]
            starts.append((offset + int(i), int(steps[i]), int(part["line"][int(i)])))
        ids = np.cumsum(back, dtype=np.int32) + np.int32(seg - (prev is None))
        out.append(part.with_columns(pl.Series("segment", ids)))
        prev, seg, offset = int(steps[-1]), int(ids[-1]), offset + len(steps)
    if prev is not None:
        lasts.append(prev)
    ends = [a for a, _, _ in starts[1:]] + [offset]
    segs = tuple(Segment(i, first, last, end - a, line) for i, ((a, first, line), last, end)
                 in enumerate(zip(starts, lasts, ends, strict=True)))
    return out, segs


def _assemble(source: str, fmt: str, sink: Sink, acc: Accounting) -> LogData:
    notes = list(sink.notes)
    train_parts, eval_parts = _one_rank(_parts(sink, False), _parts(sink, True), acc, notes)
    if sink.compactors is not None:
        notes.append(NARROW_NOTE)
    if not train_parts and not eval_parts:
        raise FormatError(f"no {fmt} records in {acc.total} lines ({acc.n_skipped} skipped, "
                          f"{acc.blank} blank)", source=source)
    train = _frame(train_parts)
    if train["step"].null_count():
        train_parts = [_fill_steps(train, notes, "train")]
    elif len(train_parts) > 1 and train.n_chunks() == 1:  # re-sorted: use the sorted frame
        train_parts = [train]
    train_parts, segments = _segments(train_parts) if train.height else ([], ())
    train = _frame([_ordered(p) for p in train_parts]) if train_parts else \
        train.with_columns(pl.lit(0, pl.Int32).alias("segment"))
    evals = _frame(eval_parts)
    if evals.height:
        evals = _fill_steps(evals, notes, "eval")
        if train.height:
            # an eval record belongs to the segment of the last train record before it
            evals = evals.sort("line").join_asof(
                train.select("line", "segment").sort("line"), on="line", strategy="backward"
            ).with_columns(pl.col("segment").fill_null(0))
        else:
            evals = evals.with_columns(pl.lit(0, pl.Int32).alias("segment"))
    if len(segments) > 1:
        notes.append(f"the step went backwards {len(segments) - 1} time(s): "
                     f"{len(segments)} segments (restarts), analysed apart")
    return LogData(source=source, format=fmt, train=train, eval=_ordered(evals), lines=acc,
                   segments=segments, names=dict(sink.names), notes=tuple(notes),
                   lists=tuple(sink.compactors[0].lists) if sink.compactors else ())


def _ordered(df: pl.DataFrame) -> pl.DataFrame:
    order = [c for c in META_COLUMNS if c in df.columns]
    return df.select(order + [c for c in df.columns if c not in META_COLUMNS])


def from_arrays(steps: np.ndarray, source: str = "<arrays>", **metrics: np.ndarray) -> LogData:
    """A LogData built from arrays (one record per step): for synthetic curves and notebooks."""
    n = len(steps)
    cols: dict[str, object] = {"step": np.asarray(steps, dtype=np.int64),
                               "line": np.arange(1, n + 1, dtype=np.int64)}
    cols.update({k: np.asarray(v, dtype=np.float64) for k, v in metrics.items()})
    acc = Accounting(total=n, parsed=n)
    sink = Sink(frames=[pl.DataFrame(cols)], names={k: k for k in metrics})
    return _assemble(source, "arrays", sink, acc)
