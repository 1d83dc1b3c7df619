"""``scaled_gradient``, after RETURNN's ``returnn/frontend/gradient.py``: the identity
forward, the gradient scaled backward (a gradient reversal layer with a negative
scale).

Composed on the tape as ``stop_gradient(x) + scale * (x - stop_gradient(x))``:
the forward value is exactly ``x`` (``x - x`` is exactly 0) and the backward is
one scale, so no op of its own is needed.

``scaled_gradient_ext`` is RETURNN's extended form: the scale, and a shift added to
the gradient. Only the scale is composable this way: a backward that adds a
constant (or ``shift * sum |grad|``) is not linear in the incoming gradient, and
verjus's tape runs no Python in backward, so a shift other than 0 is an error.

``stop_gradient_scope`` is RETURNN's ``torch.no_grad()`` block: the tape's no-grad
mode on this thread.
"""

from __future__ import annotations

from verjus._native_scope import NativeScope
from verjus._verjus import Dim, NoGradScope, Tensor
from verjus._verjus import rf_stop_gradient as _stop_gradient
from verjus.rf._dim_args import takes_dims

__all__ = ["scaled_gradient", "scaled_gradient_ext", "stop_gradient_scope"]


class stop_gradient_scope(NativeScope):  # noqa: N801 (RETURNN's name)
    """``with rf.stop_gradient_scope(): ...``: the ops in the block record nothing
    for backward, so their results carry no gradient (as ``rf.stop_gradient`` of
    each). Scopes nest; the scope belongs to the thread that enters it."""

    guard_type = NoGradScope


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


@takes_dims
def scaled_gradient_ext(
    source: Tensor,
    *,
    scale: float | Tensor,
    shift: float | Tensor | None = None,
    scale_shift_by_sum_over_axis: Dim | None = None,
) -> Tensor:
    """``source`` unchanged, its gradient multiplied by ``scale`` in backprop, as
    RETURNN's ``rf.scaled_gradient_ext`` without a shift (``scaled_gradient``).

    :param source: input
    :param scale: the factor (a number or a tensor over some of ``source``'s dims)
    :param shift: RETURNN adds it to the gradient (times ``sum |grad|`` over
        ``scale_shift_by_sum_over_axis`` if given); only None or 0 is supported
        (see the module docs)
    :param scale_shift_by_sum_over_axis: used with a shift only
    :return: ``source``'s value, with the scaled gradient
    """
    if shift is not None and (isinstance(shift, Tensor) or shift != 0):
        raise NotImplementedError(
            "scaled_gradient_ext: a gradient shift needs a custom backward, which verjus's"
            f" tape does not run from Python (got shift={shift!r},"
            f" scale_shift_by_sum_over_axis={scale_shift_by_sum_over_axis!r}); use scale only"
        )
    return scaled_gradient(source, scale)
