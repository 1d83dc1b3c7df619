"""RETURNN names and semantics that its own rf tests need: ``Tensor.copy_compatible_to``
/ ``copy_compatible_to_dims`` (broadcast dims of size 1, ``unbroadcast``),
``rf.stack`` into a dynamic out dim, RoPE's ``_apply_rope`` / ``_apply_rope_real``
in ``verjus.rf.attention``, ``verjus.rf._cache.Cache`` and
``convert_to_tensor(_backend=NumpyBackend)``, each against numpy or RETURNN's own
on its torch backend.
"""

from __future__ import annotations

import numpy as np
import pytest

from verjus import rf
from verjus.rf._cache import Cache


def _returnn() -> tuple:
    torch = pytest.importorskip("torch", reason="RETURNN's rf runs on its torch backend")
    pytest.importorskip("returnn", reason="RETURNN's own frontend is the reference")
    import returnn.frontend as rrf
    from returnn.tensor import Dim, Tensor

    rrf.select_backend_torch()
    return torch, rrf, Dim, Tensor


def _compatible_cases(m: object, dim_cls: type, tensor_cls: type, to_tensor: object) -> list:
    """``copy_compatible_to`` (and ``_dims``) results as (dim names, shape, feature name)."""
    b, f, one, t = (dim_cls(n, name=s) for n, s in ((2, "b"), (3, "f"), (1, "one"), (4, "t")))
    x = to_tensor(np.arange(6, dtype=np.float32).reshape(2, 3), [b, f], f)
    template = tensor_cls("tmpl", [t, f, one, b], "float32")
    outs = [
        x.copy_compatible_to(template),
        x.copy_compatible_to(tensor_cls("tmpl", [t, f, b], "float32", feature_dim=f)),
        x.copy_compatible_to(tensor_cls("tmpl", [t, f, b], "float32", feature_dim=t)),
        x.copy_compatible_to(template, unbroadcast=True),
        x.copy_compatible_to(template, unbroadcast=True, except_axis=t),
        x.copy_compatible_to_dims([t, b, f, one]),
        x.copy_compatible_to_dims([t, b, f, one], unbroadcast=True),
    ]
    results = []
    for y in outs:
        raw = np.asarray(y.raw_tensor.numpy() if hasattr(y.raw_tensor, "numpy") else y.raw_tensor)
        feature = y.feature_dim.name if y.feature_dim is not None else None
        results.append(([d.name for d in y.dims], raw, feature))
    return results


def test_copy_compatible_to_against_returnn() -> None:
    torch, rrf, Dim, Tensor = _returnn()  # noqa: N806

    def theirs_tensor(a: np.ndarray, dims: list, feat: object) -> object:
        return Tensor("x", dims, "float32", feature_dim=feat, raw_tensor=torch.from_numpy(a))

    def mine_tensor(a: np.ndarray, dims: list, feat: object) -> rf.Tensor:
        return rf.convert_to_tensor(a, dims=dims, feature_dim=feat)

    theirs = _compatible_cases(rrf, Dim, Tensor, theirs_tensor)
    mine = _compatible_cases(rf, rf.Dim, rf.Tensor, mine_tensor)
    for (t_names, t_raw, t_feat), (m_names, m_raw, m_feat) in zip(theirs, mine, strict=True):
        assert m_names == t_names
        assert m_feat == t_feat
        np.testing.assert_array_equal(m_raw, t_raw)


def test_copy_compatible_to_keeps_size1_dims_and_checks() -> None:
    b, one, v = rf.Dim(2, name="b"), rf.Dim(1, name="one"), rf.Dim(5, name="v")
    x = rf.convert_to_tensor(np.array([1, 2], np.int32), dims=[b], sparse_dim=v)
    template = rf.Tensor("tmpl", [one, b], "int32", sparse_dim=v)
    y = x.copy_compatible_to(template)
    assert y.dims == (one, b)  # a dim of size 1 is used as it is
    assert y.sparse_dim == v
    with pytest.raises(ValueError, match="is not in"):
        x.copy_compatible_to(template, add_dims=False)
    with pytest.raises(ValueError, match="dtype"):
        x.copy_compatible_to(rf.Tensor("tmpl", [one, b], "float32"), check_sparse=False)
    with pytest.raises(ValueError, match="sparsity"):
        x.copy_compatible_to(rf.Tensor("tmpl", [one, b], "int32"))
    with pytest.raises(ValueError, match="not in"):
        x.copy_compatible_to_dims([one])


def test_stack_into_a_dynamic_out_dim() -> None:
    b = rf.Dim(2, name="b")
    time = rf.Dim(rf.convert_to_tensor(np.array([3, 2], np.int32), dims=[b]), name="t")
    rows = np.arange(6, dtype=np.float32).reshape(3, 2)
    sources = [rf.convert_to_tensor(r, dims=[b]) for r in rows]
    out, out_dim = rf.stack(sources, out_dim=time)
    assert out_dim is time
    np.testing.assert_array_equal(out.copy_transpose([time, b]).numpy(), rows)
    with pytest.raises(ValueError, match="axis size 2"):
        rf.stack(sources[:2], out_dim=rf.Dim(3, name="three"))


def numpy_rope(x: np.ndarray, sin: np.ndarray, cos: np.ndarray) -> np.ndarray:
    """Pairs ``(x[2i], x[2i + 1])`` times ``cos_i + 1j sin_i``, over the last axis."""
    z = (x[..., 0::2] + 1j * x[..., 1::2]) * (cos + 1j * sin)
    return np.stack([z.real, z.imag], axis=-1).reshape(x.shape).astype(np.float32)


def test_apply_rope_in_attention_module_against_numpy() -> None:
    from verjus.rf.attention import _apply_rope, _apply_rope_real

    time, heads, feat = rf.Dim(5, name="t"), rf.Dim(2, name="h"), rf.Dim(8, name="f")
    xv = np.random.default_rng(0).standard_normal((5, 2, 8)).astype(np.float32)
    pe = rf.sinusoidal_positional_encoding(spatial_dim=time, feat_dim=feat)
    sin, cos = np.split(pe.copy_transpose([time, feat]).numpy(), 2, axis=-1)
    want = numpy_rope(xv, sin[:, None], cos[:, None])
    x = rf.convert_to_tensor(xv, dims=[time, heads, feat])
    for fn in (_apply_rope, _apply_rope_real):
        for order in ([time, heads, feat], [feat, time, heads]):
            y = fn(x.copy_transpose(order), pe, feat)
            got = y.copy_transpose([time, heads, feat]).numpy()
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_cache_by_sizes_and_dim_identity() -> None:
    cache = Cache(max_size=2)
    b = rf.Dim(2, name="b")
    t1 = rf.Dim(rf.convert_to_tensor(np.array([3, 2], np.int32), dims=[b]), name="t1")
    t2 = rf.Dim(rf.convert_to_tensor(np.array([3, 2], np.int32), dims=[b]), name="t2")
    t3 = rf.Dim(rf.convert_to_tensor(np.array([3, 1], np.int32), dims=[b]), name="t3")
    value = rf.convert_to_tensor(np.arange(6, dtype=np.float32).reshape(2, 3), dims=[b, t1])
    cache.set(("enc", t1), (value, t1))
    assert cache.get(("enc", t1))[1] is t1
    hit, hit_dim = cache.get(("enc", t2))  # the same lengths: over the queried dim
    assert hit_dim is t2
    assert hit.dims == (b, t2)
    np.testing.assert_array_equal(hit.numpy(), value.numpy())
    assert cache.get(("enc", t3), "miss") == "miss"
    # a derived dim in the value is not a key dim: it stays itself
    derived = rf.batch_dim + 1
    cache.set(("derived", rf.batch_dim), (derived, rf.batch_dim))
    got_derived, got_batch = cache.get(("derived", rf.batch_dim))
    assert got_derived is derived
    assert got_batch is rf.batch_dim
    # a Tensor key matches only itself; the LRU keeps max_size entries
    cache.set(("tensor", value), 1)
    assert cache.get(("tensor", value)) == 1
    assert cache.get(("tensor", rf.convert_to_tensor(value.numpy(), dims=[b, t1]))) is None
    assert cache.get(("enc", t1)) is None  # dropped, the least recently used
    with pytest.raises(TypeError, match="unexpected key item"):
        cache.get(("bad", object()))


def test_convert_to_tensor_numpy_backend() -> None:
    from verjus.rf._backend import Backend
    from verjus.rf._numpy_backend import NumpyBackend

    x = rf.convert_to_tensor(1, dims=(), dtype="int32", _backend=NumpyBackend)
    assert x.device == "cpu"
    assert isinstance(x.raw_tensor, np.ndarray)
    assert x.raw_tensor.dtype == np.int32
    assert x.raw_tensor.item() == 1
    assert rf.convert_to_tensor(2.0, _backend=Backend).raw_tensor.item() == 2.0
    with pytest.raises(TypeError, match="Backend class"):
        rf.convert_to_tensor(1, _backend="numpy")
