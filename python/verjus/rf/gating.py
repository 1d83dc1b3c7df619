"""``gating`` (RETURNN's), ``glu``, ``identity`` and the alias ``swish`` of ``silu``: the gated
activations of ``returnn/frontend/math_.py``, composed from ``split`` and the
native activations.
"""

from __future__ import annotations

from collections.abc import Callable

from verjus._verjus import Dim, Tensor
from verjus.rf._dim_args import takes_dims
from verjus.rf._public_ops import public_op
from verjus.rf.array_ import split

__all__ = ["gating", "glu", "identity", "swish"]

# ``rf.sigmoid`` and ``rf.silu`` themselves (the public wrappers of the native ops).
sigmoid = public_op("sigmoid")
silu = swish = public_op("silu")


def identity(x: Tensor) -> Tensor:
    """``x`` itself (RETURNN's ``rf.identity``; e.g. ``FeedForwardGated``'s
    default gate activation).

    :return: ``x``
    """
    return x


@takes_dims
def gating(
    x: Tensor,
    *,
    axis: Dim | None = None,
    gate_func: Callable[[Tensor], Tensor] = sigmoid,
    act_func: Callable[[Tensor], Tensor] = identity,
    out_dim: Dim | None = None,
) -> tuple[Tensor, Dim]:
    """``act_func(a) * gate_func(b)`` for the two halves ``a``, ``b`` of ``axis``
    (as in the gated linear unit; RETURNN's ``rf.gating``).

    :param x: input
    :param axis: a static dim of even size (default: ``x.feature_dim``)
    :param gate_func: applied to the second half (default sigmoid)
    :param act_func: applied to the first half (default identity)
    :param out_dim: the dim of the halves (default ``axis.div_left(2)``)
    :return: the gated tensor and ``out_dim``
    """
    if axis is None:
        axis = x.feature_dim
        if axis is None:
            raise ValueError("gating: give axis, or a tensor with a feature_dim")
    if axis.dimension is None or axis.dimension % 2 != 0:
        raise ValueError(f"gating: axis {axis.name} must be static and even, got {axis!r}")
    if out_dim is None:
        out_dim = axis.div_left(2)
    a, b = split(x, axis=axis, out_dims=[out_dim, out_dim])
    return act_func(a) * gate_func(b), out_dim


@takes_dims
def glu(x: Tensor, *, axis: Dim | None = None, out_dim: Dim | None = None) -> tuple[Tensor, Dim]:
    """The gated linear unit: ``a * sigmoid(b)`` for the halves of ``axis``
    (PyTorch's ``glu``; ``gating`` with its defaults).

    :param x: input
    :param axis: a static dim of even size (default: ``x.feature_dim``)
    :param out_dim: the dim of the halves (default ``axis.div_left(2)``)
    :return: the gated tensor and ``out_dim``
    """
    return gating(x, axis=axis, out_dim=out_dim)
