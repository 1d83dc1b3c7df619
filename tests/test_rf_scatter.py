"""verjus.rf.scatter (scatter in every mode, scatter_count / _mean / _argmax /
_logsumexp / _logmeanexp, sparse_to_dense): values against numpy with a dynamic
indices dim (the padding's values and indices never count), finite-difference
gradients, RETURNN's rf on its torch backend where installed, and bad input."""

from __future__ import annotations

import numpy as np
import pytest
from test_rf_grad import check_gradient

from verjus import rf

LENS = [3, 1, 2]
IDX = np.array([[1, 1, 3], [2, -7, 9], [0, 0, 7]], np.int32)  # padding indices out of range


def time_dim(lens: list[int]) -> rf.Dim:
    return rf.Dim(rf.convert_to_tensor(np.array(lens, np.int32), dims=[rf.batch_dim]), name="time")


@pytest.fixture
def case() -> tuple:
    t, f, o = time_dim(LENS), rf.Dim(2, name="f"), rf.Dim(4, name="o")
    xn = np.random.default_rng(1).uniform(-3, 3, (3, 3, 2)).astype(np.float32)
    xn[1, 1:] = np.nan
    x = rf.convert_to_tensor(xn, dims=[rf.batch_dim, t, f])
    idx = rf.convert_to_tensor(IDX, dims=[rf.batch_dim, t], sparse_dim=o)
    return x, xn, idx, t, f, o


def reference(xn: np.ndarray, reduce: str) -> tuple[np.ndarray, np.ndarray]:
    """numpy scatter over the valid frames: (result [b, o, f], count [b, o])."""
    out = np.zeros((3, 4, 2), np.float64)
    count = np.zeros((3, 4), np.int64)
    groups: dict[tuple[int, int], list[np.ndarray]] = {}
    for b, n in enumerate(LENS):
        for i in range(n):
            groups.setdefault((b, IDX[b, i]), []).append(xn[b, i].astype(np.float64))
    empty = {"sum": 0.0, "max": -np.inf, "min": np.inf, "mean": 0.0, "logsumexp": -np.inf}
    out[...] = empty.get(reduce, -np.inf)
    for (b, o), vals in groups.items():
        v = np.stack(vals)
        count[b, o] = len(vals)
        if reduce == "logsumexp":
            out[b, o] = np.log(np.exp(v).sum(0))
        elif reduce == "logmeanexp":
            out[b, o] = np.log(np.exp(v).mean(0))
        else:
            out[b, o] = getattr(v, reduce)(0)
    return out, count


@pytest.mark.parametrize("mode", ["sum", "max", "min", "mean", "logsumexp", "logmeanexp"])
def test_scatter_modes(case: tuple, mode: str) -> None:
    x, xn, idx, t, f, o = case
    got = rf.scatter(x, indices=idx, indices_dim=t, mode=mode)
    assert got.dims == (rf.batch_dim, o, f)
    want, _ = reference(xn, mode)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)
    n, out = rf.Dim(4, name="n"), rf.Dim(3, name="out")
    targets = rf.convert_to_tensor(np.array([2, 0, 2, 2], np.int32), dims=[n], sparse_dim=out)
    values = np.array([0.5, -1.0, 1.5, 0.7], np.float32)
    check_gradient(lambda v: rf.scatter(v, indices=targets, indices_dim=n, mode=mode), values, [n])


def test_scatter_fill_ints_and_several_out_dims(case: tuple) -> None:
    x, xn, idx, t, f, _o = case
    want, count = reference(xn, "max")
    got = rf.scatter(x, indices=idx, indices_dim=t, mode="max", fill_value=-1.0).numpy()
    np.testing.assert_allclose(got, np.where(count[..., None] > 0, want, -1), rtol=1e-6)
    ints = rf.cast(rf.where(rf.sequence_mask([t]), x * 10.0, 0.0), "int32")
    int_np = ints.numpy()
    got = rf.scatter(ints, indices=idx, indices_dim=t)
    assert got.dtype == "int32"
    want_sum = np.zeros((3, 4, 2), np.int64)
    for b, n in enumerate(LENS):
        for i in range(n):
            want_sum[b, IDX[b, i]] += int_np[b, i]
    assert got.numpy().tolist() == want_sum.tolist()
    got = rf.scatter(ints, indices=idx, indices_dim=t, mode="min").numpy()
    assert (got[count == 0] == np.iinfo(np.int32).max).all()
    assert rf.scatter_count(indices=idx, indices_dim=t).numpy().tolist() == count.tolist()
    assert rf.scatter_count(indices=idx, indices_dim=t, fill_value=1).numpy().min() == 1
    a, b2 = rf.Dim(2, name="a"), rf.Dim(2, name="b2")
    split = rf.scatter(x, indices=idx, indices_dim=t, out_dim=[a, b2])
    assert split.dims == (rf.batch_dim, a, b2, f)
    np.testing.assert_allclose(split.numpy().reshape(3, 4, 2), reference(xn, "sum")[0], atol=1e-5)


def test_scatter_argmax(case: tuple) -> None:
    x, xn, idx, t, f, o = case
    got = rf.scatter_argmax(x, indices=idx, indices_dim=t)
    assert got.dims == (rf.batch_dim, o, f)
    assert got.sparse_dim == t
    want = np.full((3, 4, 2), -1)
    for b, n in enumerate(LENS):
        for j in range(2):
            for i in range(n):
                k = IDX[b, i]
                if want[b, k, j] < 0 or xn[b, i, j] > xn[b, want[b, k, j], j]:
                    want[b, k, j] = i
    assert got.numpy().tolist() == want.tolist()
    assert rf.scatter(x, indices=idx, indices_dim=t, mode="argmax", fill_value=9).numpy().max() == 9


def test_sparse_to_dense() -> None:
    v, n = rf.Dim(4, name="v"), rf.Dim(3, name="n")
    labels = rf.convert_to_tensor(np.array([3, 0, 3], np.int32), dims=[n], sparse_dim=v)
    dense = rf.sparse_to_dense(labels, label_value=1, other_value=0)
    assert dense.dtype == "int32"
    assert dense.dims == (n, v)
    assert dense.numpy().tolist() == np.eye(4, dtype=int)[[3, 0, 3]].tolist()
    dense = rf.sparse_to_dense(labels, label_value=0.9, other_value=0.1)
    np.testing.assert_allclose(dense.numpy(), np.where(np.eye(4)[[3, 0, 3]] > 0, 0.9, 0.1))
    plain = rf.convert_to_tensor(labels.numpy(), dims=[n])  # no sparse_dim
    with pytest.raises(ValueError, match="sparse_to_dense: give axis"):
        rf.sparse_to_dense(plain, label_value=1, other_value=0)


def test_bad_input(case: tuple) -> None:
    x, _xn, idx, t, _f, o = case
    with pytest.raises(ValueError, match=r"scatter: indices .* outside"):
        rf.scatter(x, indices=idx, indices_dim=t, use_mask=False)
    with pytest.raises(ValueError, match="scatter: unknown mode"):
        rf.scatter(x, indices=idx, indices_dim=t, mode="median")
    plain = rf.convert_to_tensor(idx.numpy(), dims=list(idx.dims))  # no sparse_dim
    with pytest.raises(ValueError, match="scatter: give out_dim"):
        rf.scatter(x, indices=plain, indices_dim=t)
    with pytest.raises(ValueError, match="scatter: indices must be integers"):
        rf.scatter(x, indices=x, indices_dim=t, out_dim=o)
    with pytest.raises(ValueError, match="scatter_logsumexp: fill_value"):
        rf.scatter_logsumexp(x, indices=idx, indices_dim=t, fill_value=0.0)


@pytest.mark.usefixtures("kept_behavior_version")
def test_against_returnn(case: tuple) -> None:
    torch = pytest.importorskip("torch", reason="RETURNN's rf runs on its torch backend here")
    pytest.importorskip("returnn", reason="RETURNN's own ops are the reference here")
    import returnn.frontend as rrf
    from returnn.tensor import Dim, Tensor
    from returnn.util.basic import BehaviorVersion

    BehaviorVersion.set_min_behavior_version(25)
    rrf.select_backend_torch()
    x, xn, idx, t, _f, _o = case
    rb = Dim(3, name="batch")
    rt = Dim(Tensor("l", [rb], "int32", raw_tensor=torch.tensor(LENS, dtype=torch.int32)), name="t")
    rfd, ro = Dim(2, name="f"), Dim(4, name="o")
    rx = Tensor("x", [rb, rt, rfd], "float32", raw_tensor=torch.tensor(xn))
    ridx = Tensor("i", [rb, rt], "int32", raw_tensor=torch.tensor(IDX), sparse_dim=ro)
    for mode in ["sum", "max", "min", "mean", "logsumexp", "logmeanexp", "argmax"]:
        ours = rf.scatter(x, indices=idx, indices_dim=t, mode=mode).numpy()
        theirs = rrf.scatter(rx, indices=ridx, indices_dim=rt, mode=mode)
        assert [d.name for d in theirs.dims] == ["batch", "o", "f"]
        np.testing.assert_allclose(ours, theirs.raw_tensor.numpy(), rtol=1e-5, atol=1e-5)
    ours = rf.scatter_count(indices=idx, indices_dim=t).numpy()
    theirs = rrf.scatter_count(indices=ridx, indices_dim=rt).raw_tensor.numpy()
    assert ours.tolist() == theirs.tolist()
    ours = rf.scatter(x, indices=idx, indices_dim=t, mode="max", fill_value=0.5).numpy()
    theirs = rrf.scatter(rx, indices=ridx, indices_dim=rt, mode="max", fill_value=0.5)
    np.testing.assert_allclose(ours, theirs.raw_tensor.numpy(), rtol=1e-5, atol=1e-5)
