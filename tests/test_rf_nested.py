"""verjus.rf.nested: where / gather / masked_select / masked_scatter over nested
(tensor, dim) structures, the dims' lengths following the tensors; values
against numpy."""

from __future__ import annotations

import numpy as np

from verjus import rf


def hist(lens: list[int], name: str) -> tuple[rf.Tensor, np.ndarray, rf.Dim]:
    d = rf.Dim(rf.convert_to_tensor(np.array(lens, np.int32), dims=[rf.batch_dim]), name=name)
    xn = np.random.default_rng(len(name)).uniform(-1, 1, (3, max(lens))).astype(np.float32)
    xn[np.arange(max(lens))[None] >= np.array(lens)[:, None]] = 0
    return rf.convert_to_tensor(xn, dims=[rf.batch_dim, d]), xn, d


MASK = np.array([True, False, True])


def mask() -> rf.Tensor:
    return rf.convert_to_tensor(MASK, dims=[rf.batch_dim])


def test_mask_nested_merges_dims() -> None:
    a, an, ad = hist([3, 1, 2], "a")
    b, bn, bd = hist([1, 4, 4], "b")
    x, xd = rf.nested.mask_nested((a, ad), mask=mask(), mask_value=(b, bd))
    assert xd.dyn_size_ext.numpy().tolist() == [3, 4, 2]
    assert x.dims == (rf.batch_dim, xd)
    got = x.numpy()
    for i, (use_a, n) in enumerate(zip(MASK, [3, 4, 2], strict=True)):
        np.testing.assert_allclose(got[i, :n], (an if use_a else bn)[i, :n])


def test_gather_nested_follows_backrefs() -> None:
    a, an, ad = hist([3, 1, 2], "a")
    beam = rf.Dim(3, name="beam")
    back = rf.convert_to_tensor(np.array([2, 0, 0], np.int32), dims=[beam], sparse_dim=rf.batch_dim)
    x, xd = rf.nested.gather_nested((a, ad), indices=back)
    assert xd.dyn_size_ext.numpy().tolist() == [2, 3, 3]
    np.testing.assert_allclose(x.copy_transpose([beam, xd]).numpy()[0, :2], an[2, :2])


def test_masked_select_scatter_nested_roundtrip() -> None:
    a, an, ad = hist([3, 1, 2], "a")
    (sel, sd), packed, dim_map = rf.nested.masked_select_nested(
        (a, ad), mask=mask(), dims=[rf.batch_dim]
    )
    assert packed.dimension == 2
    assert sd.dyn_size_ext.numpy().tolist() == [3, 2]
    b, bn, bd = hist([1, 4, 4], "b")
    out, od = rf.nested.masked_scatter_nested(
        (sel, sd),
        (b, bd),
        mask=mask(),
        dims=[rf.batch_dim],
        in_dim=packed,
        masked_select_dim_map=dim_map,
    )
    assert od.dyn_size_ext.numpy().tolist() == [3, 4, 2]
    got = out.copy_transpose([rf.batch_dim, od]).numpy()
    for i, (use_a, n) in enumerate(zip(MASK, [3, 4, 2], strict=True)):
        np.testing.assert_allclose(got[i, :n], (an if use_a else bn)[i, :n])


def test_where_nested() -> None:
    a, _an, ad = hist([3, 1, 2], "a")
    b, bn, bd = hist([1, 4, 4], "b")
    x, xd = rf.nested.where_nested((a, ad), (b, bd), condition=mask())
    assert xd.dyn_size_ext.numpy().tolist() == [3, 4, 2]
    np.testing.assert_allclose(x.copy_transpose([rf.batch_dim, xd]).numpy()[1, :4], bn[1, :4])
