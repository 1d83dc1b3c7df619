"""Array ops whose RETURNN signatures need a little Python around the Rust
functions: ``split`` (a tuple) and ``gather`` (``axis`` from the indices'
``sparse_dim``, an ``int`` index)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from verjus._verjus import Dim, Tensor
from verjus._verjus import rf_from_numpy as _from_numpy
from verjus._verjus import rf_gather as _gather
from verjus._verjus import rf_split as _split


def split(source: Tensor, *, axis: Dim, out_dims: Sequence[Dim]) -> tuple[Tensor, ...]:
    """``source`` cut along the static ``axis`` into consecutive parts over
    ``out_dims`` (their sizes add up to ``axis``'s)."""
    return tuple(_split(source, axis=axis, out_dims=list(out_dims)))


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
