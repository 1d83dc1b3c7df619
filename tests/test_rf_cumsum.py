"""rf.cumsum (verjus.rf.cumsum, a masked triangular matmul): against numpy over
a dynamic dim whose padding holds NaN, finite differences, RETURNN's rf on its
torch backend where installed, and bad input."""

from __future__ import annotations

import numpy as np
import pytest
from test_rf_grad import check_gradient
from test_rf_math_forms import TOL, Mirror, returnn_rf, time_dim, uniform

from verjus import rf

LENS = [5, 2, 0, 3]


def padded(values: np.ndarray, lens: list[int], fill: float) -> np.ndarray:
    """``values`` ``[batch, time, ...]`` with ``fill`` past each length."""
    out = values.copy()
    for i, n in enumerate(lens):
        out[i, n:] = fill
    return out


def reference(values: np.ndarray, lens: list[int]) -> np.ndarray:
    """numpy's cumsum over each sequence's own frames; the padding holds the
    sequence's total."""
    return np.cumsum(padded(values, lens, 0), axis=1)


def test_cumsum_over_a_dynamic_dim_ignores_the_padding() -> None:
    t, f = time_dim(LENS), rf.Dim(3, name="f")
    values = padded(uniform(1, (4, 5, 3)), LENS, np.nan)
    x = rf.convert_to_tensor(values, dims=[rf.batch_dim, t, f])
    out = rf.cumsum(x, spatial_dim=t)
    assert out.dims == x.dims
    assert out.dtype == "float32"
    np.testing.assert_allclose(out.numpy(), reference(values, LENS), **TOL)


def test_cumsum_keeps_the_dim_order_and_static_dims() -> None:
    t, f = time_dim(LENS), rf.Dim(3, name="f")
    values = uniform(2, (3, 4, 5))  # [f, batch, time]
    x = rf.convert_to_tensor(values, dims=[f, rf.batch_dim, t])
    out = rf.cumsum(x, spatial_dim=t)
    assert out.dims == (f, rf.batch_dim, t)
    want = reference(values.transpose(1, 2, 0), LENS).transpose(2, 0, 1)
    np.testing.assert_allclose(out.numpy(), want, **TOL)
    # Along a static dim, nothing is masked.
    out = rf.cumsum(x, spatial_dim=f)
    np.testing.assert_allclose(out.numpy(), np.cumsum(values, axis=0), **TOL)


def test_cumsum_of_integers() -> None:
    t = time_dim(LENS)
    values = padded(np.random.default_rng(3).integers(0, 2, (4, 5)).astype(np.int32), LENS, 7)
    x = rf.convert_to_tensor(values, dims=[rf.batch_dim, t])
    out = rf.cumsum(x, spatial_dim=t)
    assert out.dtype == "int32"
    np.testing.assert_array_equal(out.numpy(), reference(values, LENS))


def test_cumsum_gradient() -> None:
    t, f = time_dim([3, 1]), rf.Dim(2, name="f")
    values = uniform(4, (2, 3, 2))
    check_gradient(lambda x: rf.cumsum(x, spatial_dim=t), values, [rf.batch_dim, t, f])
    # A padding frame of the source gets no gradient, even summed over all frames.
    x = rf.convert_to_tensor(values, dims=[rf.batch_dim, t, f], requires_grad=True)
    y = rf.reduce_sum(rf.cumsum(x, spatial_dim=t), axis=[rf.batch_dim, t, f], use_mask=False)
    g = rf.gradient(y, x).numpy()
    # Frame s counts in the sums of frames s.. (the padding frames hold the total).
    np.testing.assert_array_equal(g[0, :, 0], [3, 2, 1])
    np.testing.assert_array_equal(g[1, :, 0], [3, 0, 0])


def test_cumsum_bad_input() -> None:
    t, f = time_dim(LENS), rf.Dim(3, name="f")
    x = rf.convert_to_tensor(uniform(5, (4, 5)), dims=[rf.batch_dim, t])
    with pytest.raises(ValueError, match=r"cumsum: spatial_dim f is not a dim of source"):
        rf.cumsum(x, spatial_dim=f)
    with pytest.raises(ValueError, match=r"cumsum: source must be float32.*got bool"):
        rf.cumsum(rf.greater(x, 0.0), spatial_dim=t)


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_cumsum_against_returnn(dtype: str) -> None:
    rrf = returnn_rf()
    m = Mirror()
    t, f = time_dim(LENS), rf.Dim(3, name="f")
    values = padded(uniform(6, (4, 5, 3), -5, 5), LENS, 0).astype(dtype)
    x = rf.convert_to_tensor(values, dims=[rf.batch_dim, t, f])
    mine = rf.cumsum(x, spatial_dim=t)
    theirs = rrf.cumsum(m.tensor(x), spatial_dim=m.dims[t])
    assert theirs.dtype == mine.dtype
    np.testing.assert_allclose(mine.numpy(), m.numpy(theirs, mine), **TOL)
