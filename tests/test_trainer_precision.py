"""Mixed precision in the static-graph Trainer and ``verjus train`` (issue 37):
``precision="bf16-mixed"`` / ``"16-mixed"`` rounds the Linear and Conv2d
products' operands (crates/verjus-nn/tests/network/precision.rs checks the
numbers exactly); here, the option's plumbing and its effect on a step."""

from __future__ import annotations

import numpy as np
import pytest

import verjus
from verjus import optim

CNN = {
    "inputs": [{"name": "x", "shape": [1, 8, 8]}],
    "layers": [
        {"name": "conv", "type": "Conv2d", "out_channels": 4, "kernel": 3, "padding": 1},
        {"name": "act", "type": "ReLU"},
        {"name": "flat", "type": "Flatten"},
        {"name": "fc", "type": "Linear", "out_features": 3},
    ],
    "outputs": ["fc"],
}


def _losses(precision: str) -> list[float]:
    net = verjus.Network.from_def(CNN, seed=5)
    trainer = verjus.Trainer(net, optim.SGD(lr=0.1), precision=precision)
    assert trainer.precision == precision
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 1, 8, 8)).astype(np.float32)
    y = rng.integers(0, 3, 16)
    return [trainer.train_minibatch(x, y, return_output=False)[0] for _ in range(5)]


def test_mixed_precision_steps_differ_from_float32_by_the_rounding_only() -> None:
    exact = _losses("32")
    assert _losses("32") == exact  # float32 is deterministic
    for precision, bound in (("bf16-mixed", 2e-2), ("16-mixed", 2e-3)):
        mixed = _losses(precision)
        assert mixed != exact, precision
        np.testing.assert_allclose(mixed, exact, rtol=bound, err_msg=precision)


def test_a_bad_precision_is_named(tmp_path) -> None:
    net = verjus.Network.from_def(CNN)
    with pytest.raises(ValueError, match="precision: expected one of 32, bf16-mixed, 16-mixed"):
        verjus.Trainer(net, optim.SGD(lr=0.1), precision="fp8")
    trainer = verjus.Trainer(net, optim.SGD(lr=0.1), precision="16-mixed")
    trainer.save_checkpoint(tmp_path / "run")
    resumed = verjus.Trainer.resume(tmp_path / "run", precision="bf16-mixed")
    assert resumed.precision == "bf16-mixed"


def test_verjus_train_takes_precision(capsys) -> None:
    from verjus.cli import _parser

    args = _parser().parse_args(["train", "net.json", "--precision", "bf16-mixed"])
    assert args.precision == "bf16-mixed"
    with pytest.raises(SystemExit):
        _parser().parse_args(["train", "net.json", "--precision", "64"])
    assert "invalid choice: '64'" in capsys.readouterr().err


def test_float16_scales_the_loss_and_skips_overflowed_steps(capsys) -> None:
    """The first step's scaled loss gradient (the squared error's, about 1 in
    size here, times 2^16) overflows float16's 65504 where the Linear layer
    rounds it: that step changes nothing and halves the scale; later steps
    train, on the float32 update up to float16's rounding."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 1, 8, 8)).astype(np.float32)
    y = np.full((16, 3), 1.5, np.float32)

    def trainer(precision: str) -> verjus.Trainer:
        net = verjus.Network.from_def(CNN, seed=5)
        return verjus.Trainer(net, optim.SGD(lr=0.01), loss="mse", precision=precision)

    mixed = trainer("16-mixed")
    assert (mixed.skipped_steps, mixed.loss_scale) == (0, 65536.0)
    before = mixed.network.state_dict()
    mixed.train_minibatch(x, y, return_output=False)
    assert (mixed.skipped_steps, mixed.loss_scale) == (1, 32768.0)
    for name, value in mixed.network.state_dict().items():
        np.testing.assert_array_equal(value, before[name], err_msg=name)
    mixed.train_minibatch(x, y, return_output=False)
    assert mixed.skipped_steps == 1
    exact = trainer("32")
    exact.train_minibatch(x, y, return_output=False)
    for name, value in mixed.network.state_dict().items():
        expected = exact.network.state_dict()[name]
        assert not np.array_equal(value, before[name]), name
        np.testing.assert_allclose(value, expected, rtol=1e-2, atol=1e-4, err_msg=name)
    # fit counts them per epoch and says so; other precisions have no scale.
    history = trainer("16-mixed").fit(x, y, epochs=1, batch_size=16, progress=False)
    assert history["skipped_steps"] == [1]
    assert "1 step skipped (float16 overflow)" in capsys.readouterr().out
    assert trainer("bf16-mixed").loss_scale == 1.0
