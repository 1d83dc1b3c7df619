"""``rf.TensorArray``, ``rf.scan(..., return_tensor_arrays=True)`` and
``rf.cum_concat_step``: values and gradients against numpy and hand-written
loops, dynamic dims per sequence, the error cases, and (where RETURNN and torch
are installed) the same calls in RETURNN's rf on its torch backend."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from verjus import rf

TOL = {"rtol": 1e-5, "atol": 1e-6}
LENS = [3, 0, 1]


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def total(y: rf.Tensor) -> rf.Tensor:
    return rf.reduce_sum(y, axis=y.dims)


def dyn_time(lens: list[int]) -> rf.Dim:
    lengths = rf.convert_to_tensor(np.array(lens, np.int32), dims=[rf.batch_dim])
    return rf.Dim(lengths, name="time")


def test_unstack_then_stack_gives_the_tensor_back_with_gradient() -> None:
    f, t = rf.Dim(2, name="f"), rf.Dim(4, name="t")
    xv = rng(0).standard_normal((4, 2)).astype(np.float32)
    x = rf.convert_to_tensor(xv, dims=[t, f], requires_grad=True)
    array = rf.TensorArray.unstack(x, axis=t)
    assert len(array) == 4
    assert set(array.tensor_template.dims) == {f}
    for i in range(4):
        np.testing.assert_array_equal(array[i].numpy(), xv[i])
    np.testing.assert_array_equal(array[rf.convert_to_tensor(2, dtype="int32")].numpy(), xv[2])
    back = array.stack(axis=t)
    np.testing.assert_array_equal(back.copy_transpose([t, f]).numpy(), xv)
    seed = rng(1).standard_normal((4, 2)).astype(np.float32)
    loss = total(back * rf.convert_to_tensor(seed, dims=[t, f]))
    np.testing.assert_allclose(rf.gradient(loss, x).numpy(), seed, **TOL)


def test_push_back_builds_a_list_and_stack_puts_it_over_the_axis() -> None:
    f = rf.Dim(3, name="f")
    frames = [rng(i).standard_normal(3).astype(np.float32) for i in range(3)]
    array = rf.TensorArray(rf.zeros([f]))
    for v in frames:
        array = array.push_back(rf.convert_to_tensor(v, dims=[f]))
    assert len(array) == 3
    t = rf.Dim(3, name="t")
    np.testing.assert_array_equal(array.stack(axis=t).copy_transpose([t, f]).numpy(), frames)
    np.testing.assert_array_equal(array[-1].numpy(), frames[-1])


def test_stack_of_no_entries_is_zeros_over_an_empty_axis() -> None:
    f, t = rf.Dim(3, name="f"), rf.Dim(0, name="t")
    out = rf.TensorArray(rf.ones([f])).stack(axis=t)
    assert set(out.dims) == {f, t}
    assert out.copy_transpose([t, f]).numpy().shape == (0, 3)


def test_tensor_array_errors_say_what_is_wrong() -> None:
    f, g = rf.Dim(3, name="f"), rf.Dim(2, name="g")
    array = rf.TensorArray(rf.zeros([f]))
    with pytest.raises(ValueError, match=r"template has dims \[f\], the tensor \[g\]"):
        array.push_back(rf.zeros([g]))
    with pytest.raises(ValueError, match="axis t has size 2, the array 0 entries"):
        array.stack(axis=rf.Dim(2, name="t"))
    with pytest.raises(IndexError, match="index 0 is out of range for 0 entries"):
        _ = array[0]
    with pytest.raises(ValueError, match="axis g is not a dim"):
        rf.TensorArray.unstack(rf.zeros([f]), axis=g)
    with pytest.raises(TypeError, match="tensor_template must be a Tensor"):
        rf.TensorArray(3.0)


def test_scan_return_tensor_arrays_gives_the_unstacked_frames() -> None:
    f = rf.Dim(2, name="f")
    time = dyn_time(LENS)
    xv = rng(2).standard_normal((3, 3, 2)).astype(np.float32)
    x = rf.convert_to_tensor(xv, dims=[rf.batch_dim, time, f], requires_grad=True)
    s0 = rf.zeros([f])
    frame = rf.gather(x, indices=0, axis=time)  # the template of one frame

    def body(x_t: rf.Tensor, s: rf.Tensor) -> tuple[tuple, rf.Tensor]:
        return (x_t * 2.0, None), s

    arrays, _, dim = rf.scan(
        spatial_dim=time,
        initial=s0,
        xs=x,
        ys=(frame, None),
        body=body,
        return_tensor_arrays=True,
    )
    ta, none = arrays
    assert none is None
    assert isinstance(ta, rf.TensorArray)
    assert len(ta) == 3
    for i in range(3):  # not masked: every entry's frame i, as computed
        np.testing.assert_allclose(
            ta[i].copy_transpose([rf.batch_dim, f]).numpy(), 2 * xv[:, i], **TOL
        )
    stacked, _, _ = rf.scan(
        spatial_dim=time, initial=s0, xs=x, ys=frame, body=lambda x_t, s: (x_t * 2.0, s)
    )
    valid = rf.sequence_mask(dim)
    masked = rf.where(valid, ta.stack(axis=dim), 0.0, allow_broadcast_all_sources=True)
    order = [rf.batch_dim, dim, f]
    np.testing.assert_allclose(
        masked.copy_transpose(order).numpy(), stacked.copy_transpose(order).numpy(), **TOL
    )


def test_cum_concat_step_over_a_static_axis_from_empty() -> None:
    f = rf.Dim(2, name="f")
    axis = rf.Dim(0, name="acc0")
    frames = [rng(10 + i).standard_normal(2).astype(np.float32) for i in range(3)]
    leaves = [rf.convert_to_tensor(v, dims=[f], requires_grad=True) for v in frames]
    accum = rf.zeros([axis, f])
    for k, src in enumerate(leaves):
        accum, axis = rf.cum_concat_step(src, prev_accum=accum, axis=axis)
        assert axis.size == k + 1
        np.testing.assert_array_equal(accum.copy_transpose([axis, f]).numpy(), frames[: k + 1])
    weights = rng(20).standard_normal((3, 2)).astype(np.float32)
    loss = total(accum * rf.convert_to_tensor(weights, dims=[axis, f]))
    for k, src in enumerate(leaves):
        np.testing.assert_allclose(rf.gradient(loss, src).numpy(), weights[k], **TOL)


def test_cum_concat_step_appends_after_each_sequence_end() -> None:
    f = rf.Dim(2, name="f")
    time = dyn_time(LENS)
    prev = rng(3).standard_normal((3, 3, 2)).astype(np.float32)
    src = rng(4).standard_normal((3, 2)).astype(np.float32)
    out_dim = rf.Dim(rf.convert_to_tensor(np.array(LENS, np.int32) + 1, dims=[rf.batch_dim]))
    out, dim = rf.cum_concat_step(
        rf.convert_to_tensor(src, dims=[rf.batch_dim, f]),
        prev_accum=rf.convert_to_tensor(prev, dims=[rf.batch_dim, time, f]),
        axis=time,
        out_spatial_dim=out_dim,
    )
    assert dim == out_dim
    got = out.copy_transpose([rf.batch_dim, dim, f]).numpy()
    for b, n in enumerate(LENS):
        np.testing.assert_array_equal(got[b, :n], prev[b, :n])
        np.testing.assert_array_equal(got[b, n], src[b])
    _, default = rf.cum_concat_step(
        rf.convert_to_tensor(src, dims=[rf.batch_dim, f]),
        prev_accum=rf.convert_to_tensor(prev, dims=[rf.batch_dim, time, f]),
        axis=time,
    )
    np.testing.assert_array_equal(default.dyn_size_ext.numpy(), np.array(LENS) + 1)


def test_cum_concat_step_errors() -> None:
    f, g, t = rf.Dim(2, name="f"), rf.Dim(3, name="g"), rf.Dim(1, name="t")
    with pytest.raises(ValueError, match="source must have prev_accum's dims without t"):
        rf.cum_concat_step(rf.zeros([g]), prev_accum=rf.zeros([t, f]), axis=t)
    with pytest.raises(ValueError, match="axis g is not a dim of prev_accum"):
        rf.cum_concat_step(rf.zeros([f]), prev_accum=rf.zeros([t, f]), axis=g)


def returnn_rf():
    torch = pytest.importorskip("torch", reason="RETURNN's rf runs on its torch backend")
    pytest.importorskip("returnn", reason="RETURNN's own rf is the reference here")
    import returnn.frontend as rrf
    from returnn.frontend.tensor_array import TensorArray
    from returnn.tensor import Dim, Tensor

    rrf.select_backend_torch()
    return torch, rrf, SimpleNamespace(TensorArray=TensorArray, Dim=Dim, Tensor=Tensor)


def test_tensor_array_and_cum_concat_step_against_returnn() -> None:
    torch, rrf, their = returnn_rf()
    xv = rng(5).standard_normal((3, 3, 2)).astype(np.float32)
    srcv = rng(6).standard_normal((3, 2)).astype(np.float32)
    batch, feat = their.Dim(3, name="batch"), their.Dim(2, name="f")
    their_time = their.Dim(
        their.Tensor("len", [batch], "int32", raw_tensor=torch.tensor(LENS, dtype=torch.int32))
    )
    tx = their.Tensor("x", [batch, their_time, feat], "float32", raw_tensor=torch.tensor(xv))
    tsrc = their.Tensor("s", [batch, feat], "float32", raw_tensor=torch.tensor(srcv))
    their_arr = their.TensorArray.unstack(tx, axis=their_time)
    their_out, their_dim = rrf.cum_concat_step(tsrc, prev_accum=tx, axis=their_time)

    time = dyn_time(LENS)
    f = rf.Dim(2, name="f")
    x = rf.convert_to_tensor(xv, dims=[rf.batch_dim, time, f])
    arr = rf.TensorArray.unstack(x, axis=time)
    assert len(arr) == len(their_arr._backend_tensor_array)
    for i in range(len(arr)):
        np.testing.assert_array_equal(
            arr[i].copy_transpose([rf.batch_dim, f]).numpy(),
            their_arr[i].copy_transpose([batch, feat]).raw_tensor.numpy(),
        )
    out, dim = rf.cum_concat_step(
        rf.convert_to_tensor(srcv, dims=[rf.batch_dim, f]), prev_accum=x, axis=time
    )
    their_lens = their_dim.dyn_size_ext.raw_tensor.numpy()
    np.testing.assert_array_equal(dim.dyn_size_ext.numpy(), their_lens)
    mine = out.copy_transpose([rf.batch_dim, dim, f]).numpy()
    theirs = their_out.copy_transpose([batch, their_dim, feat]).raw_tensor.numpy()
    valid = np.arange(their_lens.max())[None, :] < their_lens[:, None]
    np.testing.assert_array_equal(mine[valid], theirs[valid])


def test_scan_return_tensor_arrays_against_returnn() -> None:
    torch, rrf, their = returnn_rf()
    xv = rng(7).standard_normal((3, 3, 2)).astype(np.float32)
    batch, feat = their.Dim(3, name="batch"), their.Dim(2, name="f")
    their_time = their.Dim(
        their.Tensor("len", [batch], "int32", raw_tensor=torch.tensor(LENS, dtype=torch.int32))
    )
    tx = their.Tensor("x", [batch, their_time, feat], "float32", raw_tensor=torch.tensor(xv))
    ts0 = their.Tensor("s0", [batch, feat], "float32", raw_tensor=torch.zeros(3, 2))
    their_ys, their_s, _ = rrf.scan(
        spatial_dim=their_time,
        initial=ts0,
        xs=tx,
        ys=ts0,
        body=lambda x_t, s: (rrf.tanh(x_t + s), rrf.tanh(x_t + s)),
        return_tensor_arrays=True,
    )
    time = dyn_time(LENS)
    f = rf.Dim(2, name="f")
    x = rf.convert_to_tensor(xv, dims=[rf.batch_dim, time, f])
    s0 = rf.gather(x, indices=0, axis=time) * 0.0  # zeros over [batch, f]
    ys, s, _ = rf.scan(
        spatial_dim=time,
        initial=s0,
        xs=x,
        ys=s0,
        body=lambda x_t, s: (rf.tanh(x_t + s), rf.tanh(x_t + s)),
        return_tensor_arrays=True,
    )
    assert isinstance(ys, rf.TensorArray)
    assert isinstance(their_ys, their.TensorArray)
    assert len(ys) == len(their_ys._backend_tensor_array)
    for i in range(len(ys)):
        np.testing.assert_allclose(
            ys[i].copy_transpose([rf.batch_dim, f]).numpy(),
            their_ys[i].copy_transpose([batch, feat]).raw_tensor.numpy(),
            **TOL,
        )
    np.testing.assert_allclose(
        s.copy_transpose([rf.batch_dim, f]).numpy(),
        their_s.copy_transpose([batch, feat]).raw_tensor.numpy(),
        **TOL,
    )
