"""Transposed convolution (verjus.rf.transposed_conv) against a numpy reference,
per sequence over a dynamic dim, with finite-difference gradients; and the
convolution modules with ``in_dim == out_dim``."""

from __future__ import annotations

import numpy as np
import pytest

import verjus.rf as rf
from verjus.rf import Dim


def _reference(x: np.ndarray, w: np.ndarray, bias: np.ndarray, stride: int, out_len: int):
    """``x`` ``[T, I]``, ``w`` ``[I, O, K]``: ``out[t*s + k] += x[t] @ w[:, :, k]``."""
    out = np.tile(bias, (max(out_len, (len(x) - 1) * stride + w.shape[2]), 1)).astype(np.float64)
    for t in range(len(x)):
        for k in range(w.shape[2]):
            out[t * stride + k] += x[t] @ w[:, :, k]
    return out[:out_len]


@pytest.mark.parametrize(
    ("k", "s", "output_padding"), [(4, 3, None), (3, 3, None), (2, None, None), (3, 2, 1)]
)
def test_transposed_conv1d_matches_reference(k: int, s: int | None, output_padding) -> None:
    rng = np.random.default_rng(0)
    batch, in_dim, out_dim = Dim(2, name="batch"), Dim(3, name="in"), Dim(4, name="out")
    lengths = np.array([5, 3], np.int32)
    time = Dim(rf.convert_to_tensor(lengths, dims=[batch]), name="time")
    x = rng.standard_normal((2, 5, 3)).astype(np.float32)
    x[1, 3:] = 1e3  # padding: must not reach the result
    mod = rf.TransposedConv1d(
        in_dim, out_dim, k, strides=s, padding="valid", output_padding=output_padding
    )
    mod.bias.assign(rng.standard_normal(4).astype(np.float32))
    y, y_dim = mod(rf.convert_to_tensor(x, dims=[batch, time, in_dim]), in_spatial_dim=time)
    stride = s or k
    extra = max(k - stride, 0) if output_padding is None else k - stride + output_padding
    np.testing.assert_array_equal(y_dim.dyn_size_ext.numpy(), lengths * stride + extra)
    got = y.copy_transpose([batch, y_dim, out_dim]).numpy()
    w = mod.filter.copy_transpose([in_dim, out_dim, mod.filter_size[0]]).numpy()
    for b, n in enumerate(lengths):
        want = _reference(x[b, :n], w, mod.bias.numpy(), stride, n * stride + extra)
        np.testing.assert_allclose(got[b, : len(want)], want, rtol=1e-4, atol=1e-4)


def test_transposed_conv_gradient_by_finite_differences() -> None:
    rng = np.random.default_rng(1)
    time, in_dim, out_dim, fdim = (
        Dim(3, name="t"),
        Dim(2, name="i"),
        Dim(2, name="o"),
        Dim(3, name="f"),
    )
    x0 = rng.standard_normal((3, 2))
    w = rf.convert_to_tensor(
        rng.standard_normal((2, 2, 3)).astype(np.float32), dims=[in_dim, out_dim, fdim]
    )
    weights = rng.standard_normal((3 * 2 + 1, 2))  # a fixed projection of the output to a scalar

    def loss(x_np: np.ndarray, grad: bool = False):
        x = rf.convert_to_tensor(x_np.astype(np.float32), dims=[time, in_dim], requires_grad=grad)
        y, (y_dim,) = rf.transposed_conv(
            x,
            in_dim=in_dim,
            out_dim=out_dim,
            in_spatial_dims=[time],
            filter=w,
            filter_size=[fdim],
            padding="valid",
            strides=[2],
        )
        proj = rf.convert_to_tensor(weights.astype(np.float32), dims=[y_dim, out_dim])
        return x, rf.reduce_sum(y * proj, axis=[y_dim, out_dim])

    x, value = loss(x0, grad=True)
    (analytic,) = [rf.gradient(value, x).copy_transpose([time, in_dim]).numpy()]
    eps = 1e-2
    numeric = np.zeros_like(x0)
    for idx in np.ndindex(*x0.shape):
        plus, minus = x0.copy(), x0.copy()
        plus[idx] += eps
        minus[idx] -= eps
        numeric[idx] = (loss(plus)[1].numpy() - loss(minus)[1].numpy()) / (2 * eps)
    np.testing.assert_allclose(analytic, numeric, rtol=1e-2, atol=1e-2)


def test_transposed_conv_rejects_same_padding() -> None:
    a, b, time = Dim(2, name="a"), Dim(3, name="b"), Dim(4, name="t")
    mod = rf.TransposedConv1d(a, b, 2, padding="same")
    x = rf.zeros([time, a])
    with pytest.raises(NotImplementedError, match=r"transposed_conv: only padding='valid'"):
        mod(x, in_spatial_dim=time)


@pytest.mark.parametrize("cls", [rf.Conv1d, rf.TransposedConv1d])
def test_conv_modules_with_in_dim_equal_out_dim(cls) -> None:
    rng = np.random.default_rng(2)
    feat, time = Dim(3, name="feat"), Dim(5, name="time")
    mod = cls(feat, feat, 2, padding="valid")
    # The filter's input side is a copy of feat (a tensor cannot have a dim twice).
    assert mod.filter_in_dim != feat
    assert mod.filter_in_dim.dimension == 3
    x = rng.standard_normal((5, 3)).astype(np.float32)
    y, y_dim = mod(rf.convert_to_tensor(x, dims=[time, feat]), in_spatial_dim=time)
    assert set(y.dims) == {y_dim, feat}
    w = mod.filter.copy_transpose(
        [
            mod.out_dim if cls is rf.Conv1d else mod.filter_in_dim,
            mod.filter_in_dim if cls is rf.Conv1d else mod.out_dim,
            mod.filter_size[0],
        ]
    ).numpy()
    got = y.copy_transpose([y_dim, feat]).numpy()
    if cls is rf.Conv1d:  # out[t, o] = sum_k x[t + k] @ w[o, :, k]
        want = np.stack([sum(w[:, :, j] @ x[t + j] for j in range(2)) for t in range(4)])
    else:
        want = _reference(x, w, np.zeros(3), 2, 10)
    np.testing.assert_allclose(got, want + mod.bias.numpy(), rtol=1e-5, atol=1e-5)
