"""``rf.GroupNorm`` and ``rf.GroupNormSpatial``: against numpy over a dynamic
time dim with different lengths (padding must not leak into the statistics),
finite-difference gradients, against RETURNN's own on its torch backend, and
bad input.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_rf_grad import check_gradient

from verjus import rf

LENS = [4, 1, 3]
C, G = 6, 3
TOL = {"rtol": 1e-5, "atol": 1e-5}


def time_dim(lens: list[int]) -> rf.Dim:
    return rf.Dim(rf.convert_to_tensor(np.array(lens, np.int32), dims=[rf.batch_dim]), name="t")


def data() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    g = np.random.default_rng(3)
    xv = g.standard_normal((len(LENS), max(LENS), C)).astype(np.float32) * 2 + 1
    scale = g.uniform(0.5, 1.5, C).astype(np.float32)
    bias = g.uniform(-0.5, 0.5, C).astype(np.float32)
    valid = np.arange(max(LENS))[None, :] < np.array(LENS)[:, None]
    return xv, scale, bias, valid


def numpy_group_norm(
    x: np.ndarray, scale: np.ndarray, bias: np.ndarray, spatial: bool
) -> np.ndarray:
    """Per sequence (only its valid frames): groups of C // G channels."""
    t, c = x.shape
    xg = x.reshape(t, G, c // G).astype(np.float64)
    axes = (0, 2) if spatial else (2,)
    mean = xg.mean(axis=axes, keepdims=True)
    var = xg.var(axis=axes, keepdims=True)
    return ((xg - mean) / np.sqrt(var + 1e-6)).reshape(t, c) * scale + bias


def build(cls: type) -> object:
    feat = rf.Dim(C, name="c")
    norm = cls(feat, num_groups=G)
    return norm, feat


@pytest.mark.parametrize("spatial", [False, True])
def test_values_against_numpy_per_sequence(spatial: bool) -> None:
    xv, scale, bias, valid = data()
    norm, feat = build(rf.GroupNormSpatial if spatial else rf.GroupNorm)
    norm.scale.assign(scale)
    norm.bias.assign(bias)
    time = time_dim(LENS)
    noisy = np.where(valid[..., None], xv, 1e4).astype(np.float32)  # padding must not leak
    x = rf.convert_to_tensor(noisy, dims=[rf.batch_dim, time, feat])
    y = norm(x, spatial_dim=time) if spatial else norm(x)
    assert set(y.dims) == {rf.batch_dim, time, feat}
    got = y.copy_transpose([rf.batch_dim, time, feat]).numpy()
    for b, n in enumerate(LENS):
        want = numpy_group_norm(xv[b, :n], scale, bias, spatial)
        np.testing.assert_allclose(got[b, :n], want, **TOL)


@pytest.mark.parametrize("spatial", [False, True])
def test_gradient(spatial: bool) -> None:
    xv, _, _, _ = data()
    feat = rf.Dim(C, name="c")
    # groups of 3 channels (of 2, the normalised values are always +-1)
    norm = (rf.GroupNormSpatial if spatial else rf.GroupNorm)(feat, num_groups=2)
    time = time_dim(LENS)

    def f(x: rf.Tensor) -> rf.Tensor:
        return norm(x, spatial_dim=time) if spatial else norm(x)

    check_gradient(f, xv, [rf.batch_dim, time, feat])


def test_parameters_and_group_dims() -> None:
    norm, _feat = build(rf.GroupNorm)
    assert sorted(n for n, _ in norm.named_parameters()) == ["bias", "scale"]
    assert norm.num_groups.dimension == G
    assert norm.in_group_dim.dimension == C // G
    np.testing.assert_array_equal(norm.scale.numpy(), np.ones(C, np.float32))
    np.testing.assert_array_equal(norm.bias.numpy(), np.zeros(C, np.float32))


@pytest.mark.parametrize("spatial", [False, True])
def test_against_returnn_on_its_torch_backend(spatial: bool) -> None:
    torch = pytest.importorskip("torch", reason="RETURNN's rf runs on its torch backend")
    pytest.importorskip("returnn", reason="RETURNN's own GroupNorm is the reference")
    import returnn.frontend as rrf
    from returnn.tensor import Dim, Tensor

    rrf.select_backend_torch()
    xv, scale, bias, valid = data()
    cls = "GroupNormSpatial" if spatial else "GroupNorm"
    tfeat = Dim(C, name="c")
    theirs = getattr(rrf, cls)(tfeat, num_groups=G)
    with torch.no_grad():
        theirs.scale.raw_tensor.copy_(torch.from_numpy(scale))
        theirs.bias.raw_tensor.copy_(torch.from_numpy(bias))
    tb = Dim(len(LENS), name="b")
    tt = Dim(Tensor("l", [tb], "int32", raw_tensor=torch.tensor(LENS, dtype=torch.int32)), name="t")
    tx = Tensor("x", [tb, tt, tfeat], "float32", raw_tensor=torch.from_numpy(xv))
    ty = theirs(tx, spatial_dim=tt) if spatial else theirs(tx)
    want = ty.copy_transpose([tb, tt, tfeat]).raw_tensor.detach().numpy()

    norm, feat = build(getattr(rf, cls))
    norm.scale.assign(scale)
    norm.bias.assign(bias)
    time = time_dim(LENS)
    x = rf.convert_to_tensor(xv, dims=[rf.batch_dim, time, feat])
    y = norm(x, spatial_dim=time) if spatial else norm(x)
    got = y.copy_transpose([rf.batch_dim, time, feat]).numpy()
    np.testing.assert_allclose(got[valid], want[valid], **TOL)


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="GroupNorm: in_dim c of size 6 is not divisible"):
        rf.GroupNorm(rf.Dim(6, name="c"), num_groups=4)
    with pytest.raises(TypeError, match="GroupNormSpatial: in_dim must be a static Dim"):
        rf.GroupNormSpatial([rf.Dim(6, name="c")], num_groups=2)
    norm, _ = build(rf.GroupNormSpatial)
    other, time = rf.Dim(C, name="other"), rf.Dim(2, name="t")
    x = rf.convert_to_tensor(np.zeros((2, C), np.float32), dims=[time, other])
    with pytest.raises(ValueError, match=r"GroupNormSpatial: \['c'\] not among"):
        norm(x, spatial_dim=time)
