"""One root exception; subclasses carry the file (and line) they are about.

The CLI turns any LossLensError into one line on stderr and exit code 2.
"""

from __future__ import annotations


class LossLensError(Exception):
    """Base class: a problem with the user's input, not a bug in losslens."""

    def __init__(self, message: str, *, source: str | None = None, line: int | None = None):
        super().__init__(message)
        self.message = message
        self.source = source
        self.line = line

    def __str__(self) -> str:
        where = ""
        if self.source is not None:
            where = self.source if self.line is None else f"{self.source}:{self.line}"
            where += ": "
        return f"{where}{self.message}"


class InputError(LossLensError):
    """The log cannot be opened or read (missing, a directory, binary, empty)."""


class FormatError(LossLensError):
    """The log was read but holds no record in the requested or detected format."""


class NotALog(FormatError):
    """The file holds no log by its content (empty, prose, no known format): a folder walk passes
    over it (listed under --verbose); named explicitly, it is an error like any other."""


class UsageError(LossLensError):
    """Bad option values (unknown format, bad threshold)."""


class MissingExtra(LossLensError):
    """An optional extra (torch for replay, matplotlib for --plot, tensorboard) is not installed."""
