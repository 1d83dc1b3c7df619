"""``DataWorker``: one forked worker serving every epoch of a run (requests in
turn, a stream cut short, failures, death), and the engine forking it before
the model is made (see python/verjus/engine/worker.py for why)."""

from __future__ import annotations

import multiprocessing
import os
import signal

import numpy as np
import pytest

import verjus.rf as rf
from verjus.engine import ArrayDataset, Engine
from verjus.engine.worker import DataWorker, can_fork

pytestmark = pytest.mark.skipif(not can_fork(), reason="no fork on this platform")


def produce(request):
    """``request`` items ``(request, i)``; request 99 fails after one item."""
    count = 5 if request != 99 else 1
    for i in range(count):
        yield (request, i, os.getpid())
    if request == 99:
        raise ValueError("request 99: bad sequence")


def test_serves_requests_in_turn_from_one_process():
    with DataWorker(produce) as worker:
        first = list(worker.stream(1))
        second = list(worker.stream(2))
    assert [(r, i) for r, i, _ in first] == [(1, i) for i in range(5)]
    assert [(r, i) for r, i, _ in second] == [(2, i) for i in range(5)]
    pids = {pid for *_, pid in first + second}
    assert len(pids) == 1
    assert pids != {os.getpid()}


def test_a_stream_cut_short_leaves_the_worker_ready():
    with DataWorker(produce, depth=1) as worker:
        with worker.stream(1) as items:
            assert next(items)[:2] == (1, 0)
        assert [i for _, i, _ in worker.stream(3)] == list(range(5))


def test_a_failure_is_raised_and_the_worker_serves_on():
    with DataWorker(produce) as worker:
        items = worker.stream(99)
        assert next(items)[:2] == (99, 0)
        with pytest.raises(RuntimeError, match="ValueError: request 99: bad sequence"):
            next(items)
        assert len(list(worker.stream(4))) == 5


def test_a_dead_worker_is_an_error_not_a_hang():
    with DataWorker(produce) as worker:
        items = worker.stream(1)
        pid = next(items)[2]
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(RuntimeError, match="died with exit code"):
            list(items)
        with pytest.raises(RuntimeError, match="has ended"):
            worker.stream(2)


def test_one_stream_at_a_time():
    with DataWorker(produce) as worker:
        worker.stream(1)
        with pytest.raises(RuntimeError, match="still serving"):
            worker.stream(2)


def test_the_engine_forks_its_worker_before_the_model():
    """``train`` starts the worker before ``get_model`` runs and stops it at the end."""
    in_dim, out_dim = rf.Dim(3, name="in"), rf.Dim(2, name="out")
    time_dim = rf.Dim(None, name="time")
    workers_at_model = []

    def get_model(**_kwargs):
        workers_at_model.append([p.pid for p in multiprocessing.active_children()])
        return rf.Linear(in_dim, out_dim)

    def train_step(*, model, extern_data, **_kwargs):
        logits = model(extern_data["data"])
        rf.cross_entropy(
            estimated=logits, target=extern_data["classes"], axis=out_dim,
            estimated_type="logits",
        ).mark_as_loss("ce")  # fmt: skip

    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((4, 3)).astype(np.float32) for _ in range(6)]
    data = ArrayDataset({"data": xs, "classes": [np.zeros(4, np.int32)] * 6})
    extern = {
        "data": {"dims": [rf.batch_dim, time_dim, in_dim], "dtype": "float32"},
        "classes": {"dims": [rf.batch_dim, time_dim], "sparse_dim": out_dim, "dtype": "int32"},
    }
    engine = Engine(
        get_model=get_model, train_step=train_step, extern_data=extern,
        optimizer={"class": "sgd"}, learning_rate=0.1, batch_size=20, num_epochs=2,
        log=lambda line: None, progress=False,
    )  # fmt: skip
    engine.train(data, {"dev": data})
    assert len(workers_at_model) == 1
    assert workers_at_model[0], "no worker process when the model was made"
    assert engine._worker is None
    assert not multiprocessing.active_children()
