"""The documentation's tables that the registries write: the README's formats and findings, the
kinds of docs/findings.md and docs/contract.md. Each sits in its file between
``<!-- NAME: ... -->`` and ``<!-- end NAME -->``; ``python -m losslens.doc_tables`` rewrites them
after a format or detector is added, and a test fails while one is out of step."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from losslens.detectors.base import KindDoc


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def kinds() -> Iterator[tuple[str, KindDoc]]:
    """Every finding kind with its documentation, in the registry's order, then no_loss_metric."""
    from losslens.analysis import NO_LOSS_METRIC
    from losslens.detectors import REGISTRY

    yield from ((d.name, d.doc) for d in REGISTRY)
    yield "no_loss_metric", NO_LOSS_METRIC


def findings_table() -> str:
    """The README's table: a kind and what it means."""
    rows = ["| kind | what it means |", "|---|---|"]
    rows += [f"| `{kind}` | {_cell(doc.meaning)} |" for kind, doc in kinds()]
    return "\n".join(rows)


def evidence_table() -> str:
    """docs/findings.md's table: a kind, its severities and its evidence keys."""
    rows = ["| kind | severity | evidence keys |", "|---|---|---|"]
    rows += [f"| `{kind}` | {_cell(doc.severity)} | {_cell(doc.evidence)} |" for kind, doc in kinds()]
    return "\n".join(rows)


def contract_table() -> str:
    """docs/contract.md's vocabulary: the shared contract's row of each kind, then the rows later
    issues added to it."""
    rows = ["| kind | what it means |", "|---|---|"]
    for kind, doc in kinds():
        rows.append(f"| `{kind}` | {doc.contract} |")
        rows += [f"| {label.format(kind=kind)} | {text} |".replace("|  |", "| |")
                 for label, text in doc.extensions]
    return "\n".join(rows)


def formats_table() -> str:
    """The README's formats table (``logs.registry.formats_table``)."""
    from losslens.logs.registry import formats_table

    return formats_table()


# (file, block name) -> the function that writes the block
TABLES: dict[tuple[str, str], Callable[[], str]] = {
    ("README.md", "formats"): formats_table,
    ("README.md", "findings"): findings_table,
    ("docs/findings.md", "findings"): evidence_table,
    ("docs/contract.md", "findings"): contract_table,
}


def _replaced(text: str, name: str, table: str, path: str) -> str:
    start, end = f"<!-- {name}:", f"<!-- end {name} -->"
    if start not in text or end not in text:
        raise ValueError(f"{path}: no '{start} ... -->' ... '{end}' block")
    head, rest = text.split(start, 1)
    marker, _ = rest.split("\n", 1)
    tail = rest.split(end, 1)[1]
    return f"{head}{start}{marker}\n{table}\n{end}{tail}"


def stale(root: Path) -> list[str]:
    """The blocks under ``root`` that differ from what the registries write, as 'file: name'."""
    return [f"{path}: {name}" for (path, name), make in TABLES.items()
            if (text := (root / path).read_text()) != _replaced(text, name, make(), path)]


def write(root: Path) -> list[str]:
    """Rewrite every block under ``root``; returns the files changed."""
    changed = []
    for (path, name), make in TABLES.items():
        text = (root / path).read_text()
        new = _replaced(text, name, make(), path)
        if new != text:
            (root / path).write_text(new)
            changed.append(path)
    return sorted(set(changed))


if __name__ == "__main__":
    here = Path(sys.argv[1]) if len(sys.argv) > 1 else Path.cwd()
    for path in write(here):
        print(f"rewrote {path}")
