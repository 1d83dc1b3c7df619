"""Devices: where a network lives (``net.device``), moving it (``net.to``), a
Trainer or Runner on a device, and the errors when a device is not there.

Everything here runs without a GPU: the moves are checked CPU->CPU (the Rust
move does not depend on the backend kind; its device round trips are tested in
Rust with a fake device), and each CUDA request must raise a clean
``RuntimeError`` naming what is missing. The CUDA error tests are skipped where
CUDA works.
"""

import numpy as np
import pytest
from conftest import NETS

import verjus
from verjus import optim

NO_CUDA = pytest.mark.skipif(verjus.cuda.is_available(), reason="CUDA works here")
CUDA_MISSING = r"cuda:\d.*(driver|\.so|device)|(driver|\.so|device).*cuda:\d"


def mlp(seed: int = 0, **kw) -> verjus.Network:
    return verjus.Network.from_def(NETS / "fashion_mlp.json", seed=seed, **kw)


def batch(seed: int = 0, n: int = 16):
    rng = np.random.default_rng(seed)
    return rng.random((n, 1, 28, 28), dtype=np.float32), rng.integers(0, 10, n)


def same_weights(a: verjus.Network, b: verjus.Network) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    assert list(sa) == list(sb)
    for name in sa:
        np.testing.assert_array_equal(sa[name], sb[name], err_msg=name)


def test_a_network_lives_on_the_cpu_by_default():
    net = mlp()
    assert net.device == "cpu"
    assert mlp(device="cpu").device == "cpu"
    assert "device='cpu'" in repr(net)


def test_to_returns_the_network_and_keeps_every_bit():
    net = mlp(seed=3)
    before = net.state_dict()
    x, _ = batch()
    out = net(x)
    assert net.to("cpu") is net
    assert net.device == "cpu"
    for name, value in net.state_dict().items():
        np.testing.assert_array_equal(value, before[name])
    np.testing.assert_array_equal(net(x), out)


def test_a_trainer_uses_the_networks_device_by_default():
    net = mlp()
    trainer = verjus.Trainer(net, optim.Adam())
    assert trainer.device == "cpu"
    explicit = verjus.Trainer(mlp(), optim.Adam(), device="cpu")
    assert explicit.device == "cpu"


def test_moving_a_trained_network_keeps_training_identical():
    # Two trainers, one of whose networks is moved (with the Adam state) midway.
    nets = [mlp(seed=5), mlp(seed=5)]
    trainers = [verjus.Trainer(n, optim.Adam(lr=1e-3)) for n in nets]
    for step in range(2):
        losses = [t.train_minibatch(*batch(step)) for t in trainers]
        assert losses[0][0] == losses[1][0]
    assert nets[0].to("cpu") is nets[0]
    assert trainers[0].device == "cpu"
    for step in range(2, 4):
        losses = [t.train_minibatch(*batch(step)) for t in trainers]
        assert losses[0][0] == losses[1][0]
    same_weights(*nets)


def test_a_runner_serves_on_a_device(tmp_path):
    net = mlp(seed=2)
    x, _ = batch()
    runner = verjus.Runner(net, device="cpu")
    assert runner.device == "cpu"
    np.testing.assert_array_equal(runner.infer(x), net(x))
    net.save(tmp_path / "net")
    loaded = verjus.Runner.from_checkpoint(tmp_path / "net", device="cpu")
    assert loaded.device == "cpu"
    np.testing.assert_array_equal(loaded.infer(x), net(x))
    same_weights(verjus.Network.load(tmp_path / "net", device="cpu"), net)


@pytest.mark.parametrize("name", ["tpu", "cuda:", "cuda:x", "CPU", "cuda:-1"])
def test_a_malformed_device_name_is_a_value_error(name, tmp_path):
    net = mlp()
    with pytest.raises(ValueError, match="device"):
        mlp(device=name)
    with pytest.raises(ValueError, match="device"):
        net.to(name)
    with pytest.raises(ValueError, match="device"):
        verjus.Trainer(net, optim.Adam(), device=name)
    with pytest.raises(ValueError, match="device"):
        verjus.Runner(net, device=name)
    assert net.device == "cpu"


@NO_CUDA
def test_building_on_a_missing_gpu_names_what_is_missing():
    for device in ["cuda", "cuda:0", "cuda:3"]:
        with pytest.raises(RuntimeError, match=CUDA_MISSING):
            mlp(device=device)


@NO_CUDA
def test_a_failed_move_leaves_the_network_on_the_cpu():
    net = mlp(seed=4)
    before = net.state_dict()
    x, _ = batch()
    out = net(x)
    with pytest.raises(RuntimeError, match=CUDA_MISSING):
        net.to("cuda")
    assert net.device == "cpu"
    same = net.state_dict()
    for name in before:
        np.testing.assert_array_equal(same[name], before[name])
    np.testing.assert_array_equal(net(x), out)


@NO_CUDA
def test_a_trainer_on_a_missing_gpu_leaves_the_network_usable():
    net = mlp()
    with pytest.raises(RuntimeError, match=CUDA_MISSING):
        verjus.Trainer(net, optim.Adam(), device="cuda:1")
    assert net.device == "cpu"
    trainer = verjus.Trainer(net, optim.Adam())
    trainer.train_minibatch(*batch())
    # A network being trained: a failed move changes neither it nor the trainer.
    with pytest.raises(RuntimeError, match=CUDA_MISSING):
        net.to("cuda")
    assert (net.device, trainer.device) == ("cpu", "cpu")
    trainer.train_minibatch(*batch(1))
    assert trainer.step == 2


@NO_CUDA
def test_loading_serving_and_resuming_on_a_missing_gpu_raise(tmp_path):
    net = mlp()
    trainer = verjus.Trainer(net, optim.Adam())
    trainer.save_checkpoint(tmp_path / "run")
    with pytest.raises(RuntimeError, match=CUDA_MISSING):
        verjus.Network.load(tmp_path / "run", device="cuda")
    with pytest.raises(RuntimeError, match=CUDA_MISSING):
        verjus.Runner(net, device="cuda")
    with pytest.raises(RuntimeError, match=CUDA_MISSING):
        verjus.Runner.from_checkpoint(tmp_path / "run", device="cuda")
    with pytest.raises(RuntimeError, match=CUDA_MISSING):
        verjus.Trainer.resume(tmp_path / "run", device="cuda")
