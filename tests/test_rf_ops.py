"""verjus.rf: the ops of the RF core's second round through the bindings --
slice/split, conv/pool and the Conv modules, per-entry gather, dense
cross_entropy, concat/pad/merge_dims over dynamic dims, the default device.
Signatures and returns follow RETURNN; values are checked against numpy."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from verjus import rf


def _time(lengths: list[int]) -> rf.Dim:
    lens = rf.convert_to_tensor(np.array(lengths, np.int32), dims=[rf.batch_dim])
    return rf.Dim(lens, name="time")


def test_slice_and_split() -> None:
    f = rf.Dim(5, name="f")
    x = rf.convert_to_tensor(np.arange(10.0).reshape(2, 5), dims=[rf.batch_dim, f])
    y, d = rf.slice(x, axis=f, start=1, end=4, step=2)
    assert isinstance(d, rf.Dim)
    assert d.dimension == 2
    assert y.dims == (rf.batch_dim, d)
    np.testing.assert_array_equal(y.numpy(), [[1, 3], [6, 8]])
    g = rf.Dim(3, name="g")
    y, d = rf.slice(x, axis=f, start=2, size=g)
    assert d == g
    np.testing.assert_array_equal(y.numpy(), [[2, 3, 4], [7, 8, 9]])
    p, q = rf.Dim(2, name="p"), rf.Dim(3, name="q")
    parts = rf.split(x, axis=f, out_dims=[p, q])
    assert isinstance(parts, tuple)
    assert [t.dims for t in parts] == [
        (rf.batch_dim, p),
        (rf.batch_dim, q),
    ]
    np.testing.assert_array_equal(parts[1].numpy(), [[2, 3, 4], [7, 8, 9]])
    with pytest.raises(ValueError, match="outside dim f"):
        rf.slice(x, axis=f, start=3, end=9)
    with pytest.raises(ValueError, match=r"\[p\]"):
        rf.split(x, axis=f, out_dims=[p])
    t = _time([3, 1])
    xt = rf.convert_to_tensor(np.arange(6.0).reshape(2, 3), dims=[rf.batch_dim, t])
    y, d = rf.slice(xt, axis=t, start=1)
    np.testing.assert_array_equal(d.dyn_size_ext.numpy(), [2, 0])
    with pytest.raises(ValueError, match="dynamic dim time"):
        rf.slice(xt, axis=t, start=-1)


def test_conv1d_module_same_and_valid() -> None:
    cin, cout = rf.Dim(2, name="in"), rf.Dim(3, name="out")
    t = _time([4, 2])
    rng = np.random.default_rng(0)
    xv = rng.standard_normal((2, 4, 2)).astype(np.float32)
    x = rf.convert_to_tensor(xv, dims=[rf.batch_dim, t, cin])
    conv = rf.Conv1d(cin, cout, 3, padding="same")
    assert [p.dims for p in conv.parameters()] == [
        (cout, cin, conv.filter_size[0]),
        (cout,),
    ]
    y, d = conv(x, in_spatial_dim=t)
    assert d == t
    assert y.dims == (rf.batch_dim, cout, t)
    assert y.feature_dim == cout
    w = conv.filter.numpy()  # [out, in, k]
    xm = xv * (np.arange(4)[None, :, None] < np.array([4, 2])[:, None, None])
    pad = np.pad(xm, ((0, 0), (1, 1), (0, 0)))
    want = np.einsum("btkc,ock->bot", np.stack([pad[:, i : i + 4] for i in range(3)], 2), w)
    np.testing.assert_allclose(y.numpy(), want, atol=1e-5)
    conv2 = rf.Conv1d(cin, cout, 2, padding="valid", strides=2, with_bias=False)
    y, d = conv2(x, in_spatial_dim=t)
    assert d != t
    assert conv2.bias is None
    np.testing.assert_array_equal(d.dyn_size_ext.numpy(), [2, 1])
    with pytest.raises(ValueError, match="padding"):
        rf.conv(
            x,
            in_dim=cin,
            out_dim=cout,
            in_spatial_dims=[t],
            filter=conv.filter,
            filter_size=conv.filter_size,
            padding="full",
        )


def test_conv2d_module_and_functional_conv() -> None:
    c, o = rf.Dim(2, name="c"), rf.Dim(4, name="o")
    h, w = rf.Dim(5, name="h"), rf.Dim(4, name="w")
    x = rf.convert_to_tensor(np.ones((1, 5, 4, 2), np.float32), dims=[rf.batch_dim, h, w, c])
    conv = rf.Conv2d(c, o, (3, 3), padding="valid", strides=(2, 1), groups=2)
    y, dims = conv(x, in_spatial_dims=[h, w])
    assert [d.dimension for d in dims] == [2, 2]
    assert y.dims == (rf.batch_dim, o, *dims)
    # All-ones input: each output is the sum of its group's filter (+ bias 0).
    f = conv.filter.numpy()  # [o, c/2, 3, 3]
    np.testing.assert_allclose(y.numpy()[0, :, 0, 0], f.sum(axis=(1, 2, 3)), rtol=1e-5)
    _out, out_dims = rf.conv(
        x,
        in_dim=c,
        out_dim=o,
        in_spatial_dims=[h, w],
        filter=conv.filter,
        filter_size=conv.filter_size,
        padding=1,
        groups=2,
    )
    assert [d.dimension for d in out_dims] == [5, 4]
    assert out_dims[0] != h
    with pytest.raises(ValueError, match="does not fit"):
        rf.conv(
            x,
            in_dim=c,
            out_dim=o,
            in_spatial_dims=[h, w],
            filter=conv.filter,
            filter_size=conv.filter_size,
            padding="same",
        )


def test_pool_functions() -> None:
    t = _time([5, 2])
    f = rf.Dim(1, name="f")
    xv = np.array([[1.0, 5.0, 2.0, 4.0, 3.0], [7.0, 6.0, 99.0, 99.0, 99.0]], np.float32)
    x = rf.convert_to_tensor(xv[:, :, None], dims=[rf.batch_dim, t, f])
    y, (d,) = rf.max_pool(x, pool_size=2, in_spatial_dims=[t])
    np.testing.assert_array_equal(d.dyn_size_ext.numpy(), [2, 1])
    np.testing.assert_array_equal(y.numpy()[:, 0], [[5, 4], [7, 0]])
    y, d = rf.max_pool1d(x, pool_size=3, strides=2, padding="same", in_spatial_dim=t)
    np.testing.assert_array_equal(d.dyn_size_ext.numpy(), [3, 1])
    np.testing.assert_array_equal(y.numpy()[:, 0], [[5, 5, 4], [7, 0, 0]])
    y, d = rf.pool1d(x, mode="avg", pool_size=3, strides=2, padding="same", in_spatial_dim=t)
    np.testing.assert_allclose(y.numpy()[0, 0], [3.0, 11 / 3, 3.5], rtol=1e-6)
    np.testing.assert_allclose(y.numpy()[1, 0, 0], 6.5, rtol=1e-6)
    h, g = rf.Dim(4, name="h"), rf.Dim(2, name="g")
    x2 = rf.convert_to_tensor(np.arange(8.0).reshape(1, 4, 2), dims=[rf.batch_dim, h, g])
    y, dims = rf.pool2d(x2, mode="max", pool_size=2, in_spatial_dims=[h, g])
    assert [d.dimension for d in dims] == [2, 1]
    np.testing.assert_array_equal(y.numpy().ravel(), [3, 7])
    with pytest.raises(ValueError, match="unknown mode"):
        rf.pool(x, mode="min", pool_size=2, in_spatial_dims=[t])
    with pytest.raises(ValueError, match="dilation_rate"):
        rf.max_pool(x, pool_size=2, dilation_rate=2, in_spatial_dims=t)


def test_gather_per_entry_and_clip() -> None:
    t = _time([3, 1])
    f = rf.Dim(2, name="f")
    xv = np.arange(12.0).reshape(2, 3, 2)
    x = rf.convert_to_tensor(xv, dims=[rf.batch_dim, t, f])
    idx = rf.convert_to_tensor(np.array([2, 0], np.int32), dims=[rf.batch_dim])
    y = rf.gather(x, indices=idx, axis=t)
    assert y.dims == (rf.batch_dim, f)
    np.testing.assert_array_equal(y.numpy(), [xv[0, 2], xv[1, 0]])
    last = rf.convert_to_tensor(np.array([9, 9], np.int32), dims=[rf.batch_dim], sparse_dim=t)
    y = rf.gather(x, indices=last, clip_to_valid=True)
    np.testing.assert_array_equal(y.numpy(), [xv[0, 2], xv[1, 0]])
    y = rf.gather(x, indices=1, axis=f)
    np.testing.assert_array_equal(y.numpy(), xv[:, :, 1])
    with pytest.raises(ValueError, match="sparse_dim"):
        rf.gather(x, indices=idx)


def test_cross_entropy_dense_targets() -> None:
    c = rf.Dim(3, name="c")
    logits = np.array([[1.0, 2.0, 3.0], [0.5, -1.0, 0.0]], np.float32)
    probs = np.array([[0.2, 0.3, 0.5], [1.0, 0.0, 0.0]], np.float32)
    x = rf.convert_to_tensor(logits, dims=[rf.batch_dim, c])
    target = rf.convert_to_tensor(probs, dims=[rf.batch_dim, c])
    log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    want = -(probs * log_p).sum(-1)
    for kind, est in [
        ("logits", x),
        ("log-probs", rf.log_softmax(x, axis=c)),
        ("probs", rf.softmax(x, axis=c)),
    ]:
        ce = rf.cross_entropy(estimated=est, target=target, axis=c, estimated_type=kind)
        assert ce.dims == (rf.batch_dim,)
        np.testing.assert_allclose(ce.numpy(), want, rtol=1e-5)


def test_concat_pad_merge_over_dynamic_dims() -> None:
    f = rf.Dim(1, name="f")
    t1, t2 = _time([2, 1]), _time([1, 2])
    a = rf.convert_to_tensor(
        np.array([[1.0, 2.0], [3.0, 0.0]])[:, :, None], dims=[rf.batch_dim, t1, f]
    )
    b = rf.convert_to_tensor(
        np.array([[5.0, 0.0], [6.0, 7.0]])[:, :, None], dims=[rf.batch_dim, t2, f]
    )
    y, d = rf.concat((a, t1), (b, t2))
    np.testing.assert_array_equal(d.dyn_size_ext.numpy(), [3, 3])
    np.testing.assert_array_equal(y.numpy()[:, :, 0], [[1, 2, 5], [3, 6, 7]])
    y, (d,) = rf.pad(a, axes=[t1], padding=[(0, 1)], value=9.0)
    np.testing.assert_array_equal(d.dyn_size_ext.numpy(), [3, 2])
    np.testing.assert_array_equal(y.numpy()[:, :, 0], [[1, 2, 9], [3, 9, 9]])
    y, m = rf.merge_dims(a, dims=[t1, f])
    np.testing.assert_array_equal(m.dyn_size_ext.numpy(), [2, 1])
    with pytest.raises(ValueError, match="time is dynamic but not the first"):
        rf.merge_dims(a, dims=[f, t1])
    with pytest.raises(ValueError, match=r"pad: paddings must be non-negative, got \(0, -1\)"):
        rf.pad(a, axes=[t1], padding=[(0, -1)])


def test_default_device() -> None:
    import verjus

    session = rf.get_default_device()  # cpu, unless $VERJUS_TEST_DEVICE says otherwise
    assert session == ("cpu" if os.environ.get("VERJUS_TEST_DEVICE", "cpu") == "cpu" else "cuda:0")
    if verjus.cuda.is_available():
        rf.set_default_device("cuda")
        assert rf.get_default_device() == "cuda:0"
        rf.set_default_device("cpu")
        assert rf.get_default_device() == "cpu"
        rf.set_default_device(session)
    else:
        # The error names what is missing: without the NVIDIA kernel driver,
        # the driver itself; else the library (driver's, cuBLAS, cuDNN, NVRTC).
        if Path("/proc/driver/nvidia/version").exists():
            missing = r"cuda:0: (the NVIDIA driver is loaded|the \w+ library is|the CUDA driver)"
        else:
            missing = r"cuda:0: no NVIDIA driver is installed"
        with pytest.raises(RuntimeError, match=missing):
            rf.set_default_device("cuda")
    assert rf.get_default_device() == session
    with pytest.raises(ValueError, match="unknown device"):
        rf.set_default_device("tpu")
    rf.set_default_device("cpu")
    assert rf.zeros([rf.Dim(2, name="d")]).numpy().tolist() == [0.0, 0.0]


def test_conv_and_pool_backward() -> None:
    cin, cout = rf.Dim(2, name="in"), rf.Dim(2, name="out")
    t = _time([4, 3])
    x = rf.convert_to_tensor(np.ones((2, 4, 2), np.float32), dims=[rf.batch_dim, t, cin])
    conv = rf.Conv1d(cin, cout, 3, padding="same")
    y, d = conv(x, in_spatial_dim=t)
    y, (d,) = rf.pool(y, mode="max", pool_size=2, in_spatial_dims=[d])
    loss = rf.reduce_sum(y, axis=[rf.batch_dim, cout, d])
    loss.backward()
    assert conv.filter.grad is not None
    assert conv.bias.grad is not None
    # Each output frame adds the bias once: d loss / d bias = number of pooled frames.
    np.testing.assert_allclose(conv.bias.grad.numpy(), [3.0, 3.0])


@pytest.mark.parametrize(
    ("m", "stride", "padding", "channels_first"),
    [(2, 2, "valid", False), (1, 1, "same", False), (1, 1, "same", True), (1, 1, "valid", False)],
)
def test_depthwise_conv_values_and_gradients_match_numpy(
    m: int, stride: int, padding: str, channels_first: bool
) -> None:
    """A conv with one input channel per group (the Conformer's): with one
    filter per channel and stride 1 the core's channels-last depthwise op,
    otherwise one gather for all groups. Its values and the gradients of the
    input, the filter and the bias against an explicit loop (dilation 2)."""
    rng = np.random.default_rng(7)
    b, tn, c, k, dil = 2, 11, 3, 3, 2
    batch, t = rf.Dim(b, name="b"), rf.Dim(tn, name="t")
    cin, cout = rf.Dim(c, name="cin"), rf.Dim(c * m, name="cout")
    conv = rf.Conv1d(cin, cout, k, groups=c, padding=padding, dilation_rate=dil, strides=stride)
    xv = rng.standard_normal((b, tn, c)).astype(np.float32)
    wv = rng.standard_normal((c * m, 1, k)).astype(np.float32)
    bv = rng.standard_normal(c * m).astype(np.float32)
    conv.filter.assign(wv)  # dims [out, in / groups, k]
    conv.bias.assign(bv)
    x = rf.Parameter([cin, batch, t] if channels_first else [batch, t, cin])
    x.assign(xv.transpose(2, 0, 1) if channels_first else xv)
    y, out_t = conv(x, in_spatial_dim=t)
    y = y.copy_transpose([batch, out_t, cout])
    left = dil * (k - 1) // 2 if padding == "same" else 0
    xp = np.pad(xv, ((0, 0), (left, dil * (k - 1) - left if padding == "same" else 0), (0, 0)))
    to = out_t.dimension
    want = np.zeros((b, to, c * m), np.float32)
    for o in range(c * m):
        for j in range(to):
            taps = xp[:, j * stride : j * stride + dil * (k - 1) + 1 : dil, o // m]
            want[:, j, o] = taps @ wv[o, 0] + bv[o]
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-5, atol=1e-5)
    r = rng.standard_normal(want.shape).astype(np.float32)
    loss = rf.reduce_sum(y * rf.convert_to_tensor(r, dims=[batch, out_t, cout]), axis=y.dims)
    loss.backward()
    dxp, dw = np.zeros_like(xp), np.zeros_like(wv)
    for o in range(c * m):
        for j in range(to):
            at = slice(j * stride, j * stride + dil * (k - 1) + 1, dil)
            dxp[:, at, o // m] += r[:, j, o, None] * wv[o, 0]
            dw[o, 0] += r[:, j, o] @ xp[:, at, o // m]
    dx = dxp[:, left : left + tn]
    got_dx = x.grad.numpy().transpose(1, 2, 0) if channels_first else x.grad.numpy()
    np.testing.assert_allclose(got_dx, dx, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(conv.filter.grad.numpy(), dw, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(conv.bias.grad.numpy(), r.sum(axis=(0, 1)), rtol=1e-4, atol=1e-5)


def test_matmul_with_an_empty_dim_gives_an_empty_result() -> None:
    """A size-0 dim of one operand stays 0 in the output (it was taken as 1)."""
    b, t, f, g = rf.Dim(2, name="b"), rf.Dim(0, name="t"), rf.Dim(3, name="f"), rf.Dim(2, name="g")
    x = rf.convert_to_tensor(np.zeros((2, 0, 3), np.float32), dims=[b, t, f])
    w = rf.convert_to_tensor(np.ones((3, 2), np.float32), dims=[f, g])
    y = rf.matmul(x, w, reduce=f)
    assert y.dims == (b, t, g)
    assert np.asarray(y.raw_tensor).shape == (2, 0, 2)


def test_where_keeps_the_sparse_dim_of_its_values() -> None:
    """As RETURNN: the true value's sparse dim, else the false value's."""
    b, v = rf.Dim(2, name="b"), rf.Dim(5, name="v")
    labels = rf.convert_to_tensor(np.array([1, 2], np.int32), dims=[b], sparse_dim=v)
    zeros = rf.convert_to_tensor(np.array([0, 0], np.int32), dims=[b])
    mask = rf.convert_to_tensor(np.array([True, False]), dims=[b])
    assert rf.where(mask, labels, zeros).sparse_dim == v
    assert rf.where(mask, zeros, labels).sparse_dim == v
    assert rf.where(mask, zeros, zeros).sparse_dim is None
    np.testing.assert_array_equal(np.asarray(rf.where(mask, labels, zeros).raw_tensor), [1, 0])


@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("padding", [(0, 1), (1, 0), (2, 1)])
def test_pad_of_label_ids_keeps_their_sparse_dim_and_dtype(dtype: str, padding) -> None:
    """Padding a dynamic dim of label ids on either side keeps the ids' dtype
    and ``sparse_dim`` (padding after each sequence's end used to drop it)."""
    b, v = rf.batch_dim, rf.Dim(10, name="v")
    t = rf.Dim(rf.convert_to_tensor(np.array([2, 3], np.int32), dims=[b]), name="t")
    x = rf.convert_to_tensor(np.array([[1, 2, 0], [3, 4, 5]], dtype), dims=[b, t], sparse_dim=v)
    y, (t2,) = rf.pad(x, axes=[t], padding=[padding], value=9)
    assert y.dtype == dtype
    assert y.sparse_dim == v
    left, right = padding
    expected = [[9] * left + row[:n] + [9] * right for row, n in ([[1, 2, 0], 2], [[3, 4, 5], 3])]
    got = y.copy_transpose([b, t2]).numpy().tolist()
    assert [g[: len(e)] for g, e in zip(got, expected, strict=True)] == expected
