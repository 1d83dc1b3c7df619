"""The next batches prepared in a forked worker process: ``WorkerPrefetcher``
for one pass over a producer, ``DataWorker`` serving every epoch of a run.

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

Why a worker that lives for the whole run (``DataWorker``), forked before the
model is made: a forked child shares the parent's memory page by page until
either writes it, so while a worker forked after the model lives, every page
of parameters and optimizer state the parent's first update writes is copied
first (a page fault and a TLB shootdown per 4 KiB page). On RETURNN's AED demo
(87 M parameters, NAdam) that made the first update of each epoch take 5.8 s
instead of 0.08 s. A worker forked before the model shares none of it, and
one that serves every epoch is forked once.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import traceback
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["DataWorker", "WorkerPrefetcher", "can_fork"]

_ITEM, _END, _ERROR = 0, 1, 2
_POLL_S = 0.1  # how often a blocked queue operation looks at the other side


def can_fork() -> bool:
    """Whether worker processes can be forked here (POSIX)."""
    return "fork" in multiprocessing.get_all_start_methods()


def _serve(
    produce: Callable[[Any], Iterable[Any]],
    requests: Any,
    out: Any,
    cancel: Any,
    parent: int,
) -> None:
    """The ``DataWorker``: for each request, every item of ``produce(request)``
    (until cancelled), then the end or the error; stops at a None request."""

    def alive() -> None:
        if os.getppid() != parent:  # the parent is gone: nobody reads
            os._exit(1)

    def put(entry: tuple[int, Any]) -> None:
        while True:
            alive()
            try:
                out.put(entry, timeout=_POLL_S)
                return
            except queue.Full:
                if entry[0] == _ITEM and cancel.is_set():
                    return

    while True:
        try:
            request = requests.get(timeout=_POLL_S)
        except queue.Empty:
            alive()
            continue
        if request is None:
            break
        try:
            for item in produce(request):
                if cancel.is_set():
                    break
                put((_ITEM, item))
            put((_END, None))
        except BaseException as exc:  # reported to the parent, so that it never waits forever
            put((_ERROR, f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"))
    out.close()
    out.join_thread()


class DataWorker:
    """A forked worker process that runs ``produce(request)`` for each request
    the parent makes (``stream``), one at a time, ``depth`` items ahead; see the
    module docs for why it lives for the whole run. Fork it before the large
    allocations it should not share."""

    def __init__(self, produce: Callable[[Any], Iterable[Any]], *, depth: int = 2) -> None:
        if not isinstance(depth, int) or depth < 1:
            raise ValueError(f"depth must be a positive int, got {depth!r}")
        ctx = multiprocessing.get_context("fork")
        self._requests = ctx.Queue()
        self._out = ctx.Queue(maxsize=depth)
        self._cancel = ctx.Event()
        self._busy = False
        self._process = ctx.Process(
            target=_serve,
            args=(produce, self._requests, self._out, self._cancel, os.getpid()),
            name="verjus-data",
            daemon=True,
        )
        self._process.start()

    def stream(self, request: Any) -> _Stream:
        """The items of ``produce(request)``, read as they come; one stream at a
        time. ``request`` is any picklable value but None (which stops the worker)."""
        if request is None:
            raise ValueError("DataWorker.stream: None is the worker's stop request")
        if self._busy:
            raise RuntimeError("the data worker is still serving another stream")
        if not self._process.is_alive():
            raise RuntimeError(
                f"the data worker (pid {self._process.pid}) has ended with exit code "
                f"{self._process.exitcode}"
            )
        self._busy = True
        self._cancel.clear()
        self._requests.put(request)
        return _Stream(self)

    def _next(self) -> tuple[int, Any]:
        while True:
            try:
                return self._out.get(timeout=_POLL_S)
            except queue.Empty:
                if not self._process.is_alive():
                    self._busy = False
                    raise RuntimeError(
                        f"the data worker (pid {self._process.pid}) died with exit code "
                        f"{self._process.exitcode} before the end of the data"
                    ) from None

    def _finish(self, drain: bool) -> None:
        """Ends the current stream; with ``drain``, cancels it and skips what is left."""
        if drain and self._busy:
            self._cancel.set()
            while self._process.is_alive() and self._next()[0] == _ITEM:
                pass
        self._busy = False

    def close(self) -> None:
        """Stops the worker and waits for it."""
        if self._process.is_alive():
            self._finish(drain=True)
            self._requests.put(None)
            self._process.join(5.0)
        if self._process.is_alive():
            self._process.terminate()
            self._process.join(5.0)
        for q in (self._requests, self._out):
            q.close()
            q.cancel_join_thread()

    def __enter__(self) -> DataWorker:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class _Stream:
    """One request's items from a ``DataWorker`` (an iterator and a context manager)."""

    def __init__(self, worker: DataWorker) -> None:
        self._worker = worker
        self._finished = False

    def __iter__(self) -> _Stream:
        return self

    def __next__(self) -> Any:
        if self._finished:
            raise StopIteration
        kind, value = self._worker._next()
        if kind == _ITEM:
            return value
        self._finished = True
        self._worker._finish(drain=False)
        if kind == _ERROR:
            raise RuntimeError(f"the data worker failed: {value}")
        raise StopIteration

    def close(self) -> None:
        """Ends the stream early (the worker skips the rest) or after its end."""
        if not self._finished:
            self._finished = True
            self._worker._finish(drain=True)

    def __enter__(self) -> _Stream:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class WorkerPrefetcher:
    """Iterates ``make_producer()`` in a worker process forked for this one pass,
    ``depth`` items ahead (a ``DataWorker`` serving one request)."""

    def __init__(self, make_producer: Callable[[], Iterable[Any]], *, depth: int = 2) -> None:
        self._worker = DataWorker(lambda _request: make_producer(), depth=depth)
        self._items = self._worker.stream(0)

    def __iter__(self) -> WorkerPrefetcher:
        return self

    def __next__(self) -> Any:
        """The next item; StopIteration at the end or after ``close``."""
        return next(self._items)

    def close(self) -> None:
        """Stops the worker (if still running) and waits for it."""
        self._items.close()
        self._worker.close()

    def __enter__(self) -> WorkerPrefetcher:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
