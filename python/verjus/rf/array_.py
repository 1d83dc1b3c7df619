"""Array ops whose RETURNN signatures need a little Python around the Rust
functions: ``split`` (a tuple), ``gather`` (``axis`` from the indices'
``sparse_dim``, an ``int`` index) and ``cum_concat_step`` (one frame appended
per sequence, with ``concat``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from verjus._verjus import Dim, Tensor
from verjus._verjus import rf_concat as _concat
from verjus._verjus import rf_expand_dim as _expand_dim
from verjus._verjus import rf_from_numpy as _from_numpy
from verjus._verjus import rf_gather as _gather
from verjus._verjus import rf_split as _split
from verjus.rf._dim_args import takes_dims


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
