"""Array ops whose RETURNN signatures need a little Python around the Rust
functions: ``split`` (a tuple), ``gather`` (``axis`` from the indices'
``sparse_dim``, an ``int`` index) and ``cum_concat_step`` (one frame appended
per sequence, with ``concat``), ``where`` (a number takes the other operand's dtype,
as in RETURNN); and two of RETURNN's array helpers composed of rf
ops: ``expand_make_non_empty`` (an empty axis made one zero frame long, ``pad``
then ``slice``) and ``limit_repeats`` (durations scaled down per sequence so that
``repeat`` stays within a length factor)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from verjus._verjus import Dim, Tensor
from verjus._verjus import rf_concat as _concat
from verjus._verjus import rf_expand_dim as _expand_dim
from verjus._verjus import rf_from_numpy as _from_numpy
from verjus._verjus import rf_full as _full
from verjus._verjus import rf_gather as _gather
from verjus._verjus import rf_split as _split
from verjus._verjus import rf_where as _where
from verjus.rf._dim_args import takes_dims
from verjus.rf._public_ops import replaces_native


@takes_dims
def split(source: Tensor, *, axis: Dim, out_dims: Sequence[Dim]) -> tuple[Tensor, ...]:
    """``source`` cut along the static ``axis`` into consecutive parts over
    ``out_dims`` (their sizes add up to ``axis``'s)."""
    return tuple(_split(source, axis=axis, out_dims=list(out_dims)))


@takes_dims
def gather(
    source: Tensor,
    *,
    indices: Tensor | int,
    axis: Dim | None = None,
    clip_to_valid: bool = False,
) -> Tensor:
    """``source``'s entries along ``axis`` at ``indices``: ``axis`` is replaced by
    the indices' own dims, and dims both share are batch dims (entry ``b`` of the
    indices picks from entry ``b`` of the source). ``axis`` defaults to the
    indices' ``sparse_dim``; ``clip_to_valid`` clips the indices into each
    sequence's ``[0, len - 1]``."""
    if isinstance(indices, int):
        if axis is None:
            raise ValueError("gather: an int index needs axis")
        indices = _from_numpy(np.array(indices, np.int32), [], "int32", False, None, None)
    if axis is None:
        axis = indices.sparse_dim
        if axis is None:
            raise ValueError("gather: give axis, or indices with a sparse_dim")
    return _gather(source, indices=indices, axis=axis, clip_to_valid=clip_to_valid)


# A plain number's dtype (RETURNN's ``convert_to_tensor``: the default int and float
# dtypes), and which is the wider of two.
_NUMBER = (int, float, np.number, np.bool_)
_WIDER = {"bool": 0, "int32": 1, "float32": 2}


def _number_dtype(value: Any) -> str:
    if isinstance(value, (bool, np.bool_)):
        return "bool"
    return "int32" if isinstance(value, (int, np.integer)) else "float32"


def _as_dtype(value: Any, dtype: str) -> Any:
    """The number ``value`` as a scalar of ``dtype`` (as ``torch.full`` converts it:
    for an int dtype truncated towards 0, for bool ``value != 0``)."""
    if not isinstance(value, _NUMBER):
        return value  # (not a number: the native op names it in its TypeError)
    if dtype == "bool":
        value = bool(value)
    elif dtype in ("int32", "int64"):
        value = int(value)
    return _full(dims=[], fill_value=value, dtype=dtype)


@replaces_native("where", _where)
def where(
    cond: Tensor | bool,
    true_: Tensor | float | int | bool,
    false_: Tensor | float | int | bool,
    *,
    allow_broadcast_all_sources: bool = False,
) -> Tensor:
    """``true_`` where ``cond`` else ``false_``, elementwise, lined up by dims.

    The result's dims are the union of the three operands' dims in order of
    appearance (``cond``'s, ``true_``'s, ``false_``'s). The value not chosen is
    never read, so an inf or NaN there does not reach the result or its
    gradient. As in RETURNN, a number takes the dtype of the other operand when that
    is a Tensor (``where(mask, int_tensor, 0)`` stays an int tensor, with its
    ``sparse_dim``; a float is truncated towards 0 for an int tensor); two numbers
    are a bool, int32 or float32 scalar each, and the result is of the wider dtype.

    :param Tensor cond: a bool tensor (or a bool)
    :param Tensor | float true_: the values where ``cond`` holds
    :param Tensor | float false_: the values elsewhere
    :param bool allow_broadcast_all_sources: if True, no operand needs to have
      all dims of the result; otherwise that is an error
    :return: ``true_ if cond else false_``, elementwise; the dtype of the Tensor
      operands (float32 where two differ), the ``sparse_dim`` of ``true_``, else
      of ``false_``
    :rtype: Tensor
    """
    if isinstance(cond, (bool, np.bool_)):
        cond = _from_numpy(np.array(cond, np.float32), [], "bool", False, None, None)
    true_is, false_is = isinstance(true_, Tensor), isinstance(false_, Tensor)
    if not (true_is and false_is):
        if true_is or false_is:
            dtype = (true_ if true_is else false_).dtype
        else:
            dtype = max(_number_dtype(true_), _number_dtype(false_), key=_WIDER.__getitem__)
        if dtype != "float32":  # (a float32 one: the native op's own scalar)
            true_, false_ = _as_dtype(true_, dtype), _as_dtype(false_, dtype)
    return _where(cond, true_, false_, allow_broadcast_all_sources=allow_broadcast_all_sources)


@takes_dims
def cum_concat_step(
    source: Tensor, *, prev_accum: Tensor, axis: Dim, out_spatial_dim: Dim | None = None
) -> tuple[Tensor, Dim]:
    """Appends the frame ``source`` to ``prev_accum`` along ``axis``, as
    RETURNN's ``rf.cum_concat_step`` (e.g. the keys so far in self-attention
    decoding, one frame per step).

    A dynamic ``axis`` grows per sequence: the frame goes after each sequence's
    own last frame (new lengths: old plus 1), as RETURNN's ``rf.pad(...,
    value=source, handle_dynamic_dims=True)``.

    :param source: the new frame: ``prev_accum``'s dims without ``axis``
    :param prev_accum: the frames so far, over ``axis`` (which may be of size 0)
    :param axis: the dim accumulated over
    :param out_spatial_dim: the result's dim (one longer than ``axis``); by
        default a new one
    :return: ``(accumulated, out_spatial_dim)``: ``prev_accum`` with ``axis``
        replaced by ``out_spatial_dim``, its last frame ``source``
    """
    if axis not in prev_accum.dims:
        raise ValueError(
            f"cum_concat_step: axis {axis.name} is not a dim of prev_accum "
            f"{[d.name for d in prev_accum.dims]}"
        )
    expected = {d for d in prev_accum.dims if d != axis}
    if set(source.dims) != expected:
        raise ValueError(
            f"cum_concat_step: source must have prev_accum's dims without {axis.name}: "
            f"expected {sorted(d.name for d in expected)}, got {[d.name for d in source.dims]}"
        )
    one = Dim(1, name=f"{axis.name}_step")
    return _concat((prev_accum, axis), (_expand_dim(source, one), one), out_dim=out_spatial_dim)


@takes_dims
def expand_make_non_empty(
    source: Tensor, *, axis: Dim, out_dim: Dim | None = None
) -> tuple[Tensor, Dim]:
    """``source`` as it is where ``axis`` holds any frame (its padded size is not
    0); else ``axis`` replaced by a dim one frame long (each sequence's length at
    least 1), that frame 0, as RETURNN's ``rf.expand_make_non_empty`` (so that no op
    meets an empty axis).

    :param source: the tensor, over ``axis``
    :param axis: the axis that may be empty (static of size 0, or dynamic with all
        lengths 0)
    :param out_dim: the new dim (by default a new one, ``"non_empty"``); it must
        have the lengths ``max(axis's lengths, 1)``
    :return: ``(tensor, axis or the new dim)``
    """
    from verjus import rf

    if axis not in source.dims:
        raise ValueError(
            f"expand_make_non_empty: axis {axis.name} is not a dim of source "
            f"{[d.name for d in source.dims]}"
        )
    if source.shape[list(source.dims).index(axis)]:
        return source, axis
    lengths: int | Tensor = 1
    if axis.dyn_size_ext is not None:
        lengths = rf.maximum(axis.get_size_tensor(), 1)
    if out_dim is None:
        out_dim = Dim(lengths, name="non_empty")
    # One zero frame after the (empty) padded axis, then each sequence's length.
    padded, (frame,) = rf.pad(
        source, axes=[axis], padding=[(0, 1)], value=0, handle_dynamic_dims=False
    )
    return rf.slice(padded, axis=frame, size=lengths, out_dim=out_dim)


@takes_dims
def limit_repeats(repeats: Tensor, *, in_spatial_dim: Dim, max_len_factor: float) -> Tensor:
    """Repetition counts (durations) scaled down per sequence so that ``rf.repeat``
    on them gives at most ``max_len_factor`` times the sequence's length, as
    RETURNN's ``rf.limit_repeats``.

    Every element with a count above 0 keeps one frame; what is above that one
    frame is scaled, per sequence, by one factor (``budget / surplus``, the frames
    left after the kept ones over the counts above them), and floored. A sequence
    within the factor is unchanged (so a second call changes nothing). The padding
    frames give 0.

    :param repeats: int counts over ``[..., in_spatial_dim]``
    :param in_spatial_dim: the elements' axis (static or dynamic)
    :param max_len_factor: the bound on the total per sequence, relative to its
        length (at least 1, so that the kept frames fit)
    :return: the counts, with ``repeats``' dims and dtype
    """
    from verjus import rf

    if max_len_factor < 1:
        raise ValueError(f"limit_repeats: max_len_factor must be at least 1, got {max_len_factor}")
    dtype = repeats.dtype

    def valid(x: Tensor) -> Tensor:  # 0 at the padding frames, keeping the int dtype
        return rf.where(rf.sequence_mask([in_spatial_dim]), x, rf.zeros_like(x))

    counts = valid(repeats)
    kept = rf.cast(counts > 0, dtype)  # the one frame each non-empty element keeps
    above = counts - kept

    def total(x: Tensor) -> Tensor:
        return rf.cast(rf.reduce_sum(x, axis=in_spatial_dim), "float32")

    limit = rf.cast(in_spatial_dim.get_size_tensor(), "float32") * float(max_len_factor)
    n_kept, n_above = total(kept), total(above)
    factor = rf.where(
        total(counts) > limit, rf.maximum(limit - n_kept, 0.0) / rf.maximum(n_above, 1.0), 1.0
    )
    scaled = kept + rf.cast(rf.cast(above, "float32") * factor, dtype)
    return valid(scaled).copy_transpose(list(repeats.dims))
