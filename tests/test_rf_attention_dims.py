"""Dim handling around attention: ``replace_dim`` into a dim of unknown size,
``dot_attention`` with key dims the query lacks, and positional encodings of a
dynamic dim bound to new lengths."""

from __future__ import annotations

import numpy as np
import pytest

import verjus.rf as rf
from verjus.rf import Dim


def _lengths(batch: Dim, values: list[int]) -> rf.Tensor:
    return rf.convert_to_tensor(np.array(values, np.int32), dims=[batch])


def test_replace_dim_into_unknown_dim_takes_the_size() -> None:
    batch, feat = Dim(2, name="batch"), Dim(3, name="feat")
    time = Dim(_lengths(batch, [4, 2]), name="time")
    x = rf.convert_to_tensor(
        np.arange(24, dtype=np.float32).reshape(2, 4, 3), dims=[batch, time, feat]
    )
    kv = Dim(None, name="kv")
    y, out = rf.replace_dim(x, in_dim=time, out_dim=kv)
    assert out == kv
    assert set(y.dims) == {batch, kv, feat}
    np.testing.assert_array_equal(kv.dyn_size_ext.numpy(), [4, 2])
    np.testing.assert_array_equal(y.copy_transpose([batch, kv, feat]).numpy(), x.numpy())
    static = Dim(None, name="static")
    z, _ = rf.replace_dim(x, in_dim=feat, out_dim=static)
    assert static.axis_size == 3
    assert set(z.dims) == {batch, time, static}
    with pytest.raises(ValueError, match=r"replace_dim: out_dim .* must have the size"):
        rf.replace_dim(x, in_dim=feat, out_dim=Dim(5, name="other"))


def test_dot_attention_broadcasts_over_key_dims_the_query_lacks() -> None:
    rng = np.random.default_rng(0)
    batch, kv, feat, q_dim = Dim(2, name="b"), Dim(5, name="kv"), Dim(4, name="f"), Dim(3, name="q")
    q = rng.standard_normal((3, 4)).astype(np.float32)
    k = rng.standard_normal((2, 5, 4)).astype(np.float32)
    v = rng.standard_normal((2, 5, 4)).astype(np.float32)
    att = rf.dot_attention(
        rf.convert_to_tensor(q, dims=[q_dim, feat]),
        rf.convert_to_tensor(k, dims=[batch, kv, feat]),
        rf.convert_to_tensor(v, dims=[batch, kv, feat]),
        key_dim=feat,
        axis=kv,
    )
    assert set(att.dims) == {q_dim, batch, feat}
    energy = np.einsum("qf,bkf->bqk", q, k) / 2.0
    weights = np.exp(energy - energy.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    want = np.einsum("bqk,bkf->bqf", weights, v)
    got = att.copy_transpose([batch, q_dim, feat]).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_positional_encodings_follow_a_rebound_dim() -> None:
    batch, feat = Dim(1, name="batch"), Dim(4, name="feat")
    time = Dim(_lengths(batch, [6]), name="time")
    first = rf.sinusoidal_positional_encoding(spatial_dim=time, feat_dim=feat)
    rel_first, rel_dim_first = rf.relative_positional_encoding(
        query_spatial_dim=time, key_value_spatial_dim=time, feat_dim=feat
    )
    time.dyn_size_ext = _lengths(batch, [3])  # the next step's lengths
    second = rf.sinusoidal_positional_encoding(spatial_dim=time, feat_dim=feat)
    rel_second, rel_dim_second = rf.relative_positional_encoding(
        query_spatial_dim=time, key_value_spatial_dim=time, feat_dim=feat
    )
    assert first.shape[0] == 6
    assert second.shape[0] == 3
    np.testing.assert_array_equal(second.copy_transpose([time, feat]).numpy(), first.numpy()[:3])
    assert rel_dim_first.dimension == 11
    assert rel_dim_second.dimension == 5
    np.testing.assert_array_equal(rel_second.numpy(), rel_first.numpy()[3:8])
