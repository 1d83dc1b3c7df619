"""``slice`` with RETURNN's full signature, over the native slice.

The native ``slice`` takes int positions. RETURNN's ``rf.slice`` also takes
Tensors: a scalar Tensor acts as its int value; a Tensor over other dims (e.g.
a start per sequence) makes a new dynamic dim with one length per entry, filled
by ``gather``. A negative ``end`` on a dynamic dim counts from each sequence's
own end (RETURNN's ``axis.sub_left(start).sub_right(-end)``).
"""

from __future__ import annotations

import numpy as np

from verjus._verjus import Dim, Tensor
from verjus._verjus import combine as _combine
from verjus._verjus import rf_cast as _cast
from verjus._verjus import rf_range_over_dim as _range_over_dim
from verjus._verjus import rf_slice as _slice
from verjus.rf._dim_args import takes_dims
from verjus.rf.array_ import gather
from verjus.rf.math_ import ceil_divide
from verjus.rf.shape_ops import replace_dim_v2

__all__ = ["slice"]

Position = int | Tensor | None


def _plain(name: str, value: Position | Dim) -> Position | Dim:
    """``value`` with a scalar Tensor read as its int; other Tensors kept."""
    if not isinstance(value, Tensor) or value.dims:
        return value
    if value.dtype not in ("int32", "int64"):
        raise TypeError(f"slice: {name} must be an int Tensor, got dtype {value.dtype}")
    return int(np.asarray(value.numpy()))


@takes_dims
def slice(
    source: Tensor,
    *,
    axis: Dim,
    start: Position = None,
    end: Position = None,
    step: int | Tensor | None = None,
    size: int | Tensor | Dim | None = None,
    out_dim: Dim | None = None,
) -> tuple[Tensor, Dim]:
    """``source[start:end:step]`` along ``axis``, or ``size`` entries from ``start``.

    Positions are ints or int Tensors. A scalar Tensor acts as its value. A
    Tensor over other dims (``start``, ``end`` or ``size`` per sequence) gives a
    new dynamic dim, its lengths over those dims (``size``, or ``end - start``
    with ``end`` defaulting to each sequence's length); positions past the axis
    are clipped. A negative int ``end`` on a dynamic ``axis`` counts from each
    sequence's end. ``step`` is a positive int. ``out_dim`` reuses that dim.
    Returns the slice and its dim; otherwise as the native slice (see
    ``verjus._verjus.rf_slice``).
    """
    start, end, step = _plain("start", start), _plain("end", end), _plain("step", step)
    size = _plain("size", size)
    if isinstance(step, Tensor):
        raise TypeError("slice: step must be an int or a scalar Tensor, not one over dims")
    if step is not None and step <= 0:
        raise ValueError(f"slice: step must be positive, got {step}")
    if size is not None and end is not None:
        raise ValueError("slice: give end or size, not both")
    if any(isinstance(v, Tensor) for v in (start, end, size)):
        return _gathered(source, axis, start, end, step or 1, size, out_dim)
    if isinstance(end, int) and end < 0 and axis.is_dynamic() and (start or 0) >= 0:
        return _from_each_end(source, axis, start or 0, end, step or 1, out_dim)
    return _slice(source, axis=axis, start=start, end=end, step=step, size=size, out_dim=out_dim)


slice.extends_native = _slice  # the native op this wraps (see tests/test_docs.py)


def _gathered(
    source: Tensor,
    axis: Dim,
    start: int | Tensor | None,
    end: int | Tensor | None,
    step: int,
    size: int | Tensor | Dim | None,
    out_dim: Dim | None,
) -> tuple[Tensor, Dim]:
    """The slice with positions that vary over other dims, by ``gather``."""
    start = 0 if start is None else start
    if isinstance(start, int) and start < 0:
        raise ValueError("slice: a negative int start with Tensor end/size is not supported")
    if out_dim is None:
        if isinstance(size, Dim):
            out_dim = size
        else:
            if size is None:
                stop = axis.dyn_size_ext if axis.is_dynamic() else axis.dimension
                if end is not None:
                    stop = end if not (isinstance(end, int) and end < 0) else stop + end
                size = _combine(stop, "-", start, allow_broadcast_all_sources=True)
                if step != 1:
                    size = ceil_divide(size, step)
                size = _combine(size, "maximum", 0)
            out_dim = Dim(_lengths(size), name="slice")
    offsets = _range_over_dim(out_dim)
    if step != 1:
        offsets = offsets * step
    indices = _combine(start, "+", offsets, allow_broadcast_all_sources=True)
    out = gather(source, indices=indices, axis=axis, clip_to_valid=True)
    front = [out_dim if d == axis else d for d in source.dims]
    return out.copy_transpose(front + [d for d in out.dims if d not in front]), out_dim


def _lengths(size: int | Tensor) -> int | Tensor:
    """``size`` as a Dim size: an int, or an int32 Tensor of lengths."""
    if isinstance(size, int):
        return size
    return size if size.dtype == "int32" else _cast(size, "int32")


def _from_each_end(
    source: Tensor, axis: Dim, start: int, end: int, step: int, out_dim: Dim | None
) -> tuple[Tensor, Dim]:
    """The slice of a dynamic ``axis`` from ``start`` to ``end < 0`` frames before
    each sequence's own end."""
    padded = axis.get_dim_value()
    cut, cut_dim = _slice(source, axis=axis, start=start, end=max(padded + end, start), step=step)
    if out_dim is None:
        kept = _combine(axis.dyn_size_ext, "-", start - end)
        if step != 1:
            kept = ceil_divide(kept, step)
        out_dim = Dim(_lengths(_combine(kept, "maximum", 0)), name="slice")
    return replace_dim_v2(cut, in_dim=cut_dim, out_dim=out_dim), out_dim
