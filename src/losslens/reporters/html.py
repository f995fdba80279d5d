"""A self-contained HTML post-mortem page: header, findings table, and linked charts drawn as
inline SVG by this module (no plotting library, nothing fetched at view time). Wheel zooms and
drag pans every chart together along the step axis; double-click resets.

Large logs are down-sampled for drawing by min/max per pixel column, so spikes stay visible."""

from __future__ import annotations

import html
import math
from typing import TYPE_CHECKING

import numpy as np

from losslens.findings import Report, Severity
from losslens.reporters.chart import PANELS, downsampled, fmt, nice_ticks, robust_top, tick_label

if TYPE_CHECKING:
    from losslens.replay.request import ReplayReport

WIDTH, PANEL_H, LEFT, RIGHT, TOP = 1100, 170, 70, 20, 18
COLORS = {Severity.ERROR: "#d62728", Severity.WARNING: "#ff7f0e", Severity.INFO: "#1f77b4"}


PLOT_W = WIDTH - LEFT - RIGHT


def _panel(name: str, xs: np.ndarray, ys: np.ndarray, x0: float, x1: float, findings, index: int) -> str:
    """One metric's chart: ``xs``, ``ys`` its points down-sampled to the plot's width."""
    plot_w = PLOT_W
    if len(xs) == 0:
        return ""
    lo, hi = float(np.min(ys)), float(np.max(ys))
    top, clipped = robust_top(name, ys)
    if top is not None:
        hi = top
    if hi == lo:  # a constant: draw it in the middle
        lo, hi = lo - (abs(lo) * 0.05 or 0.5), hi + (abs(hi) * 0.05 or 0.5)
    log_scale = name in ("loss", "eval_loss") and lo > 0 and hi / lo > 20
    def ty(v: np.ndarray) -> np.ndarray:
        if log_scale:
            frac = (np.log(v) - math.log(lo)) / (math.log(hi) - math.log(lo))
            return TOP + (PANEL_H - TOP - 20) * (1 - frac)
        return TOP + (PANEL_H - TOP - 20) * (1 - (v - lo) / (hi - lo))
    span = max(1.0, x1 - x0)
    px = (xs - x0) / span * plot_w
    pts = " ".join(f"{a:.1f},{b:.1f}" for a, b in zip(px, ty(ys), strict=True))
    shades = []
    for f in findings:
        if f.metric not in (name, "time") and not (name == "loss" and f.metric == "loss"):
            continue
        a = (f.start_step - x0) / span * plot_w
        b = (f.end_step - x0) / span * plot_w
        if b - a < 5:  # a one-step finding stays visible: a 5-px band centred on it
            a, b = (a + b) / 2 - 2.5, (a + b) / 2 + 2.5
        shades.append(f'<rect class="shade" data-kind="{html.escape(f.kind)}" x="{a:.1f}" y="{TOP}" '
                      f'width="{b - a:.1f}" height="{PANEL_H - TOP - 20}" fill="{COLORS[f.severity]}" '
                      f'fill-opacity="0.22"><title>{html.escape(f.kind)}: {html.escape(f.summary)}'
                      f'</title></rect><path d="M{(a + b) / 2 - 5:.1f},{TOP - 2} h10 l-5,7 z" '
                      f'fill="{COLORS[f.severity]}"/>')
    if log_scale:
        values = [10.0 ** e for e in range(math.ceil(math.log10(lo)), math.floor(math.log10(hi)) + 1)]
        values = values or [lo, hi]
        labels = [fmt(v) for v in values]
    else:
        values = nice_ticks(lo, hi, 4)
        labels = [tick_label(v, values) for v in values]
    ticks = "".join(
        f'<text x="{LEFT - 6}" y="{float(ty(np.array([v]))[0]) + 4:.1f}" text-anchor="end" '
        f'class="tick">{label}</text>' for v, label in zip(values, labels, strict=True))
    note = (f" (axis clipped: {clipped} early point(s) reach {float(np.max(ys)):.4g})" if clipped else "")
    return (f'<svg class="panel" data-metric="{html.escape(name)}" width="{WIDTH}" height="{PANEL_H}" '
            f'viewBox="0 0 {WIDTH} {PANEL_H}"><text x="{LEFT}" y="13" class="label">{html.escape(name)}'
            f'{" (log scale)" if log_scale else ""}{html.escape(note)}</text>{ticks}'
            f'<svg x="{LEFT}" y="0" width="{plot_w}" height="{PANEL_H}" overflow="hidden">'
            f'<g class="plot" data-i="{index}">{"".join(shades)}'
            f'<polyline fill="none" stroke="#333" stroke-width="1" vector-effect="non-scaling-stroke" '
            f'points="{pts}"/></g></svg>'
            f'<line x1="{LEFT}" y1="{PANEL_H - 20}" x2="{WIDTH - RIGHT}" y2="{PANEL_H - 20}" stroke="#999"/>'
            f'</svg>')


def _axis(x0: float, x1: float) -> str:
    plot_w = WIDTH - LEFT - RIGHT
    ticks = []
    span = max(1.0, x1 - x0)
    for v in nice_ticks(x0, x1, 6):
        ticks.append(f'<text x="{LEFT + plot_w * (v - x0) / span:.1f}" y="14" text-anchor="middle" '
                     f'class="tick">{int(v)}</text>')
    return f'<svg width="{WIDTH}" height="22">{"".join(ticks)}<text x="{LEFT - 6}" y="14" ' \
           f'text-anchor="end" class="tick">step</text></svg>'


def _periodogram(finding) -> str:
    figure = finding.figures.get("periodogram")
    if figure is None or len(figure["periods"]) < 2:
        return ""
    periods, power = figure["periods"], figure["power"]
    w, h = WIDTH // 2 - 10, 200
    lx = np.log(periods)
    px = (lx - lx.min()) / (np.ptp(lx) or 1) * (w - 60) + 50
    py = h - 25 - power / (power.max() or 1) * (h - 45)
    pts = " ".join(f"{a:.1f},{b:.1f}" for a, b in zip(px, py, strict=True))
    p = finding.evidence.get("period_steps", 0) or 1
    mark = (math.log(p) - lx.min()) / (np.ptp(lx) or 1) * (w - 60) + 50
    return (f'<svg width="{w}" height="{h}" class="small"><text x="50" y="14" class="label">periodogram of '
            f'de-trended {html.escape(finding.metric)} (period in steps, log axis)</text>'
            f'<polyline fill="none" stroke="#333" points="{pts}"/>'
            f'<line x1="{mark:.1f}" x2="{mark:.1f}" y1="20" y2="{h - 25}" stroke="#d62728" '
            f'stroke-dasharray="4"/>'
            f'<text x="{mark + 4:.1f}" y="32" class="tick" fill="#d62728">period ≈ {p:.4g}</text></svg>')


def _histogram(log, finding) -> str:
    v = log.train[finding.metric].drop_nulls().to_numpy()
    v = v[np.isfinite(v)]
    if len(v) < 10:
        return ""
    counts, edges = np.histogram(v, bins=60)
    w, h = WIDTH // 2 - 10, 200
    bw = (w - 60) / len(counts)
    bars = "".join(f'<rect x="{50 + i * bw:.1f}" y="{h - 25 - c / counts.max() * (h - 45):.1f}" '
                   f'width="{bw - 1:.1f}" height="{c / counts.max() * (h - 45):.1f}" fill="#8aa"/>'
                   for i, c in enumerate(counts))
    lines = ""
    for m in finding.evidence.get("modes", []):
        x = 50 + (m - edges[0]) / (edges[-1] - edges[0] or 1) * (w - 60)
        lines += (f'<line x1="{x:.1f}" x2="{x:.1f}" y1="20" y2="{h - 25}" stroke="#d62728" '
                  f'stroke-dasharray="4"/><text x="{x + 3:.1f}" y="30" class="tick">{fmt(m)}</text>')
    return (f'<svg width="{w}" height="{h}" class="small"><text x="50" y="14" class="label">histogram of '
            f'{html.escape(finding.metric)} with the bands found</text>{bars}{lines}</svg>')


def _bucket_levels(corr: dict) -> str:
    """The replay's evidence: the median de-trended loss of the steps of each bucket, as bars."""
    levels = {int(k): float(v) for k, v in corr.get("loss_level_by_bucket", {}).items()}
    if not levels:
        return ""
    ratio = corr.get("loss_level_is") == "ratio to trend"
    base = 1.0 if ratio else 0.0
    span = max(abs(v - base) for v in levels.values()) or 1.0
    w, h = WIDTH // 2 - 10, 200
    mid, scale = h / 2, (h / 2 - 35) / span
    bw = (w - 60) / len(levels)
    bars = ""
    for i, (k, v) in enumerate(sorted(levels.items())):
        x, top = 50 + i * bw, mid - max(v - base, 0) * scale
        label_y = top - 3 if v >= base else mid + abs(v - base) * scale + 11
        bars += (f'<rect x="{x + 4:.1f}" y="{top:.1f}" width="{bw - 8:.1f}" '
                 f'height="{abs(v - base) * scale:.1f}" fill="{BUCKET_COLORS[k % len(BUCKET_COLORS)]}"/>'
                 f'<text x="{x + bw / 2:.1f}" y="{h - 8}" class="tick" text-anchor="middle">{k}</text>'
                 f'<text x="{x + bw / 2:.1f}" y="{label_y:.1f}" '
                 f'class="tick" text-anchor="middle">{f"×{v:.2f}" if ratio else fmt(v)}</text>')
    title = (f'loss {html.escape(corr.get("loss_level_is", ""))} by replayed bucket '
             f'(ρ={corr["rho"]:+.2f}, p={corr["p_value"]:.2g})')
    return (f'<svg width="{w}" height="{h}" class="small"><text x="50" y="14" class="label">{title}</text>'
            f'<line x1="50" x2="{w - 10}" y1="{mid}" y2="{mid}" stroke="#999"/>{bars}</svg>')


JS = """
(function(){const plots=[...document.querySelectorAll('g.plot')];let k=1,t=0,drag=null;
const W=PLOT_W;function apply(){
 plots.forEach(g=>g.setAttribute('transform',`translate(${t},0) scale(${k},1)`));}
document.querySelectorAll('svg.panel').forEach(s=>{
 s.addEventListener('wheel',e=>{e.preventDefault();const r=s.getBoundingClientRect();
  const x=(e.clientX-r.left)*(s.viewBox.baseVal.width/r.width)-LEFT;const f=e.deltaY<0?1.25:0.8;
  const nk=Math.max(1,Math.min(500,k*f));t=x-(x-t)*nk/k;k=nk;t=Math.min(0,Math.max(W-W*k,t));
  apply();},{passive:false});
 s.addEventListener('mousedown',e=>{drag={x:e.clientX,t:t};});
 s.addEventListener('dblclick',()=>{k=1;t=0;apply();});});
window.addEventListener('mousemove',e=>{if(!drag)return;t=Math.min(0,Math.max(W-W*k,drag.t+(e.clientX-drag.x)));apply();});
window.addEventListener('mouseup',()=>{drag=null;});document.body.dataset.ready='1';})();
""".replace("PLOT_W", str(WIDTH - LEFT - RIGHT)).replace("LEFT", str(LEFT))

CSS = """body{font:14px system-ui,sans-serif;margin:20px;color:#222;max-width:1140px}
h1{font-size:20px;margin:0 0 4px}.meta{color:#555;margin-bottom:12px}
table{border-collapse:collapse;margin:10px 0 16px;width:100%}td,th{border:1px solid #ddd;padding:4px 8px;
text-align:left;vertical-align:top}th{background:#f4f4f4}.error{color:#d62728;font-weight:600}
.warning{color:#c65f00;font-weight:600}.info{color:#1f77b4}.label{font-size:12px;font-weight:600}
.tick{font-size:11px;fill:#555}svg.panel{display:block;cursor:grab}.row{display:flex;gap:20px}
.hint{color:#777;font-size:12px}"""


BUCKET_COLORS = ("#4e79a7", "#59a14f", "#edc948", "#f28e2b", "#e15759", "#b07aa1", "#76b7b2", "#9c755f")


def _buckets(steps: np.ndarray, bucket: np.ndarray, x0: float, x1: float) -> str:
    """The replayed bucket of each step as a colour strip under the loss (one rect per run)."""
    plot_w = WIDTH - LEFT - RIGHT
    ok = (steps >= x0) & (steps <= x1)
    steps, bucket = steps[ok], bucket[ok]
    if len(steps) == 0:
        return ""
    change = np.flatnonzero(np.diff(bucket)) + 1
    starts = np.concatenate([[0], change])
    ends = np.concatenate([change, [len(steps)]])
    span = max(1.0, x1 - x0)
    rects = "".join(
        f'<rect x="{(steps[a] - x0) / span * plot_w:.2f}" y="18" width="'
        f'{max(0.5, (steps[b - 1] + 1 - steps[a]) / span * plot_w):.2f}" height="22" '
        f'fill="{BUCKET_COLORS[int(bucket[a]) % len(BUCKET_COLORS)]}"><title>bucket {int(bucket[a])}: '
        f'{b - a} step(s) from {int(steps[a])}</title></rect>' for a, b in zip(starts, ends, strict=True))
    legend = " ".join(f'<tspan fill="{BUCKET_COLORS[k % len(BUCKET_COLORS)]}">■</tspan> {k}'
                      for k in sorted({int(b) for b in bucket}))
    return (f'<svg class="panel" data-metric="replay buckets" width="{WIDTH}" height="48" '
            f'viewBox="0 0 {WIDTH} 48"><text x="{LEFT}" y="13" class="label">replayed length bucket '
            f'of each step (runs of one colour = same-bucket batches): {legend}</text>'
            f'<svg x="{LEFT}" y="0" width="{plot_w}" height="48" overflow="hidden"><g class="plot">'
            f'{rects}</g></svg></svg>')


def index(pages: list[tuple[Report, str]], folder: str) -> str:
    """One page linking the page of each log, worst first, with its findings count."""
    import os

    def worst(r: Report) -> int:
        w = r.worst()
        return -1 if w is None else int(w)

    order = sorted(pages, key=lambda rp: (-worst(rp[0]), rp[0].source))
    rows = "".join(
        f'<tr><td><a href="{html.escape(os.path.relpath(path, folder))}">{html.escape(r.source)}</a></td>'
        f'<td>{len(r.findings)}</td><td class="{r.worst() or ""}">{r.worst() or "—"}</td>'
        f'<td>{html.escape("; ".join(sorted({f.kind for f in r.findings})))}</td></tr>'
        for r, path in order)
    return (f'<!doctype html><html><head><meta charset="utf-8"><title>losslens: {len(pages)} logs</title>'
            f'<style>{CSS}</style></head><body><h1>losslens: {len(pages)} logs</h1>'
            f'<table id="logs"><tr><th>log</th><th>findings</th><th>worst</th><th>kinds</th></tr>{rows}'
            f'</table></body></html>')


def render(report: Report, log, replay_steps: np.ndarray | None = None,
           replay_buckets: np.ndarray | None = None, correlation: dict | None = None) -> str:
    """The post-mortem page of one log: the report's head, a linked panel per metric with its findings
    shaded, the periodogram and histogram of structure findings; with a replay, the bucket of each
    step under the loss."""
    # (a long run's columns are read a block at a time, never turned into float64 arrays whole)
    steps = log.train["step"]
    x0, x1 = (float(steps.min()), float(steps.max())) if log.train.height else (0.0, 1.0)  # type: ignore[arg-type]
    panels, constant = [], []
    for i, name in enumerate(m for m in PANELS if m in log.train.columns or m in log.eval.columns):
        frame = log.eval if name.startswith("eval_") else log.train
        if frame.height == 0 or name not in frame.columns:
            continue
        y = frame[name]
        if (name != "loss" and not y.null_count() and bool(y.is_finite().all()) and y.min() == y.max()
                and not any(f.metric == name for f in report.findings)):
            # a flat line says nothing: one word
            constant.append(f"{name} = {float(y.min()):.4g}")  # type: ignore[arg-type]
            continue
        panels.append(_panel(name, *downsampled(frame, name, PLOT_W), x0, x1, report.findings, i))
        if name == "loss" and replay_steps is not None and replay_buckets is not None:
            panels.append(_buckets(replay_steps, replay_buckets, x0, x1))
    extra = []
    for f in report.findings:
        if f.kind == "periodicity" and f.evidence.get("share_of_variance") is not None:
            extra.append(_periodogram(f))
        if f.kind == "multimodal":
            extra.append(_histogram(log, f))
    if correlation and correlation.get("rho") is not None:
        extra.append(_bucket_levels(correlation))
    head = report.html_head()
    flat = (f'<div class="hint">constant over the run: {html.escape(", ".join(constant))}</div>'
            if constant else "")
    return (f'<!doctype html><html><head><meta charset="utf-8"><title>losslens: '
            f'{html.escape(report.source)}</title><style>{CSS}</style></head><body>'
            f'{head}'
            f'<div class="hint">wheel: zoom all charts on the step axis · drag: pan · double-click: reset · '
            f'shaded: findings (hover for the summary)</div>{"".join(panels)}{_axis(x0, x1)}{flat}'
            f'<div class="row">{"".join(extra)}</div><script>{JS}</script></body></html>')


def replay_page(result: ReplayReport) -> str:
    """``replay --log --html``: the log's post-mortem page with the replayed bucket of each step
    under the loss and the loss level per bucket."""
    assert result.analysed is not None and result.data is not None and result.step_bucket is not None
    steps = result.bucket_steps if result.bucket_steps is not None else \
        np.arange(len(result.step_bucket)) + (result.request.step_offset or 0)
    return render(result.analysed, result.data, steps, result.step_bucket, result.summary["correlation"])
