"""The main panels as a static PNG (matplotlib, from the `plot` extra; imported only here)."""

from __future__ import annotations

import numpy as np

from losslens.errors import UsageError
from losslens.findings import Report, Severity
from losslens.reporters.chart import PANELS, downsampled

COLORS = {Severity.ERROR: "#d62728", Severity.WARNING: "#ff7f0e", Severity.INFO: "#1f77b4"}


def write(report: Report, log, path: str) -> None:
    """The main panels of one log as a picture (.png, .svg or .pdf; needs matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError("--plot needs matplotlib: pip install 'losslens[plot]'") from None
    names = [m for m in PANELS if (m in log.train.columns and log.train.height) or
             (m in log.eval.columns and log.eval.height)]
    fig, axes = plt.subplots(max(1, len(names)), 1, figsize=(12, 2.2 * max(1, len(names))),
                             sharex=True, squeeze=False)
    for ax, name in zip(axes[:, 0], names, strict=False):
        frame = log.eval if name.startswith("eval_") else log.train
        x, y = downsampled(frame, name, 1600)
        ax.plot(x, y, lw=0.8, color="#333")
        if name in ("loss", "eval_loss") and len(y) and np.min(y) > 0 and np.max(y) / np.min(y) > 20:
            ax.set_yscale("log")
        for f in report.findings:
            if f.metric == name or f.metric == "time":
                ax.axvspan(f.start_step, max(f.end_step, f.start_step + 1), color=COLORS[f.severity],
                           alpha=0.18, lw=0)
        ax.set_ylabel(name, fontsize=9)
    axes[-1, 0].set_xlabel("step")
    worst = report.worst()
    fig.suptitle(f"{report.source}: {len(report.findings)} finding(s)"
                 + (f", worst {worst}" if worst is not None else ""), fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
