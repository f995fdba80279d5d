"""Labelled detection benchmark: recall per finding kind, localisation and flags, false alarms on
clean synthetic curves and on the clean real logs in ../shared/reallogs.

    python bench/detection.py [--seeds 10]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from losslens import read_log, synth
from losslens.analysis import analyze
from losslens.findings import Severity
from losslens.logs import from_arrays

REAL = Path(__file__).resolve().parents[2] / "shared" / "reallogs"
CLEAN_REAL = ["llmc-old-format-adamw-baseline", "megatron-ds-qwen7b-v100-dynamic-freq",
              "gemma4-26b-deepspeed-swift-sft-stdout", "qwen3-8b-qlora-hf-trainer-nohup",
              "chatglm2-ptuning-trainer-state", "olmo-1b-continued-pretrain-console",
              "vispec-eagle1-draft-keyvalue-nemo-automodel-pr3173", "keras-csvlogger-mnist-cnn"]


def run(curve: synth.Curve):
    return analyze(from_arrays(curve.steps, loss=curve.loss))


def alarms(report, at_least=Severity.WARNING):
    return [f for f in report.findings if f.severity >= at_least]


def structure_cases(seeds: int):
    for s in range(seeds):
        for cause in ("accumulator", "batch_composition"):
            for period in (5, 7, 9):
                yield "ladder", synth.ladder(period=period, seed=s, cause=cause)
        yield "multimodal", synth.bands(seed=s)
        yield "multimodal", synth.bands(levels=(0.6, 1.0, 1.7), seed=s)
        for period in (25.0, 50.0, 120.0):
            yield "periodicity", synth.periodic(period=period, seed=s)
        yield "periodicity", synth.periodic(period=60.0, seed=s, uneven=True)


def health_cases(seeds: int):
    """(kind, LogData, truth) for every health kind."""
    for s in range(seeds):
        c = synth.with_nan(seed=s, at=400 + 37 * s)
        yield "nonfinite", from_arrays(c.steps, loss=c.loss), c.truth
        c = synth.with_spikes(seed=s, at=(500 + 50 * s, 1500))
        yield "spike", from_arrays(c.steps, loss=c.loss), c.truth
        c = synth.diverging(seed=s, turn=900 + 60 * s)
        yield "divergence", from_arrays(c.steps, loss=c.loss), c.truth
        c = synth.stuck(seed=s)
        yield "plateau", from_arrays(c.steps, loss=c.loss), c.truth
        c, acc = synth.accuracy_drop(seed=s, turn=500 + 30 * s)
        yield "accuracy_drop", from_arrays(c.steps, loss=c.loss, acc=acc), c.truth
        c, tps = synth.throughput_drop(seed=s, turn=1000 + 50 * s)
        yield "throughput_drop", from_arrays(c.steps, loss=c.loss, tokens_per_s=tps), c.truth
        c, q = synth.starved_queue(seed=s, start=500 + 20 * s)
        yield "pipeline_stall", from_arrays(c.steps, loss=c.loss, q_pre_min=q), c.truth
        for every, noise in EVALS:  # 9, 29 and 99 evals, 0.3 % to 2 % noise
            yield "overfitting", *evaluated(every=every, noise=noise, turn=1500 + 60 * s, seed=s)


def evaluated(**kw):
    """``synth.evaluated``'s run as a log with its eval records, and its truth."""
    c, steps, values = synth.evaluated(**kw)
    return from_arrays(c.steps, loss=c.loss, evals={"step": steps, "eval_loss": values}), c.truth


EVALS = [(every, noise) for every in (30, 100, 300) for noise in (0.003, 0.01, 0.02)]
CLEAN_EVALS = [(every, noise) for every in (30, 100, 300) for noise in (0.003, 0.01, 0.02, 0.04)]


def located(kind: str, f, truth: dict, span: int) -> bool:
    if kind == "nonfinite":
        return f.start_step == truth["start"]
    if kind == "spike":
        return any(abs(f.evidence["peak_step"] - s) <= 3 for s in truth["steps"])
    if kind in ("divergence", "accuracy_drop", "throughput_drop", "overfitting"):
        return abs(f.start_step - truth["turn"]) <= 0.1 * span
    if kind == "pipeline_stall":
        return abs(f.start_step - truth["start"]) <= 3
    return True


def judge(case, report) -> tuple[bool, bool, list[str]]:
    """(found, located, false alarms) for one case of the second family: what a user would
    need to see, and the alarms (warning or above) that no part of the truth explains."""
    t = case.truth
    warn = alarms(report)
    of = {k: [f for f in report.findings if f.kind == k] for k in
          {f.kind for f in report.findings}}
    kind = case.kind
    if kind == "clean":
        return not warn, True, [f.kind for f in warn]
    if kind == "lr_schedule":
        per = [f for f in of.get("periodicity", []) if f.evidence.get("cause") == "lr_schedule"]
        return bool(per) and not warn, bool(per) and abs(
            per[0].evidence["period_steps"] - t["period"]) <= 0.05 * t["period"], [f.kind for f in warn]
    if kind == "short_cycles":
        hits = [f for f in warn if f.kind in ("ladder", "periodicity")]
        located = any(f.evidence.get("period_records") == t["period_records"] or f.kind == "ladder"
                      for f in hits)
        return bool(hits), located, [f.kind for f in warn if f.kind not in ("ladder", "periodicity")]
    if kind == "memorisation":
        hits = [f for f in warn if f.kind == "periodicity"]
        return bool(hits), bool(hits), [f.kind for f in warn if f.kind not in ("periodicity", "overfitting")]
    hits = [f for f in report.findings if f.kind == kind and f.severity >= Severity.WARNING]
    extra = [f.kind for f in warn if f.kind != kind]
    if not hits:
        return False, False, extra
    f = hits[0]
    if kind == "nonfinite":
        ok = f.start_step == t["first_step"]
    elif kind == "spike":
        ok = any(abs(h.evidence["peak_step"] - t["step"]) <= 1 for h in hits)
    elif kind == "divergence":
        ok = abs(f.start_step - t["turn"]) <= 0.1 * t["span"]
    elif kind == "ladder":
        ok = f.evidence["cause"] == t["cause"]
    elif kind == "periodicity":
        ok = abs(f.evidence["period_steps"] - t["period"]) <= 0.05 * t["period"]
    elif kind == "multimodal":
        ok = len(f.evidence["modes"]) == t["modes"]
    elif kind == "pipeline_stall":
        ok = abs(f.start_step - t["turn"]) <= 100
    else:
        ok = True
    return True, ok, extra


def second_family(seeds: int, verbose: bool) -> int:
    """The independently written family in bench/simlogs.py, read from text like a user's log."""
    import simlogs

    rows: dict[str, dict[str, int]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i, case in enumerate(simlogs.cases(seeds)):
            suffix = ".jsonl" if case.lines and case.lines[0].startswith("{\"") else ".log"
            path = Path(tmp) / f"case{i}{suffix}"
            path.write_text("\n".join(case.lines) + "\n")
            report = analyze(read_log(path))
            found, ok, extra = judge(case, report)
            row = rows.setdefault(case.kind, {"cases": 0, "found": 0, "located": 0, "false": 0})
            row["cases"] += 1
            row["found"] += found
            row["located"] += found and ok
            row["false"] += bool(extra)
            if verbose and (not found or not ok or extra):
                why = "; ".join(f"{f.kind}/{f.severity.name}: {f.summary[:150]}" for f in report.findings[:4])
                print(f"  {case.kind}/{case.name}: found={found} ok={ok} extra={extra} :: {why}")
    print(f"\nsecond family (bench/simlogs.py, read from text) {'kind':14} {'cases':>5} {'recall':>7} "
          f"{'located':>8} {'other alarms':>13}")
    bad = 0
    for kind, r in rows.items():
        print(f"{'':48}{kind:14} {r['cases']:5d} {r['found'] / r['cases']:7.0%} "
              f"{r['located'] / max(1, r['found']):8.0%} {r['false']:13d}")
        bad += r["false"] + (r["cases"] - r["found"])
    return bad


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--family", choices=("both", "synth", "sim"), default="both")
    ap.add_argument("-v", "--verbose", action="store_true", help="print each miss of the second family")
    args = ap.parse_args()
    t0 = time.perf_counter()
    if args.family == "sim":
        bad = second_family(args.seeds, args.verbose)
        print(f"\n{time.perf_counter() - t0:.1f} s")
        return 1 if bad else 0
    rows: dict[str, dict[str, int]] = {}
    for kind, curve in structure_cases(args.seeds):
        row = rows.setdefault(kind, {"cases": 0, "found": 0, "located": 0, "flags": 0})
        row["cases"] += 1
        hits = [f for f in alarms(run(curve)) if f.kind == kind]
        if not hits:
            continue
        row["found"] += 1
        f, truth = hits[0], curve.truth
        if kind == "ladder":
            row["located"] += f.start_step <= truth["start"] + 3 * truth["period"]
            row["flags"] += f.evidence["cause"] == truth["cause"]
        elif kind == "multimodal":
            row["located"] += len(f.evidence["modes"]) == truth["modes"]
            row["flags"] += f.evidence["harmonic"] == truth["harmonic"]
        else:
            row["located"] += abs(f.evidence["period_steps"] - truth["period"]) <= 0.05 * truth["period"]
            row["flags"] += 1
    print(f"{'kind':16} {'cases':>5} {'recall':>7} {'located':>8} {'flags ok':>9}")
    for kind, r in rows.items():
        print(f"{kind:16} {r['cases']:5d} {r['found'] / r['cases']:7.0%} "
              f"{r['located'] / max(1, r['found']):8.0%} {r['flags'] / max(1, r['found']):9.0%}")
    health: dict[str, dict[str, int]] = {}
    for kind, log, truth in health_cases(args.seeds):
        row = health.setdefault(kind, {"cases": 0, "found": 0, "located": 0})
        row["cases"] += 1
        hits = [f for f in analyze(log).findings if f.kind == kind and f.severity >= Severity.INFO]
        if kind == "spike":
            row["cases"] += len(truth["steps"]) - 1
            for s in truth["steps"]:
                hit = [f for f in hits if abs(f.evidence["peak_step"] - s) <= 3]
                row["found"] += bool(hit)
                row["located"] += bool(hit)
            continue
        if hits:
            row["found"] += 1
            span = int(log.train["step"].max() - log.train["step"].min())
            row["located"] += located(kind, hits[0], truth, span)
    for kind, r in health.items():
        print(f"{kind:16} {r['cases']:5d} {r['found'] / r['cases']:7.0%} "
              f"{r['located'] / max(1, r['found']):8.0%}")
    false = 0
    total = 0
    print("\nclean synthetic curves (false alarms at warning or above):")
    for family in synth.CLEAN_FAMILIES:
        n_alarm = 0
        for s in range(args.seeds):
            total += 1
            found = alarms(run(synth.clean(family, seed=s)))
            n_alarm += bool(found)
            if found:
                print(f"  {family} seed {s}: {found[0].kind}: {found[0].summary}")
        false += n_alarm
        print(f"  {family:18} {n_alarm}/{args.seeds}")
    evals = 0
    for every, noise in CLEAN_EVALS:
        n_alarm = 0
        for s in range(args.seeds):
            found = alarms(analyze(evaluated(every=every, noise=noise, turn=None, seed=s)[0]))
            n_alarm += bool(found)
            if found:
                print(f"  evals every {every} steps, {noise:.1%} noise, seed {s}: {found[0].kind}: "
                      f"{found[0].summary}")
        evals += n_alarm
        total += args.seeds
    print(f"  {'noisy evals':18} {evals}/{len(CLEAN_EVALS) * args.seeds} (evals every 30/100/300 steps of "
          "3,000, 0.3-4 % noise, a flat end)")
    false += evals
    print(f"clean synthetic: {false}/{total} with a false alarm")
    real_false = 0
    if REAL.is_dir():
        print("\nclean real logs (../shared/reallogs):")
        for name in CLEAN_REAL:
            path = next(p for p in (REAL / name).iterdir() if p.name not in ("SOURCE.md",))
            found = alarms(analyze(read_log(path)))
            real_false += bool(found)
            print(f"  {name:52} {'; '.join(f.kind for f in found) or 'silent'}")
    print("\nlocated: ladder start within 3 periods; mode count; period ±5 %; first non-finite step "
          "exact; spike ±3 steps; turn ±10 % of the run; queue drain ±3. flags: cause / harmonic")
    sim_bad = 0
    if args.family == "both":
        print("\nsecond family (bench/simlogs.py):")
        sim_bad = second_family(args.seeds, args.verbose)
    print(f"\n{time.perf_counter() - t0:.1f} s")
    return 1 if false or real_false or sim_bad else 0


if __name__ == "__main__":
    sys.exit(main())
