"""Packed and masked selections, after RETURNN's ``rf.array_``:
``masked_select`` / ``masked_scatter`` (the entries where a mask holds, packed
into one new dim, and back) and ``pack_padded`` / ``pad_packed`` (the same with
the mask of the valid frames: only the non-padding frames are kept).

The size of the packed dim depends on the mask, so the positions are planned on
the host from the mask and the sequence lengths (integers, no gradient); the
values then move by ``gather``, so gradients flow back to the selected entries.
The padding of a dynamic dim among the mask's dims is never selected, whatever
the mask holds there.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from verjus._verjus import Dim, Tensor
from verjus._verjus import rf_expand_dim as _expand_dim
from verjus._verjus import rf_merge_dims as _merge_dims
from verjus._verjus import rf_pad as _pad
from verjus._verjus import rf_sequence_mask as _sequence_mask
from verjus._verjus import rf_slice as _slice
from verjus._verjus import rf_where as _where
from verjus.rf._dim_args import takes_dims
from verjus.rf.array_ import gather
from verjus.rf.shape_ops import check_has, host_tensor, names, scalar, valid_frames

__all__ = ["masked_scatter", "masked_select", "pack_padded", "pad_packed"]


def _split_mask_dims(op: str, mask_dims: Sequence[Dim], dims: Sequence[Dim]) -> list[Dim]:
    """The mask's dims that are not packed (kept as they are), after checking ``dims``."""
    dims = list(dims)
    if not dims or len(set(dims)) != len(dims):
        raise ValueError(f"{op}: dims must be distinct and not empty, got {names(dims)}")
    missing = [d for d in dims if d not in mask_dims]
    if missing:
        raise ValueError(f"{op}: dims {names(missing)} are not among the mask's {names(mask_dims)}")
    return [d for d in mask_dims if d not in dims]


def _host_mask(op: str, mask: Tensor, order: list[Dim]) -> np.ndarray:
    """``mask`` over ``order`` on the host, False on the padding of its dynamic dims."""
    if mask.dtype != "bool":
        raise ValueError(f"{op}: mask must be bool, got {mask.dtype}")
    moved = mask.copy_transpose(order)
    return moved.numpy() & valid_frames(order, moved.shape, op)


def _flatten(source: Tensor, dims: list[Dim]) -> tuple[Tensor, Dim]:
    """``source`` with ``dims`` flattened (row-major) into one static-layout dim."""
    if len(dims) == 1:
        return source, dims[0]
    for dim in dims:
        if dim.is_dynamic():
            # The padded layout, as a static dim, so that merge_dims keeps it.
            source, static = _slice(source, axis=dim, size=dim.size)
            dims = [static if d == dim else d for d in dims]
    return _merge_dims(source, dims=dims)


def _packed_dim(op: str, out_dim: Dim | None, counts: np.ndarray, rows: list[Dim]) -> Dim:
    """The packed dim: static without ``rows``, else dynamic with ``counts`` over
    them; a given ``out_dim`` must fit. One of unknown size is replaced by a new
    static dim without ``rows``, and with them bound to ``counts`` (as in RETURNN)."""
    if out_dim is None or out_dim.size is None:
        if not rows:
            return Dim(int(counts), name=op)
        if out_dim is None:
            return Dim(host_tensor(counts, rows, "int32"), name=op)
        out_dim.dyn_size_ext = host_tensor(counts, rows, "int32")
        return out_dim
    if not rows:
        if out_dim.dimension != int(counts):
            raise ValueError(f"{op}: out_dim {out_dim!r} must be static of size {int(counts)}")
    elif not out_dim.is_dynamic() or not np.array_equal(
        out_dim.dyn_size_ext.copy_transpose(rows).numpy(), counts
    ):
        raise ValueError(f"{op}: out_dim {out_dim!r} must have the lengths {counts.tolist()}")
    return out_dim


def _select(
    op: str,
    tensor: Tensor,
    mask_np: np.ndarray,
    rows: list[Dim],
    dims: list[Dim],
    out_dim: Dim | None,
) -> tuple[Tensor, Dim]:
    """The entries of ``tensor`` where ``mask_np`` (over ``rows + dims``) holds,
    packed per entry of ``rows`` into a new dim."""
    for dim in dims:
        if dim not in tensor.dims:
            if dim.get_dim_value_or_none() is None:
                raise ValueError(f"{op}: the tensor lacks the dim {dim.name}, of no known size")
            tensor = _expand_dim(tensor, dim)
    grid = mask_np.reshape(int(np.prod(mask_np.shape[: len(rows)])), -1)
    counts = grid.sum(-1)
    out_dim = _packed_dim(op, out_dim, counts.reshape(mask_np.shape[: len(rows)]), rows)
    flat, flat_dim = _flatten(tensor, dims)
    row_of, pos = np.nonzero(grid)
    rank = np.arange(len(row_of)) - np.concatenate([[0], np.cumsum(counts)[:-1]])[row_of]
    idx = np.zeros((grid.shape[0], int(counts.max(initial=0))), np.int32)
    idx[row_of, rank] = pos
    shape = [*mask_np.shape[: len(rows)], idx.shape[1]]
    out = gather(
        flat, indices=host_tensor(idx.reshape(shape), [*rows, out_dim], "int32"), axis=flat_dim
    )
    order = [*rows, out_dim] + [d for d in out.dims if d not in rows and d != out_dim]
    if rows:
        zero = scalar(0, out.dtype)
        out = _where(_sequence_mask([out_dim]), out, zero, allow_broadcast_all_sources=True)
    return out.copy_transpose(order), out_dim


@takes_dims
def masked_select(
    tensor: Tensor, *, mask: Tensor, dims: Sequence[Dim], out_dim: Dim | None = None
) -> tuple[Tensor, Dim]:
    """The entries of ``tensor`` where ``mask`` holds, packed into one new dim
    (TF's ``boolean_mask``; ``masked_scatter`` is the inverse).

    With ``dims`` all of the mask's dims, the packed dim is static: the selected
    entries of ``dims`` in row-major order (``dims``' order). With fewer, only
    those are packed, separately for each entry of the mask's other dims: the
    packed dim is then dynamic, its lengths over those dims (padding zero).

    :param tensor: ``{mask dims..., other...}`` (a static mask dim it lacks is
        broadcast)
    :param mask: bool; False is assumed on the padding of its dynamic dims
    :param dims: mask dims to pack, in the packed order
    :param out_dim: the packed dim, if its size is known; one of unknown size
        (``Dim(None)``) is replaced by a new dim, which is returned
    :return: ``({kept mask dims..., out_dim, other...}, out_dim)``
    """
    rows = _split_mask_dims("masked_select", mask.dims, dims)
    mask_np = _host_mask("masked_select", mask, [*rows, *dims])
    return _select("masked_select", tensor, mask_np, rows, list(dims), out_dim)


@takes_dims
def masked_scatter(
    source: Tensor,
    backup: Tensor | None = None,
    *,
    mask: Tensor,
    dims: Sequence[Dim],
    in_dim: Dim,
) -> Tensor:
    """The inverse of ``masked_select``: the packed entries of ``source`` along
    ``in_dim`` put back where ``mask`` holds, ``backup`` (default 0) elsewhere.

    :param source: ``{kept mask dims..., in_dim, other...}``
    :param backup: the values where ``mask`` is False, over (some of) the result's dims
    :param mask: bool over ``dims`` (and the kept dims); False is assumed on the
        padding of its dynamic dims
    :param dims: the packed mask dims, in ``masked_select``'s order
    :param in_dim: the packed dim of ``source``
    :return: ``{kept mask dims..., dims..., other...}``; the gradient reaches
        ``source`` where the mask holds and ``backup`` elsewhere
    """
    op = "masked_scatter"
    check_has(op, source, [in_dim])
    rows = _split_mask_dims(op, mask.dims, dims)
    dims = list(dims)
    clash = [d for d in dims if d in source.dims]
    if clash:
        raise ValueError(
            f"{op}: source {names(source.dims)} must not have the mask dims {names(clash)}"
        )
    mask_np = _host_mask(op, mask, [*rows, *dims])
    lead = mask_np.shape[: len(rows)]
    grid = mask_np.reshape(int(np.prod(lead)), -1)
    counts = grid.sum(-1)
    if in_dim.size is not None and counts.max(initial=0) > in_dim.size:
        raise ValueError(
            f"{op}: the mask selects up to {int(counts.max())} entries, "
            f"in_dim {in_dim!r} has {in_dim.size}"
        )
    rank = np.where(grid, np.cumsum(grid, axis=-1) - 1, 0).astype(np.int32)
    indices = host_tensor(rank.reshape(mask_np.shape), [*rows, *dims], "int32")
    if in_dim.size == 0:
        # Nothing is selected: one (unread) frame so that index 0 exists.
        source, (in_dim,) = _pad(source, axes=[in_dim], padding=[(0, 1)])
    taken = gather(source, indices=indices, axis=in_dim)
    where = host_tensor(mask_np, [*rows, *dims], "bool")
    other = scalar(0, taken.dtype) if backup is None else backup
    out = _where(where, taken, other, allow_broadcast_all_sources=True)
    order = [*rows, *dims] + [d for d in taken.dims if d not in rows and d not in dims]
    extra = [d for d in out.dims if d not in order]
    if extra:
        raise ValueError(f"{op}: backup has dims {names(extra)} the result lacks")
    return out.copy_transpose(order)


def _padding_mask_dims(op: str, source: Tensor, dims: Sequence[Dim]) -> list[Dim]:
    """The dims of the mask of the valid frames of ``dims``: the lengths' dims
    not among ``dims`` first, in ``source``'s order, then ``dims``."""
    dims = list(dims)
    check_has(op, source, dims)
    extra: list[Dim] = []
    for dim in dims:
        if dim.is_dynamic():
            extra += [d for d in dim.dyn_size_ext.dims if d not in dims and d not in extra]
    check_has(op, source, extra)
    return sorted(extra, key=list(source.dims).index) + dims


@takes_dims
def pack_padded(
    source: Tensor,
    *,
    dims: Sequence[Dim],
    enforce_sorted: bool = False,
    out_dim: Dim | None = None,
) -> tuple[Tensor, Dim]:
    """The valid (non-padding) frames of ``dims`` packed into one dim, row-major
    in ``dims``' order (PyTorch's ``pack_padded_sequence``; ``pad_packed`` is the
    inverse): ``dims=[batch, time]`` gives all sequences one after the other.

    A dynamic dim of ``dims`` whose lengths are over dims not in ``dims`` is
    packed per entry of those (see ``masked_select``).

    :param source: ``{dims..., other...}``
    :param dims: the dims to pack
    :param enforce_sorted: True (sort the sequences by length) is not supported,
        as in RETURNN
    :param out_dim: the packed dim, if its size is known (see ``masked_select``)
    :return: ``({out_dim, other...}, out_dim)``
    """
    if enforce_sorted:
        raise ValueError("pack_padded: enforce_sorted=True is not supported (nor in RETURNN)")
    mask_dims = _padding_mask_dims("pack_padded", source, dims)
    moved = source.copy_transpose(mask_dims + [d for d in source.dims if d not in mask_dims])
    sizes = moved.shape[: len(mask_dims)]
    mask_np = valid_frames(mask_dims, sizes, "pack_padded")
    rows = mask_dims[: len(mask_dims) - len(dims)]
    return _select("pack_padded", source, mask_np, rows, list(dims), out_dim)


@takes_dims
def pad_packed(source: Tensor, *, in_dim: Dim, dims: Sequence[Dim]) -> Tensor:
    """The inverse of ``pack_padded``: the packed frames of ``in_dim`` back over
    ``dims`` (zero in the padding).

    :param source: ``{in_dim, other...}``
    :param in_dim: the packed dim
    :param dims: the dims ``pack_padded`` packed, in the same order
    :return: ``{dims..., other...}``
    """
    dims = list(dims)
    extra: list[Dim] = []
    for dim in dims:
        if dim.is_dynamic():
            extra += [d for d in dim.dyn_size_ext.dims if d not in dims and d not in extra]
    mask = _sequence_mask(dims)
    for dim in dims:
        if dim not in mask.dims:
            mask = _expand_dim(mask, dim)
    return masked_scatter(source, mask=mask.copy_transpose(extra + dims), dims=dims, in_dim=in_dim)
