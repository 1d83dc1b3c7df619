"""The Transformer's position-wise feed-forward blocks (``FeedForward``,
``FeedForwardGated``), ``make_ff`` and ``make_norm``, after RETURNN's
``returnn/frontend/decoder/transformer.py`` (where RETURNN keeps them), with its
options, defaults and parameter names (``linear_ff``, ``linear_out``).

Both the Conformer encoder (``verjus.rf.encoder.conformer``) and the
Transformer decoder (``verjus.rf.decoder.transformer``, which re-exports them
for RETURNN's imports) build on them, so they live here, in neither.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from verjus._verjus import Dim, Tensor
from verjus.rf._public_ops import public_op
from verjus.rf.array_ import split
from verjus.rf.build_from_dict import NotSpecified, build_from_dict
from verjus.rf.dropout import dropout_broadcast_default
from verjus.rf.gating import identity, swish
from verjus.rf.module import Linear, Module

__all__ = ["FeedForward", "FeedForwardGated", "make_ff", "make_norm"]

_relu = public_op("relu")  # ``rf.relu`` itself, the default activation


def _activation(who: str, what: str, activation: Any, default: Callable[[Tensor], Tensor]) -> Any:
    """``activation`` as a callable (RETURNN's handling): ``default`` for
    ``NotSpecified``, a dict built by ``build_from_dict``, a callable kept."""
    if activation is NotSpecified:
        return default
    if isinstance(activation, dict):
        return build_from_dict(activation)
    if not callable(activation):
        raise TypeError(f"{who}: unexpected {what} {activation!r}")
    return activation


def _ff_dim(who: str, ff_dim: Any, default: Callable[[], Dim]) -> Dim:
    if isinstance(ff_dim, int):
        ff_dim = Dim(ff_dim, name="transformer-ff-dim")
    if ff_dim is NotSpecified or ff_dim is None:
        ff_dim = default()
    if not isinstance(ff_dim, Dim):
        raise TypeError(f"{who}: ff_dim must be an int or Dim, got {ff_dim!r}")
    return ff_dim


def _dropout(x: Tensor, drop: float, broadcast: bool, feature_dim: Dim) -> Tensor:
    """``rf.dropout`` with the mask shared over all but ``feature_dim`` if
    ``broadcast`` (the modules' ``dropout_broadcast``)."""
    from verjus import rf

    return rf.dropout(x, drop, axis=feature_dim if broadcast else None)


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
        ff_dim = _ff_dim(who, ff_dim, lambda: out_dim * 4)
        self.out_dim = out_dim
        self.dropout = dropout
        self.dropout_broadcast = dropout_broadcast_default()
        self.activation = _activation(who, "activation", activation, _relu)
        self.linear_ff = Linear(out_dim, ff_dim, with_bias=with_bias)
        self.linear_out = Linear(ff_dim, out_dim, with_bias=with_bias)

    def __call__(self, inp: Tensor) -> Tensor:
        """The block's output, over ``inp``'s dims."""
        x = self.activation(self.linear_ff(inp))
        x = _dropout(x, self.dropout, self.dropout_broadcast, self.linear_ff.out_dim)
        return self.linear_out(x)


class FeedForwardGated(Module):
    """Gated feed-forward block (SwiGLU with the defaults):
    ``linear_out(dropout(activation(a) * gate_activation(b)))`` with ``a, b``
    the two halves of ``linear_ff(x)``.

    :param out_dim: input and output feature dim
    :param ff_dim: the inner dim; by default ``4 * 2/3 * out_dim`` rounded up
        to a multiple of 256 (as many parameters as ``FeedForward``)
    :param dropout: dropout after the gating, while training
    :param activation: swish by default
    :param gate_activation: identity by default
    :param with_bias: biases in both linear layers (off by default)
    """

    def __init__(
        self,
        out_dim: Dim,
        *,
        ff_dim: Dim | int | None = NotSpecified,  # type: ignore[assignment]
        dropout: float = 0.1,
        activation: Any = swish,
        gate_activation: Any = identity,
        with_bias: bool = False,
    ) -> None:
        super().__init__()
        who = type(self).__name__

        def default() -> Dim:
            size = -(-(out_dim.dimension * 4 * 2 // 3) // 256) * 256
            return Dim(size, name="transformer-ff-dim")

        ff_dim = _ff_dim(who, ff_dim, default)
        self.out_dim = out_dim
        self.dropout = dropout
        self.dropout_broadcast = dropout_broadcast_default()
        self.activation = _activation(who, "activation", activation, swish)
        self.gate_activation = _activation(who, "gate_activation", gate_activation, identity)
        self.linear_ff = Linear(out_dim, 2 * ff_dim, with_bias=with_bias)
        self.linear_out = Linear(ff_dim, out_dim, with_bias=with_bias)

    def __call__(self, inp: Tensor) -> Tensor:
        """The block's output, over ``inp``'s dims."""
        ff_dim = self.linear_out.in_dim
        a, b = split(self.linear_ff(inp), axis=self.linear_ff.out_dim, out_dims=[ff_dim, ff_dim])
        x = self.activation(a) * self.gate_activation(b)
        return self.linear_out(_dropout(x, self.dropout, self.dropout_broadcast, ff_dim))


def make_ff(
    *,
    out_dim: Dim,
    ff: Any,
    ff_dim: Any,
    ff_activation: Any,
    dropout: float,
    default: type = FeedForward,
) -> Module:
    """A layer's feed-forward block (RETURNN's handling of the ``ff`` option):
    ``default`` for ``NotSpecified``, a class or build dict called with the
    options that are not ``NotSpecified``, a module deep-copied (fresh
    parameters).

    :param out_dim: the model dim
    :param ff: the block's class, build dict or module
    :param ff_dim: its inner dim
    :param ff_activation: its activation
    :param dropout: its dropout
    :param default: the class for ``NotSpecified``
    :return: the block
    """
    if ff is NotSpecified:
        ff = default
    if isinstance(ff, Module):
        return copy.deepcopy(ff)
    kwargs = {"out_dim": out_dim, "ff_dim": ff_dim, "dropout": dropout, "activation": ff_activation}
    kwargs = {k: v for k, v in kwargs.items() if v is not NotSpecified}
    if isinstance(ff, type):
        return ff(**kwargs)
    if isinstance(ff, dict):
        return build_from_dict(ff, **kwargs)
    raise TypeError(f"make_ff: unexpected ff {ff!r}")


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
