"""The Transformer's position-wise feed-forward blocks, after RETURNN's
``returnn/frontend/decoder/transformer.py`` (where RETURNN defines them; they
are importable from ``verjus.rf.decoder.transformer`` too): ``FeedForward``
and ``FeedForwardGated`` with RETURNN's options and parameter names
(``linear_ff``, ``linear_out``), plus the small helpers the decoder shares.

Dropout masks are shared over all but the feature dim, RETURNN's
``rf_dropout_broadcast`` default (verjus has no global config to change it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from verjus._verjus import Dim, Tensor
from verjus.rf.array_ import split
from verjus.rf.decoder._build import build
from verjus.rf.gating import swish
from verjus.rf.module import Linear, Module

__all__ = ["FeedForward", "FeedForwardGated"]

# RETURNN's ``rf.dropout_broadcast_default()`` without a config.
DROPOUT_BROADCAST = True


def rf_module() -> Any:
    from verjus import rf

    return rf


def dropout_along(x: Tensor, drop: float, broadcast: bool, dim: Dim) -> Tensor:
    return rf_module().dropout(x, drop, axis=dim if broadcast else None)


def _identity(x: Tensor) -> Tensor:
    return x


def as_dim(who: str, what: str, dim: Dim | int, name: str) -> Dim:
    if isinstance(dim, int):
        return Dim(dim, name=name)
    if not isinstance(dim, Dim):
        raise TypeError(f"{who}: unexpected {what} {dim!r} of type {type(dim).__name__}")
    return dim


def _activation(who: str, activation: Any, default: Callable[[Tensor], Tensor]) -> Any:
    if activation is None:
        return default
    act = build(f"{who} activation", activation, default)
    if not callable(act):
        raise TypeError(f"{who}: unexpected activation {activation!r}")
    return act


class FeedForward(Module):
    """Transformer position-wise feed-forward block (RETURNN's):
    ``linear_ff -> activation -> dropout -> linear_out``.

    :param out_dim: input and output feature dim
    :param ff_dim: the inner dim; by default ``4 * out_dim``
    :param dropout: dropout after the activation
    :param activation: ``rf.relu`` by default
    :param with_bias: biases in both linear layers
    """

    def __init__(
        self,
        out_dim: Dim,
        *,
        ff_dim: Dim | int | None = None,
        dropout: float = 0.1,
        activation: Any = None,
        with_bias: bool = True,
    ) -> None:
        super().__init__()
        who = "FeedForward"
        ff_dim = out_dim * 4 if ff_dim is None else ff_dim
        ff_dim = as_dim(who, "ff_dim", ff_dim, "transformer-ff-dim")
        self.out_dim = out_dim
        self.dropout = dropout
        self.dropout_broadcast = DROPOUT_BROADCAST
        self.activation = _activation(who, activation, rf_module().relu)
        self.linear_ff = Linear(out_dim, ff_dim, with_bias=with_bias)
        self.linear_out = Linear(ff_dim, out_dim, with_bias=with_bias)

    def __call__(self, inp: Tensor) -> Tensor:
        """``inp`` over ``out_dim`` through the block.

        :return: over ``inp``'s dims
        """
        x = self.activation(self.linear_ff(inp))
        x = dropout_along(x, self.dropout, self.dropout_broadcast, self.linear_ff.out_dim)
        return self.linear_out(x)


class FeedForwardGated(Module):
    """Gated feed-forward block (RETURNN's; SwiGLU with the defaults):
    ``linear_out(dropout(activation(a) * gate_activation(b)))`` with ``a, b``
    the two halves of ``linear_ff(x)``.

    :param out_dim: input and output feature dim
    :param ff_dim: the inner dim; by default ``4 * 2/3 * out_dim`` rounded up
        to a multiple of 256 (as many parameters as ``FeedForward``)
    :param dropout: dropout after the gating
    :param activation: ``rf.swish`` by default
    :param gate_activation: identity by default
    :param with_bias: biases in both linear layers (off by default)
    """

    def __init__(
        self,
        out_dim: Dim,
        *,
        ff_dim: Dim | int | None = None,
        dropout: float = 0.1,
        activation: Any = None,
        gate_activation: Any = None,
        with_bias: bool = False,
    ) -> None:
        super().__init__()
        who = "FeedForwardGated"
        if ff_dim is None:
            ff_dim = -(-(out_dim.dimension * 4 * 2 // 3) // 256) * 256
        ff_dim = as_dim(who, "ff_dim", ff_dim, "transformer-ff-dim")
        self.out_dim = out_dim
        self.dropout = dropout
        self.dropout_broadcast = DROPOUT_BROADCAST
        self.activation = _activation(who, activation, swish)
        self.gate_activation = _activation(who, gate_activation, _identity)
        self.linear_ff = Linear(out_dim, 2 * ff_dim, with_bias=with_bias)
        self.linear_out = Linear(ff_dim, out_dim, with_bias=with_bias)

    def __call__(self, inp: Tensor) -> Tensor:
        """``inp`` over ``out_dim`` through the block.

        :return: over ``inp``'s dims
        """
        x = self.linear_ff(inp)
        ff_dim = self.linear_out.in_dim
        a, b = split(x, axis=self.linear_ff.out_dim, out_dims=[ff_dim, ff_dim])
        x = self.activation(a) * self.gate_activation(b)
        x = dropout_along(x, self.dropout, self.dropout_broadcast, ff_dim)
        return self.linear_out(x)
