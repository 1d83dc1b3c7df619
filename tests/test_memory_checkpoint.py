"""Memory measured: ``verjus.memory_stats`` (the allocator's bytes and the
bytes the tape keeps for backward) while training steps of a Linear with
weight noise and an LSTM with weight dropout on its recurrent weight. In a
gradient checkpoint scope (what the parametrizations use) no tensor of the
weight's size is kept for backward; without it, one per access is."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from typing import NamedTuple

import numpy as np
import pytest

import verjus
from verjus import rf
from verjus.rf.parametrizations import WeightDropout, WeightNoise


@pytest.fixture(autouse=True)
def _train_mode() -> Iterator[None]:
    rf.init_train_step_run_ctx()
    yield
    rf.init_forward_step_run_ctx()


class Unscoped:
    """A parametrization's draw without the scope (what it would cost)."""

    def __init__(self, inner: WeightNoise | WeightDropout) -> None:
        self.inner = inner

    def __call__(self, param: rf.Tensor) -> rf.Tensor:
        if isinstance(self.inner, WeightNoise):
            return param + rf.random_normal(list(param.dims), stddev=self.inner.std)
        return rf.dropout(param, self.inner.drop_prob, on_forward=True)


class Step(NamedTuple):
    """What a step holds above the bytes before it."""

    kept: int  # allocator bytes after the forward (what backward holds on to)
    peak: int  # the allocator's peak over forward and backward
    saved: int  # bytes the tape keeps for backward after the forward
    saved_peak: int  # the tape's peak over forward and backward


def _step(loss: Callable[[], rf.Tensor]) -> Step:
    """One forward and backward of ``loss``, measured. Python's cycle collector
    is off meanwhile: run during the step, it freed earlier tests' tensors and
    took their bytes off the step's counts."""
    gc.collect()
    gc.disable()
    try:
        before = verjus.memory_stats()
        verjus.reset_peak_memory_stats()
        out = loss()
        after_forward = verjus.memory_stats()
        out.backward()
        del out
        stats = verjus.memory_stats()
    finally:
        gc.enable()
    # The graph is gone with the loss: the tape keeps nothing of the step.
    assert stats["tape_saved_bytes"] == before["tape_saved_bytes"]
    return Step(
        kept=after_forward["current_bytes"] - before["current_bytes"],
        peak=stats["peak_bytes"] - before["current_bytes"],
        saved=after_forward["tape_saved_bytes"] - before["tape_saved_bytes"],
        saved_peak=stats["tape_saved_peak_bytes"] - before["tape_saved_bytes"],
    )


def test_memory_stats_counts_host_tensors() -> None:
    before = verjus.memory_stats()
    verjus.reset_peak_memory_stats()
    t = rf.zeros([rf.Dim(1000, name="n")])
    assert verjus.memory_stats()["current_bytes"] - before["current_bytes"] >= 4000
    del t
    stats = verjus.memory_stats()
    assert stats["current_bytes"] - before["current_bytes"] < 4000
    assert stats["peak_bytes"] - before["current_bytes"] >= 4000
    with pytest.raises(ValueError, match="unknown device"):
        verjus.memory_stats("tpu")


def test_tape_saved_bytes_count_what_backward_keeps_once() -> None:
    """``tanh`` keeps its output, ``x * x`` reads ``x`` (made by ``tanh``:
    the same tensor, counted once); a parameter is not counted; dropping the
    graph frees it all, and the peak stays until reset."""
    n = rf.Dim(1000, name="n")
    p = rf.Parameter([n])
    p.assign(np.full(1000, 0.5, np.float32))
    before = verjus.memory_stats()["tape_saved_bytes"]
    verjus.reset_peak_memory_stats()
    y = rf.tanh(p)
    assert verjus.memory_stats()["tape_saved_bytes"] - before == 4000
    z = y * y
    assert verjus.memory_stats()["tape_saved_bytes"] - before == 4000
    w = z * p  # reads z (counted) and p (a parameter: not counted)
    assert verjus.memory_stats()["tape_saved_bytes"] - before == 8000
    del y, z, w
    stats = verjus.memory_stats()
    assert stats["tape_saved_bytes"] == before
    assert stats["tape_saved_peak_bytes"] - before == 8000
    verjus.reset_peak_memory_stats()
    assert verjus.memory_stats()["tape_saved_peak_bytes"] == before


def _linear_loss(lin: rf.Linear, x: rf.Tensor, o: rf.Dim) -> Callable[[], rf.Tensor]:
    return lambda: rf.reduce_sum(lin(x), axis=[rf.batch_dim, o])


def test_linear_with_weight_noise_keeps_no_weight_sized_tensor() -> None:
    i, o = rf.Dim(256, name="in"), rf.Dim(256, name="out")
    weight = 256 * 256 * 4
    x = rf.convert_to_tensor(np.ones((2, 256), np.float32), dims=[rf.batch_dim, i])
    results = {}
    for mode in ("plain", "unscoped", "scoped"):
        rf.set_random_seed(1)
        lin = rf.Linear(i, o)
        if mode == "scoped":
            rf.weight_noise(lin, "weight", std=0.1)
        elif mode == "unscoped":
            rf.register_parametrization(lin, "weight", Unscoped(WeightNoise(0.1)))
        _step(_linear_loss(lin, x, o))  # warm up
        results[mode] = _step(_linear_loss(lin, x, o))
    plain, unscoped, scoped = results["plain"], results["unscoped"], results["scoped"]
    assert unscoped.kept >= plain.kept + weight, results
    assert scoped.kept < plain.kept + weight // 8, results
    # The peak: the derived weight exists once at a time in either case.
    assert scoped.peak <= plain.peak + 3 * weight, results
    # The tape: the plain matmul keeps the input (the weight is a parameter),
    # the unscoped one the noisy weight too, the scoped one nothing more.
    assert unscoped.saved >= plain.saved + weight, results
    assert scoped.saved < plain.saved + weight // 8, results
    assert scoped.saved_peak < plain.saved_peak + weight // 8, results


def test_lstm_with_weight_dropout_over_100_steps_keeps_no_mask() -> None:
    f, h, steps = rf.Dim(8, name="f"), rf.Dim(64, name="h"), 100
    weight = 4 * 64 * 64 * 4
    x = rf.convert_to_tensor(np.ones((1, 8), np.float32), dims=[rf.batch_dim, f])
    results = {}
    for mode in ("plain", "unscoped", "scoped"):
        rf.set_random_seed(2)
        lstm = rf.LSTM(f, h)
        if mode == "scoped":
            rf.weight_dropout(lstm, "rec_weight", drop_prob=0.3)
        elif mode == "unscoped":
            rf.register_parametrization(lstm, "rec_weight", Unscoped(WeightDropout(0.3)))

        def loss(lstm: rf.LSTM = lstm) -> rf.Tensor:
            state = lstm.default_initial_state(batch_dims=[])
            total = None
            for _ in range(steps):
                y, state = lstm(x, state=state, spatial_dim=rf.single_step_dim)
                s = rf.reduce_sum(y, axis=[rf.batch_dim, h])
                total = s if total is None else total + s
            return total

        results[mode] = _step(loss)
    plain, unscoped, scoped = results["plain"], results["unscoped"], results["scoped"]
    assert unscoped.kept >= plain.kept + steps * weight, results
    assert scoped.kept < plain.kept + weight, results
    assert scoped.peak < plain.peak + 4 * weight, results
    assert unscoped.saved >= plain.saved + steps * weight, results
    assert scoped.saved < plain.saved + weight // 8, results
    assert scoped.saved_peak < plain.saved_peak + weight // 8, results
