"""The Python package on a CUDA GPU, unchanged: networks, the Trainer and the
Runner (hot-swaps under load) give the CPU's results there. Each test skips,
with the reason, where no GPU can be used (``scripts/gpu_run.sh`` runs them on
a GPU machine, where ``VERJUS_REQUIRE_CUDA=1`` turns a skip into a failure)."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest
from conftest import NETS

import verjus
from verjus import optim


def _require_cuda() -> None:
    if verjus.cuda.is_available():
        return
    reason = f"needs a CUDA GPU: {verjus.cuda.unavailable_reason()}"
    if os.environ.get("VERJUS_REQUIRE_CUDA") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture
def cuda() -> str:
    _require_cuda()
    return "cuda"


def _images(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).random((n, 1, 28, 28), dtype=np.float32)


@pytest.mark.parametrize("net", ["fashion_mlp.json", "fashion_cnn.json"])
def test_a_network_moved_to_the_gpu_infers_what_it_infers_on_the_cpu(cuda: str, net: str) -> None:
    cpu = verjus.Network.from_def(NETS / net, seed=3)
    x = _images(64, 0)
    expected = cpu(x)
    gpu = verjus.Network.from_def(NETS / net, seed=3)
    gpu.to(cuda)
    np.testing.assert_allclose(gpu(x), expected, rtol=1e-4, atol=1e-4)


def test_a_trainer_on_the_gpu_follows_the_cpus_losses(cuda: str) -> None:
    x = _images(64, 2)
    y = np.random.default_rng(3).integers(0, 10, size=64).astype(np.int32)
    losses = {}
    for device in ("cpu", cuda):
        net = verjus.Network.from_def(NETS / "fashion_cnn.json", seed=5)
        trainer = verjus.Trainer(net, optim.Adam(lr=1e-3), device=device)
        losses[device] = np.array([trainer.train_minibatch(x, y)[0] for _ in range(20)])
    assert losses["cpu"][-1] < losses["cpu"][0]
    np.testing.assert_allclose(losses[cuda], losses["cpu"], rtol=0.02, atol=0.01)


def test_the_runner_hot_swaps_on_the_gpu_under_load(cuda: str) -> None:
    nets = [
        verjus.Network.from_def(NETS / "fashion_mlp.json", seed=1),
        verjus.Network.from_def(NETS / "fashion_cnn.json", seed=2),
    ]
    x = _images(8, 1)
    expected = [net(x) for net in nets]
    runner = verjus.Runner(nets[0], device=cuda)
    assert runner.device.startswith("cuda")
    errors: list[BaseException] = []
    served = [0, 0]

    def serve() -> None:
        try:
            for _ in range(300):
                (out,), generation = runner.infer_with_generation(x)
                np.testing.assert_allclose(out, expected[generation % 2], rtol=1e-4, atol=1e-4)
                served[generation % 2] += 1
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=serve) for _ in range(4)]
    for t in threads:
        t.start()
    for i in range(20):
        assert runner.swap(nets[(i + 1) % 2]) == i + 1
    for t in threads:
        t.join()
    assert errors == []
    assert sum(served) == 1200
