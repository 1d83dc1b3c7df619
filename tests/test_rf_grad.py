"""rf.gradient through the Rust tape against numpy finite differences."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from verjus import rf

EPS = 1e-2


def check_gradient(
    f: Callable[[rf.Tensor], rf.Tensor], values: np.ndarray, dims: list[rf.Dim]
) -> None:
    """``rf.gradient(sum(f(x) * r), x)`` vs central differences of the same loss."""
    r = None

    def loss(v: np.ndarray, requires_grad: bool = False) -> tuple[rf.Tensor, rf.Tensor]:
        nonlocal r
        x = rf.convert_to_tensor(v, dims=dims, requires_grad=requires_grad)
        y = f(x)
        if r is None:
            r = np.random.default_rng(5).uniform(-1, 1, y.shape).astype(np.float32)
            r[~np.isfinite(y.numpy())] = 0
        weights = rf.convert_to_tensor(r, dims=list(y.dims))
        finite = rf.where(rf.convert_to_tensor(r != 0, dims=list(y.dims)), y, 0.0)
        total = rf.reduce_sum(finite * weights, axis=list(y.dims), use_mask=False)
        return total, x

    total, x = loss(values, requires_grad=True)
    g = rf.gradient(total, x)
    assert g.dims == x.dims
    numeric = np.zeros_like(values)
    for i in np.ndindex(values.shape):
        plus, minus = values.copy(), values.copy()
        plus[i] += EPS
        minus[i] -= EPS
        numeric[i] = (loss(plus)[0].numpy() - loss(minus)[0].numpy()) / (2 * EPS)
    np.testing.assert_allclose(g.numpy(), numeric, rtol=2e-2, atol=2e-2)


def time_dim(lengths: list[int]) -> rf.Dim:
    lens = rf.convert_to_tensor(np.array(lengths, np.int32), dims=[rf.batch_dim])
    return rf.Dim(lens, name="time")


@pytest.mark.parametrize(
    "name",
    ["reduce_sum", "reduce_mean", "reduce_max", "reduce_logsumexp", "softmax", "log_softmax"],
)
def test_masked_ops(name: str) -> None:
    t, f = time_dim([3, 1, 0]), rf.Dim(2, name="f")
    values = np.random.default_rng(2).uniform(-1, 1, (3, 3, 2)).astype(np.float32)
    op = getattr(rf, name)
    check_gradient(lambda x: op(x, axis=t), values, [rf.batch_dim, t, f])


def test_matmul_and_binary_ops() -> None:
    b, i, k = rf.batch_dim, rf.Dim(3, name="i"), rf.Dim(4, name="k")
    rng = np.random.default_rng(3)
    w = rf.convert_to_tensor(rng.standard_normal((4, 2)).astype(np.float32), dims=[k, rf.Dim(2)])
    values = rng.uniform(0.5, 1.5, (2, 3, 4)).astype(np.float32)
    check_gradient(lambda x: rf.matmul(x, w, reduce=k), values, [b, i, k])
    bias = rf.convert_to_tensor(rng.uniform(0.5, 1.5, 4).astype(np.float32), dims=[k])
    check_gradient(lambda x: (x * bias - 1) / (x + bias) ** 2, values, [b, i, k])


@pytest.mark.parametrize("name", ["relu", "gelu", "sigmoid", "tanh", "exp", "square", "abs"])
def test_unary_ops(name: str) -> None:
    f = rf.Dim(4, name="f")
    values = np.array([-1.2, -0.4, 0.3, 1.1], np.float32)
    check_gradient(getattr(rf, name), values, [f])


def test_gradient_of_unrelated_and_stopped() -> None:
    f = rf.Dim(3, name="f")
    x = rf.convert_to_tensor([1.0, 2.0, 3.0], dims=[f], requires_grad=True)
    y = rf.reduce_sum(x * x, axis=f)
    np.testing.assert_array_equal(rf.gradient(y, x).numpy(), [2, 4, 6])
    other = rf.convert_to_tensor([0.0, 0.0, 0.0], dims=[f], requires_grad=True)
    np.testing.assert_array_equal(rf.gradient(y, other).numpy(), [0, 0, 0])
    with pytest.raises(RuntimeError, match="does not require a gradient"):
        rf.gradient(rf.stop_gradient(y), x)
