"""``rf.cumsum``, after RETURNN's ``rf.cumsum``: the running sum along a dim.

It is composed from existing ops, as the project's "compose first" recipe
asks: the running sum is a matmul of the source with a lower-triangular 0/1
matrix over ``spatial_dim`` (``out[t] = sum_{s <= t} x[s]``). The matmul runs
as one batched GEMM and its gradient (the reverse running sum) comes from the
autograd tape for free. The quadratic cost in the length of ``spatial_dim``
is the price; a native kernel would be written only if a benchmark shows the
composed form too slow for real sequence lengths.
"""

from __future__ import annotations

from verjus._verjus import Dim, Tensor
from verjus._verjus import compare as _compare
from verjus._verjus import rf_cast as _cast
from verjus._verjus import rf_matmul as _matmul
from verjus._verjus import rf_range_over_dim as _range_over_dim
from verjus.rf._dim_args import takes_dims
from verjus.rf.replace_dim import replace_dim

__all__ = ["cumsum"]

_INT_DTYPES = ("int32", "int64")


@takes_dims
def cumsum(source: Tensor, *, spatial_dim: Dim) -> Tensor:
    """The cumulative sum of ``source`` along ``spatial_dim``:
    ``out[..., t, ...] = sum(source[..., s, ...] for s <= t)``.

    Over a dynamic ``spatial_dim`` each sequence sums its own frames only: a
    padding frame of the source never reaches a valid frame of the result
    (not even a NaN or inf there), and a padding frame of the result holds the
    sequence's total (RETURNN's, which also adds the source's padding values,
    agrees wherever the padding is 0).

    :param source: float32, int32 or int64 (an integer source is summed in
        float32, exact while the sums stay below ``2**24``, and cast back)
    :param spatial_dim: the dim to sum along, one of ``source``'s dims
    :return: the running sums, with ``source``'s dims (in its order), dtype and
        ``sparse_dim``
    """
    if spatial_dim not in source.dims:
        have = ", ".join(d.name for d in source.dims)
        raise ValueError(f"cumsum: spatial_dim {spatial_dim.name} is not a dim of source [{have}]")
    if source.dtype not in ("float32", *_INT_DTYPES):
        raise ValueError(f"cumsum: source must be float32, int32 or int64, got {source.dtype}")
    x = _cast(source, "float32")
    # The summed-over copy of spatial_dim, with the same lengths: its padding
    # frames are masked out by the matmul.
    x, s_dim = replace_dim(x, in_dim=spatial_dim)
    # triangle[s, t] = 1 where s <= t.
    s_pos, t_pos = _range_over_dim(s_dim), _range_over_dim(spatial_dim)
    triangle = _cast(_compare(s_pos, "<=", t_pos, allow_broadcast_all_sources=True), "float32")
    out = _matmul(x, triangle, reduce=s_dim).copy_transpose(list(source.dims))
    if source.dtype not in _INT_DTYPES:
        return out
    out = _cast(out, source.dtype)
    if source.sparse_dim is not None:
        out.sparse_dim = source.sparse_dim  # RETURNN's keeps it (``out`` is a new handle)
    return out
