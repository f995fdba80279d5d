"""`python -m losslens` and the `losslens` script: the command line.

A command runs for seconds: its imports (polars, numpy, rich, typer) leave some 500,000
long-lived objects, and the collector's default young-generation threshold (700 allocations)
re-scans them over and over: ~90 ms of CPU in a 0.8 s `check`. Collections are made rare here,
before anything is imported; reference counting frees the run's records as before (they hold no
cycles), and a cycle is still collected after 100,000 allocations.

Once a command has ended with an exit code, the process ends without the interpreter's teardown
(freeing each of those objects and every module one by one: ~60 ms of a 0.36 s `check`, more
than the gate's own analysis of a 5k-line log). That ends it as a worker of ``multiprocessing``
ends, and as Instagram's servers do: the threads have been joined and every ``atexit`` handler has
run (``_leave`` is registered first, so it runs last), stdout and stderr are flushed, and the
operating system takes back the memory. A traceback, or an exit that is not a code, takes the
ordinary way out. The library leaves the collector and the exit to its host."""

import atexit
import gc
import os
import sys

gc.set_threshold(100_000, 20, 10)

_exit_code: list[int] = []  # set once the command has ended with a code


def _leave() -> None:
    if not _exit_code:
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:  # the reader of stdout went away, or a full disk: the ordinary way out says so
        return
    os._exit(_exit_code[0])


atexit.register(_leave)  # before the imports, whose own handlers then run before it

from losslens.cli import main as _main  # noqa: E402


def main() -> None:
    """The `losslens` entry point: the command, then the exit without teardown (above)."""
    try:
        _main()
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            _exit_code.append(exc.code or 0)
        raise
    _exit_code.append(0)


if __name__ == "__main__":
    main()
