"""``verjus.Runner``: swaps under load from many threads, refusals that name
the mismatch, swapping from checkpoint folders and watching one."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest

import verjus

MLP = {
    "inputs": [{"name": "x", "shape": [12]}],
    "layers": [
        {"name": "fc1", "type": "Linear", "out_features": 16},
        {"name": "act", "type": "Tanh"},
        {"name": "fc2", "type": "Linear", "out_features": 4},
    ],
}
WIDE = {
    "inputs": [{"name": "x", "shape": [12]}],
    "layers": [
        {"name": "fc1", "type": "Linear", "out_features": 40},
        {"name": "act", "type": "ReLU"},
        {"name": "fc2", "type": "Linear", "out_features": 4},
    ],
}
NARROW = {
    "inputs": [{"name": "x", "shape": [12]}],
    "layers": [{"name": "fc2", "type": "Linear", "out_features": 3}],
}


def test_four_threads_infer_while_fifty_swaps_happen() -> None:
    nets = [verjus.Network.from_def(MLP, seed=1), verjus.Network.from_def(WIDE, seed=2)]
    x = np.random.default_rng(0).standard_normal((3, 12), dtype=np.float32)
    expected = [net(x) for net in nets]
    runner = verjus.Runner(nets[0])
    errors: list[BaseException] = []
    seen = [0, 0]
    done = threading.Event()

    def serve() -> None:
        try:
            for _ in range(2000):
                (out,), generation = runner.infer_with_generation(x)
                # Generation g serves nets[g % 2]: exactly that network's output.
                np.testing.assert_array_equal(out, expected[generation % 2])
                seen[generation % 2] += 1
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=serve) for _ in range(4)]
    for t in threads:
        t.start()
    for i in range(50):
        assert runner.swap(nets[(i + 1) % 2]) == i + 1
        time.sleep(0.001)
    for t in threads:
        t.join()
    done.set()
    assert errors == []
    assert sum(seen) == 8000
    assert runner.generation == 50


def test_swaps_that_do_not_fit_are_refused(tmp_path: Path) -> None:
    runner = verjus.Runner(verjus.Network.from_def(MLP))
    x = np.ones((2, 12), np.float32)
    before = runner.infer(x)
    with pytest.raises(ValueError, match=r"refused.*\[4\].*\[3\]"):
        runner.swap(verjus.Network.from_def(NARROW))
    verjus.Network.from_def(NARROW).save(tmp_path / "narrow")
    with pytest.raises(ValueError, match="refused"):
        runner.swap_from(tmp_path / "narrow")
    with pytest.raises(OSError, match="nothing-here"):
        runner.swap_from(tmp_path / "nothing-here")
    assert runner.generation == 0
    np.testing.assert_array_equal(runner.infer(x), before)


def test_watch_swaps_in_new_checkpoints(tmp_path: Path) -> None:
    folder = tmp_path / "serving"
    a, b = verjus.Network.from_def(MLP, seed=1), verjus.Network.from_def(WIDE, seed=2)
    a.save(folder)
    runner = verjus.Runner.from_checkpoint(folder)
    events: list[dict] = []
    arrived = threading.Event()

    def on_event(event: dict) -> None:
        events.append(event)
        arrived.set()

    runner.watch(folder, interval=0.01, on_event=on_event)
    try:
        b.save(folder)
        assert arrived.wait(10)
        assert events == [{"event": "swapped", "generation": 1}]
        x = np.ones((1, 12), np.float32)
        np.testing.assert_array_equal(runner.infer(x), b(x))
        arrived.clear()
        verjus.Network.from_def(NARROW).save(folder)
        assert arrived.wait(10)
        assert events[1]["event"] == "refused"
        assert "[3]" in events[1]["error"]
        assert runner.generation == 1
    finally:
        runner.stop_watching()
