"""verjus.rf.reduce_extra: ``reduce(mode=)``, ``reduce_any`` / ``reduce_all`` /
``reduce_argmin`` / ``reduce_logmeanexp``, ``reduce_out``, the element counts
and the top-k / top-p masks, against numpy over a dynamic dim (padding that
would change the result if it leaked, a sequence of length 0), finite
differences, RETURNN's rf on its torch backend where installed, and bad
input."""

from __future__ import annotations

import numpy as np
import pytest
from test_rf_grad import check_gradient
from test_rf_math_forms import TOL, Mirror, returnn_rf, time_dim, uniform

from verjus import rf

LENS = [4, 2, 0]


def valid(lens: list[int], size: int) -> np.ndarray:
    """``[batch, time, 1]``: True within each length."""
    return (np.arange(size)[None, :] < np.array(lens)[:, None])[..., None]


def data(lens: list[int] = LENS) -> tuple[rf.Dim, rf.Dim, np.ndarray]:
    """``[batch, time, f]`` values whose padding holds 50 (it would win a max)."""
    t, f = time_dim(lens), rf.Dim(3, name="f")
    values = np.where(valid(lens, 4), uniform(1, (len(lens), 4, 3)), 50.0).astype(np.float32)
    return t, f, values


def masked(values: np.ndarray, lens: list[int], fill: float) -> np.ndarray:
    return np.where(valid(lens, values.shape[1]), values, fill)


NUMPY_REDUCE = {
    "sum": lambda v, m: np.where(m, v, 0).sum(1),
    "max": lambda v, m: np.where(m, v, -np.inf).max(1),
    "min": lambda v, m: np.where(m, v, np.inf).min(1),
    "logsumexp": lambda v, m: np.log(np.where(m, np.exp(v), 0).sum(1)),
}


@pytest.mark.parametrize("mode", sorted(NUMPY_REDUCE))
def test_reduce_modes(mode: str) -> None:
    t, f, values = data()
    x = rf.convert_to_tensor(values, dims=[rf.batch_dim, t, f])
    out = rf.reduce(x, mode=mode, axis=t)
    assert out.dims == (rf.batch_dim, f)
    with np.errstate(divide="ignore"):
        want = NUMPY_REDUCE[mode](values, valid(LENS, 4))
    np.testing.assert_allclose(out.numpy(), want, **TOL)
    same = getattr(rf, f"reduce_{mode}")(x, axis=t)
    np.testing.assert_array_equal(out.numpy(), same.numpy())


def test_reduce_any_all() -> None:
    t, f, values = data()
    x = rf.convert_to_tensor(values, dims=[rf.batch_dim, t, f])
    big = rf.greater(x, 0.5)  # the padding (50) is True
    any_ = rf.reduce_any(big, axis=t)
    assert any_.dtype == "bool"
    assert any_.dims == (rf.batch_dim, f)
    np.testing.assert_array_equal(any_.numpy(), (masked(values, LENS, 0) > 0.5).any(1))
    small = rf.less(x, 1.5)  # the padding is False
    np.testing.assert_array_equal(
        rf.reduce_all(small, axis=t).numpy(), (masked(values, LENS, 0) < 1.5).all(1)
    )
    # A length-0 sequence: any is False, all is True.
    assert not rf.reduce_any(big, axis=t).numpy()[2].any()
    assert rf.reduce_all(small, axis=t).numpy()[2].all()
    np.testing.assert_array_equal(
        rf.reduce(big, mode="any", axis=[t, f]).numpy(), [True, True, False]
    )
    all_unmasked = rf.reduce_all(small, axis=t, use_mask=False)
    np.testing.assert_array_equal(all_unmasked.numpy(), (values < 1.5).all(1))


def test_reduce_argmin() -> None:
    t, f, values = data()
    values = np.where(valid(LENS, 4), values, -50.0).astype(np.float32)  # would win a min
    x = rf.convert_to_tensor(values, dims=[rf.batch_dim, t, f])
    out = rf.reduce_argmin(x, axis=t)
    assert out.sparse_dim == t
    assert out.dims == (rf.batch_dim, f)
    want = masked(values, LENS, np.inf).argmin(1)
    want[2] = 0  # length 0
    np.testing.assert_array_equal(out.numpy(), want)
    np.testing.assert_array_equal(rf.reduce(x, mode="argmin", axis=t).numpy(), want)
    np.testing.assert_array_equal(rf.reduce(x, mode="argmax", axis=[f]).numpy(), values.argmax(2))
    ints = rf.convert_to_tensor(np.array([[3, 1, 1], [0, 2, -4]], np.int32), dims=[rf.batch_dim, f])
    np.testing.assert_array_equal(rf.reduce_argmin(ints, axis=f).numpy(), [1, 2])


def test_reduce_logmeanexp() -> None:
    t, f, values = data()
    x = rf.convert_to_tensor(values, dims=[rf.batch_dim, t, f])
    m = valid(LENS, 4)
    with np.errstate(divide="ignore"):
        want = np.log(np.where(m, np.exp(values), 0).sum(1) / np.maximum(m.sum(1), 1))
    out = rf.reduce_logmeanexp(x, axis=t)
    assert out.dims == (rf.batch_dim, f)
    np.testing.assert_allclose(out.numpy(), want, **TOL)
    both = rf.reduce_logmeanexp(x, axis=[rf.batch_dim, t])
    want = np.log(np.where(m, np.exp(values), 0).sum((0, 1)) / m.sum())
    np.testing.assert_allclose(both.numpy(), want, **TOL)
    static = rf.reduce_logmeanexp(x, axis=f)
    np.testing.assert_allclose(static.numpy(), np.log(np.exp(values).mean(2)), **TOL)
    short, g = time_dim([3, 1]), rf.Dim(2, name="g")
    check_gradient(
        lambda v: rf.reduce_logmeanexp(v, axis=short),
        uniform(2, (2, 3, 2)),
        [rf.batch_dim, short, g],
    )


def test_reduce_out() -> None:
    t, _, _ = data()
    f = rf.Dim(6, name="f")
    values = uniform(3, (3, 4, 6))
    x = rf.convert_to_tensor(values, dims=[rf.batch_dim, t, f], feature_dim=f)
    for mode, ref in [("max", np.max), ("sum", np.sum), ("mean", np.mean)]:
        out = rf.reduce_out(x, mode=mode, num_pieces=2)
        assert out.dims[:2] == (rf.batch_dim, t)
        assert out.dims[2].dimension == 3
        assert out.feature_dim == out.dims[2]
        np.testing.assert_allclose(out.numpy(), ref(values.reshape(3, 4, 3, 2), axis=3), **TOL)
    mine = rf.Dim(2, name="out")
    assert rf.reduce_out(x, mode="max", num_pieces=3, out_dim=mine).feature_dim == mine
    # The gradient (of the sum of the outputs times r): r at each group's max.
    xv = uniform(4, (2, 6))
    x = rf.convert_to_tensor(xv, dims=[rf.batch_dim, f], feature_dim=f, requires_grad=True)
    out = rf.reduce_out(x, mode="max", num_pieces=3)
    rv = uniform(5, (2, 2))
    r = rf.convert_to_tensor(rv, dims=list(out.dims))
    g = rf.gradient(rf.reduce_sum(out * r, axis=list(out.dims)), x).numpy().reshape(2, 2, 3)
    want = np.zeros((2, 2, 3), np.float32)
    np.put_along_axis(want, xv.reshape(2, 2, 3).argmax(2)[..., None], rv[..., None], axis=2)
    np.testing.assert_allclose(g, want, **TOL)


def test_num_elements_of_shape() -> None:
    enc_lens, dec_lens = [17, 16, 15, 13, 12], [11, 10, 8, 7, 5]
    enc = rf.Dim(
        rf.convert_to_tensor(np.array(enc_lens, np.int64), dims=[rf.batch_dim]), name="enc"
    )
    dec = rf.Dim(
        rf.convert_to_tensor(np.array(dec_lens, np.int64), dims=[rf.batch_dim]), name="dec"
    )
    f = rf.Dim(3, name="f")
    assert rf.num_elements_of_shape([f, rf.Dim(4, name="g")]) == 12
    assert rf.num_elements_of_shape(f) == 3
    assert int(rf.num_elements_of_shape([rf.batch_dim, enc]).numpy()) == sum(enc_lens)
    assert int(rf.num_elements_of_shape([dec, rf.batch_dim]).numpy()) == sum(dec_lens)
    prod = rf.num_elements_of_shape([rf.batch_dim, enc, dec])
    assert int(prod.numpy()) == int(np.dot(enc_lens, dec_lens))
    per_seq = rf.num_elements_of_shape([enc, f])
    assert per_seq.dims == (rf.batch_dim,)
    np.testing.assert_array_equal(per_seq.numpy(), np.array(enc_lens) * 3)
    np.testing.assert_array_equal(rf.num_elements_of_shape(enc).numpy(), enc_lens)
    assert int(rf.num_elements_of_shape([enc, dec], use_mask=False).numpy()) == 17 * 11
    assert int(rf.num_elements_of_shape([rf.batch_dim, enc], use_mask=False).numpy()) == 5 * 17
    x = rf.convert_to_tensor(np.zeros((5, 3), np.float32), dims=[rf.batch_dim, f])
    assert rf.num_elements_of_shape([rf.batch_dim, f], source=x) == 15
    with pytest.raises(ValueError, match=r"num_elements_of_shape: the size of dim batch"):
        rf.num_elements_of_shape([rf.batch_dim, f])
    with pytest.raises(ValueError, match=r"num_elements_of_shape: axis enc is not a dim"):
        rf.num_elements_of_shape([enc], source=x)


def test_masked_fraction_of_shape() -> None:
    t = time_dim(LENS)
    f = rf.Dim(3, name="f")
    assert rf.masked_fraction_of_shape([f]) == 1
    np.testing.assert_allclose(rf.masked_fraction_of_shape([rf.batch_dim, t]).numpy(), 6 / 12)
    np.testing.assert_allclose(rf.masked_fraction_of_shape(t).numpy(), np.array(LENS) / 4)
    inv = rf.masked_fraction_of_shape([rf.batch_dim, t, f], inverse=True)
    np.testing.assert_allclose(inv.numpy(), 36 / 18)


def test_top_k_mask() -> None:
    t, f, values = data()
    x = rf.convert_to_tensor(values, dims=[rf.batch_dim, t, f])
    out = rf.top_k_mask(x, axis=f, k=2)
    assert out.dtype == "bool"
    assert out.dims == x.dims
    want = (-values).argsort(2, kind="stable").argsort(2) < 2  # ties: the first wins
    np.testing.assert_array_equal(out.numpy(), want)
    k = rf.convert_to_tensor(np.array(3, np.int32))
    over_time = rf.top_k_mask(x, axis=t, k=k)
    assert over_time.dims == x.dims
    rank = (-masked(values, LENS, -np.inf)).argsort(1, kind="stable").argsort(1)
    want = (rank < 3) & valid(LENS, 4)  # the padding is never in the mask
    np.testing.assert_array_equal(over_time.numpy(), want)


def numpy_top_p(probs: np.ndarray, p: float | np.ndarray, one_more: bool, keep: int) -> np.ndarray:
    """Top-p along the last axis, one row at a time."""
    flat = probs.reshape(-1, probs.shape[-1])
    ps = np.broadcast_to(np.asarray(p, np.float32), probs.shape[:-1]).reshape(-1)
    out = np.zeros(flat.shape, bool)
    for row, pr, p_ in zip(flat, out, ps, strict=True):
        order = np.argsort(-row, kind="stable")
        mass = np.cumsum(row[order], dtype=np.float32)
        if one_more:
            mass = np.concatenate([[0], mass[:-1]])
        chosen = (mass <= p_) | (np.arange(len(row)) < keep)
        pr[order[chosen]] = True
    return out.reshape(probs.shape)


def test_top_p_mask() -> None:
    t, f = time_dim(LENS), rf.Dim(7, name="f")
    logits = uniform(5, (3, 4, 7), -3, 3)
    probs = rf.softmax(rf.convert_to_tensor(logits, dims=[rf.batch_dim, t, f]), axis=f)
    pv = probs.numpy()
    for p, one_more, keep in [(0.5, True, 1), (0.5, False, 0), (0.2, False, 3), (1.0, True, 1)]:
        out = rf.top_p_mask(probs, axis=f, p=p, one_more=one_more, min_tokens_to_keep=keep)
        assert out.dims == probs.dims
        np.testing.assert_array_equal(out.numpy(), numpy_top_p(pv, p, one_more, keep))
    p = rf.convert_to_tensor(np.array([0.1, 0.6, 0.9], np.float32), dims=[rf.batch_dim])
    out = rf.top_p_mask(probs, axis=f, p=p)
    want = numpy_top_p(pv, np.array([0.1, 0.6, 0.9])[:, None], True, 1)
    np.testing.assert_array_equal(out.numpy(), want)
    # Over a dynamic axis: each sequence over its own frames, the padding False.
    over_time = rf.softmax(rf.convert_to_tensor(logits, dims=[rf.batch_dim, t, f]), axis=t)
    out = rf.top_p_mask(over_time, axis=t, p=0.6)
    ov = over_time.copy_transpose([rf.batch_dim, f, t]).numpy()
    want = numpy_top_p(np.where(valid(LENS, 4).transpose(0, 2, 1), ov, -1.0), 0.6, True, 1)
    want &= valid(LENS, 4).transpose(0, 2, 1)
    np.testing.assert_array_equal(out.copy_transpose([rf.batch_dim, f, t]).numpy(), want)


def test_bad_input() -> None:
    t, f, values = data()
    x = rf.convert_to_tensor(values, dims=[rf.batch_dim, t, f])
    with pytest.raises(ValueError, match=r"reduce: unknown mode 'median'"):
        rf.reduce(x, mode="median", axis=t)
    with pytest.raises(ValueError, match=r"reduce: distributed reductions are not supported"):
        rf.reduce(x, mode="sum", axis=t, distributed=True)
    with pytest.raises(ValueError, match=r"reduce_argmin: axis must be one dim"):
        rf.reduce_argmin(x, axis=[t, f])
    g = rf.Dim(2, name="g")
    with pytest.raises(ValueError, match=r"reduce_any: axis g is not a dim of source"):
        rf.reduce_any(rf.greater(x, 0.0), axis=g)
    with pytest.raises(ValueError, match=r"reduce_out: source needs a feature_dim"):
        rf.reduce_out(x, mode="max", num_pieces=3)
    xf = rf.convert_to_tensor(values, dims=[rf.batch_dim, t, f], feature_dim=f)
    with pytest.raises(ValueError, match=r"reduce_out: feature dim .* multiple of num_pieces=2"):
        rf.reduce_out(xf, mode="max", num_pieces=2)
    with pytest.raises(ValueError, match=r"top_p_mask: p must be in \[0, 1\], got 1.5"):
        rf.top_p_mask(x, axis=f, p=1.5)
    with pytest.raises(ValueError, match=r"top_k_mask: k must be an int or a scalar"):
        rf.top_k_mask(x, axis=f, k=rf.convert_to_tensor(np.array([1, 2], np.int32), dims=[g]))


RETURNN_MODES = ["sum", "max", "min", "mean", "logsumexp", "logmeanexp", "argmin", "argmax"]


@pytest.mark.parametrize("mode", RETURNN_MODES)
def test_reductions_against_returnn(mode: str) -> None:
    rrf = returnn_rf()
    m = Mirror()
    t, f, values = data([4, 2, 3])
    x = rf.convert_to_tensor(values, dims=[rf.batch_dim, t, f])
    tx = m.tensor(x)
    for axis in ([t], [rf.batch_dim, t], [f]):
        # RETURNN's torch backend takes one axis for arg*, max and min, and its
        # reduce_logmeanexp fails on a static axis (its count is an int).
        if (mode in ("argmin", "argmax", "max", "min") and len(axis) > 1) or (
            mode == "logmeanexp" and axis == [f]
        ):
            continue
        ax = axis[0] if mode.startswith("arg") else axis
        their_ax = m.dims[ax] if isinstance(ax, rf.Dim) else [m.dims[d] for d in ax]
        mine = getattr(rf, f"reduce_{mode}")(x, axis=ax)
        theirs = getattr(rrf, f"reduce_{mode}")(tx, axis=their_ax)
        assert [m.dims[d] for d in mine.dims] == list(theirs.dims)
        np.testing.assert_allclose(mine.numpy(), m.numpy(theirs, mine), **TOL)


def test_any_all_counts_and_masks_against_returnn() -> None:
    rrf = returnn_rf()
    m = Mirror()
    t, f, values = data([4, 2, 3])
    x = rf.convert_to_tensor(values, dims=[rf.batch_dim, t, f], feature_dim=f)
    tx = m.tensor(x)
    tt, tf = m.dims[t], m.dims[f]
    big, tbig = rf.greater(x, 0.5), rrf.compare(tx, ">", 0.5)
    small, tsmall = rf.less(x, 1.5), rrf.compare(tx, "<", 1.5)
    probs = rf.softmax(x, axis=f)
    six = rf.Dim(6, name="six")
    x6 = rf.convert_to_tensor(uniform(7, (3, 4, 6)), dims=[rf.batch_dim, t, six], feature_dim=six)
    pairs = [
        (rf.reduce_any(big, axis=t), rrf.reduce_any(tbig, axis=tt)),
        (rf.reduce_all(small, axis=t), rrf.reduce_all(tsmall, axis=tt)),
        (
            rf.num_elements_of_shape([rf.batch_dim, t]),
            rrf.num_elements_of_shape([m.dims[rf.batch_dim], tt]),
        ),
        (rf.num_elements_of_shape([t, f]), rrf.num_elements_of_shape([tt, tf])),
        (rf.masked_fraction_of_shape([t]), rrf.masked_fraction_of_shape([tt])),
        (rf.top_k_mask(x, axis=f, k=2), rrf.top_k_mask(tx, axis=tf, k=2)),
        (rf.top_p_mask(probs, axis=f, p=0.5), rrf.top_p_mask(m.tensor(probs), axis=tf, p=0.5)),
        (
            rf.top_p_mask(probs, axis=f, p=0.3, one_more=False, min_tokens_to_keep=2),
            rrf.top_p_mask(m.tensor(probs), axis=tf, p=0.3, one_more=False, min_tokens_to_keep=2),
        ),
    ]
    out = rf.Dim(2, name="out")
    for mode in ("max", "sum", "mean"):
        mine = rf.reduce_out(x6, mode=mode, num_pieces=3, out_dim=out)
        theirs = rrf.reduce_out(m.tensor(x6), mode=mode, num_pieces=3, out_dim=m.dim(out))
        assert theirs.feature_dim == m.dims[mine.feature_dim]
        pairs.append((mine, theirs))
    for mine, theirs in pairs:
        assert [m.dims[d] for d in mine.dims] == list(theirs.dims)
        np.testing.assert_allclose(mine.numpy(), m.numpy(theirs, mine), **TOL)
