"""``verjus.Runner``: swaps under load from many threads, refusals that name
the mismatch, swapping from checkpoint folders and watching one."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import NETS

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


def test_the_shipped_mlp_and_cnn_swap_by_their_interface_names(tmp_path: Path) -> None:
    mlp = verjus.Network.from_def(NETS / "fashion_mlp.json")
    cnn = verjus.Network.from_def(NETS / "fashion_cnn.json", seed=1)
    assert mlp.outputs == cnn.outputs == [("logits", (10,))]
    runner = verjus.Runner(mlp)
    x = np.random.default_rng(0).random((3, 1, 28, 28), dtype=np.float32)
    assert runner.swap(cnn) == 1
    np.testing.assert_array_equal(runner.infer(x), cnn(x))
    mlp.save(tmp_path / "mlp")
    assert runner.swap_from(tmp_path / "mlp") == 2
    np.testing.assert_array_equal(runner.infer(x), mlp(x))
    # The interface names survive the checkpoint, and a served copy keeps them.
    assert verjus.Network.load(tmp_path / "mlp").outputs == [("logits", (10,))]
    assert verjus.Runner.from_checkpoint(tmp_path / "mlp").swap(cnn) == 1


def test_a_renamed_output_is_refused_naming_both_sides() -> None:
    named = {**WIDE, "outputs": [{"name": "scores", "from": "fc2"}]}
    runner = verjus.Runner(verjus.Network.from_def(MLP))
    with pytest.raises(ValueError, match=r'refused: output "fc2" .* called "scores"') as info:
        runner.swap(verjus.Network.from_def(named))
    assert 'serving outputs: "fc2" [4]; new outputs: "scores" [4]' in str(info.value)
    assert runner.generation == 0


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


def test_a_callback_can_stop_the_watching(tmp_path: Path, monkeypatch) -> None:
    folder = tmp_path / "serving"
    verjus.Network.from_def(MLP, seed=1).save(folder)
    runner = verjus.Runner.from_checkpoint(folder)
    unraisable: list = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    arrived = threading.Event()

    def stop_after_first(event: dict) -> None:
        runner.stop_watching()
        arrived.set()

    runner.watch(folder, interval=0.01, on_event=stop_after_first)
    verjus.Network.from_def(MLP, seed=2).save(folder)
    assert arrived.wait(10)
    time.sleep(0.1)
    verjus.Network.from_def(MLP, seed=3).save(folder)  # no longer watched
    time.sleep(0.2)
    assert unraisable == []
    assert runner.generation == 1
    runner.watch(folder, interval=0.01)  # and it can watch again
    runner.stop_watching()


EXIT_DURING_CALLBACK = """
import sys, time
import verjus
folder = sys.argv[1]
mlp = {
    "inputs": [{"name": "x", "shape": [4]}],
    "layers": [{"name": "fc", "type": "Linear", "out_features": 2}],
}
verjus.Network.from_def(mlp, seed=0).save(folder)
runner = verjus.Runner.from_checkpoint(folder)
def slow(event):
    for _ in range(300):
        time.sleep(0.001)  # releases the GIL, as logging or I/O would
    print("callback finished", flush=True)
runner.watch(folder, interval=0.01, on_event=slow)
verjus.Network.from_def(mlp, seed=1).save(folder)
time.sleep(0.1)  # the watcher is inside the callback now
print("exiting", flush=True)
"""


def test_exit_while_a_callback_runs_waits_for_it(tmp_path: Path) -> None:
    # Before, the interpreter's shutdown killed the watcher thread inside the
    # callback and the process aborted (SIGABRT).
    run = subprocess.run(
        [sys.executable, "-c", EXIT_DURING_CALLBACK, str(tmp_path / "serving")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.split() == ["exiting", "callback", "finished"]
