"""RETURNN's dim arithmetic between dims, as RETURNN model code writes it
(``demo-rf-pt-benchmark.py``'s ``att_num_heads * enc_dim``,
``key_dim.div_left(heads)``, ``Dim(..., kind=Dim.Types.Feature)``), and the dims
merge_dims / concat make: the same formulas, so the same dim objects."""

from __future__ import annotations

import numpy as np
import pytest

import verjus.rf as rf


def test_product_of_dims_is_one_dim_and_merge_dims_makes_it():
    heads, feat = rf.Dim(2, name="heads"), rf.Dim(3, name="feat")
    product = heads * feat
    assert product.dimension == 6
    assert product is not feat
    assert heads * feat == product  # cached: the same dim
    x = rf.convert_to_tensor(
        np.arange(12, dtype=np.float32).reshape(2, 2, 3), dims=[rf.batch_dim, heads, feat]
    )
    x.feature_dim = feat
    merged, out_dim = rf.merge_dims(x, dims=[heads, feat])
    assert out_dim == product
    assert merged.feature_dim == product  # the feature dim was merged


def test_product_with_a_dynamic_dim_and_errors():
    lengths = rf.convert_to_tensor(np.array([3, 1], np.int32), dims=[rf.batch_dim])
    time = rf.Dim(lengths, name="time")
    feat = rf.Dim(2, name="feat")
    np.testing.assert_array_equal((time * feat).dyn_size_ext.numpy(), [6, 2])
    other = rf.Dim(rf.convert_to_tensor(np.array([2, 2], np.int32), dims=[rf.batch_dim]), name="t2")
    with pytest.raises(ValueError, match="two dynamic dims have no product dim"):
        time * other


def test_division_by_a_static_dim():
    key, heads = rf.Dim(8, name="key"), rf.Dim(2, name="heads")
    assert key.div_left(heads).dimension == 4
    assert key.div_left(heads) == key.div_left(2)
    lengths = rf.convert_to_tensor(np.array([3], np.int32), dims=[rf.batch_dim])
    with pytest.raises(TypeError, match="the divisor must be an int or a static dim"):
        key.div_left(rf.Dim(lengths, name="time"))


def test_concat_of_static_dims_is_their_sum():
    a, b = rf.Dim(2, name="a"), rf.Dim(3, name="b")
    x = rf.convert_to_tensor(np.ones((1, 2), np.float32), dims=[rf.batch_dim, a])
    y = rf.convert_to_tensor(np.ones((1, 3), np.float32), dims=[rf.batch_dim, b])
    x.feature_dim, y.feature_dim = a, b
    joined = rf.concat_features(x, y)
    assert joined.feature_dim == a + b


def test_dim_kinds_are_accepted():
    assert rf.Dim.Types.Time == rf.Dim.Types.Spatial
    d = rf.Dim(4, name="enc", kind=rf.Dim.Types.Feature)
    assert d.dimension == 4
    with pytest.raises(ValueError, match=r"kind must be one of Dim\.Types"):
        rf.Dim(4, name="enc", kind="colour")


def test_feature_dim_axis_reads_and_sets_the_feature_dim():
    a, b = rf.Dim(2, name="a"), rf.Dim(3, name="b")
    x = rf.zeros([rf.batch_dim, a, b])
    x.feature_dim_axis = -1
    assert x.feature_dim == b
    assert x.feature_dim_axis == 2
    x.feature_dim_axis = None
    assert x.feature_dim is None
    with pytest.raises(ValueError, match="feature_dim_axis 5 is not an axis"):
        x.feature_dim_axis = 5


def test_scan_state_entries_may_come_back_in_any_order():
    t = rf.Dim(3, name="t")

    def body(x, state):
        new = rf.State()
        new.b = state.b + 1.0  # set in the other order than the initial state
        new.a = state.a + x
        return x, new

    def zeros():
        return rf.convert_to_tensor(np.zeros(2, np.float32), dims=[rf.batch_dim])

    initial = rf.State(a=zeros(), b=zeros())
    xs = rf.convert_to_tensor(np.ones((2, 3), np.float32), dims=[rf.batch_dim, t])
    _, last, _ = rf.scan(spatial_dim=t, initial=initial, xs=xs, ys=zeros(), body=body)
    np.testing.assert_array_equal(last.a.numpy(), [3.0, 3.0])
    np.testing.assert_array_equal(last.b.numpy(), [3.0, 3.0])
