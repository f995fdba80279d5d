"""From records to a LogData: the one public path from a reader's records to the frames.

A reader (a format's ``read``, a run folder, an event file, `watch`'s window) fills a ``Sink``
and an ``Accounting``; ``assemble`` turns them into a ``LogData``: records in canonical types
(held compact for large logs, see compact.py), one rank of a torchrun job, steps filled in,
restart segments numbered, each eval record placed in the segment it belongs to.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from losslens.errors import FormatError
from losslens.logs.compact import NARROW_NOTE, normalised
from losslens.logs.sink import Accounting, Sink
from losslens.logs.spill import Spill

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
    (restarts, ranks, buffered stdout); ``lost``: those of them that say the file held more than
    could be read."""

    source: str
    format: str
    train: pl.DataFrame
    eval: pl.DataFrame
    lines: Accounting
    segments: tuple[Segment, ...]
    names: dict[str, str] = field(default_factory=dict)  # canonical → original key
    notes: tuple[str, ...] = ()
    lost: tuple[str, ...] = ()  # what the read could not take (a gzip file cut short, a hole of
    # NUL bytes): among the notes too, and said by `check` on stderr
    lists: tuple[str, ...] = ()  # list columns a large log holds as their min and mean only
    # the non-finite values of the torchrun ranks not analysed (see ``_one_rank``): per rank and
    # metric, {rank, metric, first_step, first_line, last_step, count, values}
    rank_nonfinite: tuple[dict, ...] = ()
    # a large log's columns held in a mapped file (see spill.py): ``release`` after reading them
    spill: Spill | None = field(default=None, compare=False, repr=False)

    def release(self) -> None:
        """Drop the pages of the columns held in the spill file from the process's memory (a
        column read again is read back from the file): a large log's analysis does after each
        series it builds and each detector run."""
        if self.spill is not None:
            self.spill.release()

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


def _one_rank(train: list[pl.DataFrame], evals: list[pl.DataFrame], acc: Accounting,
              notes: list[str], elsewhere: list[dict]) -> tuple[list[pl.DataFrame], list[pl.DataFrame]]:
    """Every rank of a torchrun job printing its own lines: the lowest rank is analysed (ranks
    interleave, so their steps would go back and forth as if the run restarted), the others'
    records are counted as skipped lines; their non-finite values are put in ``elsewhere`` (per
    rank and metric: the analysis makes them findings) and the first gets a note."""
    ranked = [p for p in train if "rank" in p.columns]
    ranks = sorted({int(r) for p in ranked for r in p["rank"].drop_nulls().unique()})
    if len(ranks) > 1:
        keep = ranks[0]
        other = pl.col("rank").is_not_null() & (pl.col("rank") != keep)
        nan_note = None
        for p in ranked + [e for e in evals if "rank" in e.columns]:
            floats = [c for c, t in p.schema.items() if t.is_float() and c != "rank"]
            bad = p.filter(other & pl.any_horizontal([~pl.col(c).is_finite() for c in floats])) \
                if floats else p.clear()
            if bad.height and nan_note is None:
                first = bad.row(0, named=True)
                cols = [c for c in floats if first[c] is not None and not math.isfinite(first[c])]
                nan_note = (f"rank {int(first['rank'])} logged a non-finite {', '.join(cols)} at step "
                            f"{first['step']} (line {first['line']}); rank {keep} is the one analysed")
            elsewhere += _nonfinite_by_rank(bad, floats)
        # each line of another rank once (a line's highest rank names it), in one query
        line_rank = (pl.col("line").cast(pl.Int64), pl.col("rank").cast(pl.Int64))
        dropped = pl.concat([p.filter(other).select(*line_rank) for p in train + evals if "rank" in p.columns]
                            ).group_by("line").agg(pl.col("rank").max()).sort("line")
        if dropped.height:
            first_line, first_rank = dropped.row(0)
            acc.skip(f"another rank's record (rank {keep} analysed)", first_line,
                     f"(a record of rank {first_rank})", count=dropped.height)
        acc.parsed -= dropped.height
        notes.append(f"lines from {len(ranks)} ranks ({', '.join(map(str, ranks))}): rank {keep} "
                     f"analysed, {dropped.height} records of the others skipped")
        if nan_note:
            notes.append(nan_note)
        train = [p.filter(~other) if "rank" in p.columns else p for p in train]
        evals = [p.filter(~other) if "rank" in p.columns else p for p in evals]
    return ([p.drop("rank") if "rank" in p.columns else p for p in train],
            [p.drop("rank") if "rank" in p.columns else p for p in evals])


def _nonfinite_by_rank(bad: pl.DataFrame, floats: list[str]) -> list[dict]:
    """Per rank and float column of ``bad`` (records of ranks not analysed): where it is non-finite."""
    out = []
    for c in floats:
        hit = bad.filter(~pl.col(c).is_finite()).sort("line")
        for (rank,), part in hit.group_by("rank", maintain_order=True):
            v = part[c]
            kinds = [k for k, n in (("NaN", v.is_nan().sum()), ("inf", (v == math.inf).sum()),
                                    ("-inf", (v == -math.inf).sum())) if n]
            out.append({"rank": int(rank), "metric": c, "first_step": part["step"][0],  # type: ignore[call-overload]
                        "first_line": int(part["line"][0]), "last_step": part["step"][-1],
                        "count": part.height, "values": kinds})
    return out


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
        if what == "train" and _one_record_an_epoch(df):
            # 'Epoch 005 loss 9.52 | train 2.2s': the epoch is the step (a run that starts again
            # at epoch 1 is a restart, as with steps), as Keras's epoch records have it
            notes.append("no step numbers in the train records: steps are their epochs (a record an epoch)")
            return df.with_columns(pl.col("epoch").cast(pl.Int64).alias("step"))
        notes.append(f"no step numbers in the {what} records: steps are the record order (1, 2, …)")
        return df.with_columns(pl.int_range(1, df.height + 1, dtype=pl.Int64).alias("step"))
    notes.append(f"{missing} {what} records without a step number take the step before them")
    return df.with_columns(pl.col("step").forward_fill().fill_null(0))


def _epoch_local(df: pl.DataFrame, notes: list[str]) -> tuple[pl.DataFrame, pl.DataFrame] | None:
    """Steps counted within each epoch ('Epoch [2/5], Step [100/600]', 'Epoch: [ 1/200] Iter [
    10/1487]', 'epoch:7 iter:0/18' printed once an epoch), made to count across the run: (the
    frame, each record's line and what was added to its step), or None when they already do. They
    do not when the step does not go on (it starts again, or stays) each time the epoch goes up:
    then a record's step is (epoch - E) × L + step, L the number of steps an epoch holds as far as
    the log shows (the largest step printed, one more when they count from 0), E 0 when the epochs
    count from 0, else 1. A step that goes back with no new epoch is a restart, as always. The
    steps are left as they are when some new epoch does not start them again (they count the run),
    or one starts further on than twice the usual gap between records (a resume, not an epoch's
    first record)."""
    if "epoch" not in df.columns or df.height < 3 or df["epoch"].null_count() or df["step"].null_count():
        return None
    if rising(df["step"]):
        return None  # they go on at every record
    step = df["step"].to_numpy()
    back = np.flatnonzero(step[1:] <= step[:-1]) + 1
    if not len(back):
        return None
    epoch = df["epoch"].to_numpy().astype(np.float64)
    if not (np.isfinite(epoch).all() and (epoch == np.floor(epoch)).all()) or np.abs(epoch).max() > 2.0**31:
        return None
    up = epoch[back] > epoch[back - 1]
    if not up.any() or int((epoch[1:] > epoch[:-1]).sum()) != int(up.sum()):
        return None  # the step goes on across some new epoch: it counts the run
    gaps = np.diff(step)
    gap = float(np.median(gaps[gaps > 0])) if (gaps > 0).any() else 1.0
    if (step[back[up]] > 2 * gap + 1).any():
        return None  # a step that starts again further on than a record's gap: a resume
    from_zero = int(step.min()) == 0
    length = int(step.max()) + from_zero
    # not the first epoch seen: `watch`'s windows then number a 1-based log's steps as the whole
    # log does
    first = float(min(epoch.min(), 1.0))
    offset = ((epoch - first) * length).astype(np.int64)
    if length <= 0 or np.abs(offset).max() > 2**62:
        return None
    notes.append(f"steps count within each epoch (they start again as the epoch goes up, "
                 f"{int(up.sum())} time(s)): a record's step is (epoch - {first:g}) × {length:,} + "
                 f"its step, {length:,} being the largest step printed"
                 + (" plus one (they count from 0)" if from_zero else ""))
    added = pl.Series("added", offset)
    return (df.with_columns((pl.col("step") + added).alias("step")),
            pl.DataFrame([df["line"], added]))


def rising(steps: pl.Series) -> bool:
    """Each step above the one before it: checked chunk by chunk on the column's own values (a
    large log's steps are not differenced into another array of their length)."""
    last = None
    for chunk in steps.get_chunks():
        a = chunk.to_numpy()
        if not len(a):
            continue
        if (last is not None and not a[0] > last) or not (a[1:] > a[:-1]).all():
            return False
        last = a[-1]
    return True


def _one_record_an_epoch(df: pl.DataFrame) -> bool:
    """Every record holds a whole epoch number, each one other than the record's before it (but
    for one in twenty at most: a run that stopped after its first epoch and started again)."""
    if "epoch" not in df.columns or df.height < 2:
        return False
    e = df["epoch"]
    if e.null_count() or not bool((e.is_finite() & (e == e.floor()) & (e.abs() < 2.0**53)).all()):
        return False
    return int((e.diff().drop_nulls() == 0).sum()) * 20 <= df.height - 1


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


def assemble(source: str, fmt: str, sink: Sink, acc: Accounting) -> LogData:
    """The sink's records (and accounting) as a LogData: canonical types, one rank of a
    torchrun job, steps filled in, restart segments, eval records placed in their segment. Every
    reader ends here, and so do `watch`'s windows."""
    notes = list(sink.lost) + list(sink.notes) + sink.mixed_notes()
    elsewhere: list[dict] = []
    train_parts, eval_parts = _one_rank(_parts(sink, False), _parts(sink, True), acc, notes, elsewhere)
    if sink.compactors is not None:
        notes.append(NARROW_NOTE)
    if not train_parts and not eval_parts:
        raise FormatError(f"no {fmt} records in {acc.total} lines ({acc.n_skipped} skipped, "
                          f"{acc.blank} blank)", source=source)
    train = _frame(train_parts)
    _drop_pages(sink)  # (each pass over a large log's held columns: the pages it read, dropped)
    if train["step"].null_count():
        train_parts = [_fill_steps(train, notes, "train")]
    elif len(train_parts) > 1 and train.n_chunks() == 1:  # re-sorted: use the sorted frame
        train_parts = [train]
    added = None
    if "epoch" in train.columns and (local := _epoch_local(_frame(train_parts), notes)) is not None:
        train_parts, added = [local[0]], local[1]
    _drop_pages(sink)
    train_parts, segments = _segments(train_parts) if train.height else ([], ())
    _drop_pages(sink)
    train = _frame([_ordered(p) for p in train_parts]) if train_parts else \
        train.with_columns(pl.lit(0, pl.Int32).alias("segment"))
    evals = _frame(eval_parts)
    if evals.height:
        if added is not None:  # an eval record's own step was counted within its epoch too
            evals = evals.sort("line").join_asof(added.sort("line"), on="line", strategy="backward")
            evals = evals.with_columns(pl.col("step") + pl.col("added").fill_null(0)).drop("added")
        if evals["step"].null_count() and train.height:
            # 'Epoch [3/5] val_loss: 0.41': an eval record with no step of its own is at the step of
            # the last train record before it
            evals = evals.sort("line").join_asof(
                train.select("line", pl.col("step").alias("train_step")).sort("line"), on="line",
                strategy="backward").with_columns(pl.col("step").fill_null(pl.col("train_step"))).drop("train_step")
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
    evals = _ordered(evals)
    if sink.spill is not None:  # the columns made here (segments; a re-sorted frame's) too, and
        # each column whole (read without a copy); the pages the passes above read, dropped first
        sink.spill.release()
        train, evals = sink.spill.hold(train, whole=True), sink.spill.hold(evals, whole=True)
        sink.spill.close()
        sink.spill.release()
    return LogData(source=source, format=fmt, train=train, eval=evals, lines=acc,
                   segments=segments, names=dict(sink.names), notes=tuple(notes), lost=tuple(sink.lost),
                   lists=tuple(sink.compactors[0].lists) if sink.compactors else (),
                   rank_nonfinite=tuple(elsewhere), spill=sink.spill)


def _drop_pages(sink: Sink) -> None:
    if sink.spill is not None:
        sink.spill.release()


def _ordered(df: pl.DataFrame) -> pl.DataFrame:
    order = [c for c in META_COLUMNS if c in df.columns]
    return df.select(order + [c for c in df.columns if c not in META_COLUMNS])


def from_arrays(steps: np.ndarray, source: str = "<arrays>", *, evals: dict[str, np.ndarray] | None = None,
                **metrics: np.ndarray | list[float | None]) -> LogData:
    """A LogData built from arrays (one record per step): for synthetic curves and notebooks.
    A metric given as a list may hold None where a record lacks it (NaN is a logged NaN).
    ``evals``: eval records, their "step" and their metrics ('eval_loss', ...), numbered as
    lines after the training records."""
    n = len(steps)
    cols: dict[str, object] = {"step": np.asarray(steps, dtype=np.int64),
                               "line": np.arange(1, n + 1, dtype=np.int64)}
    cols.update({k: pl.Series(k, v, dtype=pl.Float64, strict=False) if isinstance(v, list)
                 else np.asarray(v, dtype=np.float64) for k, v in metrics.items()})
    sink = Sink(frames=[pl.DataFrame(cols)], names={k: k for k in metrics})
    if evals:
        m = len(evals["step"])
        sink.eval_frames.append(pl.DataFrame({
            "step": np.asarray(evals["step"], dtype=np.int64),
            "line": np.arange(n + 1, n + m + 1, dtype=np.int64),
            **{k: np.asarray(v, dtype=np.float64) for k, v in evals.items() if k != "step"}}))
        sink.names.update({k: k for k in evals if k != "step"})
        n += m
    return assemble(source, "arrays", sink, Accounting(total=n, parsed=n))
