"""``pad`` with RETURNN's full signature, over the native constant padding.

The native ``pad`` pads with a number. RETURNN's ``rf.pad`` also takes a
Tensor as the value (a scalar Tensor, or one that varies over other dims, e.g.
one value per sequence), ``mode`` and ``handle_dynamic_dims``. A Tensor value
is put in by ``where`` over a mask of the padded frames (the native padding of
an all-ones indicator), so gradients reach both the source and the value.

``handle_dynamic_dims`` defaults as in RETURNN: True, unless RETURNN's settings
are in effect with a behavior version below 21 (``verjus.rf.backend.
returnn_behavior_version``).
"""

from __future__ import annotations

from collections.abc import Sequence

from verjus._verjus import Dim, Tensor
from verjus._verjus import compare as _compare
from verjus._verjus import rf_full as _full
from verjus._verjus import rf_merge_dims as _merge_dims
from verjus._verjus import rf_pad as _pad
from verjus._verjus import rf_where as _where
from verjus.rf._dim_args import takes_dims
from verjus.rf.backend import behavior_version_at_least

__all__ = ["pad"]


def _amount(value: Dim | int | Tensor) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, Dim)):
        raise TypeError(
            f"pad: padding amounts must be ints or static Dims, got {type(value).__name__}"
        )
    if isinstance(value, Dim):
        if value.dimension is None:
            raise ValueError(f"pad: a padding amount Dim must be static, got {value!r}")
        return value.dimension
    return value


@takes_dims
def pad(
    source: Tensor,
    *,
    axes: Sequence[Dim],
    padding: Sequence[tuple[Dim | int, Dim | int]],
    out_dims: Sequence[Dim] | None = None,
    mode: str = "constant",
    value: float | int | bool | Tensor | None = None,
    handle_dynamic_dims: bool | None = None,
) -> tuple[Tensor, list[Dim]]:
    """Pads ``source`` left and right along ``axes`` with ``value`` (default 0).

    ``padding`` is ``(left, right)`` per axis (ints or static Dims). With
    ``handle_dynamic_dims`` (by default, but False with a RETURNN behavior
    version below 21, as in RETURNN) right padding of a dynamic dim goes after
    each sequence's own end, so the new lengths are the old plus the padding;
    without, it goes after the padded frames, and the out dim is a static one of
    the padded size plus the padding (RETURNN's). ``value`` is a number or a
    Tensor, which may vary over dims of ``source`` (e.g. one value per sequence);
    only ``mode="constant"`` is supported. ``out_dims`` reuses these dims for the
    padded axes. Returns the padded tensor and the out dim of each of ``axes``.
    """
    if isinstance(axes, Dim):
        axes = [axes]
    if len(axes) != len(padding):
        raise ValueError(f"pad: {len(axes)} axes but {len(padding)} padding pairs")
    if mode != "constant":
        raise ValueError(f"pad: only mode='constant' is supported, got mode={mode!r}")
    amounts = [(_amount(left), _amount(right)) for left, right in padding]
    axes = list(axes)
    if handle_dynamic_dims is None:
        handle_dynamic_dims = behavior_version_at_least(21)
    if not handle_dynamic_dims:
        source, axes = _padded_size_dims(source, axes, amounts)
    out_dims = list(out_dims) if out_dims else None
    if not isinstance(value, Tensor):
        return _pad(source, axes=axes, padding=amounts, out_dims=out_dims, value=value or 0)
    padded, new_dims = _pad(source, axes=axes, padding=amounts, out_dims=out_dims, value=0)
    inside, _ = _pad(_indicator(axes), axes=axes, padding=amounts, out_dims=new_dims, value=0)
    is_source = _compare(inside, ">", 0.5)
    out = _where(is_source, padded, value)
    order = list(padded.dims) + [d for d in out.dims if d not in padded.dims]
    return out.copy_transpose(order), new_dims


pad.extends_native = _pad  # the native op this wraps (see tests/test_docs.py)


def _padded_size_dims(
    source: Tensor, axes: list[Dim], amounts: list[tuple[int, int]]
) -> tuple[Tensor, list[Dim]]:
    """``handle_dynamic_dims=False``: each dynamic axis padded on the right taken
    as a static dim of its padded size, so that its padding frames stay as they
    are and the padding goes after them, the same for every sequence (RETURNN's
    padding of the raw array). Other axes are padded alike either way.

    :return: ``source`` over the new axes, and ``axes`` with them
    """
    new_axes = []
    for axis, (_, right) in zip(axes, amounts, strict=True):
        if axis.is_dynamic() and right:
            static = Dim(int(axis.get_dim_value()), name=f"{axis.name}:padded")
            source, _ = _merge_dims(source, dims=[axis], out_dim=static)
            axis = static
        new_axes.append(axis)
    return source, new_axes


def _indicator(axes: Sequence[Dim]) -> Tensor:
    """Ones over ``axes`` and the dims of their sequence lengths."""
    dims: list[Dim] = []
    for axis in axes:
        lengths = axis.dyn_size_ext if axis.dimension is None else None
        for d in [*(lengths.dims if lengths is not None else ()), axis]:
            if d not in dims:
                dims.append(d)
    return _full(dims=dims, fill_value=1.0)
