"""read_log: any supported log → one canonical frame (train and eval apart) + what was found."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import polars as pl

from losslens.errors import FormatError, InputError, UsageError
from losslens.logs.base import Format
from losslens.logs.records import Accounting, Sink
from losslens.logs.registry import BY_NAME, FORMATS
from losslens.logs.source import Source, open_source

SNIFF_LINES = 2000
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
    """What ``read_log`` returns: the canonical frames and everything detected on the way."""

    source: str
    format: str
    train: pl.DataFrame
    eval: pl.DataFrame
    lines: Accounting
    segments: tuple[Segment, ...]
    names: dict[str, str] = field(default_factory=dict)  # canonical → original key
    notes: tuple[str, ...] = ()

    @property
    def metrics(self) -> list[str]:
        return [c for c in self.train.columns if c not in META_COLUMNS]

    @property
    def eval_metrics(self) -> list[str]:
        return [c for c in self.eval.columns if c not in META_COLUMNS]


def sniff(lines: list[str], limit: int = SNIFF_LINES) -> tuple[Format | None, dict[str, int]]:
    """The format that reads most of the first ``limit`` non-blank lines, and every score."""
    sample = [x for x in lines if x.strip()][:limit]
    scores = {f.name: f.sniff(sample) for f in FORMATS}
    best = max(FORMATS, key=lambda f: scores[f.name])  # max keeps the first on ties
    return (best if scores[best.name] > 0 else None), scores


def _decode_lines(chunk: bytes) -> list[str]:
    text = chunk.decode("utf-8", errors="replace")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def read_log(path: str | os.PathLike[str], format: str | None = None) -> LogData:
    """Read a training log into canonical frames.

    ``format`` is a name from ``losslens formats`` or None/'auto' to detect it from content.
    Raises InputError / FormatError / UsageError (all LossLensError) on bad input.
    """
    if format not in (None, "auto") and format not in BY_NAME:
        raise UsageError(f"unknown format {format!r} (known: auto, {', '.join(BY_NAME)})")
    src = open_source(path)
    try:
        return _read(src, format)
    finally:
        src.close()


def _read(src: Source, format: str | None) -> LogData:
    if not src.head:
        raise InputError("empty file: no lines to read", source=src.name)
    if src.is_binary:
        at = src.head.index(b"\x00")
        hint = " (UTF-16 text? convert it to UTF-8)" if src.head[:2] in (b"\xff\xfe", b"\xfe\xff") else ""
        raise InputError(f"binary data (NUL byte at offset {at}), not a text log{hint}",
                         source=src.name)
    head_lines = _decode_lines(src.head)
    if format in (None, "auto"):
        fmt, _ = sniff(head_lines[:-1] if len(head_lines) > 1 else head_lines)
        if fmt is None and src.extend_head(SNIFF_DEEP_BYTES):
            # some logs open with thousands of lines of start-up noise: look further once
            deep = _decode_lines(src.head)
            fmt, _ = sniff(deep[:-1] if len(deep) > 1 else deep, limit=len(deep))
        if fmt is None:
            raise FormatError("no known log format recognised (see `losslens formats`, or pass "
                              "--format)", source=src.name)
    else:
        fmt = BY_NAME[format]
    sink, acc = Sink(), Accounting()
    if fmt.whole_file:
        data = src.read_all()
        text = data.decode("utf-8", errors="replace")
        lines = _decode_lines(data)
        acc.total = len(lines)
        fmt.parse_text(text, lines, sink, acc, src.name)
    else:
        _parse_lines(src, fmt, sink, acc)
    return _assemble(src.name, fmt.name, sink, acc)


def _parse_lines(src: Source, fmt: Format, sink: Sink, acc: Accounting) -> None:
    parser = None
    lineno = 0
    for chunk in src.chunks():
        for line in _decode_lines(chunk):
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
            reason = parser.feed(lineno, line)
            if reason is None:
                acc.parsed += 1
            else:
                acc.skip(reason, lineno, line)
    if parser is not None:
        parser.finish()
    acc.total = lineno


def _frame(records: list[dict], frames: list[pl.DataFrame]) -> pl.DataFrame:
    parts = list(frames)
    if records:
        parts.append(pl.from_dicts(records, infer_schema_length=None))
    if not parts:
        return pl.DataFrame(schema={"step": pl.Int64, "line": pl.Int64})
    df = pl.concat(parts, how="diagonal_relaxed") if len(parts) > 1 else parts[0]
    casts = []
    for name, dtype in df.schema.items():
        if name in ("step", "line"):
            casts.append(pl.col(name).cast(pl.Int64))
        elif name == "time":
            continue
        elif isinstance(dtype, pl.List):
            casts.append(pl.col(name).cast(pl.List(pl.Float64)))
        elif dtype == pl.Null or dtype.is_numeric():
            casts.append(pl.col(name).cast(pl.Float64))
    df = df.with_columns(casts).sort("line", maintain_order=True)
    if "time" in df.columns and df["time"].null_count() == df.height:
        df = df.drop("time")
    derived = []
    for name, dtype in df.schema.items():
        if isinstance(dtype, pl.List):
            derived += [pl.col(name).list.min().alias(f"{name}_min"),
                        pl.col(name).list.mean().alias(f"{name}_mean")]
    return df.with_columns(derived) if derived else df


def _fill_steps(df: pl.DataFrame, notes: list[str], what: str) -> pl.DataFrame:
    missing = df["step"].null_count()
    if missing == 0 or df.height == 0:
        return df
    if missing == df.height:
        notes.append(f"no step numbers in the {what} records: steps are the record order (1, 2, …)")
        return df.with_columns(pl.int_range(1, df.height + 1, dtype=pl.Int64).alias("step"))
    notes.append(f"{missing} {what} records without a step number take the step before them")
    return df.with_columns(pl.col("step").forward_fill().fill_null(0))


def _segments(train: pl.DataFrame) -> tuple[pl.DataFrame, tuple[Segment, ...]]:
    if train.height == 0:
        return train.with_columns(pl.lit(0, pl.Int32).alias("segment")), ()
    seg = (pl.col("step").diff().fill_null(0) < 0).cum_sum().cast(pl.Int32)
    train = train.with_columns(seg.alias("segment"))
    table = (train.group_by("segment", maintain_order=True)
             .agg(pl.col("step").first().alias("first"), pl.col("step").last().alias("last"),
                  pl.len().alias("n"), pl.col("line").first().alias("line")))
    segs = tuple(Segment(int(r["segment"]), int(r["first"]), int(r["last"]), int(r["n"]),
                         int(r["line"])) for r in table.iter_rows(named=True))
    return train, segs


def _assemble(source: str, fmt: str, sink: Sink, acc: Accounting) -> LogData:
    notes = list(sink.notes)
    train = _fill_steps(_frame(sink.train, sink.frames), notes, "train")
    evals = _frame(sink.eval, sink.eval_frames)
    if train.height == 0 and evals.height == 0:
        raise FormatError(f"no {fmt} records in {acc.total} lines ({acc.n_skipped} skipped, "
                          f"{acc.blank} blank)", source=source)
    train, segments = _segments(train)
    if evals.height:
        evals = _fill_steps(evals, notes, "eval")
        if train.height:
            # an eval record belongs to the segment of the last train record before it
            evals = evals.sort("line").join_asof(
                train.select("line", "segment").sort("line"), on="line", strategy="backward"
            ).with_columns(pl.col("segment").fill_null(0))
        else:
            evals = evals.with_columns(pl.lit(0, pl.Int32).alias("segment"))
    order = [c for c in META_COLUMNS if c in train.columns]
    train = train.select(order + [c for c in train.columns if c not in META_COLUMNS])
    if len(segments) > 1:
        notes.append(f"the step went backwards {len(segments) - 1} time(s): "
                     f"{len(segments)} segments (restarts), analysed apart")
    return LogData(source=source, format=fmt, train=train, eval=evals, lines=acc,
                   segments=segments, names=dict(sink.names), notes=tuple(notes))
