"""rf.silu / swish, gating / glu, scaled_gradient, Dropout (shared masks along dims),
range_over_dim's dtype, and the sinusoidal / relative positional encodings: against
numpy, finite differences, RETURNN's rf on its torch backend where installed, and
bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from test_rf_grad import check_gradient

from verjus import rf

TOL = {"rtol": 1e-5, "atol": 1e-5}


def uniform(seed: int, shape: tuple[int, ...]) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-3, 3, shape).astype(np.float32)


def time_dim(lens: list[int]) -> rf.Dim:
    return rf.Dim(rf.convert_to_tensor(np.array(lens, np.int32), dims=[rf.batch_dim]), name="time")


def test_silu_values_swish_alias_and_finite_differences() -> None:
    f = rf.Dim(5, name="f")
    x = uniform(1, (3, 5))
    got = rf.silu(rf.convert_to_tensor(x, dims=[rf.batch_dim, f])).numpy()
    np.testing.assert_allclose(got, x / (1 + np.exp(-x)), **TOL)
    assert rf.swish is rf.silu
    check_gradient(rf.silu, x, [rf.batch_dim, f])


def test_glu_and_gating() -> None:
    f = rf.Dim(6, name="f")
    x = uniform(2, (2, 6))
    xt = rf.convert_to_tensor(x, dims=[rf.batch_dim, f], feature_dim=f)
    y, half = rf.glu(xt)
    assert half.dimension == 3
    assert half == f.div_left(2)
    a, b = x[:, :3], x[:, 3:]
    np.testing.assert_allclose(y.numpy(), a / (1 + np.exp(-b)), **TOL)
    y2, _ = rf.gating(xt, axis=f, gate_func=rf.relu, act_func=rf.tanh)
    np.testing.assert_allclose(y2.numpy(), np.tanh(a) * np.maximum(b, 0), **TOL)
    check_gradient(lambda t: rf.glu(t, axis=f)[0], x, [rf.batch_dim, f])
    odd = rf.Dim(5, name="odd")
    with pytest.raises(ValueError, match="static and even"):
        rf.glu(rf.convert_to_tensor(uniform(3, (2, 5)), dims=[rf.batch_dim, odd]), axis=odd)
    with pytest.raises(ValueError, match="give axis"):
        rf.glu(rf.convert_to_tensor(x, dims=[rf.batch_dim, f]))


def test_scaled_gradient() -> None:
    f = rf.Dim(4, name="f")
    x = uniform(3, (2, 4))
    xt = rf.convert_to_tensor(x, dims=[rf.batch_dim, f], requires_grad=True)
    assert not rf.scaled_gradient(xt, 0.0).requires_grad  # 0 is stop_gradient
    for scale in (-1.0, 0.5, 3.0):
        y = rf.scaled_gradient(xt, scale)
        np.testing.assert_array_equal(y.numpy(), x)  # the forward is exactly the identity
        loss = rf.reduce_sum(y * y, axis=[rf.batch_dim, f])
        np.testing.assert_allclose(rf.gradient(loss, xt).numpy(), 2 * x * scale, **TOL)
    s = rf.convert_to_tensor(np.array([1.0, -1.0, 2.0, 0.0], np.float32), dims=[f])
    loss = rf.reduce_sum(rf.scaled_gradient(xt, s), axis=[rf.batch_dim, f])
    np.testing.assert_allclose(rf.gradient(loss, xt).numpy(), np.broadcast_to(s.numpy(), (2, 4)))


def test_dropout_module_shares_the_mask_along_other_dims() -> None:
    t, f = rf.Dim(50, name="t"), rf.Dim(40, name="f")
    x = rf.ones([t, f])
    rf.set_random_seed(3)
    drop = rf.Dropout(0.5, axis=f, on_forward=True)
    y = drop(x).copy_transpose([t, f]).numpy()
    assert set(np.unique(y)) <= {0.0, 2.0}
    assert (y == y[0:1]).all()  # one mask over f, the same at every t
    assert 0 < (y[0] == 0).sum() < 40
    assert (rf.Dropout(0.5)(x).numpy() == 1).all()  # outside training: unchanged
    with pytest.raises(ValueError, match="drop_prob"):
        rf.Dropout(1.0)


def test_range_over_dim_dtype() -> None:
    d = rf.Dim(4, name="d")
    assert rf.range_over_dim(d).dtype == "int32"
    r = rf.range_over_dim(d, dtype="float32")
    assert r.dtype == "float32"
    np.testing.assert_array_equal(r.numpy(), [0, 1, 2, 3])
    with pytest.raises(ValueError, match="complex"):
        rf.range_over_dim(d, dtype="complex")


def sinusoidal(positions: np.ndarray, feat: int, base: float = 1e4) -> np.ndarray:
    half = feat // 2
    div = np.exp(np.arange(half) * -(math.log(base) / (half - 1)))
    arg = positions[..., None] * div
    return np.concatenate([np.sin(arg), np.cos(arg)], -1)


def test_sinusoidal_positional_encoding() -> None:
    t, f = time_dim([5, 2, 3]), rf.Dim(8, name="f")
    enc = rf.sinusoidal_positional_encoding(spatial_dim=t, feat_dim=f)
    assert enc.dims == (t, f)
    assert enc.feature_dim == f
    np.testing.assert_allclose(enc.numpy(), sinusoidal(np.arange(5.0), 8), atol=1e-5)
    assert rf.sinusoidal_positional_encoding(spatial_dim=t, feat_dim=f) is enc  # cached
    step = rf.sinusoidal_positional_encoding(spatial_dim=rf.single_step_dim, feat_dim=f, offset=3)
    np.testing.assert_allclose(step.numpy(), sinusoidal(np.array(3.0), 8), atol=1e-5)
    off = rf.convert_to_tensor(np.array([0, 2], np.int32), dims=[rf.Dim(2, name="b")])
    shifted = rf.sinusoidal_positional_encoding(spatial_dim=rf.Dim(3), feat_dim=f, offset=off)
    want = sinusoidal(np.arange(3.0)[:, None] + np.array([0, 2]), 8)
    np.testing.assert_allclose(shifted.numpy(), want, atol=1e-5)
    with pytest.raises(ValueError, match="static and even"):
        rf.sinusoidal_positional_encoding(spatial_dim=t, feat_dim=rf.Dim(7))
    with pytest.raises(ValueError, match="needs an offset"):
        rf.sinusoidal_positional_encoding(spatial_dim=rf.single_step_dim, feat_dim=f)


def sin_cos(arg: np.ndarray) -> np.ndarray:
    return np.concatenate([np.sin(arg), np.cos(arg)], -1)


def test_relative_positional_encoding() -> None:
    q, f = time_dim([4, 2]), rf.Dim(6, name="f")
    enc, out = rf.relative_positional_encoding(
        query_spatial_dim=q, key_value_spatial_dim=q, feat_dim=f
    )
    assert out.dimension == 7
    assert enc.dims == (out, f)
    div = np.exp(np.arange(3) * -(2 * math.log(1e4) / 6))
    arg = np.arange(-3, 4)[:, None] * div
    np.testing.assert_allclose(enc.numpy(), sin_cos(arg), atol=1e-5)
    again = rf.relative_positional_encoding(
        query_spatial_dim=q, key_value_spatial_dim=q, feat_dim=f
    )
    assert again[1] == out
    step, kv = rf.relative_positional_encoding(
        query_spatial_dim=rf.single_step_dim, key_value_spatial_dim=q, feat_dim=f
    )
    assert kv == q
    assert step.dims == (q, rf.batch_dim, f)
    arg = (np.arange(4)[:, None] - np.array([3, 1]))[..., None] * div
    np.testing.assert_allclose(step.numpy(), sin_cos(arg), atol=1e-5)


def test_positional_encodings_against_returnn() -> None:
    torch = pytest.importorskip("torch", reason="RETURNN's rf runs on its torch backend here")
    pytest.importorskip("returnn", reason="RETURNN's own encodings are the reference here")
    import returnn.frontend as rrf
    from returnn.tensor import Dim, Tensor

    rrf.select_backend_torch()
    lens = [6, 3]
    batch = Dim(2, name="batch")
    tt = Dim(
        Tensor("l", [batch], "int32", raw_tensor=torch.tensor(lens, dtype=torch.int32)), name="t"
    )
    tk = Dim(9, name="k")
    tf = Dim(8, name="f")
    mt, mk, mf = time_dim(lens), rf.Dim(9, name="k"), rf.Dim(8, name="f")
    theirs = rrf.sinusoidal_positional_encoding(spatial_dim=tt, feat_dim=tf)
    mine = rf.sinusoidal_positional_encoding(spatial_dim=mt, feat_dim=mf)
    np.testing.assert_allclose(mine.numpy(), theirs.copy_transpose([tt, tf]).raw_tensor, atol=2e-5)
    theirs, tout = rrf.relative_positional_encoding(
        query_spatial_dim=tt, key_value_spatial_dim=tk, feat_dim=tf
    )
    mine, mout = rf.relative_positional_encoding(
        query_spatial_dim=mt, key_value_spatial_dim=mk, feat_dim=mf
    )
    assert mout.dimension == tout.get_dim_value()
    want = theirs.copy_transpose([tout, tf]).raw_tensor.numpy()
    np.testing.assert_allclose(mine.copy_transpose([mout, mf]).numpy(), want, atol=2e-5)
