"""``analyze --html`` / ``--plot``: the files a person opens. One log: the page (or picture) at
the path given. Several: one per log next to it (named after the log) and, at the HTML path, an
index page linking them."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from losslens.findings import Report
    from losslens.runner import Result


def page_tags(sources: list[str]) -> dict[str, str]:
    """A distinct file-name tag per log: its path below the folder all of them share, its
    separators and dots made '_' (two logs named train.log in runs a/ and b/ are 'a_train_log'
    and 'b_train_log'); a number where two would still be the same."""
    paths = [os.path.abspath(s) for s in sources]
    common = os.path.commonpath([os.path.dirname(p) for p in paths]) if paths else ""
    tags: dict[str, str] = {}
    used: set[str] = set()
    for source, path in zip(sources, paths, strict=True):
        rel = os.path.relpath(path, common) if common else os.path.basename(path)
        tag = "".join(c if c.isalnum() or c in "-_" else "_" for c in rel) or "log"
        base, n = tag, 2
        while tag in used:
            tag, n = f"{base}-{n}", n + 1
        used.add(tag)
        tags[source] = tag
    return tags


def write(results: list[Result], html_out: str | None, plot: str | None) -> list[str]:
    """Write the pages and pictures of ``results`` (each read); the files written, in order, as
    the CLI says them ('a.html (an index of 2 pages: ...)')."""
    if not results or not (html_out or plot):
        return []
    several = len(results) > 1
    tags = page_tags([r.report.source for r in results if r.report is not None])

    def name(path: str, source: str) -> str:
        if not several:
            return path
        stem, dot, ext = path.rpartition(".")
        return f"{stem}-{tags[source]}.{ext}" if dot else f"{path}-{tags[source]}"

    said: list[str] = []
    written: list[tuple[Report, str]] = []
    for r in results:
        assert r.report is not None and r.log is not None
        if html_out:
            from losslens.reporters import html

            page = name(html_out, r.report.source)
            with open(page, "w", encoding="utf-8") as f:
                f.write(html.render(r.report, r.log))
            written.append((r.report, page))
        if plot:
            from losslens.reporters import png

            png.write(r.report, r.log, name(plot, r.report.source))
            said.append(name(plot, r.report.source))
    if html_out and several:
        from losslens.reporters import html

        with open(html_out, "w", encoding="utf-8") as f:
            f.write(html.index(written, os.path.dirname(os.path.abspath(html_out))))
    if html_out:
        pages = f" (an index of {len(written)} pages: {', '.join(p for _, p in written)})" if several else ""
        said.append(f"{html_out}{pages}")
    return said
