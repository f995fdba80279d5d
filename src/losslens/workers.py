"""Worker processes that a signal can stop at any moment: ``in_order(fn, items, jobs, chunk)``.

``concurrent.futures.ProcessPoolExecutor`` keeps a manager thread and a queue-feeding thread in
the main process; when SIGTERM or Ctrl-C ends the command and its workers are terminated, that
thread can wait for ever on a result a worker was killed while writing (the interpreter then
never exits), or fail a cancelled future and print a traceback. Here the main process has no
thread: each worker holds one pipe, is sent a chunk of items and answers with their results;
the main process waits on the pipes, keeps the items' order, and on any exit (a result, an
error, a signal, the consumer gone) terminates every worker and closes every pipe.

Workers are spawned, not forked: polars' threads do not survive a fork."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from losslens.errors import LossLensError

# the signals that stop a command (Ctrl-C, a supervisor, a closed terminal): held back while a
# worker starts, so that none is half started when the command ends
_STOPPING = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}


class WorkerDied(LossLensError):
    """A worker process ended without answering (killed from outside, out of memory): one line
    and exit 2 from the command, as any error of the run's own."""


def in_order(fn: Callable[[Any], Any], items: list[Any], jobs: int, chunk: int) -> Iterator[Any]:
    """``fn(item)`` of each item, in the items' order, over ``jobs`` spawned processes that take
    ``chunk`` items at a time. ``fn`` must be importable (a module-level function or a
    ``functools.partial`` of one); an exception it raises is raised here."""
    import multiprocessing
    from multiprocessing.connection import wait

    spawn = multiprocessing.get_context("spawn")
    chunks = [items[i:i + chunk] for i in range(0, len(items), chunk)]
    workers: list[tuple[Any, Any]] = []
    given: dict[Any, int] = {}  # a worker's pipe -> the chunk it is working on
    done: dict[int, list[Any]] = {}
    todo = iter(enumerate(chunks))  # the chunks not handed out yet

    def give(pipe: Any) -> None:
        """The next chunk to the worker of ``pipe``, if one is left."""
        if (following := next(todo, None)) is not None:
            pipe.send(following[1])
            given[pipe] = following[0]

    try:
        for _ in range(min(jobs, len(chunks))):
            here, there = spawn.Pipe()
            proc = spawn.Process(target=_serve, args=(there, fn), daemon=True,
                                 name="losslens-worker")
            previous = signal.pthread_sigmask(signal.SIG_BLOCK, _STOPPING)
            try:
                proc.start()
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, previous)
            there.close()
            workers.append((proc, here))
        for _, pipe in workers:
            give(pipe)
        for wanted in range(len(chunks)):
            while wanted not in done:
                ready: list[Any] = wait(list(given))
                for pipe in ready:
                    try:
                        failed, answer = pipe.recv()
                    except (EOFError, OSError):
                        raise WorkerDied("a worker process ended without answering (killed, or "
                                         "out of memory); -j 1 reads every log in this "
                                         "process") from None
                    if failed:
                        raise answer
                    done[given.pop(pipe)] = answer
                    give(pipe)
            yield from done.pop(wanted)
    finally:
        _stop(workers)


def _stop(workers: list[tuple[Any, Any]]) -> None:
    """End every worker now: told to leave when idle, terminated when not; pipes closed."""
    for proc, pipe in workers:
        try:
            pipe.send(None)
        except OSError:
            pass
        if proc.is_alive():
            proc.terminate()
    for proc, pipe in workers:
        proc.join(timeout=5)
        if proc.is_alive():
            proc.kill()
            proc.join(timeout=5)
        pipe.close()


def _serve(pipe: Any, fn: Callable[[Any], Any]) -> None:
    """A worker: chunks in, ``(failed, results or the exception)`` out, until ``None``."""
    _start()
    while True:
        try:
            got = pipe.recv()
        except (EOFError, OSError):
            return
        if got is None:
            return
        try:
            answer: tuple[bool, Any] = (False, [fn(item) for item in got])
        except Exception as exc:  # raised in the main process, as a plain call would
            answer = (True, exc)
        try:
            pipe.send(answer)
        except Exception as exc:  # an exception or result that cannot be pickled
            pipe.send((True, RuntimeError(f"a worker's answer could not be sent back: {exc}")))


def _start() -> None:
    """A worker leaves Ctrl-C to the main process, which stops it, and ends by itself once the
    main process is gone (killed before it could stop it): an orphan would hold the caller's
    stdout and stderr, and a caller reading them would wait for ever."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOPPING)  # a spawned child inherits the mask
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="losslens-parent-watch").start()
