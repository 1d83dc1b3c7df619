"""Tests of the native module ``verjus._verjus`` itself (crates/verjus-py).

The package's own tests go through ``verjus.Network`` / ``verjus.Trainer``; these
pin down the contract of the bindings underneath: error types and messages,
zero-copy inputs, sharing between a network and its trainers, weights files,
and that computing releases the GIL.
"""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from verjus import _verjus

MLP = {
    "inputs": [{"name": "x", "shape": [6]}],
    "layers": [
        {"name": "fc1", "type": "Linear", "out_features": 16},
        {"name": "act", "type": "ReLU"},
        {"name": "fc2", "type": "Linear", "out_features": 3},
    ],
    "outputs": ["fc2"],
}
ADAM = json.dumps({"rule": {"Adam": {"lr": 0.01}}})
CE = json.dumps({"type": "SoftmaxCrossEntropy", "label_smoothing": 0.0})


def mlp(seed: int = 0) -> _verjus.Network:
    return _verjus.Network.from_json(json.dumps(MLP), seed)


def batch(rng: np.random.Generator, n: int = 32) -> tuple[np.ndarray, np.ndarray]:
    x = rng.standard_normal((n, 6)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64) + (x[:, 1] > 0)
    return x, y


def test_introspection() -> None:
    net = mlp()
    assert net.inputs() == [("x", [6])]
    assert net.outputs() == [("fc2", [3])]
    assert net.parameter_count() == 6 * 16 + 16 + 16 * 3 + 3
    d = net.descriptors()
    assert [x["path"] for x in d] == ["fc1", "act", "fc2"]
    assert d[0]["params"] == [("fc1.weight", [16, 6]), ("fc1.bias", [16])]
    assert d[0]["input_shapes"] == [[6]]
    assert d[0]["output_shape"] == [16]
    assert d[0]["shares"] is None
    assert d[0]["live"] is True
    again = _verjus.Network.from_json(net.to_json(), 0)
    assert again.outputs() == net.outputs()
    assert _verjus.devices()[0] == "cpu"


def test_forward_zero_copy_equals_converted(rng: np.random.Generator) -> None:
    net = mlp()
    x = rng.standard_normal((5, 6)).astype(np.float32)
    (ref,) = net.forward([x])
    assert ref.shape == (5, 3)
    assert ref.dtype == np.float32
    wide = np.zeros((5, 12), dtype=np.float32)
    wide[:, ::2] = x
    # Converted copies hold the same float32 values, so the results are identical.
    for converted in (
        x.astype(np.float64),
        np.asfortranarray(x),
        wide[:, ::2],
        x.astype(">f4"),
        x.tolist(),
    ):
        (out,) = net.forward([converted])
        np.testing.assert_array_equal(out, ref)
    (half,) = net.forward([x.astype(np.float16)])
    np.testing.assert_allclose(half, ref, atol=5e-2)
    # A read-only input works and is left alone.
    ro = x.copy()
    ro.setflags(write=False)
    np.testing.assert_array_equal(net.forward([ro])[0], ref)


def test_forward_errors_name_input_and_shapes() -> None:
    net = mlp()
    with pytest.raises(
        ValueError, match=r'input "x".*expected \[4, 6\].*unit shape \[6\].*got \[4, 5\]'
    ):
        net.forward([np.zeros((4, 5), np.float32)])
    with pytest.raises(TypeError, match=r"input 0.*int32"):
        net.forward([np.zeros((4, 6), np.int32)])
    with pytest.raises(TypeError, match=r"input 0.*object"):
        net.forward([np.array([None, 1], dtype=object)])
    with pytest.raises(TypeError, match="single array"):
        net.forward(np.zeros((4, 6), np.float32))
    with pytest.raises(TypeError, match="sequence"):
        net.forward(3)
    with pytest.raises(ValueError, match="expected 1 input"):
        net.forward([np.zeros((4, 6), np.float32)] * 2)


def test_bad_definitions_are_value_errors() -> None:
    with pytest.raises(ValueError, match="JSON"):
        _verjus.Network.from_json("{")
    bad = json.loads(json.dumps(MLP))
    bad["layers"][0]["out_featres"] = 3
    with pytest.raises(ValueError, match="out_featres"):
        _verjus.Network.from_json(json.dumps(bad))
    bad = json.loads(json.dumps(MLP))
    bad["outputs"] = ["nope"]
    with pytest.raises(ValueError, match="nope"):
        _verjus.Network.from_json(json.dumps(bad))


def test_trainer_settings_errors() -> None:
    net = mlp()
    with pytest.raises(ValueError, match="betas"):
        _verjus.Trainer(net, json.dumps({"rule": {"Adam": {"lr": 0.1, "betas": [0.9, 0.9]}}}), CE)
    with pytest.raises(ValueError, match="beta1"):
        _verjus.Trainer(net, json.dumps({"rule": {"Adam": {"lr": 0.1, "beta1": 2.0}}}), CE)
    with pytest.raises(ValueError, match="loss_json"):
        _verjus.Trainer(net, ADAM, json.dumps({"type": "Hinge"}))
    with pytest.raises(ValueError, match="device"):
        _verjus.Trainer(net, ADAM, CE, "tpu")
    if "cuda:0" not in _verjus.devices():
        with pytest.raises(RuntimeError, match="cuda"):
            _verjus.Trainer(net, ADAM, CE, "cuda")
    # Defaults of the optional fields, and the configuration read back.
    t = _verjus.Trainer(net, json.dumps({"rule": {"Sgd": {"lr": 0.5}}, "clip_norm": 1.0}), CE)
    cfg = json.loads(t.solver_json())
    assert cfg == {
        "rule": {
            "Sgd": {
                "lr": 0.5,
                "momentum": 0.0,
                "dampening": 0.0,
                "nesterov": False,
                "weight_decay": 0.0,
            }
        },
        "schedule": "Constant",
        "clip_norm": 1.0,
    }


def test_trainer_trains_the_shared_network(rng: np.random.Generator) -> None:
    net = mlp()
    x, y = batch(rng, 64)
    before = net.forward([x])[0]
    t = _verjus.Trainer(net, ADAM, CE)
    assert t.network is net
    assert t.step == 0
    assert t.lr == pytest.approx(0.01)
    first, out = t.train_minibatch(x, y)
    assert out.shape == (64, 3)
    assert np.isfinite(first)
    np.testing.assert_allclose(out, before, rtol=1e-5, atol=1e-6)
    for _ in range(50):
        loss, _ = t.train_minibatch(x, y)
    assert t.step == 51
    assert loss < first
    after = net.forward([x])[0]
    assert not np.allclose(after, before)
    ev_loss, acc = t.evaluate(x, y, 16)
    assert acc is not None
    assert 0.0 <= acc <= 1.0
    assert ev_loss == pytest.approx(loss, rel=0.2)
    # Labels of any integer type; float targets give no accuracy.
    assert t.evaluate(x, y.astype(np.int32))[0] == pytest.approx(ev_loss)
    # A second trainer takes the network over.
    t2 = _verjus.Trainer(net, json.dumps({"rule": {"Sgd": {"lr": 0.1}}}), CE)
    with pytest.raises(RuntimeError, match="superseded"):
        t.train_minibatch(x, y)
    t2.train_minibatch(x, y)
    assert t2.step == 1
    with pytest.raises(ValueError, match="targets"):
        t2.train_minibatch(x, y[:10])
    with pytest.raises(TypeError, match="y"):
        t2.train_minibatch(x, np.array(["a"] * 64))


def test_regression_with_float_targets(rng: np.random.Generator) -> None:
    net = _verjus.Network.from_json(
        json.dumps(
            {
                "inputs": [{"name": "x", "shape": [3]}],
                "layers": [{"name": "fc", "type": "Linear", "out_features": 2}],
                "outputs": ["fc"],
            }
        )
    )
    t = _verjus.Trainer(
        net, json.dumps({"rule": {"Sgd": {"lr": 0.1}}}), json.dumps({"type": "Mse"})
    )
    x = rng.standard_normal((128, 3)).astype(np.float32)
    y = x[:, :2] * 2.0 - x[:, 2:]
    data = _verjus.Dataset(x, y)
    first = t.train_epoch(data, 32, 0)
    for epoch in range(1, 30):
        last = t.train_epoch(data, 32, epoch)
    assert last < first * 0.1
    loss, acc = t.evaluate_dataset(data, 50)
    assert acc is None
    assert loss == pytest.approx(last, rel=0.5)


def test_dataset_and_epoch(rng: np.random.Generator) -> None:
    x, y = batch(rng, 100)
    data = _verjus.Dataset(x.astype(np.float64), y.astype(np.uint8))
    assert len(data) == 100
    with pytest.raises(ValueError, match=r"\[100\]"):
        _verjus.Dataset(x, y[:50])
    with pytest.raises(TypeError, match="x"):
        _verjus.Dataset(x.astype(np.int64), y)
    t = _verjus.Trainer(mlp(), ADAM, CE)
    seen: list[tuple[int, float]] = []
    mean = t.train_epoch(data, 32, 7, lambda n, loss: seen.append((n, loss)))
    assert [n for n, _ in seen] == [32, 32, 32, 4]
    assert mean == pytest.approx(sum(n * loss for n, loss in seen) / 100, rel=1e-5)
    assert t.step == 4

    def stop(n: int, loss: float) -> None:
        raise KeyError("stop here")

    with pytest.raises(KeyError, match="stop here"):
        t.train_epoch(data, 10, None, stop)
    assert t.step == 5, "the epoch stops at the step whose callback raised"
    with pytest.raises(ValueError, match="batch_size"):
        t.train_epoch(data, 0)


def test_train_epoch_releases_the_gil() -> None:
    rng = np.random.default_rng(0)
    net = _verjus.Network.from_json(
        json.dumps(
            {
                "inputs": [{"name": "x", "shape": [512]}],
                "layers": [
                    {"name": "fc1", "type": "Linear", "out_features": 1024},
                    {"name": "fc2", "type": "Linear", "out_features": 1024},
                    {"name": "fc3", "type": "Linear", "out_features": 10},
                ],
                "outputs": ["fc3"],
            }
        )
    )
    data = _verjus.Dataset(rng.random((4096, 512), dtype=np.float32), rng.integers(0, 10, 4096))
    t = _verjus.Trainer(net, ADAM, CE)
    ticks = 0
    running = threading.Event()
    done = threading.Event()

    def tick() -> None:
        nonlocal ticks
        running.set()
        while not done.is_set():
            ticks += 1
            time.sleep(0.001)

    thread = threading.Thread(target=tick)
    thread.start()
    running.wait()
    start_ticks, start = ticks, time.perf_counter()
    # One step per epoch: no callback and no GIL hand-over between steps.
    t.train_epoch(data, 4096)
    elapsed = time.perf_counter() - start
    progressed = ticks - start_ticks
    done.set()
    thread.join()
    assert elapsed > 0.05, "the step was too quick to tell"
    # Holding the GIL for the whole step would allow a tick or two.
    assert progressed >= 10, f"{progressed} ticks in {elapsed:.3f} s"


def test_threads_share_a_network_while_it_trains(rng: np.random.Generator) -> None:
    net = mlp()
    t = _verjus.Trainer(net, ADAM, CE)
    x, y = batch(rng, 256)
    data = _verjus.Dataset(x, y)
    errors: list[BaseException] = []

    def infer() -> None:
        try:
            for _ in range(30):
                (out,) = net.forward([x[:8]])
                assert out.shape == (8, 3)
                assert np.all(np.isfinite(out))
                net.state_dict()
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=infer) for _ in range(3)]
    for th in threads:
        th.start()
    # The callback runs with the GIL held while the readers wait for the lock
    # without it: no deadlock.
    for epoch in range(3):
        t.train_epoch(data, 16, epoch, lambda n, loss: time.sleep(0.001))
    for th in threads:
        th.join(timeout=60)
    assert not any(th.is_alive() for th in threads)
    assert errors == []
    assert t.step == 3 * 16


def test_state_dict_round_trip_and_validation(rng: np.random.Generator) -> None:
    a, b = mlp(1), mlp(2)
    x, _ = batch(rng)
    sd = a.state_dict()
    assert [n for n, _ in sd] == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    assert sd[0][1].shape == (16, 6)
    assert sd[0][1].dtype == np.float32
    sd[0][1][:] = 0  # a copy: changing it leaves the network alone
    assert np.any(a.state_dict()[0][1] != 0)
    b.load_state_dict(dict(a.state_dict()))
    np.testing.assert_array_equal(a.forward([x])[0], b.forward([x])[0])

    c = mlp(3)
    before = c.forward([x])[0]
    bad = dict(a.state_dict())
    bad["fc2.bias"] = np.zeros(4, np.float32)
    with pytest.raises(ValueError, match=r'"fc2.bias".*expected \[3\], got \[4\]'):
        c.load_state_dict(bad)
    bad = dict(a.state_dict())
    bad["fc9.weight"] = np.zeros(1, np.float32)
    with pytest.raises(ValueError, match=r"fc9.weight"):
        c.load_state_dict(bad)
    partial = dict(a.state_dict())
    del partial["fc1.bias"]
    with pytest.raises(ValueError, match=r"fc1.bias.*missing"):
        c.load_state_dict(partial)
    np.testing.assert_array_equal(c.forward([x])[0], before)
    c.load_state_dict(partial, strict=False)
    assert not np.array_equal(c.forward([x])[0], before)
    with pytest.raises(TypeError):
        c.load_state_dict([1, 2])
    with pytest.raises(TypeError, match=r"fc1.weight"):
        c.load_state_dict({"fc1.weight": np.zeros((16, 6), np.int64)})


def test_weights_files(tmp_path: Path, rng: np.random.Generator) -> None:
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    a = mlp(1)
    path = tmp_path / "w.safetensors"
    a.save_weights(str(path))
    assert [p.name for p in tmp_path.iterdir()] == ["w.safetensors"]
    on_disk = safetensors_numpy.load_file(str(path))
    for name, value in a.state_dict():
        np.testing.assert_array_equal(on_disk[name], value)
    b = mlp(2)
    b.load_weights(path)
    x, _ = batch(rng)
    np.testing.assert_array_equal(a.forward([x])[0], b.forward([x])[0])
    # A file written by the safetensors package loads too.
    on_disk["fc2.bias"] = np.array([1, 2, 3], np.float32)
    other = tmp_path / "other.safetensors"
    safetensors_numpy.save_file(on_disk, str(other))
    b.load_weights(str(other))
    np.testing.assert_array_equal(dict(b.state_dict())["fc2.bias"], [1, 2, 3])

    before = b.state_dict()
    good = path.read_bytes()
    for name, data in [
        ("truncated", good[:-3]),
        ("empty", b""),
        ("garbage", b"\x10" + b"\x00" * 7 + b"not json at all!"),
    ]:
        broken = tmp_path / f"{name}.safetensors"
        broken.write_bytes(data)
        with pytest.raises(OSError, match=re.escape(f"{name}.safetensors")):
            b.load_weights(str(broken))
    with pytest.raises(OSError, match=r"missing.safetensors"):
        b.load_weights(str(tmp_path / "missing.safetensors"))
    with pytest.raises(OSError, match="nowhere"):
        b.save_weights(str(tmp_path / "nowhere" / "w.safetensors"))
    # A valid file for another network: a shape error, nothing replaced.
    wrong = tmp_path / "wrong.safetensors"
    safetensors_numpy.save_file({"fc1.weight": np.zeros((2, 2), np.float32)}, str(wrong))
    with pytest.raises(ValueError, match=r"fc1.weight"):
        b.load_weights(str(wrong), strict=False)
    for (n1, v1), (n2, v2) in zip(before, b.state_dict(), strict=True):
        assert n1 == n2
        np.testing.assert_array_equal(v1, v2)


def test_fashion_mnist(fashion_dir: Path, tmp_path: Path) -> None:
    images, labels = _verjus.fashion_mnist("test", str(fashion_dir))
    assert images.dtype == np.float32
    assert images.shape[1:] == (1, 28, 28)
    assert labels.dtype == np.int64
    assert labels.shape == (images.shape[0],)
    assert images.min() >= 0.0
    assert images.max() <= 1.0
    with pytest.raises(ValueError, match="split"):
        _verjus.fashion_mnist("validation", str(fashion_dir))
    with pytest.raises(OSError, match="apt-get install dataset-fashion-mnist"):
        _verjus.fashion_mnist("train", str(tmp_path))
