"""verjus.rf.math_: RETURNN's functional math forms (``add``, ``floor_divide``,
``log_add_exp``, ``round``, ``combine_bc``, ...) against numpy, finite
differences, RETURNN's rf on its torch backend where installed, and bad input.

The helpers ``returnn_rf`` and ``Mirror`` (the same data as RETURNN tensors)
are shared with test_rf_reduce_extra.py and test_rf_cumsum.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from test_rf_grad import check_gradient

from verjus import rf

TOL = {"rtol": 1e-5, "atol": 1e-5}
LENS = [4, 2, 3]


def time_dim(lens: list[int]) -> rf.Dim:
    return rf.Dim(rf.convert_to_tensor(np.array(lens, np.int32), dims=[rf.batch_dim]), name="time")


def uniform(seed: int, shape: tuple[int, ...], low: float = -2.0, high: float = 2.0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(low, high, shape).astype(np.float32)


def setup() -> tuple[rf.Dim, rf.Dim, rf.Tensor, rf.Tensor, np.ndarray, np.ndarray]:
    """``a`` over ``[batch, time (lengths LENS), f]`` and ``b`` over ``[f]``."""
    t, f = time_dim(LENS), rf.Dim(3, name="f")
    a, b = uniform(1, (3, 4, 3)), uniform(2, (3,))
    return (
        t,
        f,
        rf.convert_to_tensor(a, dims=[rf.batch_dim, t, f]),
        rf.convert_to_tensor(b, dims=[f]),
        a,
        b,
    )


def returnn_rf() -> Any:
    """RETURNN's frontend on its torch backend (the test skips without them)."""
    pytest.importorskip("torch", reason="RETURNN's rf runs on its torch backend here")
    pytest.importorskip("returnn", reason="RETURNN's own ops are the reference here")
    import returnn.frontend as rrf

    rrf.select_backend_torch()
    return rrf


class Mirror:
    """The same dims and data as RETURNN tensors (one RETURNN dim per verjus
    dim; the batch dim gets the size of the lengths)."""

    def __init__(self) -> None:
        import torch
        from returnn.tensor import Dim, Tensor

        self.torch, self.Dim, self.Tensor = torch, Dim, Tensor
        self.dims: dict[rf.Dim, Any] = {}

    def dim(self, d: rf.Dim, size: int | None = None) -> Any:
        if d not in self.dims:
            if d.is_dynamic():
                lens = d.dyn_size_ext
                raw = self.torch.tensor(lens.numpy())
                their = self.Tensor(
                    "lens",
                    [self.dim(x, n) for x, n in zip(lens.dims, lens.shape, strict=True)],
                    "int32",
                    raw_tensor=raw,
                )
                self.dims[d] = self.Dim(their, name=d.name)
            else:
                self.dims[d] = self.Dim(d.dimension or size, name=d.name)
        return self.dims[d]

    def tensor(self, x: rf.Tensor) -> Any:
        dims = [self.dim(d, n) for d, n in zip(x.dims, x.shape, strict=True)]
        sparse = self.dim(x.sparse_dim) if x.sparse_dim is not None else None
        feature = self.dim(x.feature_dim) if x.feature_dim is not None else None
        raw = self.torch.tensor(np.asarray(x.numpy()))
        return self.Tensor(
            "x", dims, x.dtype, raw_tensor=raw, sparse_dim=sparse, feature_dim=feature
        )

    def numpy(self, theirs: Any, like: rf.Tensor) -> np.ndarray:
        """RETURNN's result in the axis order of ``like`` (whose dims it must have)."""
        assert set(theirs.dims) == {self.dims[d] for d in like.dims}
        return theirs.copy_transpose([self.dims[d] for d in like.dims]).raw_tensor.numpy()


def special() -> tuple[rf.Dim, np.ndarray]:
    """Halves, tiny values, infinities and NaN."""
    v = [-np.inf, -2.5, -1.5, -0.5, -1e-7, 0.0, 1e-7, 0.5, 1.5, 2.5, 3.7, 9e6, np.inf, np.nan]
    values = np.array(v, np.float32)
    return rf.Dim(len(values), name="s"), values


BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "true_divide": np.true_divide,
    "floor_divide": np.floor_divide,
    "ceil_divide": lambda a, b: -np.floor_divide(-a, b),
    "mod": np.mod,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "squared_difference": lambda a, b: (a - b) ** 2,
    "log_add_exp": np.logaddexp,
}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_forms_against_numpy(name: str) -> None:
    t, f, a, b, av, bv = setup()
    out = getattr(rf, name)(a, b)
    assert out.dims == (rf.batch_dim, t, f)
    np.testing.assert_allclose(out.numpy(), BINARY[name](av, bv), **TOL)
    scalar = getattr(rf, name)(a, 1.5)
    np.testing.assert_allclose(scalar.numpy(), BINARY[name](av, np.float32(1.5)), **TOL)


def test_pow_and_reciprocal() -> None:
    _, _, a, b, av, bv = setup()
    np.testing.assert_allclose(rf.pow(rf.abs(a), b).numpy(), np.abs(av) ** bv, **TOL)
    np.testing.assert_allclose(rf.reciprocal(a).numpy(), 1 / av, **TOL)


def test_integer_division_and_neg() -> None:
    f = rf.Dim(8, name="f")
    av = np.array([-7, -6, -1, 0, 1, 5, 6, 1000003], np.int32)
    bv = np.array([3, -3, 2, 5, -4, 5, 4, 7], np.int32)
    a, b = rf.convert_to_tensor(av, dims=[f]), rf.convert_to_tensor(bv, dims=[f])
    for got, want in [
        (rf.floor_divide(a, b), av // bv),
        (rf.mod(a, b), av % bv),
        (rf.ceil_divide(a, b), -(-av // bv)),
        (rf.floor_divide(a, 3), av // 3),
        (rf.mod(a, 3), av % 3),
        (rf.neg(a), -av),
    ]:
        assert got.dtype == "int32"
        np.testing.assert_array_equal(got.numpy(), want)
    assert rf.neg(3) == -3


COMPARE = {
    "equal": np.equal,
    "not_equal": np.not_equal,
    "less": np.less,
    "less_equal": np.less_equal,
    "greater": np.greater,
    "greater_equal": np.greater_equal,
}


@pytest.mark.parametrize("name", sorted(COMPARE))
def test_compare_forms(name: str) -> None:
    t, f, a, _, av, _ = setup()
    bv = np.round(av[0])  # some equal entries
    b = rf.convert_to_tensor(bv, dims=[t, f])
    out = getattr(rf, name)(a, b)
    assert out.dtype == "bool"
    assert out.dims == (rf.batch_dim, t, f)
    np.testing.assert_array_equal(out.numpy(), COMPARE[name](av, bv))


def test_logical_forms() -> None:
    f, g = rf.Dim(4, name="f"), rf.Dim(2, name="g")
    pv = np.array([True, False, True, False])
    qv = np.array([[True, True, False, False], [False, True, True, False]])
    p, q = rf.convert_to_tensor(pv, dims=[f]), rf.convert_to_tensor(qv, dims=[g, f])
    np.testing.assert_array_equal(rf.logical_and(q, p).numpy(), qv & pv)
    np.testing.assert_array_equal(rf.logical_or(q, p).numpy(), qv | pv)
    np.testing.assert_array_equal(rf.logical_not(p).numpy(), ~pv)
    assert rf.logical_and(p, True).dtype == "bool"
    np.testing.assert_array_equal(rf.logical_and(p, True).numpy(), pv)
    np.testing.assert_array_equal(rf.logical_or(p, False).numpy(), pv)
    # Numbers count as != 0.
    x = rf.convert_to_tensor(np.array([0.0, 2.0, -1.0, 0.0], np.float32), dims=[f])
    np.testing.assert_array_equal(rf.logical_and(x, p).numpy(), [False, False, True, False])
    np.testing.assert_array_equal(rf.logical_not(x).numpy(), [True, False, False, True])
    # The opt_ forms short-cut Python bools.
    assert rf.opt_logical_or(True, p) is True
    assert rf.opt_logical_or(p, False) is p
    assert rf.opt_logical_and(False, p) is False
    assert rf.opt_logical_and(p, True) is p
    assert rf.opt_logical_or(False, False) is False
    np.testing.assert_array_equal(rf.opt_logical_and(p, p).numpy(), pv)


UNARY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "neg": np.negative,
    "log1p": np.log1p,
    "expm1": np.expm1,
    "elu": lambda x: np.where(x > 0, x, np.expm1(x)),
    "selu": lambda x: 1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772 * np.expm1(x)),
    "relu_square": lambda x: np.maximum(x, 0) ** 2,
    "floor": np.floor,
    "ceil": np.ceil,
    "round": np.round,
    "is_finite": np.isfinite,
    "is_infinite": np.isinf,
    "is_neg_infinite": np.isneginf,
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_forms_on_special_values(name: str) -> None:
    s, values = special()
    out = getattr(rf, name)(rf.convert_to_tensor(values, dims=[s]))
    with np.errstate(invalid="ignore", over="ignore"):
        want = UNARY[name](values.astype(np.float64)).astype(out.numpy().dtype)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-6, atol=0)


def test_log1p_and_expm1_are_accurate_for_tiny_values() -> None:
    f = rf.Dim(6, name="f")
    values = np.array([1e-30, -3e-12, 2e-8, -5e-8, 1e-4, 0.3], np.float32)
    x = rf.convert_to_tensor(values, dims=[f])
    for name, ref in [("log1p", np.log1p), ("expm1", np.expm1)]:
        want = ref(values.astype(np.float64))
        np.testing.assert_allclose(getattr(rf, name)(x).numpy(), want, rtol=2e-7)


def test_rounding_keeps_ints_and_has_zero_gradient() -> None:
    f = rf.Dim(3, name="f")
    i = rf.convert_to_tensor(np.array([-2, 0, 5], np.int32), dims=[f])
    for name in ("floor", "ceil", "round"):
        assert getattr(rf, name)(i) is i
        x = rf.convert_to_tensor(
            np.array([-1.3, 0.2, 2.5], np.float32), dims=[f], requires_grad=True
        )
        y = rf.reduce_sum(getattr(rf, name)(x) * x, axis=f)
        # d/dx (round(x) * x) = round(x): nothing through round itself.
        np.testing.assert_allclose(rf.gradient(y, x).numpy(), UNARY[name](x.numpy()))


GRADIENT: dict[str, Callable[[rf.Tensor], rf.Tensor]] = {
    "log1p": rf.log1p,
    "expm1": rf.expm1,
    "elu": rf.elu,
    "selu": rf.selu,
    "relu_square": rf.relu_square,
    "reciprocal": rf.reciprocal,
    "squared_difference": lambda x: rf.squared_difference(x, 0.3),
    "log_add_exp": lambda x: rf.log_add_exp(x, rf.sqrt(x * x + 1.0)),
    "maximum": lambda x: rf.maximum(x, 0.05, -x * 0.5),
    "clip_by_value": lambda x: rf.clip_by_value(x, -0.75, 0.8),
    "mod": lambda x: rf.mod(x * 3.0, 1.1),
    "true_divide": lambda x: rf.true_divide(x, x * x + 1.0),
    "lerp": lambda x: rf.lerp(x, x * x, x),
}


@pytest.mark.parametrize("name", sorted(GRADIENT))
def test_gradients_against_finite_differences(name: str) -> None:
    f = rf.Dim(6, name="f")
    values = np.array([-0.93, -0.61, -0.27, 0.21, 0.45, 0.68], np.float32)
    check_gradient(GRADIENT[name], values, [f])


def test_log_add_exp_infinities_and_ties() -> None:
    f = rf.Dim(5, name="f")
    av = np.array([-np.inf, np.inf, -np.inf, 2.0, 0.5], np.float32)
    bv = np.array([-np.inf, np.inf, 1.0, 2.0, -np.inf], np.float32)
    a = rf.convert_to_tensor(av, dims=[f], requires_grad=True)
    b = rf.convert_to_tensor(bv, dims=[f])
    out = rf.log_add_exp(a, b)
    np.testing.assert_allclose(out.numpy(), np.logaddexp(av, bv), **TOL)
    finite = rf.convert_to_tensor(np.array([0, 0, 1, 1, 1], np.float32), dims=[f])
    g = rf.gradient(rf.reduce_sum(rf.where(rf.is_finite(out), out, 0.0) * finite, axis=f), a)
    # Equal operands share the gradient; -inf gets none; nothing is NaN.
    np.testing.assert_allclose(g.numpy(), [0, 0, 0, 0.5, 1.0], atol=1e-6)


def test_maximum_minimum_varargs_and_numbers() -> None:
    _, _, a, b, av, bv = setup()
    out = rf.maximum(0.0, a, b)
    assert out.dims == a.dims
    np.testing.assert_allclose(out.numpy(), np.maximum(np.maximum(av, 0.0), bv), **TOL)
    np.testing.assert_allclose(rf.minimum(a, b, -0.5).numpy(), np.minimum(np.minimum(av, bv), -0.5))
    assert rf.maximum(1, 4, 2) == 4
    assert rf.minimum(1.5, 0.5) == 0.5


def test_clip_by_value() -> None:
    t, f, a, b, av, bv = setup()
    np.testing.assert_allclose(rf.clip_by_value(a, -0.5, 1.0).numpy(), np.clip(av, -0.5, 1.0))
    np.testing.assert_allclose(rf.clip_by_value(a, b).numpy(), np.maximum(av, bv))
    np.testing.assert_allclose(rf.clip_by_value(a, None, b).numpy(), np.minimum(av, bv))
    assert rf.clip_by_value(a) is a
    lo = rf.convert_to_tensor(np.full((3,), -0.2, np.float32), dims=[rf.batch_dim])
    top = rf.convert_to_tensor(bv[0] + np.zeros((4,), np.float32), dims=[t])
    with pytest.raises(ValueError, match=r"clip_by_value: no operand has all"):
        rf.clip_by_value(b, lo, top)
    out = rf.clip_by_value(b, lo, top, allow_broadcast_all_sources=True)
    assert out.dims == (f, rf.batch_dim, t)


def test_lerp() -> None:
    t, f, a, b, av, bv = setup()
    np.testing.assert_allclose(rf.lerp(a, b, 0.25).numpy(), av + 0.25 * (bv - av), **TOL)
    np.testing.assert_array_equal(rf.lerp(a, b, 1.0).numpy(), np.broadcast_to(bv, av.shape))
    wv = uniform(3, (4,), 0.0, 1.0)
    w = rf.convert_to_tensor(wv, dims=[t])
    out = rf.lerp(b, a, w)
    assert out.dims == (f, rf.batch_dim, t)
    want = bv + wv[:, None] * (av - bv)
    np.testing.assert_allclose(out.numpy(), want.transpose(2, 0, 1), **TOL)
    with pytest.raises(ValueError, match=r"lerp: no operand has all"):
        rf.lerp(b, w, 0.5)


def test_combine_bc_and_compare_bc() -> None:
    t, f, _, b, _, bv = setup()
    pos = rf.range_over_dim(t)
    out = rf.compare_bc(
        pos, "<", rf.convert_to_tensor(np.array([1, 3, 2], np.int32), dims=[rf.batch_dim])
    )
    assert out.dims == (t, rf.batch_dim)
    np.testing.assert_array_equal(out.numpy(), np.arange(4)[:, None] < [1, 3, 2])
    out = rf.compare_bc(pos, "<>", 2, dim_order=[rf.batch_dim])
    np.testing.assert_array_equal(out.numpy(), np.arange(4) != 2)
    tv = np.arange(4, dtype=np.float32) - 1.5
    tt = rf.convert_to_tensor(tv, dims=[t])
    for kind, ref in [
        ("+", np.add),
        ("max", np.maximum),
        ("//", np.floor_divide),
        ("%", np.mod),
        ("squared_difference", lambda x, y: (x - y) ** 2),
        ("logaddexp", np.logaddexp),
    ]:
        out = rf.combine_bc(tt, kind, b)
        assert out.dims == (t, f)
        np.testing.assert_allclose(out.numpy(), ref(tv[:, None], bv[None, :]), **TOL)
        ordered = rf.combine_bc(tt, kind, b, dim_order=[f, rf.batch_dim])
        assert ordered.dims == (f, t)
    with pytest.raises(ValueError, match="neither operand has all output dims"):
        rf.add(tt, b)


def test_dot_is_matmul_and_copy() -> None:
    _, f, a, b, av, bv = setup()
    np.testing.assert_allclose(rf.dot(a, b, reduce=f).numpy(), av @ bv, **TOL)
    p = rf.Parameter([f])
    p.initial = 1.0
    c = rf.copy(p)
    p.assign(rf.convert_to_tensor(np.full((3,), 7.0, np.float32), dims=[f]))
    np.testing.assert_array_equal(c.numpy(), np.ones(3))
    labels = rf.convert_to_tensor(np.array([1, 2], np.int32), dims=[rf.Dim(2)], sparse_dim=f)
    assert rf.copy(labels).sparse_dim == f
    check_gradient(lambda x: rf.copy(x) * x, np.array([0.5, -1.0, 2.0], np.float32), [f])


RETURNN_BINARY = [
    "add",
    "sub",
    "mul",
    "true_divide",
    "floor_divide",
    "ceil_divide",
    "mod",
    "pow",
    "maximum",
    "minimum",
    "squared_difference",
    "log_add_exp",
    "equal",
    "not_equal",
    "less",
    "less_equal",
    "greater",
    "greater_equal",
]


@pytest.mark.parametrize("name", RETURNN_BINARY)
def test_binary_forms_against_returnn(name: str) -> None:
    rrf = returnn_rf()
    m = Mirror()
    _, _, a, b, _, _ = setup()
    if name == "pow":
        a = rf.abs(a)
    if name in COMPARE:
        b = rf.round(b)
        a = rf.round(a)
    mine = getattr(rf, name)(a, b)
    theirs = getattr(rrf, name)(m.tensor(a), m.tensor(b))
    assert [m.dims[d] for d in mine.dims] == list(theirs.dims)
    np.testing.assert_allclose(mine.numpy(), m.numpy(theirs, mine), **TOL)


RETURNN_UNARY = [
    "neg",
    "reciprocal",
    "log1p",
    "expm1",
    "elu",
    "selu",
    "relu_square",
    "floor",
    "ceil",
    "round",
    "is_finite",
    "is_infinite",
    "is_neg_infinite",
    "logical_not",
    "copy",
]


@pytest.mark.parametrize("name", RETURNN_UNARY)
def test_unary_forms_against_returnn(name: str) -> None:
    rrf = returnn_rf()
    m = Mirror()
    s, values = special()
    x = rf.convert_to_tensor(values, dims=[s])
    if name == "logical_not":
        x = rf.greater(x, 0.0)
    mine = getattr(rf, name)(x)
    theirs = getattr(rrf, name)(m.tensor(x))
    np.testing.assert_allclose(mine.numpy(), m.numpy(theirs, mine), rtol=1e-6, atol=1e-7)


def test_other_forms_against_returnn() -> None:
    rrf = returnn_rf()
    m = Mirror()
    t, f, a, b, _, _ = setup()
    w = rf.convert_to_tensor(uniform(3, (4,), 0.0, 1.0), dims=[t])
    p = rf.greater(a, 0.0)
    q = rf.less(b, 0.5)
    ta, tb, tw, tp, tq = (m.tensor(x) for x in (a, b, w, p, q))
    pairs = [
        (rf.lerp(a, b, 0.3), rrf.lerp(ta, tb, 0.3)),
        (rf.lerp(a, b, 0.8), rrf.lerp(ta, tb, 0.8)),
        (rf.lerp(a, b, w), rrf.lerp(ta, tb, tw)),
        (rf.clip_by_value(a, -0.5, b), rrf.clip_by_value(ta, -0.5, tb)),
        (rf.maximum(a, b, 0.1), rrf.maximum(ta, tb, 0.1)),
        (rf.logical_and(p, q), rrf.logical_and(tp, tq)),
        (rf.logical_or(p, q), rrf.logical_or(tp, tq)),
        (rf.combine_bc(w, "%", b), rrf.combine_bc(tw, "%", tb)),
        (rf.combine_bc(w, "logaddexp", b), rrf.combine_bc(tw, "logaddexp", tb)),
        (rf.compare_bc(w, "<", b), rrf.compare_bc(tw, "<", tb)),
        (
            rf.combine_bc(w, "-", b, dim_order=[f, t]),
            rrf.combine_bc(tw, "-", tb, dim_order=[m.dims[f], m.dims[t]]),
        ),
    ]
    for mine, theirs in pairs:
        assert [m.dims[d] for d in mine.dims] == list(theirs.dims)
        np.testing.assert_allclose(mine.numpy(), m.numpy(theirs, mine), **TOL)
