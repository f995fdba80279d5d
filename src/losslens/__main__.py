"""`python -m losslens` and the `losslens` script: the command line.

A command runs for seconds: its imports (polars, numpy, rich, typer) leave some 500,000
long-lived objects, and the collector's default young-generation threshold (700 allocations)
re-scans them over and over: ~90 ms of CPU in a 0.8 s `check`. Collections are made rare here,
before anything is imported; reference counting frees the run's records as before (they hold no
cycles), and a cycle is still collected after 100,000 allocations.

Once a command has ended with an exit code, the process ends without the interpreter's teardown
(freeing each of those objects and every module one by one: ~60 ms of a 0.36 s `check`, more
than the gate's own analysis of a 5k-line log): every ``atexit`` handler is run, as the
interpreter's exit runs them (coverage's, a sitecustomize's, the libraries'), stdout and stderr
are flushed, and ``os._exit`` hands the memory back to the operating system. A traceback, an exit
that is not a code, a thread still running or a flush that fails takes the ordinary way out. The
library leaves the collector and the exit to its host."""

import atexit
import gc
import os
import sys
import threading

gc.set_threshold(100_000, 20, 10)

from losslens.cli import main as _main  # noqa: E402


def main() -> None:
    """The `losslens` entry point: the command, then the exit without teardown (above)."""
    try:
        _main()
        code = 0
    except SystemExit as exc:
        if not (exc.code is None or isinstance(exc.code, int)):
            raise
        code = exc.code or 0
    _leave(code)


def _leave(code: int) -> None:
    others = [t for t in threading.enumerate() if t is not threading.current_thread()]
    if any(t.is_alive() and not t.daemon for t in others):
        sys.exit(code)  # the interpreter waits for it
    atexit._run_exitfuncs()  # (each once: the list is cleared)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:  # the reader of stdout went away, or a full disk: the ordinary way out says so
        sys.exit(code)
    os._exit(code)


if __name__ == "__main__":
    main()
