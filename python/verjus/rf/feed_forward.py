"""The Transformer's position-wise ``FeedForward`` block and ``make_norm``, after
RETURNN's ``returnn/frontend/decoder/transformer.py`` (where RETURNN keeps them),
with its options and parameter names (``linear_ff``, ``linear_out``).

Both the Conformer encoder (``verjus.rf.encoder.conformer``) and the Transformer
decoder build on them, so they live here, in neither; ``NotSpecified`` is
RETURNN's marker of an argument left at its default.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from verjus._verjus import Dim, Tensor
from verjus._verjus import rf_relu as _relu
from verjus.rf.build_from_dict import build_from_dict
from verjus.rf.dropout import dropout_broadcast_default
from verjus.rf.module import Linear, Module

__all__ = ["FeedForward", "NotSpecified", "make_norm"]


class NotSpecified:
    """RETURNN's placeholder default: the argument was not given (the class
    itself is the marker)."""


def resolve_activation(who: str, activation: Any, default: Callable[[Tensor], Tensor]) -> Any:
    """``activation`` as a callable: ``default`` for ``NotSpecified``, a dict
    built by ``build_from_dict``.

    :return: the callable
    """
    if activation is NotSpecified:
        return default
    if isinstance(activation, dict):
        return build_from_dict(activation)
    if not callable(activation):
        raise TypeError(f"{who}: unexpected activation {activation!r}")
    return activation


class FeedForward(Module):
    """Position-wise feed-forward: ``linear_out(dropout(activation(linear_ff(x))))``.

    :param out_dim: input and output feature dim
    :param ff_dim: the inner dim (an int or Dim; default ``4 * out_dim``)
    :param dropout: dropout after the activation, while training
    :param activation: relu by default (a callable, a module or a dict for
        ``build_from_dict``)
    :param with_bias: biases in both linear layers
    """

    def __init__(
        self,
        out_dim: Dim,
        *,
        ff_dim: Dim | int | None = NotSpecified,  # type: ignore[assignment]
        dropout: float = 0.1,
        activation: Any = _relu,
        with_bias: bool = True,
    ) -> None:
        super().__init__()
        who = type(self).__name__
        if isinstance(ff_dim, int):
            ff_dim = Dim(ff_dim, name="transformer-ff-dim")
        if ff_dim is NotSpecified or ff_dim is None:
            ff_dim = out_dim * 4
        if not isinstance(ff_dim, Dim):
            raise TypeError(f"{who}: ff_dim must be an int or Dim, got {ff_dim!r}")
        self.out_dim = out_dim
        self.dropout = dropout
        self.dropout_broadcast = dropout_broadcast_default()
        self.activation = resolve_activation(who, activation, _relu)
        self.linear_ff = Linear(out_dim, ff_dim, with_bias=with_bias)
        self.linear_out = Linear(ff_dim, out_dim, with_bias=with_bias)

    def __call__(self, inp: Tensor) -> Tensor:
        """The block's output, over ``inp``'s dims."""
        from verjus import rf

        x = self.activation(self.linear_ff(inp))
        axis = self.linear_ff.out_dim if self.dropout_broadcast else None
        return self.linear_out(rf.dropout(x, self.dropout, axis=axis))


def make_norm(norm: Any, out_dim: Dim) -> Any:
    """A normalization for ``out_dim``: a class is called with it, a dict built
    by ``build_from_dict``, a module deep-copied (fresh parameters), a callable
    kept.

    :param norm: e.g. ``rf.LayerNorm``
    :param out_dim: the model dim
    :return: the norm module or callable
    """
    if isinstance(norm, type):
        norm = norm(out_dim)
    elif isinstance(norm, dict):
        norm = build_from_dict(norm, out_dim)
    elif isinstance(norm, Module):
        norm = copy.deepcopy(norm)
    if not callable(norm):
        raise TypeError(f"make_norm: unexpected norm {norm!r}")
    return norm
