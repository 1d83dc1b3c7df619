"""``WorkerPrefetcher``: batches from a forked worker, its failures, its death,
and that it never outlives its parent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from verjus.engine.worker import WorkerPrefetcher, can_fork

pytestmark = pytest.mark.skipif(not can_fork(), reason="no fork on this platform")


def test_yields_everything_in_order():
    with WorkerPrefetcher(lambda: ({"x": np.full(3, i)} for i in range(20))) as items:
        got = [int(item["x"][0]) for item in items]
    assert got == list(range(20))


def test_a_failure_in_the_worker_is_raised_with_its_traceback():
    def produce():
        yield 1
        raise ValueError("sequence 7: bad frame")

    items = WorkerPrefetcher(produce)
    assert next(items) == 1
    with pytest.raises(RuntimeError, match="the data worker failed: ValueError: sequence 7"):
        next(items)
    items.close()


def test_a_worker_that_dies_is_an_error_not_a_hang():
    def produce():
        os._exit(3)
        yield 1  # a generator that dies before its first item

    items = WorkerPrefetcher(produce)
    with pytest.raises(RuntimeError, match="died with exit code 3"):
        next(items)


def test_close_stops_a_worker_blocked_on_a_full_queue():
    items = WorkerPrefetcher(lambda: iter(range(10**9)), depth=1)
    assert next(items) == 0
    items.close()
    assert not items._worker._process.is_alive()


def test_the_worker_ends_when_its_parent_is_killed(tmp_path):
    pid_file = tmp_path / "worker.pid"
    script = textwrap.dedent(
        f"""
        import os, time
        from verjus.engine.worker import WorkerPrefetcher
        def produce():
            open({str(pid_file)!r}, "w").write(str(os.getpid()))
            yield from range(10**9)
        items = WorkerPrefetcher(produce, depth=1)
        next(items)
        time.sleep(60)
        """
    )
    parent = subprocess.Popen([sys.executable, "-c", script])
    deadline = time.monotonic() + 30
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline, "the worker did not start"
        time.sleep(0.05)
    worker = int(pid_file.read_text())
    parent.send_signal(signal.SIGKILL)
    parent.wait(10)
    deadline = time.monotonic() + 10
    while _alive(worker):
        assert time.monotonic() < deadline, "the worker outlived its parent"
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (reaped by init later) counts as ended.
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split()[2] != "Z"
