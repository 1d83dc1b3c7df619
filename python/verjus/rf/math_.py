"""RETURNN's functional math forms (``returnn/frontend/math_.py``): ``add``,
``maximum``, ``logical_or``, ``floor`` and the rest, ``combine_bc`` /
``compare_bc`` (with RETURNN's extra kinds ``"//"``, ``"%"``,
``"squared_difference"``, ``"logaddexp"``), ``dot`` (= ``matmul``) and
``copy``, so that model code written against ``rf.add(a, b)`` or
``rf.combine_bc(a, "//", b)`` runs unchanged. The Tensor operators ``//``,
``%``, ``&``, ``|``, ``~`` call these forms (``verjus.rf.tensor_api``).

Everything is composed from the native ops (``combine``, ``compare``,
``where``, ``cast``, the unary functions), so gradients come from the autograd
tape. Where a formula has a singular point (``log1p``'s ``log(u) / (u - 1)``,
``log_add_exp`` of equal infinities), the input of the unused branch is made
safe first: a ``where`` alone would still let ``0 * inf`` into the gradient.
``floor``, ``ceil`` and ``round`` go through an integer cast and have gradient
0, as in PyTorch.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Sequence

import numpy as np

from verjus._verjus import Dim, Tensor
from verjus._verjus import combine as _native_combine
from verjus._verjus import compare as _native_compare
from verjus._verjus import rf_abs as _abs
from verjus._verjus import rf_cast as _cast
from verjus._verjus import rf_exp as _exp
from verjus._verjus import rf_from_numpy as _from_numpy
from verjus._verjus import rf_log as _log
from verjus._verjus import rf_relu as _relu
from verjus._verjus import rf_square as _square
from verjus._verjus import rf_stop_gradient as _stop_gradient
from verjus._verjus import rf_where as _where
from verjus.rf._dim_args import takes_dims
from verjus.rf._public_ops import public_op

__all__ = [
    "add",
    "ceil",
    "ceil_divide",
    "clip_by_value",
    "combine_bc",
    "compare_bc",
    "copy",
    "dot",
    "elu",
    "equal",
    "expm1",
    "floor",
    "floor_divide",
    "greater",
    "greater_equal",
    "is_finite",
    "is_infinite",
    "is_neg_infinite",
    "lerp",
    "less",
    "less_equal",
    "log1p",
    "log_add_exp",
    "logical_and",
    "logical_not",
    "logical_or",
    "maximum",
    "minimum",
    "mod",
    "mul",
    "neg",
    "not_equal",
    "opt_logical_and",
    "opt_logical_or",
    "pow",
    "reciprocal",
    "relu_square",
    "round",
    "selu",
    "squared_difference",
    "sub",
    "true_divide",
]

# A Tensor or a Python number (RETURNN's ``RawTensorTypes``).
Operand = Tensor | int | float | bool

_INT_DTYPES = ("int32", "int64")
# float32 values from 2**23 up in magnitude are integers already.
_INTEGRAL = float(2**23)
_INF = math.inf
# SELU's constants (Klambauer et al., 2017), as in PyTorch.
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946

# RETURNN's aliases of the kinds of ``combine`` and ``compare``.
_COMBINE_ALIASES = {"//": "floordiv", "%": "mod", "max": "maximum", "min": "minimum"}
_COMPARE_ALIASES = {"eq": "equal", "<>": "not_equal"}

dot = public_op("matmul")  # ``rf.matmul`` itself


def _is_int(x: Operand) -> bool:
    if isinstance(x, Tensor):
        return x.dtype in _INT_DTYPES
    return isinstance(x, int | np.integer) and not isinstance(x, bool)


def _order(x: Tensor, dim_order: Sequence[Dim] | None) -> Tensor:
    """``x`` with its dims sorted by their place in ``dim_order`` (dims not in
    it last, in their order), as RETURNN's ``dim_order``."""
    if not dim_order:
        return x
    order = list(dim_order)
    dims = sorted(x.dims, key=lambda d: order.index(d) if d in order else len(order))
    return x if tuple(dims) == tuple(x.dims) else x.copy_transpose(dims)


def equal(a: Operand, b: Operand) -> Tensor:
    """``a == b`` elementwise (bool), lined up by dims."""
    return _native_compare(a, "equal", b)


def not_equal(a: Operand, b: Operand) -> Tensor:
    """``a != b`` elementwise (bool), lined up by dims."""
    return _native_compare(a, "not_equal", b)


def less(a: Operand, b: Operand) -> Tensor:
    """``a < b`` elementwise (bool), lined up by dims."""
    return _native_compare(a, "less", b)


def less_equal(a: Operand, b: Operand) -> Tensor:
    """``a <= b`` elementwise (bool), lined up by dims."""
    return _native_compare(a, "less_equal", b)


def greater(a: Operand, b: Operand) -> Tensor:
    """``a > b`` elementwise (bool), lined up by dims."""
    return _native_compare(a, "greater", b)


def greater_equal(a: Operand, b: Operand) -> Tensor:
    """``a >= b`` elementwise (bool), lined up by dims."""
    return _native_compare(a, "greater_equal", b)


def add(a: Operand, b: Operand) -> Tensor:
    """``a + b`` elementwise, lined up by dims."""
    return _native_combine(a, "add", b)


def sub(a: Operand, b: Operand) -> Tensor:
    """``a - b`` elementwise, lined up by dims."""
    return _native_combine(a, "sub", b)


def mul(a: Operand, b: Operand) -> Tensor:
    """``a * b`` elementwise, lined up by dims."""
    return _native_combine(a, "mul", b)


def true_divide(a: Operand, b: Operand) -> Tensor:
    """``a / b`` elementwise, lined up by dims; always float32."""
    return _native_combine(a, "truediv", b)


def _floordiv(a: Operand, b: Operand, bc: bool) -> Tensor:
    q = floor(_native_combine(a, "truediv", b, allow_broadcast_all_sources=bc))
    if _is_int(a) and _is_int(b):
        return _cast(q, a.dtype if isinstance(a, Tensor) else b.dtype)
    return q


def floor_divide(a: Operand, b: Operand) -> Tensor:
    """``a // b`` elementwise (Python's floor division), lined up by dims.

    Computed as ``floor(a / b)`` in float32 (integers are exact while their
    magnitudes stay below ``2**23``); integer operands give an integer
    result. The gradient is 0, as in PyTorch.
    """
    return _floordiv(a, b, False)


def ceil_divide(a: Operand, b: Operand) -> Tensor:
    """The ceiling of ``a / b`` elementwise: ``-((-a) // b)``, lined up by dims
    (integer operands give an integer result; gradient 0)."""
    return neg(floor_divide(neg(a), b))


def _mod(a: Operand, b: Operand, bc: bool) -> Tensor:
    q = _stop_gradient(_floordiv(a, b, bc))
    return _native_combine(a, "sub", _native_combine(q, "mul", b), allow_broadcast_all_sources=bc)


def mod(a: Operand, b: Operand) -> Tensor:
    """``a % b`` elementwise (Python's modulo: the sign of ``b``), lined up by
    dims: ``a - (a // b) * b``, with ``floor_divide``'s exactness. The
    gradient is PyTorch's ``remainder``'s: 1 to ``a``, ``-(a // b)`` to ``b``.
    """
    return _mod(a, b, False)


def neg(a: Operand) -> Operand:
    """``-a`` (also of an integer tensor, or a number)."""
    if not isinstance(a, Tensor):
        return -a
    return _native_combine(0, "sub", a) if a.dtype in _INT_DTYPES else -a


def reciprocal(a: Tensor) -> Tensor:
    """``1 / a`` elementwise (float32)."""
    return _native_combine(1.0, "truediv", a)


def pow(a: Operand, b: Operand) -> Tensor:
    """``a ** b`` elementwise, lined up by dims (an integer to a negative
    integer power is an error; cast to float32 first)."""
    return _native_combine(a, "pow", b)


def _squared_difference(a: Operand, b: Operand, bc: bool) -> Tensor:
    d = _native_combine(a, "sub", b, allow_broadcast_all_sources=bc)
    return _native_combine(d, "mul", d)


def squared_difference(a: Operand, b: Operand) -> Tensor:
    """``(a - b) ** 2`` elementwise, lined up by dims."""
    return _squared_difference(a, b, False)


def _as_bool(x: Operand) -> Tensor:
    """``x`` as a bool tensor (non-zero is True; a number a bool scalar)."""
    if isinstance(x, Tensor):
        return x if x.dtype == "bool" else _cast(x, "bool")
    return _from_numpy(np.array(bool(x), np.float32), [], "bool", False, None, None)


def logical_and(a: Operand, b: Operand) -> Tensor:
    """``a and b`` elementwise (bool; non-bool operands count as ``!= 0``)."""
    return _combine(a, "logical_and", b)


def logical_or(a: Operand, b: Operand) -> Tensor:
    """``a or b`` elementwise (bool; non-bool operands count as ``!= 0``)."""
    return _combine(a, "logical_or", b)


def logical_not(a: Tensor) -> Tensor:
    """``not a`` elementwise (bool; a non-bool tensor counts as ``!= 0``)."""
    return _native_compare(_as_bool(a), "equal", False)


def opt_logical_or(a: Tensor | bool, b: Tensor | bool) -> Tensor | bool:
    """``a or b``, where a Python bool short-cuts: ``True`` if either is
    ``True``, the other operand if one is ``False``; else ``logical_or``."""
    if isinstance(a, bool):
        return True if a else b
    if isinstance(b, bool):
        return True if b else a
    return logical_or(a, b)


def opt_logical_and(a: Tensor | bool, b: Tensor | bool) -> Tensor | bool:
    """``a and b``, where a Python bool short-cuts: ``False`` if either is
    ``False``, the other operand if one is ``True``; else ``logical_and``."""
    if isinstance(a, bool):
        return b if a else False
    if isinstance(b, bool):
        return a if b else False
    return logical_and(a, b)


def _log_add_exp(a: Tensor, b: Tensor, bc: bool) -> Tensor:
    same = _native_compare(a, "equal", b, allow_broadcast_all_sources=bc)
    # Equal operands (also equal infinities, whose difference is NaN): the
    # mean plus log 2, which splits the gradient evenly, as PyTorch does.
    at_same = _native_combine(
        _native_combine(a, "add", b, allow_broadcast_all_sources=bc), "mul", 0.5
    )
    diff = _where(same, 0.0, _native_combine(a, "sub", b, allow_broadcast_all_sources=bc))
    larger = _native_combine(a, "maximum", b, allow_broadcast_all_sources=bc)
    general = larger + log1p(_exp(-_abs(diff)))
    return _where(same, at_same + math.log(2.0), general)


def log_add_exp(a: Tensor, b: Tensor) -> Tensor:
    """``log(exp(a) + exp(b))`` elementwise, lined up by dims, without
    overflow (``-inf`` operands are fine)."""
    return _log_add_exp(a, b, False)


def is_finite(a: Tensor) -> Tensor:
    """Where ``a`` is neither infinite nor NaN (bool; all True for integers and
    bools)."""
    if a.dtype != "float32":
        return _native_compare(a, "equal", a)
    return _native_compare(_abs(a), "less", _INF)


def is_infinite(a: Tensor) -> Tensor:
    """Where ``a`` is ``inf`` or ``-inf`` (bool; all False for integers and
    bools)."""
    if a.dtype != "float32":
        return _native_compare(a, "not_equal", a)
    return _native_compare(_abs(a), "equal", _INF)


def is_neg_infinite(a: Tensor) -> Tensor:
    """Where ``a`` is ``-inf`` (bool; all False for integers and bools)."""
    if a.dtype != "float32":
        return _native_compare(a, "not_equal", a)
    return _native_compare(a, "equal", -_INF)


def _fold(name: str, kind: str, values: list[Operand]) -> Operand:
    """``kind`` over ``values`` left to right, a Tensor first (both kinds are
    commutative); plain numbers only give the builtin's result."""
    if not any(isinstance(v, Tensor) for v in values):
        return getattr(builtins, name)(values)
    first = next(i for i, v in enumerate(values) if isinstance(v, Tensor))
    values[0], values[first] = values[first], values[0]
    out = values[0]
    for v in values[1:]:
        out = _native_combine(out, kind, v)
    return out


def maximum(a: Operand, b: Operand, *other_tensors: Operand) -> Operand:
    """The elementwise maximum of all operands, lined up by dims (the builtin
    ``max`` when none is a Tensor)."""
    return _fold("max", "maximum", [a, b, *other_tensors])


def minimum(a: Operand, b: Operand, *other_tensors: Operand) -> Operand:
    """The elementwise minimum of all operands, lined up by dims (the builtin
    ``min`` when none is a Tensor)."""
    return _fold("min", "minimum", [a, b, *other_tensors])


def _bc(a: Operand, kind: str, b: Operand) -> Tensor:
    """The native ``combine`` with ``allow_broadcast_all_sources=True``."""
    return _native_combine(a, kind, b, allow_broadcast_all_sources=True)


def _check_broadcast(name: str, sources: Sequence[Operand], allowed: bool) -> None:
    """RETURNN's rule: unless ``allowed``, one tensor must have all dims."""
    if allowed:
        return
    tensors = [s for s in sources if isinstance(s, Tensor)]
    union = {d for t in tensors for d in t.dims}
    if not any(set(t.dims) == union for t in tensors):
        lists = " and ".join("[" + ", ".join(d.name for d in t.dims) + "]" for t in tensors)
        raise ValueError(
            f"{name}: no operand has all the result's dims ({lists}); pass "
            "allow_broadcast_all_sources=True if that is meant"
        )


def clip_by_value(
    x: Tensor,
    clip_value_min: Operand | None = None,
    clip_value_max: Operand | None = None,
    *,
    allow_broadcast_all_sources: bool = False,
) -> Tensor:
    """``x`` clipped into ``[clip_value_min, clip_value_max]`` elementwise, lined
    up by dims (a bound of None is not applied).

    :param x: the tensor
    :param clip_value_min: the lower bound (a number or a tensor)
    :param clip_value_max: the upper bound (a number or a tensor)
    :param allow_broadcast_all_sources: if True, no operand needs all the
        result's dims; otherwise that is an error
    :return: the clipped values; the gradient flows to ``x`` inside the
        bounds and to a tensor bound where it clips
    """
    bounds = [v for v in (clip_value_min, clip_value_max) if v is not None]
    _check_broadcast("clip_by_value", [x, *bounds], allow_broadcast_all_sources)
    out = x
    if clip_value_min is not None:
        out = _bc(out, "maximum", clip_value_min)
    if clip_value_max is not None:
        out = _bc(out, "minimum", clip_value_max)
    return out


def log1p(a: Tensor) -> Tensor:
    """``log(1 + a)`` elementwise, accurate also for tiny ``a`` (where
    ``1 + a`` rounds): ``log(u) * a / (u - 1)`` with ``u = 1 + a`` near 0."""
    u = a + 1.0
    # Near 0, and where 1 + a does not round to 1: the corrected formula.
    near = _native_combine(
        _native_compare(_abs(a), "less", 0.5), "logical_and", _native_compare(u, "not_equal", 1.0)
    )
    u_safe = _where(near, u, 2.0)
    corrected = _log(u_safe) * (a / (u_safe - 1.0))
    far = _log(_where(near, 2.0, u))
    return _where(_native_compare(u, "equal", 1.0), a, _where(near, corrected, far))


def expm1(a: Tensor) -> Tensor:
    """``exp(a) - 1`` elementwise, accurate also for tiny ``a``:
    ``(u - 1) * a / log(u)`` with ``u = exp(a)`` near 0."""
    near = _native_compare(_abs(a), "less", 0.5)
    a_near = _where(near, a, 1.0)
    u = _exp(a_near)
    tiny = _native_compare(u, "equal", 1.0)
    u_safe = _where(tiny, 2.0, u)
    corrected = (u_safe - 1.0) * (a_near / _log(u_safe))
    far = _exp(_where(near, 0.0, a)) - 1.0
    return _where(near, _where(tiny, a, corrected), far)


def elu(a: Tensor) -> Tensor:
    """The exponential linear unit: ``a`` for ``a > 0``, else ``exp(a) - 1``."""
    positive = _native_compare(a, "greater", 0.0)
    return _where(positive, a, expm1(_where(positive, 0.0, a)))


def selu(a: Tensor) -> Tensor:
    """The scaled exponential linear unit: ``scale * a`` for ``a > 0``, else
    ``scale * alpha * (exp(a) - 1)``, with PyTorch's ``alpha`` and ``scale``."""
    positive = _native_compare(a, "greater", 0.0)
    neg_part = expm1(_where(positive, 0.0, a)) * _SELU_ALPHA
    return _where(positive, a, neg_part) * _SELU_SCALE


def relu_square(x: Tensor) -> Tensor:
    """``relu(x) ** 2`` elementwise."""
    return _square(_relu(x))


def lerp(
    start: Tensor,
    end: Tensor,
    weight: float | Tensor,
    *,
    allow_broadcast_all_sources: bool = False,
) -> Tensor:
    """Linear interpolation ``start + weight * (end - start)``, lined up by dims.

    As PyTorch's ``lerp``, a weight from 0.5 up uses the equal form
    ``end - (1 - weight) * (end - start)``, so weight 1 gives ``end`` exactly.

    :param start: the values at weight 0
    :param end: the values at weight 1
    :param weight: a number or a tensor
    :param allow_broadcast_all_sources: if True, no operand needs all the
        result's dims; otherwise that is an error
    :return: over the dims of ``start``, then the new ones of ``end`` and
        ``weight``
    """
    _check_broadcast("lerp", [start, end, weight], allow_broadcast_all_sources)
    span = _bc(end, "sub", start)
    if not isinstance(weight, Tensor):
        from_start = weight < 0.5
        out = (
            _bc(start, "add", span * weight)
            if from_start
            else _bc(end, "sub", span * (1.0 - weight))
        )
    else:
        low = _bc(start, "add", _bc(weight, "mul", span))
        high = _bc(end, "sub", _bc(1.0 - weight, "mul", span))
        out = _where(
            _native_compare(weight, "less", 0.5), low, high, allow_broadcast_all_sources=True
        )
    dims: list[Dim] = []
    for t in (start, end, weight):
        if isinstance(t, Tensor):
            dims += [d for d in t.dims if d not in dims]
    return _order(out, dims)


def floor(a: Tensor) -> Tensor:
    """The largest integer ``<= a`` elementwise, still float32 (an integer
    tensor is returned as it is); gradient 0. ``inf`` and NaN stay."""
    if a.dtype in _INT_DTYPES:
        return a
    small = _native_compare(_abs(a), "less", _INTEGRAL)
    x = _stop_gradient(a)
    truncated = _cast(_cast(_where(small, x, 0.0), "int32"), "float32")
    floored = _where(_native_compare(truncated, "greater", x), truncated - 1.0, truncated)
    return _where(small, floored, x)


def ceil(a: Tensor) -> Tensor:
    """The smallest integer ``>= a`` elementwise, still float32 (an integer
    tensor is returned as it is); gradient 0."""
    if a.dtype in _INT_DTYPES:
        return a
    return -floor(-a)


def round(a: Tensor) -> Tensor:
    """``a`` rounded to the nearest integer elementwise, halves to even (as
    PyTorch), still float32 (an integer tensor is returned as it is);
    gradient 0."""
    if a.dtype in _INT_DTYPES:
        return a
    x = _stop_gradient(a)
    low = floor(x)
    frac = x - low  # exact in float32
    odd = _native_compare(low * 0.5 - floor(low * 0.5), "equal", 0.5)
    half_odd = _native_combine(_native_compare(frac, "equal", 0.5), "logical_and", odd)
    up = _native_combine(_native_compare(frac, "greater", 0.5), "logical_or", half_odd)
    return _where(up, low + 1.0, low)


def copy(tensor: Tensor) -> Tensor:
    """A copy of ``tensor`` (same values, dims, dtype, ``sparse_dim`` and
    ``feature_dim``) that a later ``assign`` to a ``Parameter`` leaves alone;
    the gradient flows through it."""
    keep = _from_numpy(np.array(True, np.float32), [], "bool", False, None, None)
    return _where(keep, tensor, tensor)


# The kinds of RETURNN's ``combine`` that the native op lacks, composed above.
_EXTRA_KINDS = {
    "floordiv": _floordiv,
    "mod": _mod,
    "squared_difference": _squared_difference,
    "logaddexp": _log_add_exp,
}


def _combine(a: Operand, kind: str, b: Operand, bc: bool = False) -> Tensor:
    """``combine`` with RETURNN's kinds, also those the native op lacks."""
    kind = _COMBINE_ALIASES.get(kind, kind)
    if kind in _EXTRA_KINDS:
        return _EXTRA_KINDS[kind](a, b, bc)
    if kind in ("logical_and", "logical_or"):
        return _native_combine(_as_bool(a), kind, _as_bool(b), allow_broadcast_all_sources=bc)
    return _native_combine(a, kind, b, allow_broadcast_all_sources=bc)


@takes_dims
def combine_bc(
    a: Operand, kind: str, b: Operand, *, dim_order: Sequence[Dim] | None = None
) -> Tensor:
    """``combine(a, kind, b)`` where neither operand needs all the result's dims
    (RETURNN's ``allow_broadcast_all_sources=True``).

    :param a: the first operand
    :param kind: a kind of the native ``combine`` (``"add"``, ``"mul"``,
        ``"maximum"``, ...), also ``"floordiv"`` / ``"//"``, ``"mod"`` / ``"%"``,
        ``"squared_difference"``, ``"logaddexp"``, ``"max"``, ``"min"``
    :param b: the second operand
    :param dim_order: the result's dims are sorted by their place here (dims
        not listed come last); by default ``a``'s dims, then ``b``'s new ones
    :return: the element-wise combination
    """
    return _order(_combine(a, kind, b, bc=True), dim_order)


@takes_dims
def compare_bc(
    a: Operand, kind: str, b: Operand, *, dim_order: Sequence[Dim] | None = None
) -> Tensor:
    """``compare(a, kind, b)`` where neither operand needs all the result's dims
    (RETURNN's ``allow_broadcast_all_sources=True``).

    :param a: the first operand
    :param kind: ``"equal"`` / ``"=="`` / ``"eq"``, ``"not_equal"`` / ``"!="`` /
        ``"<>"``, ``"less"`` / ``"<"``, ``"less_equal"`` / ``"<="``,
        ``"greater"`` / ``">"``, ``"greater_equal"`` / ``">="``
    :param b: the second operand
    :param dim_order: as for ``combine_bc``
    :return: bool, the element-wise comparison
    """
    kind = _COMPARE_ALIASES.get(kind, kind)
    return _order(_native_compare(a, kind, b, allow_broadcast_all_sources=True), dim_order)
