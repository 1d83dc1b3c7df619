"""verjus.rf.packing (pack_padded / pad_packed, masked_select / masked_scatter):
values against numpy with a dynamic dim (padding never selected, whatever the
mask says there), finite-difference gradients, RETURNN's rf on its torch backend
where installed, and bad input."""

from __future__ import annotations

import numpy as np
import pytest
from test_rf_grad import check_gradient

from verjus import rf

LENS = [3, 1, 2]
MASK = np.array([[1, 0, 1], [1, 1, 1], [0, 1, 1]], bool)  # row 1: padding marked True


def time_dim(lens: list[int]) -> rf.Dim:
    return rf.Dim(rf.convert_to_tensor(np.array(lens, np.int32), dims=[rf.batch_dim]), name="time")


@pytest.fixture
def seq() -> tuple[rf.Tensor, np.ndarray, rf.Dim, rf.Dim]:
    t, f = time_dim(LENS), rf.Dim(2, name="f")
    xn = np.random.default_rng(1).uniform(-3, 3, (3, 3, 2)).astype(np.float32)
    return rf.convert_to_tensor(xn, dims=[rf.batch_dim, t, f]), xn, t, f


def valid_mask() -> np.ndarray:
    return np.arange(3)[None, :] < np.array(LENS)[:, None]


def test_pack_padded_and_back(seq: tuple) -> None:
    x, xn, t, f = seq
    packed, pd = rf.pack_padded(x, dims=[rf.batch_dim, t])
    assert pd.dimension == sum(LENS)
    assert packed.dims == (pd, f)
    np.testing.assert_allclose(packed.numpy(), xn[valid_mask()])
    back = rf.pad_packed(packed, in_dim=pd, dims=[rf.batch_dim, t])
    assert back.dims == (rf.batch_dim, t, f)
    np.testing.assert_allclose(back.numpy(), np.where(valid_mask()[..., None], xn, 0))
    time_major, _ = rf.pack_padded(x, dims=[t, rf.batch_dim])
    np.testing.assert_allclose(time_major.numpy(), xn.transpose(1, 0, 2)[valid_mask().T])
    per_seq, sd = rf.pack_padded(x, dims=[t])
    assert per_seq.dims == (rf.batch_dim, sd, f)
    assert sd.dyn_size_ext.numpy().tolist() == LENS
    given = rf.Dim(sum(LENS), name="given")
    assert rf.pack_padded(x, dims=[rf.batch_dim, t], out_dim=given)[1] == given
    unknown = rf.Dim(None, name="unknown")
    assert rf.pack_padded(x, dims=[rf.batch_dim, t], out_dim=unknown)[1].dimension == sum(LENS)
    with pytest.raises(ValueError, match="pack_padded: out_dim"):
        rf.pack_padded(x, dims=[rf.batch_dim, t], out_dim=rf.Dim(4))
    with pytest.raises(ValueError, match="enforce_sorted"):
        rf.pack_padded(x, dims=[rf.batch_dim, t], enforce_sorted=True)
    b2, t2 = rf.Dim(2, name="b2"), rf.Dim(3, name="t2")
    check_gradient(
        lambda v: rf.pack_padded(v, dims=[b2, t2])[0] ** 2,
        xn[:2, :, 0],
        [b2, t2],
    )


def test_masked_select_and_scatter(seq: tuple) -> None:
    x, xn, t, f = seq
    mask = rf.convert_to_tensor(MASK, dims=[rf.batch_dim, t])
    keep = MASK & valid_mask()
    sel, sd = rf.masked_select(x, mask=mask, dims=[rf.batch_dim, t])
    assert sel.dims == (sd, f)
    assert sd.dimension == keep.sum()
    np.testing.assert_allclose(sel.numpy(), xn[keep])
    back = rf.masked_scatter(sel, mask=mask, dims=[rf.batch_dim, t], in_dim=sd)
    np.testing.assert_allclose(back.numpy(), np.where(keep[..., None], xn, 0))
    backup = rf.convert_to_tensor(np.float32(-5.0))
    back = rf.masked_scatter(sel, backup, mask=mask, dims=[rf.batch_dim, t], in_dim=sd)
    np.testing.assert_allclose(back.numpy(), np.where(keep[..., None], xn, -5))
    rows, rd = rf.masked_select(x, mask=mask, dims=[t])
    assert rows.dims == (rf.batch_dim, rd, f)
    counts = keep.sum(1)
    assert rd.dyn_size_ext.numpy().tolist() == counts.tolist()
    for b in range(3):
        np.testing.assert_allclose(rows.numpy()[b, : counts[b]], xn[b][keep[b]])
        assert (rows.numpy()[b, counts[b] :] == 0).all()
    back = rf.masked_scatter(rows, mask=mask, dims=[t], in_dim=rd)
    assert back.dims == (rf.batch_dim, t, f)
    np.testing.assert_allclose(back.numpy(), np.where(keep[..., None], xn, 0))
    n = rf.Dim(3, name="n")
    m = rf.convert_to_tensor(np.array([True, False, True]), dims=[n])
    check_gradient(lambda v: rf.masked_select(v, mask=m, dims=[n])[0] ** 2, xn[0, :, 0], [n])
    two = rf.Dim(2, name="two")
    check_gradient(
        lambda v: rf.masked_scatter(v, mask=m, dims=[n], in_dim=two) ** 2, xn[0, :2, 0], [two]
    )
    with pytest.raises(ValueError, match="masked_select: dims"):
        rf.masked_select(x, mask=mask, dims=[f])
    with pytest.raises(ValueError, match="masked_select: mask must be bool"):
        rf.masked_select(x, mask=rf.cast(mask, "int32"), dims=[t])
    with pytest.raises(ValueError, match="masked_scatter: the mask selects"):
        rf.masked_scatter(
            rf.zeros([two]),
            mask=rf.convert_to_tensor(np.ones(3, bool), dims=[n]),
            dims=[n],
            in_dim=two,
        )


@pytest.mark.usefixtures("kept_behavior_version")
def test_against_returnn(seq: tuple) -> None:
    torch = pytest.importorskip("torch", reason="RETURNN's rf runs on its torch backend here")
    pytest.importorskip("returnn", reason="RETURNN's own ops are the reference here")
    import returnn.frontend as rrf
    from returnn.tensor import Dim, Tensor
    from returnn.util.basic import BehaviorVersion

    BehaviorVersion.set_min_behavior_version(25)
    rrf.select_backend_torch()
    x, xn, t, _f = seq
    rb = Dim(3, name="batch")
    rt = Dim(Tensor("l", [rb], "int32", raw_tensor=torch.tensor(LENS, dtype=torch.int32)), name="t")
    rfd = Dim(2, name="f")
    rx = Tensor("x", [rb, rt, rfd], "float32", raw_tensor=torch.tensor(xn))
    ours, _ = rf.pack_padded(x, dims=[rf.batch_dim, t])
    theirs, _ = rrf.pack_padded(rx, dims=[rb, rt])
    np.testing.assert_allclose(ours.numpy(), theirs.raw_tensor.numpy(), atol=1e-5)
    keep = MASK & valid_mask()  # RETURNN's full-mask path would select padding marked True
    mask = rf.convert_to_tensor(keep, dims=[rf.batch_dim, t])
    rmask = Tensor("m", [rb, rt], "bool", raw_tensor=torch.tensor(keep))
    ours, od = rf.masked_select(x, mask=mask, dims=[t])
    theirs, rod = rrf.masked_select(rx, mask=rmask, dims=[rt])
    assert od.dyn_size_ext.numpy().tolist() == rod.dyn_size_ext.raw_tensor.tolist()
    np.testing.assert_allclose(ours.numpy(), theirs.raw_tensor.numpy(), atol=1e-5)
    ours = rf.masked_scatter(ours, mask=mask, dims=[t], in_dim=od)
    theirs = rrf.masked_scatter(theirs, mask=rmask, dims=[rt], in_dim=rod)
    np.testing.assert_allclose(
        ours.numpy(), theirs.copy_transpose([rb, rt, rfd]).raw_tensor.numpy(), atol=1e-5
    )
