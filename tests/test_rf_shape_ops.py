"""verjus.rf.shape_ops (constant, stack / unstack, expand_dims, squeeze, reshape,
repeat, reverse_sequence, shift_left / shift_right, window, concat_features, the
ranges, last_frame_position_of_dim, set_sparse_dim, replace_dim_v2, slice_update,
sort, search_sorted): values against numpy with a dynamic dim (padding must not
leak into valid frames), finite-difference gradients, RETURNN's rf on its torch
backend where installed, and bad input."""

from __future__ import annotations

import numpy as np
import pytest
from test_rf_grad import check_gradient

from verjus import rf

LENS = [4, 1, 3]


def uniform(seed: int, shape: tuple[int, ...]) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-3, 3, shape).astype(np.float32)


def time_dim(lens: list[int], name: str = "time") -> rf.Dim:
    return rf.Dim(rf.convert_to_tensor(np.array(lens, np.int32), dims=[rf.batch_dim]), name=name)


def valid(out: np.ndarray, lens: list[int]) -> list[np.ndarray]:
    """The valid frames of each sequence of ``out`` ([batch, time, ...])."""
    return [out[b, :n] for b, n in enumerate(lens)]


def check_valid(got: rf.Tensor, want: list[np.ndarray], lens: list[int]) -> None:
    for g, w in zip(valid(got.numpy(), lens), want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


@pytest.fixture
def seq() -> tuple[rf.Tensor, np.ndarray, rf.Dim, rf.Dim]:
    t, f = time_dim(LENS), rf.Dim(2, name="f")
    x = uniform(1, (3, 4, 2))
    x[1, 1:] = np.nan  # padding: must never reach a valid frame
    x[2, 3:] = np.nan
    return rf.convert_to_tensor(x, dims=[rf.batch_dim, t, f], feature_dim=f), x, t, f


def test_constant() -> None:
    f = rf.Dim(3, name="f")
    c = rf.constant(2, dims=[f])
    assert c.dtype == "int32"
    assert c.numpy().tolist() == [2, 2, 2]
    assert rf.constant(True, dims=[f]).dtype == "bool"
    assert rf.constant(1.5, dims=[f], feature_dim=f).feature_dim == f
    v = rf.Dim(5, name="v")
    assert rf.constant(1, dims=[f], sparse_dim=v).sparse_dim == v
    assert rf.constant(0, dims=[f], like=rf.zeros([f])).dtype == "float32"
    with pytest.raises(TypeError, match="constant"):
        rf.constant([1, 2], dims=[f])


def test_stack_unstack_expand_squeeze(seq: tuple) -> None:
    x, xn, t, f = seq
    y = x * 2.0
    s, sd = rf.stack([x, y.copy_transpose([f, t, rf.batch_dim])])
    assert sd.dimension == 2
    assert s.dims == (sd, rf.batch_dim, t, f)
    got = s.numpy()
    np.testing.assert_allclose(got[0], xn)
    np.testing.assert_allclose(got[1], xn * 2)
    a, b = rf.unstack(s, axis=sd)
    assert a.dims == x.dims
    np.testing.assert_allclose(b.numpy(), xn * 2)
    one = rf.Dim(1, name="one")
    e = rf.expand_dims(x, [one])
    assert one in e.dims
    np.testing.assert_allclose(rf.squeeze(e, one).numpy(), xn)
    check_gradient(lambda v: rf.stack([v, v * v])[0], uniform(2, (3,)), [rf.Dim(3, name="g")])
    with pytest.raises(ValueError, match="stack: source 1"):
        rf.stack([x, rf.zeros([f])])
    with pytest.raises(ValueError, match="stack: out_dim"):
        rf.stack([x, x], out_dim=rf.Dim(3))
    with pytest.raises(ValueError, match="squeeze"):
        rf.squeeze(x, f)
    with pytest.raises(ValueError, match="unstack"):
        rf.unstack(x, axis=t)


def test_reshape() -> None:
    a, b = rf.Dim(2, name="a"), rf.Dim(6, name="b")
    c, d = rf.Dim(4, name="c"), rf.Dim(3, name="d")
    xn = uniform(3, (5, 2, 6))
    x = rf.convert_to_tensor(xn, dims=[rf.Dim(5, name="n"), a, b])
    y = rf.reshape(x, [a, b], [c, d])
    assert y.dims[1:] == (c, d)
    np.testing.assert_allclose(y.numpy(), xn.reshape(5, 4, 3))
    check_gradient(lambda v: rf.reshape(v, [a, b], [c, d]) ** 2, xn[0], [a, b])
    with pytest.raises(ValueError, match="reshape: in_dims"):
        rf.reshape(x, [a, b], [c, rf.Dim(2)])


def test_repeat(seq: tuple) -> None:
    x, xn, t, f = seq
    reps = np.array([[1, 0, 2, 3], [2, 7, 7, 7], [0, 1, 1, 9]], np.int32)
    r = rf.convert_to_tensor(reps, dims=[rf.batch_dim, t])
    out, od = rf.repeat(x, in_spatial_dim=t, repeats=r)
    want_lens = [6, 2, 2]
    assert od.dyn_size_ext.numpy().tolist() == want_lens
    assert out.dims == (rf.batch_dim, od, f)
    want = [np.repeat(xn[b, :n], reps[b, :n], axis=0) for b, n in enumerate(LENS)]
    check_valid(out, want, want_lens)
    limited, ld = rf.repeat(x, in_spatial_dim=t, repeats=r, max_len_factor=1)
    assert ld.dyn_size_ext.numpy().tolist() == [3, 1, 2]
    assert limited.dims == (rf.batch_dim, ld, f)
    g = rf.Dim(3, name="g")
    three = rf.convert_to_tensor(np.array([2, 0, 1], np.int32), dims=[g])
    check_gradient(
        lambda v: rf.repeat(v, in_spatial_dim=g, repeats=three)[0], uniform(4, (3,)), [g]
    )
    with pytest.raises(ValueError, match="repeat: repeats must not be negative"):
        rf.repeat(x, in_spatial_dim=t, repeats=r * -1)


def test_reverse_and_shift(seq: tuple) -> None:
    x, xn, t, _f = seq
    check_valid(rf.reverse_sequence(x, axis=t), [xn[b, :n][::-1] for b, n in enumerate(LENS)], LENS)
    flipped = rf.reverse_sequence(x, axis=t, handle_dynamic_dims=False).numpy()
    np.testing.assert_allclose(flipped, xn[:, ::-1])

    def shifted(amount: int) -> list[np.ndarray]:
        out = []
        for b, length in enumerate(LENS):
            pad = np.full((min(abs(amount), length), 2), -9.0, np.float32)
            s = xn[b, :length]
            out.append(
                np.concatenate([pad, s[: length - len(pad)]])
                if amount > 0
                else np.concatenate([s[len(pad) :], pad])
            )
        return out

    for amount in (1, 2):
        check_valid(rf.shift_right(x, axis=t, pad_value=-9.0, amount=amount), shifted(amount), LENS)
        check_valid(rf.shift_left(x, axis=t, pad_value=-9.0, amount=amount), shifted(-amount), LENS)
    g = rf.Dim(4, name="g")
    ints = rf.cast(rf.range_over_dim(g), "int64")
    shifted_ints = rf.shift_right(ints, axis=g, pad_value=-1)
    assert shifted_ints.dtype == "int64"
    assert shifted_ints.numpy().tolist() == [-1, 0, 1, 2]
    check_gradient(lambda v: rf.reverse_sequence(v, axis=g) * v, uniform(5, (4,)), [g])
    check_gradient(lambda v: rf.shift_left(v, axis=g, pad_value=1.0) * v, uniform(6, (4,)), [g])
    with pytest.raises(ValueError, match="shift_right: amount"):
        rf.shift_right(x, axis=t, pad_value=0.0, amount=-1)


def windows(seq: np.ndarray, size: int, left: int, pad: float) -> np.ndarray:
    padded = np.concatenate(
        [np.full((left, 2), pad), seq, np.full((size - 1 - left, 2), pad)]
    ).astype(np.float32)
    return np.stack([padded[i : i + size] for i in range(len(seq))])


def test_window(seq: tuple) -> None:
    x, xn, t, f = seq
    w = rf.Dim(3, name="w")
    out, od = rf.window(x, spatial_dim=t, window_dim=w, pad_value=-1.0)
    assert od == t
    assert out.dims == (rf.batch_dim, w, t, f)
    check_valid(
        out.copy_transpose([rf.batch_dim, t, w, f]),
        [windows(xn[b, :n], 3, 1, -1.0) for b, n in enumerate(LENS)],
        LENS,
    )
    out, od = rf.window(x, spatial_dim=t, window_dim=w, stride=2, window_left=2)
    assert out.dims == (rf.batch_dim, od, w, f)
    lens = [2, 1, 2]
    assert od.dyn_size_ext.numpy().tolist() == lens
    check_valid(out, [windows(xn[b, :n], 3, 2, 0.0)[::2] for b, n in enumerate(LENS)], lens)
    w2 = rf.Dim(2, name="w2")
    out, od = rf.window(x, spatial_dim=t, window_dim=w2, padding="valid")
    lens = [3, 0, 2]
    assert od.dyn_size_ext.numpy().tolist() == lens
    got = out.copy_transpose([rf.batch_dim, od, w2, f]).numpy()
    for b, n in enumerate(lens):
        for i in range(n):
            np.testing.assert_allclose(got[b, i], xn[b, i : i + 2])
    g = rf.Dim(4, name="g")
    check_gradient(
        lambda v: rf.window(v, spatial_dim=g, window_dim=w)[0] ** 2, uniform(7, (4,)), [g]
    )
    with pytest.raises(ValueError, match="window: window_left"):
        rf.window(x, spatial_dim=t, window_dim=w, window_left=2, window_right=2)
    with pytest.raises(ValueError, match="window: padding"):
        rf.window(x, spatial_dim=t, window_dim=w, padding="full")


def test_concat_features_and_ranges() -> None:
    f, g = rf.Dim(2, name="f"), rf.Dim(3, name="g")
    a = rf.convert_to_tensor(uniform(8, (2,)), dims=[f], feature_dim=f)
    b = rf.convert_to_tensor(uniform(9, (3,)), dims=[g], feature_dim=g)
    c = rf.concat_features(a, b)
    assert c.feature_dim == c.dims[0]
    assert c.dims[0].dimension == 5
    np.testing.assert_allclose(c.numpy(), np.concatenate([a.numpy(), b.numpy()]))
    with pytest.raises(ValueError, match="concat_features: source 1"):
        rf.concat_features(a, rf.zeros([g]))
    t = time_dim([5, 2, 4])
    pos, od = rf.range_over_dim_strided(t, stride=2)
    assert od.dyn_size_ext.numpy().tolist() == [3, 1, 2]
    assert pos.numpy().tolist() == [0, 2, 4]
    assert pos.sparse_dim == od
    merged = rf.range_over_merged_dims([f, g])
    assert merged.dims == (f, g)
    assert merged.sparse_dim.dimension == 6
    assert merged.numpy().tolist() == [[0, 1, 2], [3, 4, 5]]
    lin = rf.linspace_over_dim(t, 1.0, 3.0)
    assert lin.dims == (t, rf.batch_dim)
    for b, n in enumerate([5, 2, 4]):
        np.testing.assert_allclose(lin.numpy()[:n, b], 1 + 2 * np.arange(n) / n, rtol=1e-6)
    np.testing.assert_allclose(rf.linspace_over_dim(g).numpy(), np.arange(3) / 3, rtol=1e-6)
    last = rf.last_frame_position_of_dim(time_dim([3, 0, 1]))
    assert last.numpy().tolist() == [2, 0, 0]
    assert rf.last_frame_position_of_dim(g) == 2


def test_set_sparse_dim_and_replace_dim_v2(seq: tuple) -> None:
    x, xn, t, f = seq
    v = rf.Dim(9, name="v")
    labels = rf.set_sparse_dim(rf.convert_to_tensor(np.array([1, 8], np.int32), dims=[f]), v)
    assert labels.sparse_dim == v
    assert labels.numpy().tolist() == [1, 8]
    with pytest.raises(ValueError, match="set_sparse_dim"):
        rf.set_sparse_dim(x, v)
    wide = rf.Dim(3, name="wide")
    y = rf.replace_dim_v2(x, in_dim=f, out_dim=wide)
    assert y.dims == (rf.batch_dim, t, wide)
    np.testing.assert_allclose(y.numpy()[..., :2], xn)
    assert (y.numpy()[..., 2] == 0).all()
    narrow = rf.Dim(1, name="narrow")
    np.testing.assert_allclose(rf.replace_dim_v2(x, in_dim=f, out_dim=narrow).numpy(), xn[..., :1])
    fixed = rf.Dim(5, name="fixed")
    z = rf.replace_dim_v2(x, in_dim=t, out_dim=fixed)
    assert z.dims == (rf.batch_dim, fixed, f)
    for b, n in enumerate(LENS):
        np.testing.assert_allclose(z.numpy()[b, :n], xn[b, :n])
        assert (z.numpy()[b, n:] == 0).all()
    with pytest.raises(ValueError, match="not allowed to expand"):
        rf.replace_dim_v2(x, in_dim=f, out_dim=wide, allow_expand=False)
    check_gradient(lambda v: rf.replace_dim_v2(v, in_dim=f, out_dim=wide) ** 2, xn[0, 0], [f])


def test_slice_update(seq: tuple) -> None:
    x, xn, t, f = seq
    frame = uniform(10, (3, 2))
    got = rf.slice_update(
        x, rf.convert_to_tensor(frame, dims=[rf.batch_dim, f]), axis=t, start=2
    ).numpy()
    want = xn.copy()
    want[:, 2] = frame
    np.testing.assert_allclose(got, want)
    g = rf.Dim(3, name="g")
    frame_t = rf.convert_to_tensor(np.float32(5.0))
    check_gradient(
        lambda v: rf.slice_update(v, frame_t, axis=g, start=1) * v, uniform(11, (3,)), [g]
    )
    with pytest.raises(ValueError, match="slice_update: value"):
        rf.slice_update(x, x, axis=t, start=0)


def test_sort_and_search_sorted(seq: tuple) -> None:
    x, xn, t, f = seq
    values, indices, od = rf.sort(x, axis=t, descending=True)
    assert values.dims == (rf.batch_dim, f, od)
    assert indices.sparse_dim == t
    assert indices.dtype == "int64"
    for b, n in enumerate(LENS):
        want = -np.sort(-xn[b, :n], axis=0)
        np.testing.assert_allclose(values.numpy()[b, :, :n], want.T)
        np.testing.assert_allclose(
            np.take_along_axis(xn[b, :n].T, indices.numpy()[b, :, :n], axis=1), want.T
        )
    g = rf.Dim(4, name="g")

    def weighted_sort(v: rf.Tensor) -> rf.Tensor:
        out, _, sorted_dim = rf.sort(v, axis=g)
        return out * rf.range_over_dim(sorted_dim, dtype="float32")

    check_gradient(weighted_sort, np.array([0.3, -1.0, 2.0, 0.1], np.float32), [g])
    sorted_np = np.sort(uniform(12, (3, 4)), axis=1)
    sorted_seq = rf.convert_to_tensor(sorted_np, dims=[rf.batch_dim, t])
    q = rf.Dim(5, name="q")
    vals_np = np.concatenate([sorted_np[:, :2], uniform(13, (3, 3))], axis=1)
    vals = rf.convert_to_tensor(vals_np, dims=[rf.batch_dim, q])
    for side in ("left", "right"):
        got = rf.search_sorted(sorted_seq, vals, axis=t, side=side)
        assert got.dims == (rf.batch_dim, q)
        assert got.sparse_dim == t
        for b, n in enumerate(LENS):
            want = np.searchsorted(sorted_np[b, :n], vals_np[b], side=side)
            assert got.numpy()[b].tolist() == want.tolist()
    with pytest.raises(ValueError, match="search_sorted: side"):
        rf.search_sorted(sorted_seq, vals, axis=t, side="middle")


@pytest.mark.usefixtures("kept_behavior_version")
def test_against_returnn(seq: tuple) -> None:
    torch = pytest.importorskip("torch", reason="RETURNN's rf runs on its torch backend here")
    pytest.importorskip("returnn", reason="RETURNN's own ops are the reference here")
    import returnn.frontend as rrf
    from returnn.tensor import Dim, Tensor
    from returnn.util.basic import BehaviorVersion

    BehaviorVersion.set_min_behavior_version(25)
    rrf.select_backend_torch()
    x, xn, t, f = seq
    xn = np.nan_to_num(xn, nan=0.0)
    x = rf.convert_to_tensor(xn, dims=[rf.batch_dim, t, f], feature_dim=f)
    rb = Dim(3, name="batch")
    rt = Dim(Tensor("l", [rb], "int32", raw_tensor=torch.tensor(LENS, dtype=torch.int32)), name="t")
    rfd = Dim(2, name="f")
    rx = Tensor("x", [rb, rt, rfd], "float32", raw_tensor=torch.tensor(xn), feature_dim=rfd)
    mine_dims = {rb: rf.batch_dim, rt: t, rfd: f}

    def same(mine: rf.Tensor, theirs: Tensor, lens_axis: int | None = 1) -> None:
        order = [mine_dims[d] for d in theirs.dims]
        assert list(mine.dims) == order, (mine.dims, theirs.dims)
        got, want = mine.numpy(), theirs.raw_tensor.detach().numpy()
        if lens_axis is None:
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
            return
        for b, n in enumerate(LENS):
            np.testing.assert_allclose(
                np.take(got[b], range(n), axis=lens_axis - 1),
                np.take(want[b], range(n), axis=lens_axis - 1),
                rtol=1e-5,
                atol=1e-5,
            )

    same(rf.reverse_sequence(x, axis=t), rrf.reverse_sequence(rx, axis=rt))
    same(rf.shift_right(x, axis=t, pad_value=2.0), rrf.shift_right(rx, axis=rt, pad_value=2.0))
    same(rf.shift_left(x, axis=t, pad_value=0.0), rrf.shift_left(rx, axis=rt, pad_value=0.0))
    w, rw = rf.Dim(3, name="w"), Dim(3, name="w")
    mine_dims[rw] = w
    same(
        rf.window(x, spatial_dim=t, window_dim=w)[0],
        rrf.window(rx, spatial_dim=rt, window_dim=rw)[0],
        2,
    )
    ours, od = rf.window(x, spatial_dim=t, window_dim=w, stride=2)
    theirs, rod = rrf.window(rx, spatial_dim=rt, window_dim=rw, stride=2)
    assert od.dyn_size_ext.numpy().tolist() == rod.dyn_size_ext.raw_tensor.tolist()
    mine_dims[rod] = od
    assert [mine_dims[d] for d in theirs.dims] == list(ours.dims)
    reps = np.array([[1, 0, 2, 3], [2, 7, 7, 7], [0, 1, 1, 9]], np.int32)
    ours, od = rf.repeat(
        x, in_spatial_dim=t, repeats=rf.convert_to_tensor(reps, dims=[rf.batch_dim, t])
    )
    theirs, rod = rrf.repeat(
        rx, in_spatial_dim=rt, repeats=Tensor("r", [rb, rt], "int32", raw_tensor=torch.tensor(reps))
    )
    assert od.dyn_size_ext.numpy().tolist() == rod.dyn_size_ext.raw_tensor.tolist()
    mine_dims[rod] = od
    for b, n in enumerate(od.dyn_size_ext.numpy()):
        np.testing.assert_allclose(ours.numpy()[b, :n], theirs.raw_tensor.numpy()[b, :n], atol=1e-5)
    ours, _, od = rf.sort(x, axis=f)
    theirs, _, rod = rrf.sort(rx, axis=rfd)
    mine_dims[rod] = od
    same(ours, theirs)
    lin, rlin = rf.linspace_over_dim(t, -1.0, 2.0), rrf.linspace_over_dim(rt, -1.0, 2.0)
    assert [mine_dims[d] for d in rlin.dims] == list(lin.dims)
    for b, n in enumerate(LENS):
        np.testing.assert_allclose(lin.numpy()[:n, b], rlin.raw_tensor.numpy()[:n, b], atol=1e-5)
    q, rq = rf.Dim(2, name="q"), Dim(2, name="q")
    mine_dims[rq] = q
    vals_np = np.array([[0.5, -1.0], [0.0, 3.0], [1.0, -2.0]], np.float32)
    st = np.sort(xn, axis=1)
    rs = Dim(4, name="s")
    s = rf.Dim(4, name="s")
    mine_dims[rs] = s
    for side in ("left", "right"):
        ours = rf.search_sorted(
            rf.convert_to_tensor(st[..., 0], dims=[rf.batch_dim, s]),
            rf.convert_to_tensor(vals_np, dims=[rf.batch_dim, q]),
            axis=s,
            side=side,
        )
        theirs = rrf.search_sorted(
            Tensor("s", [rb, rs], "float32", raw_tensor=torch.tensor(st[..., 0])),
            Tensor("v", [rb, rq], "float32", raw_tensor=torch.tensor(vals_np)),
            axis=rs,
            side=side,
        )
        same(ours, theirs, None)


def test_replace_dim_v2_keeps_frames_past_the_old_lengths() -> None:
    """Of the same padded size, the frames move as they are (RETURNN's eager rule):
    after a gather of hypotheses, the old lengths no longer describe the data."""
    old = rf.Dim(rf.convert_to_tensor(np.array([1, 3], np.int32), dims=[rf.batch_dim]), name="o")
    new = rf.Dim(rf.convert_to_tensor(np.array([3, 2], np.int32), dims=[rf.batch_dim]), name="n")
    values = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], np.float32)
    x = rf.convert_to_tensor(values, dims=[rf.batch_dim, old])
    y = rf.replace_dim_v2(x, in_dim=old, out_dim=new)
    assert y.dims == (rf.batch_dim, new)
    np.testing.assert_allclose(y.numpy()[0], [1.0, 2.0, 3.0])
    np.testing.assert_allclose(y.numpy()[1, :2], [4.0, 5.0])
    longer = old + 1
    z = rf.replace_dim_v2(x, in_dim=old, out_dim=longer).copy_transpose([rf.batch_dim, longer])
    np.testing.assert_allclose(z.numpy()[0, :2], [1.0, 0.0])  # zeros from the old end on
