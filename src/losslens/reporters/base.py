"""The one interface every output format implements.

A ``Reporter`` is told about each log as it is done (``log``: what to print now, for the formats
that stream) and about the whole run at the end (``close``: what to print once, for the formats
that are one document). Either returns None when it has nothing to print. Reporters never print,
write files or choose the exit code: the CLI does."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from losslens.findings import Gate

if TYPE_CHECKING:
    from losslens.runner import Result


@dataclass(frozen=True)
class Context:
    """What a reporter may need beyond the results: which command asks (``analyze`` shows the
    whole report, ``check`` one line per finding), the terminal width, --all, --verbose, and the
    gate that judges the logs (what fails it)."""

    command: str = "analyze"
    width: int = 100
    show_all: bool = False
    verbose: bool = False
    gate: Gate = field(default_factory=lambda: Gate())


class Reporter(Protocol):
    """An output format (see the module's docstring)."""
    name: str

    def log(self, result: Result, ctx: Context) -> Any:
        """Output for one log as soon as it is done: a string (printed as is, its own line ends),
        a rich renderable, or None."""

    def close(self, results: list[Result], ctx: Context) -> str | None:
        """Output once every log is done (a whole-run document), or None."""


class Streaming:
    """A reporter whose output is per log only."""

    name = ""

    def close(self, results: list[Result], ctx: Context) -> str | None:
        return None
