"""``scaled_gradient``, after RETURNN's ``returnn/frontend/gradient.py``: the identity
forward, the gradient scaled backward (a gradient reversal layer with a negative
scale).

Composed on the tape as ``stop_gradient(x) + scale * (x - stop_gradient(x))``:
the forward value is exactly ``x`` (``x - x`` is exactly 0) and the backward is
one scale, so no op of its own is needed.
"""

from __future__ import annotations

from verjus._verjus import Tensor
from verjus._verjus import rf_stop_gradient as _stop_gradient

__all__ = ["scaled_gradient"]


def scaled_gradient(source: Tensor, scale: float | Tensor) -> Tensor:
    """``source`` unchanged, its gradient multiplied by ``scale`` in backprop.

    :param source: input
    :param scale: the factor (a number or a tensor over some of ``source``'s
        dims); a constant 0 is ``stop_gradient``, -1 reverses the gradient
    :return: ``source``'s value, with the scaled gradient
    """
    if not isinstance(scale, Tensor) and scale == 0.0:
        return _stop_gradient(source)
    if not isinstance(scale, Tensor) and scale == 1.0:
        return source
    held = _stop_gradient(source)
    return held + (source - held) * scale
