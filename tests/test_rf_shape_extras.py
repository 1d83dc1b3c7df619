"""Shape ops in RETURNN's corner cases: ``reshape`` with a dynamic dim not first
(the padded layout), ``repeat`` over empty sequences, ``replace_dim_v2`` of a
dim whose lengths' dims the tensor lacks, ``masked_select`` broadcasting a
missing mask dim, ``pack_padded`` binding an unknown out dim; against numpy."""

from __future__ import annotations

import numpy as np

from verjus import rf


def lens_dim(lens: list[int], name: str, over: rf.Dim = rf.batch_dim) -> rf.Dim:
    return rf.Dim(rf.convert_to_tensor(np.array(lens, np.int32), dims=[over]), name=name)


def test_reshape_dynamic_dim_not_first() -> None:
    t, f = lens_dim([3, 2], "time"), rf.Dim(4, name="f")
    xn = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    x = rf.convert_to_tensor(xn, dims=[rf.batch_dim, t, f])
    y = rf.reshape(x, in_dims=[t, f], out_dims=[f, t])
    assert y.dims == (rf.batch_dim, f, t)
    np.testing.assert_array_equal(y.numpy(), xn.reshape(2, 4, 3))


def test_repeat_all_empty() -> None:
    b = rf.Dim(2, name="b")
    t = lens_dim([0, 0], "time", b)
    x = rf.zeros([b, t])
    out, od = rf.repeat(x, in_spatial_dim=t, repeats=rf.zeros([b, t], dtype="int32"))
    assert od.dyn_size_ext.numpy().tolist() == [0, 0]
    assert out.dims == (b, od)


def test_replace_dim_v2_lengths_over_missing_dims() -> None:
    beam = rf.Dim(2, name="beam")
    h = rf.Dim(
        rf.convert_to_tensor(np.array([[1, 3], [2, 2]], np.int32), dims=[rf.batch_dim, beam])
    )
    packed = rf.Dim(3, name="packed")
    xn = np.arange(9, dtype=np.float32).reshape(3, 3)
    x = rf.convert_to_tensor(xn, dims=[packed, h])
    wide = rf.Dim(4, name="wide")
    y = rf.replace_dim_v2(x, in_dim=h, out_dim=wide)
    assert y.dims == (packed, wide)  # no batch or beam from h's lengths
    np.testing.assert_array_equal(y.numpy(), np.pad(xn, [(0, 0), (0, 1)]))


def test_masked_select_broadcasts_missing_mask_dim() -> None:
    t = lens_dim([3, 2], "time")
    idx = rf.range_over_dim(t)
    out, _pd = rf.masked_select(
        idx, mask=rf.sequence_mask([rf.batch_dim, t]), dims=[rf.batch_dim, t]
    )
    assert out.numpy().tolist() == [0, 1, 2, 0, 1]


def test_pack_padded_binds_unknown_out_dim() -> None:
    hyps = rf.Dim(2, name="hyps")
    inner = rf.Dim(
        rf.convert_to_tensor(np.array([[1, 2], [0, 3]], np.int32), dims=[rf.batch_dim, hyps]),
        name="inner",
    )
    x = rf.convert_to_tensor(
        np.arange(12, dtype=np.int32).reshape(2, 2, 3), dims=[rf.batch_dim, hyps, inner]
    )
    out_dim = rf.Dim(None, name="packed")
    packed, got = rf.pack_padded(x, dims=[hyps, inner], out_dim=out_dim)
    assert got is out_dim
    assert out_dim.dyn_size_ext.numpy().tolist() == [3, 3]
    assert packed.numpy().tolist() == [[0, 3, 4], [9, 10, 11]]
