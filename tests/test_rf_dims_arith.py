"""Dim arithmetic (``dim + 1``, ``2 * dim``, ``dim - 1``, ``dim // 2``,
``dim.ceildiv_right(2)``, ``dim.div_left(2)``, ``dim_a + dim_b``): sizes per entry of
dynamic dims, the same formula giving the same dim, inverses folding back, RETURNN's
sizes where it is installed, and bad input."""

from __future__ import annotations

import numpy as np
import pytest

from verjus import rf

LENS = [7, 0, 1, 4]


def time_dim(lens: list[int], name: str = "time") -> rf.Dim:
    return rf.Dim(rf.convert_to_tensor(np.array(lens, np.int32), dims=[rf.batch_dim]), name=name)


def lengths(dim: rf.Dim) -> list[int]:
    return dim.dyn_size_ext.numpy().tolist()


FORMULAS = {
    "d + 1": (lambda d: d + 1, lambda n: n + 1),
    "1 + d": (lambda d: 1 + d, lambda n: n + 1),
    "d - 1": (lambda d: d - 1, lambda n: max(n - 1, 0)),
    "2 * d": (lambda d: 2 * d, lambda n: 2 * n),
    "d * 3": (lambda d: d * 3, lambda n: 3 * n),
    "d // 2": (lambda d: d // 2, lambda n: n // 2),
    "ceildiv_right(2)": (lambda d: d.ceildiv_right(2), lambda n: -(-n // 2)),
    "ceildiv_left(3)": (lambda d: d.ceildiv_left(3), lambda n: -(-n // 3)),
}


@pytest.mark.parametrize("name", list(FORMULAS))
def test_dynamic_sizes_are_per_entry(name: str) -> None:
    make, size = FORMULAS[name]
    t = time_dim(LENS)
    d = make(t)
    assert d.is_dynamic()
    assert lengths(d) == [size(n) for n in LENS]
    assert d.size == max(size(n) for n in LENS)
    assert d.dyn_size_ext.dims == (rf.batch_dim,)


@pytest.mark.parametrize("name", list(FORMULAS))
def test_static_sizes(name: str) -> None:
    make, size = FORMULAS[name]
    d = make(rf.Dim(9, name="f"))
    assert d.dimension == size(9)


def test_same_formula_same_dim_and_inverses_fold_back() -> None:
    t = time_dim(LENS)
    assert t + 1 == t + 1
    assert 2 * t == 2 * t
    assert t.ceildiv_right(2) == t.ceildiv_right(2)
    assert t + 1 != 1 + t  # RETURNN: left and right forms are different dims
    assert (t + 1) - 1 == t
    assert (t - 1) + 1 == t
    assert (t + 1) + 2 == t + 3
    assert t - 1 == t.sub_right(1)
    assert (t * 2) // 2 == t
    assert (t * 2).ceildiv_right(2) == t
    assert t + 0 == t
    assert t * 1 == t
    assert t // 1 == t
    f = rf.Dim(8, name="f")
    assert f.div_left(2) == f.div_left(2)
    assert f.div_left(2).dimension == 4
    assert (f / 2).dimension == 4


def test_sum_of_dims() -> None:
    a, b = time_dim(LENS, "a"), time_dim([1, 2, 3, 4], "b")
    s = a + b
    assert lengths(s) == [8, 2, 4, 8]
    assert a + b == s
    assert b + a != s
    assert lengths(a + rf.Dim(3, name="three")) == [n + 3 for n in LENS]
    assert (rf.Dim(2, name="x") + rf.Dim(3, name="y")).dimension == 5


def test_derived_dims_mask_like_their_lengths() -> None:
    """A tensor over a derived dynamic dim is masked by the derived lengths."""
    t = time_dim(LENS)
    half = t.ceildiv_right(2)
    ones = rf.convert_to_tensor(np.ones((len(LENS), half.size)), dims=[rf.batch_dim, half])
    np.testing.assert_array_equal(
        rf.reduce_sum(ones, axis=half).numpy(), [-(-n // 2) for n in LENS]
    )


def test_bad_input_is_a_clear_error() -> None:
    t, f = time_dim(LENS), rf.Dim(9, name="f")
    with pytest.raises(ValueError, match="not a multiple of 2"):
        f.div_left(2)
    with pytest.raises(ValueError, match="not a multiple of 2"):
        t / 2
    with pytest.raises(ValueError, match="factor >= 1"):
        t // 0
    with pytest.raises(ValueError, match="factor >= 1"):
        -1 * t
    with pytest.raises(TypeError):
        t + 1.5
    other = rf.Dim(
        rf.convert_to_tensor(np.array([1, 2], np.int32), dims=[rf.Dim(2, name="beam")]), name="o"
    )
    with pytest.raises(ValueError, match="lengths must be over the same dims"):
        t + other


def test_sizes_match_returnn() -> None:
    torch = pytest.importorskip("torch", reason="RETURNN's dims run on its torch backend here")
    pytest.importorskip("returnn", reason="RETURNN's own dim math is the reference here")
    import returnn.frontend as rrf
    from returnn.tensor import Dim, Tensor

    rrf.select_backend_torch()
    batch = Dim(len(LENS), name="batch")
    lens = torch.tensor(LENS, dtype=torch.int32)
    theirs = Dim(Tensor("lengths", [batch], dtype="int32", raw_tensor=lens), name="time")
    mine = time_dim(LENS)
    for name, (make, _) in FORMULAS.items():
        if name == "d - 1":
            continue  # RETURNN gives -1 for an empty entry; verjus clamps at 0
        got = lengths(make(mine))
        d = make(theirs)
        d.complete_dyn_size()
        want = d.dyn_size_ext.raw_tensor.tolist()
        assert got == want, name
