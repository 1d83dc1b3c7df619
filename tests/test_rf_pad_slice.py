"""verjus.rf.pad and verjus.rf.slicing: RETURNN's ``rf.pad`` with a Tensor value
and ``rf.slice`` with Tensor positions and a negative end on a dynamic dim,
values against numpy per sequence, finite-difference gradients, bad input."""

from __future__ import annotations

import numpy as np
import pytest
from test_rf_grad import check_gradient

from verjus import rf

LENS = [3, 1, 2]


def seq() -> tuple[rf.Tensor, np.ndarray, rf.Dim, rf.Dim]:
    t = rf.Dim(rf.convert_to_tensor(np.array(LENS, np.int32), dims=[rf.batch_dim]), name="time")
    f = rf.Dim(2, name="f")
    xn = np.random.default_rng(3).uniform(-1, 1, (3, 3, 2)).astype(np.float32)
    return rf.convert_to_tensor(xn, dims=[rf.batch_dim, t, f]), xn, t, f


def test_pad_tensor_value_per_sequence() -> None:
    x, xn, t, f = seq()
    vn = np.array([10.0, 20.0, 30.0], np.float32)
    value = rf.convert_to_tensor(vn, dims=[rf.batch_dim])
    out, (nt,) = rf.pad(x, axes=[t], padding=[(2, 1)], value=value)
    assert out.dims == (rf.batch_dim, nt, f)
    assert nt.dyn_size_ext.numpy().tolist() == [n + 3 for n in LENS]
    got = out.numpy()
    for b, n in enumerate(LENS):
        np.testing.assert_allclose(got[b, :2], vn[b])
        np.testing.assert_allclose(got[b, 2 : 2 + n], xn[b, :n])
        np.testing.assert_allclose(got[b, 2 + n], vn[b])
    flag = rf.pad(x > 0, axes=[t], padding=[(0, 1)], value=rf.zeros((), dtype="bool"))[0]
    assert flag.dtype == "bool"
    assert not flag.numpy()[0, LENS[0]].any()


def test_pad_tensor_value_gradient() -> None:
    a, b = rf.Dim(2, name="a"), rf.Dim(3, name="b")
    values = np.random.default_rng(4).uniform(-1, 1, (2, 3)).astype(np.float32)
    check_gradient(
        lambda v: rf.pad(v, axes=[b], padding=[(1, 1)], value=rf.reduce_sum(v, axis=b))[0],
        values,
        [a, b],
    )


def test_pad_bad_input() -> None:
    x, _, t, _ = seq()
    with pytest.raises(ValueError, match="pad: only mode='constant'"):
        rf.pad(x, axes=[t], padding=[(1, 0)], mode="reflect")
    with pytest.raises(ValueError, match="pad: 1 axes but 2 padding"):
        rf.pad(x, axes=[t], padding=[(1, 0), (0, 1)])


def test_slice_tensor_start_and_size() -> None:
    x, xn, t, f = seq()
    start = rf.convert_to_tensor(np.array([1, 0, 1], np.int32), dims=[rf.batch_dim])
    size = rf.convert_to_tensor(np.array([2, 1, 1], np.int32), dims=[rf.batch_dim])
    out, nt = rf.slice(x, axis=t, start=start, size=size)
    assert out.dims == (rf.batch_dim, nt, f)
    assert nt.dyn_size_ext.numpy().tolist() == [2, 1, 1]
    for b, (s, n) in enumerate([(1, 2), (0, 1), (1, 1)]):
        np.testing.assert_allclose(out.numpy()[b, :n], xn[b, s : s + n])
    rest, rt = rf.slice(x, axis=t, start=start)  # to each sequence's end
    assert rt != t
    assert rt.dyn_size_ext.numpy().tolist() == [2, 1, 1]
    np.testing.assert_allclose(rest.numpy()[0, :2], xn[0, 1:3])
    scalar = rf.convert_to_tensor(np.array(2, np.int32))
    head, ht = rf.slice(x, axis=t, size=scalar)
    assert ht.dimension == 2
    np.testing.assert_allclose(head.numpy(), xn[:, :2])


def test_slice_negative_end_per_sequence() -> None:
    x, xn, t, _f = seq()
    out, nt = rf.slice(x, axis=t, start=0, end=-1)
    assert nt.dyn_size_ext.numpy().tolist() == [n - 1 for n in LENS]
    for b, n in enumerate(LENS):
        np.testing.assert_allclose(out.numpy()[b, : n - 1], xn[b, : n - 1])


def test_slice_tensor_start_gradient() -> None:
    a, b = rf.Dim(2, name="a"), rf.Dim(4, name="b")
    start = rf.convert_to_tensor(np.array([1, 2], np.int32), dims=[a])
    values = np.random.default_rng(5).uniform(-1, 1, (2, 4)).astype(np.float32)
    check_gradient(lambda v: rf.slice(v, axis=b, start=start, size=2)[0], values, [a, b])


def test_slice_bad_input() -> None:
    x, _, t, _ = seq()
    start = rf.convert_to_tensor(np.array([1, 0, 1], np.int32), dims=[rf.batch_dim])
    with pytest.raises(ValueError, match="slice: give end or size"):
        rf.slice(x, axis=t, start=start, end=2, size=1)
    with pytest.raises(TypeError, match="slice: start must be an int Tensor"):
        rf.slice(x, axis=t, start=rf.convert_to_tensor(np.float32(1.0)))
