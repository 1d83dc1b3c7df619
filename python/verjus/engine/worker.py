"""``WorkerPrefetcher``: the next batches prepared in a forked worker process.

Reading and batching a dataset is Python (RETURNN's datasets generate or
decode sequences in Python), so in a thread of the training process it holds
the interpreter lock that every training step also needs between its native
ops: measured on ``demo-rf.config`` (2 cores), an epoch took 2.2 s with the
data prepared in a thread, against 1.2 s for the data alone and 0.7 s for the
steps alone. In a worker process the two run side by side, as PyTorch's
``DataLoader`` workers do.

The worker is forked, so it starts with the dataset as the parent has it and
nothing is pickled but the batches (numpy arrays). It only runs Python and
numpy: native verjus ops are never called in it (their thread pool does not
survive a fork). It never outlives its parent: it stops when its parent is
gone, and the parent stops it on ``close``. A failure in the worker is raised
in the parent where its batch would have come, with the worker's traceback; a
worker that dies is a ``RuntimeError`` naming its exit code, never a hang.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import traceback
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["WorkerPrefetcher", "can_fork"]

_ITEM, _END, _ERROR = 0, 1, 2
_POLL_S = 0.1  # how often a blocked queue operation looks at the other side


def can_fork() -> bool:
    """Whether worker processes can be forked here (POSIX)."""
    return "fork" in multiprocessing.get_all_start_methods()


def _run(make_producer: Callable[[], Iterable[Any]], out: Any, parent: int) -> None:
    """The worker: every item of the producer, then the end or the error."""

    def put(entry: tuple[int, Any]) -> None:
        while True:
            if os.getppid() != parent:  # the parent is gone: nobody reads
                os._exit(1)
            try:
                out.put(entry, timeout=_POLL_S)
                return
            except queue.Full:
                pass

    try:
        for item in make_producer():
            put((_ITEM, item))
        put((_END, None))
    except BaseException as exc:  # reported to the parent, so that it never waits forever
        put((_ERROR, f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"))
    finally:
        out.close()
        out.join_thread()


class WorkerPrefetcher:
    """Iterates ``make_producer()`` in a forked worker process, ``depth`` items ahead."""

    def __init__(self, make_producer: Callable[[], Iterable[Any]], *, depth: int = 2) -> None:
        if not isinstance(depth, int) or depth < 1:
            raise ValueError(f"depth must be a positive int, got {depth!r}")
        ctx = multiprocessing.get_context("fork")
        self._queue = ctx.Queue(maxsize=depth)
        self._finished = False
        self._process = ctx.Process(
            target=_run,
            args=(make_producer, self._queue, os.getpid()),
            name="verjus-data",
            daemon=True,
        )
        self._process.start()

    def __iter__(self) -> WorkerPrefetcher:
        return self

    def __next__(self) -> Any:
        """The next item; StopIteration at the end or after ``close``."""
        if self._finished:
            raise StopIteration
        while True:
            try:
                kind, value = self._queue.get(timeout=_POLL_S)
                break
            except queue.Empty:
                if not self._process.is_alive():
                    self._finished = True
                    raise RuntimeError(
                        f"the data worker (pid {self._process.pid}) died with exit code "
                        f"{self._process.exitcode} before the end of the data"
                    ) from None
        if kind == _ITEM:
            return value
        self._finished = True
        self._process.join(5.0)
        if kind == _ERROR:
            raise RuntimeError(f"the data worker failed: {value}")
        raise StopIteration

    def close(self) -> None:
        """Stops the worker (if still running) and waits for it."""
        self._finished = True
        if self._process.is_alive():
            self._process.terminate()
        self._process.join(5.0)
        self._queue.close()
        self._queue.cancel_join_thread()

    def __enter__(self) -> WorkerPrefetcher:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
