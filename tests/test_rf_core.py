"""verjus.rf: dims by identity, the binary-op dim union, matmul's dim order and
masked reductions/softmax, mirroring the Rust goldens (crates/verjus-rf/tests)."""

from __future__ import annotations

import numpy as np
import pytest

from verjus import rf


def test_dims_compare_by_identity() -> None:
    a, b = rf.Dim(7, name="feat"), rf.Dim(7, name="feat")
    assert a != b
    assert a == a
    assert len({a, b, a}) == 2
    assert (a.name, a.dimension, a.size, a.is_dynamic()) == ("feat", 7, 7, False)
    assert rf.batch_dim == rf.batch_dim
    assert rf.batch_dim.dimension is None
    lengths = rf.convert_to_tensor(np.array([2, 5, 0], dtype=np.int32), dims=[rf.batch_dim])
    t = rf.Dim(lengths, name="time")
    assert (t.dimension, t.size, t.is_dynamic()) == (None, 5, True)
    np.testing.assert_array_equal(t.dyn_size_ext.numpy(), [2, 5, 0])
    with pytest.raises(ValueError, match="int32 or int64"):
        rf.Dim(rf.convert_to_tensor(np.ones(3, np.float32), dims=[rf.batch_dim]))
    with pytest.raises(TypeError, match="dimension must be"):
        rf.Dim("seven")


def test_convert_to_tensor_checks_dims() -> None:
    f = rf.Dim(3, name="feat")
    x = rf.convert_to_tensor(np.arange(6.0).reshape(2, 3), dims=[rf.batch_dim, f], feature_dim=f)
    assert (x.dims, x.dtype, x.feature_dim, x.sparse_dim) == ((rf.batch_dim, f), "float32", f, None)
    assert x.shape == [2, 3]
    with pytest.raises(ValueError, match="feat=3"):
        rf.convert_to_tensor(np.zeros(4), dims=[f])
    labels = rf.convert_to_tensor([1, 2], dims=[rf.batch_dim], dtype="int32", sparse_dim=f)
    assert (labels.dtype, labels.sparse_dim) == ("int32", f)
    with pytest.raises(ValueError, match="sparse_dim needs an integer"):
        rf.convert_to_tensor([1.0], dims=[rf.batch_dim], sparse_dim=f)


def test_binary_ops_give_the_union_of_dims_in_order_of_appearance() -> None:
    b, f = rf.batch_dim, rf.Dim(3, name="feat")
    xv = np.arange(6, dtype=np.float32).reshape(2, 3)
    x = rf.convert_to_tensor(xv, dims=[b, f])
    bias = rf.convert_to_tensor(np.array([10.0, 20.0, 30.0]), dims=[f])
    y = x + bias
    assert y.dims == (b, f)
    np.testing.assert_array_equal(y.numpy(), xv + np.array([10, 20, 30]))
    y = bias - x
    assert y.dims == (f, b)
    np.testing.assert_array_equal(y.numpy(), ([10, 20, 30] - xv).T)
    xt = x.copy_transpose([f, b])
    np.testing.assert_array_equal(xt.numpy(), xv.T)
    np.testing.assert_array_equal((x * xt).numpy(), xv * xv)
    np.testing.assert_array_equal((2 - x).numpy(), 2 - xv)
    np.testing.assert_allclose((x / 2).numpy(), xv / 2)
    np.testing.assert_allclose((1 / (x + 1)).numpy(), 1 / (xv + 1), rtol=1e-6)
    np.testing.assert_allclose((x**2).numpy(), xv**2)
    i = rf.convert_to_tensor(np.array([1, 2, 3], np.int32), dims=[f])
    np.testing.assert_array_equal((i**2).numpy(), [1, 4, 9])
    np.testing.assert_array_equal((2**i).numpy(), [2, 4, 8])
    with pytest.raises(ValueError, match="negative integer power -1"):
        i**-1
    with pytest.raises(ValueError, match="negative integer power -3"):
        2 ** (i - 4)  # the exponents -3, -2, -1
    np.testing.assert_allclose((rf.cast(i, "float32") ** -1).numpy(), [1, 0.5, 1 / 3], rtol=1e-6)
    np.testing.assert_array_equal((-x).numpy(), -xv)
    mask = x > 2.5
    assert mask.dtype == "bool"
    np.testing.assert_array_equal(mask.numpy(), xv > 2.5)
    np.testing.assert_array_equal((x == xt).numpy(), np.ones((2, 3), bool))
    np.testing.assert_array_equal(rf.combine(x, "maximum", 2.0).numpy(), np.maximum(xv, 2))
    np.testing.assert_array_equal(rf.compare(x, "less", 2.0).numpy(), xv < 2)
    with pytest.raises(ValueError, match="not a comparison"):
        rf.compare(x, "add", x)


def test_broadcasting_both_sources_needs_permission() -> None:
    f, g = rf.Dim(2, name="feat"), rf.Dim(3, name="other")
    a = rf.convert_to_tensor([1.0, 2.0], dims=[f])
    c = rf.convert_to_tensor([10.0, 20.0, 30.0], dims=[g])
    with pytest.raises(ValueError, match=r"\[feat\] and \[other\]"):
        a + c
    y = rf.combine(a, "add", c, allow_broadcast_all_sources=True)
    assert y.dims == (f, g)
    np.testing.assert_array_equal(y.numpy(), [[11, 21, 31], [12, 22, 32]])


def test_matmul_dim_order() -> None:
    b, i, j, k = rf.batch_dim, rf.Dim(3, name="i"), rf.Dim(5, name="j"), rf.Dim(4, name="k")
    rng = np.random.default_rng(0)
    av = rng.standard_normal((2, 3, 4)).astype(np.float32)
    bv = rng.standard_normal((4, 5, 2)).astype(np.float32)
    x = rf.convert_to_tensor(av, dims=[b, i, k])
    y = rf.convert_to_tensor(bv, dims=[k, j, b])
    z = rf.matmul(x, y, reduce=k)
    assert z.dims == (b, i, j)
    np.testing.assert_allclose(z.numpy(), np.einsum("bik,kjb->bij", av, bv), rtol=1e-5, atol=1e-6)
    z = rf.matmul(y, x, reduce=[k])
    assert z.dims == (b, j, i)
    with pytest.raises(ValueError, match="dim batch is not in"):
        rf.matmul(x, rf.convert_to_tensor(bv[:, :, 0], dims=[k, j]), reduce=b)


def padded() -> tuple[rf.Dim, rf.Tensor]:
    """x over [batch=3, time] with lengths [3, 1, 0] and NaN/inf in the padding."""
    lengths = rf.convert_to_tensor(np.array([3, 1, 0], np.int32), dims=[rf.batch_dim])
    t = rf.Dim(lengths, name="time")
    nan, inf = np.nan, np.inf
    xv = np.array([[1, 2, 6], [4, nan, inf], [nan, nan, -inf]], np.float32)
    return t, rf.convert_to_tensor(xv, dims=[rf.batch_dim, t])


def test_masked_reductions() -> None:
    t, x = padded()
    np.testing.assert_array_equal(rf.reduce_sum(x, axis=t).numpy(), [9, 4, 0])
    np.testing.assert_array_equal(rf.reduce_mean(x, axis=t).numpy(), [3, 4, 0])
    np.testing.assert_array_equal(rf.reduce_max(x, axis=t).numpy(), [6, 4, -np.inf])
    np.testing.assert_array_equal(rf.reduce_min(x, axis=t).numpy(), [1, 4, np.inf])
    lse = rf.reduce_logsumexp(x, axis=t).numpy()
    np.testing.assert_allclose(lse, [np.log(np.exp([1, 2, 6]).sum()), 4, -np.inf], rtol=1e-6)
    am = rf.reduce_argmax(x, axis=t)
    assert (am.dtype, am.sparse_dim) == ("int64", t)
    np.testing.assert_array_equal(am.numpy(), [2, 0, 0])
    assert rf.reduce_sum(x, axis=[rf.batch_dim, t]).numpy() == 13
    with pytest.raises(ValueError, match=r"dim feat is not in the tensor's dims \[batch, time\]"):
        rf.reduce_sum(x, axis=rf.Dim(3, name="feat"))


def test_masked_softmax_has_no_nan() -> None:
    t, x = padded()
    e = np.exp([1.0, 2.0, 6.0])
    want = np.array([e / e.sum(), [1, 0, 0], [0, 0, 0]])
    np.testing.assert_allclose(rf.softmax(x, axis=t).numpy(), want, rtol=1e-6)
    log = rf.log_softmax(x, axis=t).numpy()
    np.testing.assert_allclose(log[0], np.log(e / e.sum()), rtol=1e-5)
    np.testing.assert_array_equal(log[1:], [[0, -np.inf, -np.inf], [-np.inf] * 3])


def test_sequence_mask_where_and_unary_ops() -> None:
    t, x = padded()
    m = rf.sequence_mask(t)
    assert (m.dims, m.dtype) == ((rf.batch_dim, t), "bool")
    np.testing.assert_array_equal(m.numpy(), [[1, 1, 1], [1, 0, 0], [0, 0, 0]])
    y = rf.where(m, x, 0.0)
    np.testing.assert_array_equal(y.numpy(), [[1, 2, 6], [4, 0, 0], [0, 0, 0]])
    np.testing.assert_array_equal(rf.range_over_dim(t).numpy(), [0, 1, 2])
    np.testing.assert_array_equal(rf.relu(y - 3).numpy(), [[0, 0, 3], [1, 0, 0], [0, 0, 0]])
    np.testing.assert_allclose(rf.exp(y).numpy(), np.exp(y.numpy()), rtol=1e-6)
    assert np.isfinite(rf.safe_log(y).numpy()).all()
    assert rf.cast(y, "int32").dtype == "int32"
    np.testing.assert_array_equal(rf.cast(y, "bool").numpy(), y.numpy() != 0)
    with pytest.raises(ValueError, match="exp: invalid argument: needs a float32"):
        rf.exp(t.dyn_size_ext)


@pytest.mark.parametrize("lengths", [[4, 1, 0, 3]])
def test_batched_equals_single_entry(lengths: list[int]) -> None:
    """Each entry alone (its own length, a batch of 1) gives the batched slice."""
    rng = np.random.default_rng(1)
    f = rf.Dim(3, name="f")
    xv = rng.standard_normal((len(lengths), max(lengths), 3)).astype(np.float32)

    def ops(x: rf.Tensor, t: rf.Dim) -> list[np.ndarray]:
        return [
            rf.reduce_mean(x, axis=t).numpy(),
            rf.reduce_max(x, axis=t).numpy(),
            rf.reduce_logsumexp(x, axis=[t, f]).numpy(),
            rf.softmax(x, axis=t).numpy(),
            rf.matmul(x, x, reduce=t).numpy(),
        ]

    def tensor(values: np.ndarray, lens: list[int]) -> tuple[rf.Tensor, rf.Dim]:
        t = rf.Dim(rf.convert_to_tensor(np.array(lens, np.int32), dims=[rf.batch_dim]))
        return rf.convert_to_tensor(values, dims=[rf.batch_dim, t, f]), t

    batched = ops(*tensor(xv, lengths))
    for b, n in enumerate(lengths):
        single = ops(*tensor(xv[b : b + 1, :n], [n]))
        for k, (got, whole) in enumerate(zip(single, batched, strict=True)):
            want = whole[b : b + 1]
            if k == 3:
                want = want[:, :n]
            np.testing.assert_allclose(got, want, rtol=1e-5, err_msg=f"op {k}, entry {b}")


@pytest.mark.parametrize(
    "value", [np.array(3, np.int32), np.array(1.5, np.float32), 2.0, np.float64(-0.25)]
)
def test_a_scalar_converts_to_a_tensor_without_dims(value) -> None:
    """A 0-d array or a Python number is a tensor over no dims (numpy's
    ``ascontiguousarray`` would have made it shape (1,))."""
    t = rf.convert_to_tensor(value)
    assert t.dims == ()
    assert t.numpy().shape == ()
    assert float(t.numpy()) == float(value)


def test_constants_over_the_batch_dim_take_the_current_batch_size() -> None:
    """As RETURNN's batch_dim at run time: once data over rf.batch_dim was
    made, rf.zeros over it and a module's default initial state have that
    batch's size, and follow the next batch's."""
    feat, hidden = rf.Dim(3, name="feat"), rf.Dim(5, name="hidden")
    lstm = rf.LSTM(feat, hidden)
    for batch in (4, 2):
        x = rf.convert_to_tensor(np.ones((batch, 3), np.float32), dims=[rf.batch_dim, feat])
        assert rf.zeros([rf.batch_dim, feat]).shape == [batch, 3]
        state = lstm.default_initial_state(batch_dims=[rf.batch_dim])
        y, _ = lstm(x, state=state, spatial_dim=rf.single_step_dim)
        assert y.shape == [batch, 5]


def test_constants_over_an_unseen_unknown_dim_are_an_error() -> None:
    never = rf.Dim(None, name="never")
    with pytest.raises(ValueError, match="never has no known size"):
        rf.zeros([never])
