"""``rf.replace_dim``, after RETURNN's ``rf.replace_dim``: the same values under
another dim of the same size (per sequence for a dynamic dim).

Self-attention needs it: the keys and values of a sequence attend over their
own axis from queries on that same axis, so ``RelPosSelfAttention`` and
``dot_attention``'s unfused path move the key side to a separate dim with the
same lengths (RETURNN's ``hist_dim``), and a square ``rf.Linear`` maps to a
copy of its dim and back. The data are relabelled by ``merge_dims`` of the one
dim into the new one.
"""

from __future__ import annotations

import numpy as np

from verjus._verjus import Dim, Tensor
from verjus._verjus import rf_merge_dims as _merge_dims
from verjus.rf._dim_args import takes_dims

__all__ = ["replace_dim"]


@takes_dims
def replace_dim(source: Tensor, *, in_dim: Dim, out_dim: Dim | None = None) -> tuple[Tensor, Dim]:
    """``source`` with ``in_dim`` replaced by ``out_dim``, the values unchanged.

    :param source: ``{..., in_dim}``
    :param in_dim: the dim to replace
    :param out_dim: the new dim, of ``in_dim``'s size (for a dynamic ``in_dim``:
        dynamic, with the same lengths); a dim of unknown size (``Dim(None)``)
        gets ``in_dim``'s size or lengths; by default a new dim with ``in_dim``'s
        size or lengths
    :return: the tensor and ``out_dim``
    """
    if in_dim not in source.dims:
        have = ", ".join(d.name for d in source.dims)
        raise ValueError(f"replace_dim: in_dim {in_dim.name} is not a dim of the source [{have}]")
    if out_dim is None:
        size = in_dim.dyn_size_ext if in_dim.is_dynamic() else in_dim.dimension
        out_dim = Dim(size, name=f"{in_dim.name}:replaced")
    if out_dim == in_dim:
        return source, out_dim
    if out_dim.dimension is None and out_dim.dyn_size_ext is None:
        # A dim of unknown size (``Dim(None)``) takes in_dim's size or lengths, as RETURNN's.
        if in_dim.is_dynamic():
            out_dim.dyn_size_ext = in_dim.dyn_size_ext
        else:
            size = np.int32(in_dim.get_dim_value())
            out_dim.dyn_size_ext = Tensor(f"{out_dim.name}:size", [], "int32", raw_tensor=size)
    if out_dim.axis_size is None or out_dim.axis_size != in_dim.axis_size:
        raise ValueError(
            f"replace_dim: out_dim {out_dim!r} must have the size of in_dim {in_dim!r}"
            " (give out_dim=None for a new dim like in_dim)"
        )
    if out_dim.dimension is not None and out_dim.is_dynamic() != in_dim.is_dynamic():
        raise ValueError(
            f"replace_dim: out_dim {out_dim!r} and in_dim {in_dim!r} must both be static"
            " or both dynamic"
        )
    if in_dim.is_dynamic() and not np.array_equal(
        in_dim.dyn_size_ext.numpy(), out_dim.dyn_size_ext.numpy()
    ):
        raise ValueError(
            f"replace_dim: out_dim {out_dim!r} must have the lengths of in_dim {in_dim!r}"
        )
    out, _ = _merge_dims(source, dims=[in_dim], out_dim=out_dim)
    return out, out_dim
