"""The human view of a replay report."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.text import Text

from losslens.findings import steps_text
from losslens.reporters.text import reflowed


def render(r: dict[str, Any], width: int = 100) -> Group:
    """The replay report for a terminal: a table per strategy (stacked rows where the terminal's
    ``width`` is too narrow for them), the chance line, bounds and the correlation; with a log,
    the verdict first."""
    lead = [verdict_line(r)] if "verdict" in r else []
    if r.get("mode") == "fed":
        shares = " ".join(f"{x:.2f}" for x in r["bucket_step_share"])
        lines = [Text(f"{r['batches']}: {r['steps_recorded']:,} optimizer steps recorded "
                                 f"({r['exactness']}); bounds {r['bounds']}; share of steps by bucket of "
                                 f"their longest sample: {shares}")]
        return Group(*lead, *lines, *_correlation(r))
    p = r["plan"]
    head = Text(f"{r['samples']:,} samples; bounds {p['bounds']}; budget {p['token_budget']}, "
                f"≤{p['max_batch_size']}/batch → batch size per bucket {p['bucket_batch_size']} "
                f"(from the {p['bs_from']}); {r['epochs']} epoch(s), seed {r['seed']}, "
                f"grad-accum {r['grad_accum']}, world {r['world_size']}; device {r['device']}")
    columns = ["strategy", "batches/epoch", "bucket shares", "padding eff.", "budget use", "max run",
               "runs≥4 /1000", "iid max run", "period"]
    rows = [[e["name"], f"{e['batches_per_epoch']:,.0f}",
             " ".join(f"{x:.2f}" for x in e["bucket_batch_share"]), f"{e['padding_efficiency']:.3f}",
             f"{e['budget_use']:.3f}", str(e["max_same_bucket_run"]),
             f"{e['runs_ge_4_per_1000']:.1f}", f"{e['expected_max_run_iid']:.0f}",
             f"{e['period_steps']} (acf {e['period_acf']})" if e["period_steps"] else "—"]
            for e in r["strategies"]]
    t = reflowed("strategies", columns, rows, width)
    parts: list[Any] = [*lead, head, *(Text(f"note: {n}", style="yellow") for n in r.get("notes", [])), t]
    if "max_run_null" in r:
        m = r["max_run_null"]
        parts.append(Text(
            f"{r['strategy']}: longest same-bucket run {m['observed']} vs {m['mean']:.1f} on average "
            f"({m['q05']:.0f}–{m['q95']:.0f} in 90 %) over {m['shuffles']} random orders of the same "
            f"batches: p={m['p_value']:.2g}"
            + (" — the order makes longer runs than chance" if m["p_value"] <= 0.01 else
               " — shorter runs than chance (interleaved)" if m["observed"] < m["q05"] else
               " — what chance gives with these bucket shares"),
            style="bold red" if m["p_value"] <= 0.01 else ""))
    if "optimized_bounds" in r:
        o = r["optimized_bounds"]
        parts.append(Text(f"optimised bounds {o['bounds']}: padding efficiency {o['padding_efficiency']:.3f} "
                          f"(given bounds {o['given_padding_efficiency']:.3f}); bucket shares "
                          f"{' '.join(f'{x:.2f}' for x in o['bucket_batch_share'])}"))
    parts += _correlation(r)
    return Group(*parts)


def verdict_line(r: dict[str, Any]) -> Text:
    """One sentence: does the loss follow the batches, by which method, with which p-value."""
    v = r["verdict"]
    c = r.get("correlation", {})
    steps = v["tests"].get("step_to_step", {})
    periodic = bool(steps.get("tested") and "why" in steps)  # a record (or fixed order) that repeats
    against = ("a periodic sequence: its step-to-step changes, p from Bartlett's variance" if periodic
               else f"against {c.get('null_seeds', 0)} circular shifts of it")
    if v["method"] == "batches":
        how = f"what the run fed, {against}"
    elif "circular_shift" in v["tests"]:  # a sampler whose order no seed changes
        how = f"{r['strategy']} replayed, the same order for every seed, {against}"
    elif v["method"] == "order-free":
        how = f"order-free: {r['strategy']}'s bucket shares and period from the lengths, the order unknown"
    else:
        how = (f"{r['strategy']} seed {r['seed']} replayed, against {c.get('null_seeds', 0)} other seeds "
               "beyond the shape all seeds share")
    if v["dependence"]:
        rho = f"; loss vs batch length ρ={c['rho']:+.2f}" if c.get("rho") is not None else ""
        if periodic:
            rho = f"; step-to-step ρ={steps['rho']:+.2f}"
        return Text(f"verdict: the loss follows the batches (p={v['p_value']:.2g}; {how}{rho}) — cause: "
                    "batch_composition", style="bold red")
    if v["dependence"] is None:
        return Text(f"verdict: the data cannot tell ({how}): {v.get('reason', '')}", style="yellow")
    seen = (f"; a dependence of |ρ| >= {v['detectable_rho']:.2f} would have shown"
            if v.get("detectable_rho") is not None else "")
    return Text(f"verdict: no dependence found (p={v['p_value']:.2g}; {how}{seen}): the loss does not "
                "follow this order — not proof that batches do not matter (see docs/replay.md: what it "
                "can and cannot mean)", style="green")


def _correlation(r: dict[str, Any]) -> list[Any]:
    """The loss against the batches: the rank correlation and its null, the loss level per bucket,
    where the ladder peaks and spikes sit, and the log's findings with their cause."""
    parts: list[Any] = []
    v = r.get("verdict", {})
    tests = v.get("tests", {}) if v.get("method") == "order-free" else {}
    if "band_weights" in tests:
        b = tests["band_weights"]
        parts.append(Text(f"band weights {b['band_shares']} vs the strategy's step shares grouped "
                          f"{b['predicted_shares']}: distance {b['distance']:.3f}, p={b['p_value']:.2g} "
                          f"over {b['null']}"))
    if "band_runs" in tests:
        t = tests["band_runs"]
        lo, hi = t["strategy_q05_q95"]
        parts.append(Text(f"top band ({t['top_band_share']:.0%} of records) in runs of "
                          f"{t['observed_mean_run']:.2f} records on average; the strategy's top buckets "
                          f"at the same steps: {t['strategy_mean_run']:.2f} ({lo:.2f}–{hi:.2f} over "
                          f"{t['replays']} seeds); "
                          f"records in random order: {t['no_order_mean_run']:.2f} (longer: "
                          f"p={t['longer_than_no_order_p']:.2g})"))
    if "period" in tests:
        t = tests["period"]
        parts.append(Text(f"the strategy's period {t['period_steps']} steps in the loss's periodogram: "
                          f"p={t['power_rank_p']:.2g} (its power ranked among {t['bins']} frequencies)"))
    if tests.get("smear", {}).get("purity") is not None:
        s = tests["smear"]
        parts.append(Text(f"each logged value covers {s['steps_per_logged_value']} step(s); "
                          f"{s['purity']:.0%} of a window is one bucket on average"))
    # the sampler and record paths keep it under the correlation, the order-free path on top
    a = r.get("correlation", {}).get("alignment") or r.get("alignment", {})
    if a.get("warning"):
        parts.append(Text(f"alignment: {a['warning']} (tested anyway: --allow-misalignment)",
                          style="bold yellow"))
    elif a.get("note"):
        parts.append(Text(f"alignment: {a['note']}", style="yellow"))
    if "correlation" in r:
        c = r["correlation"]
        if c.get("rho") is None:
            parts.append(Text(f"correlation: {c.get('note')}", style="yellow"))
        else:
            fed = r.get("mode") == "fed"  # --batches: what the run fed, against shifts of itself
            null = c.get("null") or f"{c['null_seeds']} other seeds (the shape they share included)"
            logged = c.get("logged_loss", "the step's own")
            parts.append(Text(
                f"loss vs the {'fed' if fed else 'replayed'} batch {c.get('against', 'length')} ({logged}): "
                f"Spearman ρ={c['rho']:+.3f}, p={c['p_value']:.3g} over {null} ({c['aligned_records']} "
                "records)"))
            steps = r.get("verdict", {}).get("tests", {}).get("step_to_step", {})
            if steps.get("tested") and "why" in steps:
                parts.append(Text(f"its step-to-step changes, the test carried ({steps['why']}): "
                                  f"ρ={steps['rho']:+.3f}, p={steps['p_value']:.3g} (Bartlett's variance)"))
            spec = r.get("verdict", {}).get("tests", {}).get("seed_specific")
            if spec:
                parts.append(Text(f"beyond the shape all seeds share: ρ={spec['rho']:+.3f}, "
                                  f"p={spec['p_value']:.3g} (this seed's order against the others')"))
            ratio = c["loss_level_is"] == "ratio to trend"
            levels = ", ".join(f"{k}: {'×' if ratio else ''}{v:{'.2f' if ratio else '+.3g'}}"
                               for k, v in c["loss_level_by_bucket"].items())
            parts.append(Text(f"median loss {c['loss_level_is']} by bucket of the step's longest batch: "
                              f"{levels}"))
            if c.get("events"):
                parts.append(Text(
                    f"{c['events']} ladder peak(s)/spike(s): {c['events_in_runs_ge_4']:.0%} inside "
                    f"same-bucket runs of ≥ 4 steps ({'shifted' if fed else 'other seeds'} "
                    f"{c['events_in_runs_null_mean']:.0%}, "
                    f"p={c['events_in_runs_p_value']:.2g})"))
    for f in r.get("findings", []):
        parts.append(Text(f"{f['severity']} {f['kind']} [{f['metric']}] "
                          f"{steps_text(f['start_step'], f['end_step'])}: {f['summary']}"))
    return parts
