"""Reshaping and moving entries, after RETURNN's ``rf.array_``, ``rf.dims`` and
``rf.const``: ``full`` / ``constant`` (RETURNN's dtype of the fill value), ``stack``
/ ``unstack``, ``expand_dims``, ``squeeze``, ``reshape``, ``repeat``,
``reverse_sequence``, ``shift_left`` / ``shift_right``, ``window``,
``concat_features``, ``range_over_dim_strided``,
``range_over_merged_dims``, ``linspace_over_dim``,
``last_frame_position_of_dim``, ``set_sparse_dim``, ``replace_dim_v2``,
``slice_update``, ``sort`` and ``search_sorted``.

Each is composed of the native ops (``gather``, ``concat``, ``merge_dims``,
``where``, ...), so gradients come from the autograd tape. Integer positions
that depend on data (``repeat``'s, ``sort``'s order) are planned on the host
from values that carry no gradient, and the values are then moved by
``gather``. A dynamic dim is handled per sequence: padding frames never enter
a valid frame of the result (but see ``window`` under RETURNN's older settings).

A result's ``sparse_dim`` / ``feature_dim`` is set on a new handle to the
same values (``Tensor(x)``), so nothing is copied.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from verjus._verjus import Dim, Tensor
from verjus._verjus import combine as _combine
from verjus._verjus import compare as _compare
from verjus._verjus import rf_cast as _cast
from verjus._verjus import rf_concat as _concat
from verjus._verjus import rf_expand_dim as _expand_dim
from verjus._verjus import rf_from_numpy as _from_numpy
from verjus._verjus import rf_full as _full
from verjus._verjus import rf_merge_dims as _merge_dims
from verjus._verjus import rf_pad as _pad
from verjus._verjus import rf_range_over_dim as _range_over_dim
from verjus._verjus import rf_reduce_sum as _reduce_sum
from verjus._verjus import rf_sequence_mask as _sequence_mask
from verjus._verjus import rf_slice as _slice
from verjus._verjus import rf_split_dims as _split_dims
from verjus._verjus import rf_where as _where
from verjus.rf._dim_args import takes_dims
from verjus.rf._public_ops import replaces_native
from verjus.rf.array_ import gather
from verjus.rf.backend import (
    get_default_float_dtype,
    get_default_int_dtype,
    set_default_device_ctx,
    use_mask_default,
)
from verjus.rf.pad import pad as rf_pad
from verjus.rf.replace_dim import replace_dim
from verjus.rf.tensor_layout import TensorLayout

__all__ = [
    "concat_features",
    "constant",
    "expand_dims",
    "full",
    "last_frame_position_of_dim",
    "linspace_over_dim",
    "range_over_dim_strided",
    "range_over_merged_dims",
    "repeat",
    "replace_dim_v2",
    "reshape",
    "reverse_sequence",
    "search_sorted",
    "set_sparse_dim",
    "shift_left",
    "shift_right",
    "slice_update",
    "sort",
    "squeeze",
    "stack",
    "unstack",
    "window",
]

_NP_DTYPES = {"float32": np.float32, "int32": np.int32, "int64": np.int64, "bool": np.bool_}


# Helpers shared with verjus.rf.packing and verjus.rf.scatter.


def names(dims: Sequence[Dim]) -> str:
    """``[a, b]``: dim names for messages."""
    return "[" + ", ".join(d.name for d in dims) + "]"


def host_tensor(
    array: np.ndarray,
    dims: Sequence[Dim],
    dtype: str,
    *,
    sparse_dim: Dim | None = None,
    feature_dim: Dim | None = None,
) -> Tensor:
    """A constant tensor from a host array (no gradient), on the default device."""
    storage = np.float32 if dtype == "bool" else _NP_DTYPES[dtype]
    array = np.asarray(array, dtype=storage, order="C")
    return _from_numpy(array, list(dims), dtype, False, sparse_dim, feature_dim)


def scalar(value: float | int | bool, dtype: str) -> Tensor:
    """A scalar of ``dtype`` (``where`` takes plain numbers as float32)."""
    return host_tensor(np.array(value), [], dtype)


def check_has(op: str, source: Tensor, dims: Sequence[Dim], what: str = "source") -> None:
    """A ValueError naming ``op`` unless every one of ``dims`` is one of ``source``'s."""
    missing = [d for d in dims if d not in source.dims]
    if missing:
        raise ValueError(f"{op}: {names(missing)} not among the {what}'s dims {names(source.dims)}")


def with_feature_dim(source: Tensor, feature_dim: Dim) -> Tensor:
    """``source`` (which has ``feature_dim``) with ``feature_dim`` marked as its feature dim."""
    out = Tensor(source)
    out.feature_dim = feature_dim
    return out


def valid_frames(dims: Sequence[Dim], sizes: Sequence[int], op: str) -> np.ndarray:
    """Host bool mask over ``dims`` (of those ``sizes``): False on the padding of
    every dynamic one among them; their lengths' dims must be among ``dims``."""
    dims = list(dims)
    valid = np.ones(sizes, np.bool_)
    for axis, dim in enumerate(dims):
        if not dim.is_dynamic():
            continue
        lens = dim.dyn_size_ext
        missing = [d for d in lens.dims if d not in dims]
        if missing:
            raise ValueError(
                f"{op}: the lengths of {dim.name} are over {names(lens.dims)}, "
                f"not all among {names(dims)}"
            )
        order = sorted(lens.dims, key=dims.index)
        shape = [sizes[i] if d in lens.dims else 1 for i, d in enumerate(dims)]
        lens_np = lens.copy_transpose(order).numpy().reshape(shape)
        positions = np.arange(sizes[axis]).reshape(
            [-1 if i == axis else 1 for i in range(len(dims))]
        )
        valid &= positions < lens_np
    return valid


@takes_dims
def set_sparse_dim(source: Tensor, sparse_dim: Dim) -> Tensor:
    """``source`` (integer) with ``sparse_dim`` as its sparse dim, the values unchanged.

    :param source: an int32 or int64 tensor
    :param sparse_dim: the class dim its values index
    :return: the same values and dims, ``sparse_dim`` set
    """
    if source.dtype not in ("int32", "int64"):
        raise ValueError(f"set_sparse_dim: needs an integer tensor, got {source.dtype}")
    out = Tensor(source)
    out.sparse_dim = sparse_dim
    return out


@replaces_native("full", _full)
def full(
    *,
    dims: Sequence[Dim],
    fill_value: float | int | bool | Tensor,
    dtype: str | None = None,
    device: str | None = None,
    sparse_dim: Dim | None = None,
    feature_dim: Dim | None = None,
    like: Tensor | TensorLayout | None = None,
) -> Tensor:
    """A constant tensor over ``dims`` (RETURNN's ``rf.full``; ``rf.fill`` and
    ``rf.constant`` are it too), on the default device (or ``device``, or ``like``'s).

    The dtype, unless given, is RETURNN's: ``like``'s (a Tensor), else that of
    ``fill_value``: ``"bool"`` for a bool, ``"int32"`` (the default int dtype) for an
    int, ``"float32"`` for a float, a scalar Tensor's own. A float value for an integer
    dtype is truncated towards 0.

    :param Dim | Sequence[Dim] dims: the dims, all of known size
    :param float | int | bool | Tensor fill_value: the value of every entry: a number,
      a bool or a scalar Tensor (its value is taken; no gradient flows to it)
    :param str | None dtype: ``"float32"``, ``"int32"``, ``"int64"`` or ``"bool"``
    :param str | None device: where to create it (default: ``like``'s device, else the
      default device)
    :param Dim | None sparse_dim: the sparse dim of an integer result
    :param Dim | None feature_dim: the feature dim (one of ``dims``)
    :param Tensor | None like: a tensor whose dtype (unless given) and device (unless
      given) the result takes, or its ``TensorLayout`` (the device)
    :return: the tensor
    :rtype: Tensor
    """
    if dtype is None:
        dtype = _fill_dtype(fill_value, like)
    if isinstance(fill_value, Tensor):
        if fill_value.dims:
            raise ValueError(
                f"full: fill_value must be a scalar, got a tensor over {names(fill_value.dims)}; "
                "rf.convert_to_tensor converts an array"
            )
        fill_value = fill_value.numpy().item()
    if device is None and like is not None:
        device = like.device
    if feature_dim is not None:
        listed = [dims] if isinstance(dims, Dim) else list(dims)
        if feature_dim not in listed:
            raise ValueError(f"full: feature_dim {feature_dim.name} is not one of {names(listed)}")
    with set_default_device_ctx(device):
        out = _full(dims=dims, fill_value=fill_value, dtype=dtype)
    if sparse_dim is not None:
        out = set_sparse_dim(out, sparse_dim)
    if feature_dim is not None:
        out = with_feature_dim(out, feature_dim)
    return out


def _fill_dtype(fill_value: Any, like: Any) -> str:
    """RETURNN's dtype of ``full(fill_value=...)`` (``like``'s, else the value's)."""
    if isinstance(like, Tensor):
        return like.dtype
    if isinstance(fill_value, Tensor):
        return fill_value.dtype
    if isinstance(fill_value, bool | np.bool_):
        return "bool"
    if isinstance(fill_value, int | np.integer):
        return get_default_int_dtype()
    if isinstance(fill_value, float | np.floating):
        return get_default_float_dtype()
    raise TypeError(f"cannot infer the dtype of fill_value {fill_value!r}: give dtype")


@takes_dims
def constant(
    fill_value: float | int | bool,
    *,
    dims: Sequence[Dim],
    dtype: str | None = None,
    device: str | None = None,
    sparse_dim: Dim | None = None,
    feature_dim: Dim | None = None,
    like: Tensor | TensorLayout | None = None,
) -> Tensor:
    """``fill_value`` over ``dims`` (RETURNN's ``rf.constant``: ``full`` with the
    value first; see ``full`` for the arguments).

    :param fill_value: a number or bool
    :return: the tensor
    """
    if not isinstance(fill_value, int | float | bool | np.number | np.bool_):
        raise TypeError(f"constant: fill_value must be a number or bool, got {type(fill_value)}")
    return full(
        dims=dims,
        fill_value=fill_value,
        dtype=dtype,
        device=device,
        sparse_dim=sparse_dim,
        feature_dim=feature_dim,
        like=like,
    )


@takes_dims
def stack(sources: Sequence[Tensor], *, out_dim: Dim | None = None) -> tuple[Tensor, Dim]:
    """The ``sources`` (all with the same dims, in any order) stacked along a new
    dim.

    :param sources: the tensors
    :param out_dim: the new dim, of axis size ``len(sources)`` (static, or dynamic
        with that longest sequence, as RETURNN allows); by default a new one
    :return: ``(stacked, out_dim)``, dims ``[out_dim, *sources[0].dims]``
    """
    if not sources:
        raise ValueError("stack: no sources to stack")
    first = sources[0]
    for i, src in enumerate(sources):
        if set(src.dims) != set(first.dims) or len(src.dims) != len(first.dims):
            raise ValueError(
                f"stack: source {i} has dims {names(src.dims)}, "
                f"source 0 has {names(first.dims)}; all must have the same"
            )
    if out_dim is None:
        out_dim = Dim(len(sources), name="stack")
    elif out_dim.axis_size != len(sources):
        raise ValueError(
            f"stack: out_dim {out_dim!r} must have the axis size {len(sources)} (the sources)"
        )
    one = Dim(1, name="stack_entry")
    pieces = [(_expand_dim(src, one), one) for src in sources]
    out, _ = _concat(*pieces, out_dim=out_dim)
    out = out.copy_transpose([out_dim, *first.dims])
    if first.sparse_dim is not None and out.sparse_dim != first.sparse_dim:
        out = set_sparse_dim(out, first.sparse_dim)
    return out, out_dim


@takes_dims
def unstack(source: Tensor, *, axis: Dim) -> tuple[Tensor, ...]:
    """``source`` cut along the static ``axis`` into its entries (the inverse of
    ``stack``).

    :param source: ``{..., axis}``
    :param axis: a static dim of ``source``
    :return: ``axis.dimension`` tensors, each ``source``'s dims without ``axis``
    """
    check_has("unstack", source, [axis])
    if axis.dimension is None:
        raise ValueError(f"unstack: axis {axis!r} must be static")
    return tuple(gather(source, indices=i, axis=axis) for i in range(axis.dimension))


@takes_dims
def expand_dims(source: Tensor, dims: Sequence[Dim]) -> Tensor:
    """``source`` broadcast over each of ``dims`` (``expand_dim`` for each, new
    dims last), with its ``sparse_dim``."""
    out = source
    for dim in dims:
        out = _expand_dim(out, dim)
    if source.sparse_dim is not None and out is not source:
        out.sparse_dim = source.sparse_dim  # (dropped by the native op; a new handle)
    return out


@takes_dims
def squeeze(source: Tensor, axis: Dim) -> Tensor:
    """``source`` without its size-1 dim ``axis``."""
    check_has("squeeze", source, [axis])
    if axis.dimension != 1:
        raise ValueError(f"squeeze: axis {axis!r} must be static of size 1")
    return gather(source, indices=0, axis=axis)


@takes_dims
def reshape(source: Tensor, in_dims: Sequence[Dim], out_dims: Sequence[Dim]) -> Tensor:
    """``source`` with ``in_dims`` (flattened in that order) reshaped into
    ``out_dims``, placed where the first of ``in_dims`` in ``source`` was.

    A dynamic dim first among ``in_dims`` and ``out_dims`` is handled per
    sequence by ``merge_dims`` / ``split_dims``. With dynamic dims elsewhere the
    padded layout is reshaped, as in RETURNN: each dynamic dim by its longest
    length (the values then need not respect the sequence lengths).

    :param source: ``{..., in_dims..., ...}``
    :param in_dims: dims of ``source``, together the size of ``out_dims``
    :param out_dims: the new dims
    :return: ``{..., out_dims..., ...}``
    """
    in_dims, out_dims = list(in_dims), list(out_dims)
    check_has("reshape", source, in_dims)
    if not in_dims or not out_dims or len(set(in_dims)) != len(in_dims):
        raise ValueError(f"reshape: bad in_dims {names(in_dims)} / out_dims {names(out_dims)}")
    kept = [d for d in out_dims if d in source.dims and d not in in_dims]
    if kept:
        raise ValueError(f"reshape: out_dims {names(kept)} are already dims of the source")
    static = all(d.dimension is not None for d in in_dims + out_dims)
    if static and np.prod([d.dimension for d in in_dims]) != np.prod(
        [d.dimension for d in out_dims]
    ):
        raise ValueError(
            f"reshape: in_dims {in_dims} and out_dims {out_dims} have different total sizes"
        )
    if any(d.is_dynamic() for d in in_dims[1:] + out_dims[1:]):
        return _reshape_padded(source, in_dims, out_dims)
    if len(out_dims) == 1:
        out, _ = _merge_dims(source, dims=in_dims, out_dim=out_dims[0])
        return out
    flat, flat_dim = _merge_dims(source, dims=in_dims)
    return _split_dims(flat, axis=flat_dim, dims=out_dims)


def _reshape_padded(source: Tensor, in_dims: list[Dim], out_dims: list[Dim]) -> Tensor:
    """``reshape`` of the padded layout: dynamic dims as static ones of their
    longest length, relabelled at the end."""
    first = min(list(source.dims).index(d) for d in in_dims)
    at = len([d for d in list(source.dims)[:first] if d not in in_dims])
    flat_in = []
    for d in in_dims:
        if d.is_dynamic():
            source, d = _slice(source, axis=d, size=d.get_dim_value())
        flat_in.append(d)
    stand_ins = [Dim(d.get_dim_value(), name=d.name) if d.is_dynamic() else d for d in out_dims]
    have, want = (int(np.prod([d.dimension for d in ds])) for ds in (flat_in, stand_ins))
    if have != want:
        raise ValueError(
            f"reshape: in_dims {names(in_dims)} (padded size {have}) and out_dims "
            f"{names(out_dims)} (padded size {want}) have different total sizes"
        )
    flat, flat_dim = _merge_dims(source, dims=flat_in)
    out = _split_dims(flat, axis=flat_dim, dims=stand_ins)
    for stand_in, d in zip(stand_ins, out_dims, strict=True):
        if stand_in is not d:
            out, _ = _merge_dims(out, dims=[stand_in], out_dim=d)
    rest = [d for d in out.dims if d not in out_dims]
    return out.copy_transpose(rest[:at] + out_dims + rest[at:])


@takes_dims
def repeat(
    values: Tensor,
    *,
    in_spatial_dim: Dim,
    repeats: Tensor,
    out_spatial_dim: Dim | None = None,
    max_len_factor: int | None = None,
) -> tuple[Tensor, Dim]:
    """Each frame of ``values`` along ``in_spatial_dim`` repeated ``repeats``
    times (0 drops it), e.g. durations in text-to-speech.

    The padding of a dynamic ``in_spatial_dim`` counts as 0 repeats. The result's
    lengths are the sums of the repeats (over ``repeats``' other dims). The
    positions are planned on the host from ``repeats`` (integers, no gradient);
    the values are gathered, so their gradient sums over the copies.

    :param values: ``{common..., values..., in_spatial_dim}``
    :param in_spatial_dim: the dim to expand
    :param repeats: int ``{common..., repeats..., in_spatial_dim}``
    :param out_spatial_dim: the result's dim (its sizes must fit); by default a
        new one
    :param max_len_factor: bound each sequence to ``max_len_factor`` times its
        length: where it is exceeded, every non-zero repeat keeps 1 and the rest
        above that is scaled by one factor (rounded down), as RETURNN's
        ``limit_repeats``
    :return: ``(out, out_spatial_dim)``: ``values`` with ``in_spatial_dim`` replaced
        by ``repeats``' other dims and ``out_spatial_dim`` (RETURNN's order)
    """
    check_has("repeat", values, [in_spatial_dim], "values")
    check_has("repeat", repeats, [in_spatial_dim], "repeats")
    if repeats.dtype not in ("int32", "int64"):
        raise ValueError(f"repeat: repeats must be integers, got {repeats.dtype}")
    rows = [d for d in repeats.dims if d != in_spatial_dim]
    order = [*rows, in_spatial_dim]
    reps_t = repeats.copy_transpose(order)
    reps = reps_t.numpy().astype(np.int64)
    valid = valid_frames(order, reps_t.shape, "repeat")
    if (reps[valid] < 0).any():
        raise ValueError("repeat: repeats must not be negative")
    reps = np.where(valid, reps, 0)
    if max_len_factor is not None:
        reps = _limit_repeats(reps, valid.sum(-1), max_len_factor)
    lens = reps.sum(-1)
    out_spatial_dim = _repeat_out_dim(out_spatial_dim, lens, rows)
    flat = reps.reshape(int(np.prod(reps.shape[:-1])), reps.shape[-1])
    idx = np.zeros((flat.shape[0], out_spatial_dim.size), np.int32)
    for row, counts in enumerate(flat):
        picks = np.repeat(np.arange(len(counts)), counts)
        idx[row, : len(picks)] = picks
    idx = idx.reshape([*reps.shape[:-1], idx.shape[1]])  # not -1: there may be no entries
    indices = host_tensor(idx, [*rows, out_spatial_dim], "int32")
    return gather(values, indices=indices, axis=in_spatial_dim), out_spatial_dim


def _limit_repeats(reps: np.ndarray, in_lens: np.ndarray, factor: int) -> np.ndarray:
    """RETURNN's ``limit_repeats`` on the host (float32 arithmetic, as there)."""
    if factor < 1:
        raise ValueError(f"repeat: max_len_factor {factor} must be at least 1")
    target = in_lens.astype(np.float32) * np.float32(factor)
    keep = (reps > 0).astype(np.int64)
    surplus = reps - keep
    budget = np.maximum(target - keep.sum(-1).astype(np.float32), 0)
    total = reps.sum(-1).astype(np.float32)
    scale = np.where(
        total > target, budget / np.maximum(surplus.sum(-1).astype(np.float32), 1), 1
    ).astype(np.float32)
    return keep + (surplus.astype(np.float32) * scale[..., None]).astype(np.int64)


def _repeat_out_dim(out_dim: Dim | None, lens: np.ndarray, rows: list[Dim]) -> Dim:
    """``repeat``'s out dim: dynamic over ``rows`` (static without), checked
    against a given one (a new dim for one of unknown size)."""
    if out_dim is not None and out_dim.size is not None:
        if out_dim.is_dynamic():
            got = out_dim.dyn_size_ext.copy_transpose(rows).numpy() if rows else None
            if got is None or not np.array_equal(got, lens):
                raise ValueError(
                    f"repeat: out_spatial_dim {out_dim!r} has lengths {got}, "
                    f"the repeats sum to {lens.tolist()}"
                )
        elif rows or out_dim.dimension != int(lens):
            raise ValueError(
                f"repeat: out_spatial_dim {out_dim!r} does not fit "
                f"the repeats' sums {lens.tolist()}"
            )
        return out_dim
    if not rows:
        return Dim(int(lens), name="repeat")
    return Dim(host_tensor(lens, rows, "int32"), name="repeat")


def _positions(axis: Dim) -> tuple[Tensor, Tensor | int]:
    """``range_over_dim(axis)`` and the length (per sequence for a dynamic dim)."""
    length = axis.dyn_size_ext if axis.is_dynamic() else axis.dimension
    return _range_over_dim(axis), length


@takes_dims
def reverse_sequence(tensor: Tensor, *, axis: Dim, handle_dynamic_dims: bool = True) -> Tensor:
    """``tensor`` reversed along ``axis``; on a dynamic ``axis`` each sequence
    within its own length (``a b c <pad>`` -> ``c b a <pad>``), unless
    ``handle_dynamic_dims=False`` (then ``<pad> c b a``).

    :return: the same dims
    """
    check_has("reverse_sequence", tensor, [axis], "tensor")
    pos, length = _positions(axis)
    per_sequence = handle_dynamic_dims and axis.is_dynamic()
    if not per_sequence:
        length = axis.size
    indices = _combine(length, "-", pos, allow_broadcast_all_sources=True) - 1
    out = gather(tensor, indices=indices, axis=axis, clip_to_valid=per_sequence)
    return out.copy_transpose(list(tensor.dims) + [d for d in out.dims if d not in tensor.dims])


def _shift(
    op: str, source: Tensor, axis: Dim, pad_value: float | int | bool | Tensor, amount: int
) -> Tensor:
    """``source`` moved by ``amount`` along ``axis`` (> 0: right), ``pad_value``
    where nothing moved in; a dynamic ``axis`` per sequence."""
    check_has(op, source, [axis])
    pos, length = _positions(axis)
    moved = pos - amount
    if amount > 0:
        inside = moved >= 0
    else:
        inside = _compare(moved, "<", length, allow_broadcast_all_sources=True)
    taken = gather(source, indices=moved, axis=axis, clip_to_valid=True)
    fill = pad_value if isinstance(pad_value, Tensor) else scalar(pad_value, source.dtype)
    out = _where(inside, taken, fill, allow_broadcast_all_sources=True)
    return out.copy_transpose(list(source.dims) + [d for d in out.dims if d not in source.dims])


@takes_dims
def shift_right(
    source: Tensor, *, axis: Dim, pad_value: float | int | bool | Tensor, amount: int = 1
) -> Tensor:
    """``source`` shifted right by ``amount`` along ``axis``: ``pad_value`` in the
    first ``amount`` frames; the last ``amount`` frames (of each sequence, for a
    dynamic ``axis``) drop out.

    :return: the same dims (plus a Tensor ``pad_value``'s other dims)
    """
    if amount < 0:
        raise ValueError(f"shift_right: amount must be >= 0, got {amount}")
    return _shift("shift_right", source, axis, pad_value, amount)


@takes_dims
def shift_left(
    source: Tensor, *, axis: Dim, pad_value: float | int | bool | Tensor, amount: int = 1
) -> Tensor:
    """``source`` shifted left by ``amount`` along ``axis``: the first ``amount``
    frames drop out, ``pad_value`` fills the last ``amount`` frames of each
    sequence (of a dynamic ``axis``: before its own end).

    :return: the same dims (plus a Tensor ``pad_value``'s other dims)
    """
    if amount < 0:
        raise ValueError(f"shift_left: amount must be >= 0, got {amount}")
    return _shift("shift_left", source, axis, pad_value, -amount)


def _window_sides(window: int, left: Dim | int | None, right: Dim | int | None) -> tuple[int, int]:
    """The left and right context of a "same" window (RETURNN's defaults)."""
    left = left.dimension if isinstance(left, Dim) else left
    right = right.dimension if isinstance(right, Dim) else right
    if left is None and right is None:
        right = window // 2
        left = window - right - 1
    elif left is None:
        left = window - right - 1
    elif right is None:
        right = window - left - 1
    if left < 0 or right < 0 or left + right != window - 1:
        raise ValueError(
            f"window: window_left {left} + window_right {right} must be the window size "
            f"{window} minus 1, both >= 0"
        )
    return left, right


@takes_dims
def window(
    source: Tensor,
    *,
    spatial_dim: Dim,
    window_dim: Dim,
    window_right: Dim | int | None = None,
    window_left: Dim | int | None = None,
    padding: str = "same",
    pad_value: float | None = None,
    stride: int = 1,
    out_spatial_dim: Dim | None = None,
    use_mask: bool | None = None,
) -> tuple[Tensor, Dim]:
    """Sliding windows of ``window_dim`` frames over ``spatial_dim``.

    ``padding="same"``: the window around each frame (``window_left`` before it,
    ``window_right`` after it; by default centered, the extra frame of an even
    window on the left), ``pad_value`` (default 0) outside the sequence; the out
    dim is ``spatial_dim`` itself (stride 1) or ``spatial_dim.ceildiv_right(
    stride)``. ``"valid"``: only whole windows, out dim ``spatial_dim - (window
    - 1)``. A dynamic ``spatial_dim`` is windowed per sequence, so a window never
    holds padding frames, unless RETURNN's settings say otherwise (``verjus.rf.
    backend.returnn_behavior_version``): below behavior version 21 ``"same"``
    pads after the padded frames (``rf.pad``'s ``handle_dynamic_dims=False``), so
    the windows at a sequence's end hold its padding frames, as they are with
    ``use_mask`` False (RETURNN's default up to version 22), else zeros.

    :param source: ``{..., spatial_dim, ...}``
    :param spatial_dim: the dim to slide over
    :param window_dim: the static window dim (new)
    :param window_right: frames after the center ("same" only)
    :param window_left: frames before the center ("same" only)
    :param padding: ``"same"`` or ``"valid"``
    :param pad_value: the value outside the sequence (default 0)
    :param stride: an int step between windows
    :param out_spatial_dim: the out dim, for ``stride > 1`` only (as in RETURNN)
    :param use_mask: whether the padding frames of a dynamic ``spatial_dim`` are
        taken as 0 first (None: as RETURNN's ``rf.use_mask_default``: yes, but not
        with a RETURNN behavior version up to 22); seen only where they enter a
        window (see above) and in the result's own padding frames
    :return: ``(out, out_spatial_dim)``: ``spatial_dim`` replaced by ``window_dim,
        out_spatial_dim`` (stride 1) or ``out_spatial_dim, window_dim`` (stride > 1),
        RETURNN's orders
    """
    check_has("window", source, [spatial_dim])
    if window_dim in source.dims or window_dim.dimension is None or window_dim.dimension < 1:
        raise ValueError(f"window: window_dim {window_dim!r} must be a new static dim")
    if not isinstance(stride, int) or stride < 1:
        raise ValueError(f"window: stride must be an int >= 1, got {stride!r}")
    size = window_dim.dimension
    if spatial_dim.is_dynamic():
        if use_mask is None:
            use_mask = use_mask_default(
                default=True, default_false_for_behavior_version_up_to=22, func_name="window"
            )
        if use_mask:
            zero = scalar(0, source.dtype)
            source = _where(_sequence_mask([spatial_dim]), source, zero).copy_transpose(
                list(source.dims)
            )
    if padding == "same":
        left, right = _window_sides(size, window_left, window_right)
        # Below behavior version 21 (RETURNN's settings) after the padded frames.
        padded, (in_dim,) = rf_pad(
            source, axes=[spatial_dim], padding=[(left, right)], value=pad_value or 0.0
        )
        unstrided = spatial_dim
    elif padding == "valid":
        padded, in_dim = source, spatial_dim
        unstrided = spatial_dim - (size - 1)
    else:
        raise ValueError(f"window: padding must be 'same' or 'valid', got {padding!r}")
    if stride == 1:
        if out_spatial_dim is not None and out_spatial_dim != unstrided:
            raise ValueError("window: out_spatial_dim is only for stride > 1 (as in RETURNN)")
        out_spatial_dim = unstrided
    elif out_spatial_dim is None:
        out_spatial_dim = unstrided.ceildiv_right(stride)
    starts = _range_over_dim(out_spatial_dim) * stride
    # RETURNN's order: the window before the time dim for stride 1, after it otherwise.
    pair = [out_spatial_dim, window_dim] if stride > 1 else [window_dim, out_spatial_dim]
    indices = _combine(
        starts, "+", _range_over_dim(window_dim), allow_broadcast_all_sources=True
    ).copy_transpose(pair)
    return gather(padded, indices=indices, axis=in_dim), out_spatial_dim


def concat_features(*sources: Tensor, allow_broadcast: bool = False) -> Tensor:
    """The ``sources`` concatenated along their feature dims; the new dim is the
    result's feature dim."""
    pairs = []
    for i, src in enumerate(sources):
        if src.feature_dim is None:
            raise ValueError(f"concat_features: source {i} {names(src.dims)} has no feature_dim")
        pairs.append((src, src.feature_dim))
    out, out_dim = _concat(*pairs, allow_broadcast=allow_broadcast)
    return with_feature_dim(out, out_dim)


@takes_dims
def range_over_dim_strided(
    dim: Dim,
    *,
    stride: int,
    out_dim: Dim | None = None,
    dtype: str | None = None,
    device: str | None = None,
) -> tuple[Tensor, Dim]:
    """``[0, stride, 2 * stride, ...]`` over ``out_dim``, by default
    ``dim.ceildiv_right(stride)`` (the positions a stride-``stride`` window starts
    at).

    :return: ``(positions over [out_dim], out_dim)``; integer positions have
        sparse dim ``out_dim``, as in RETURNN
    """
    if not isinstance(stride, int) or stride < 1:
        raise ValueError(f"range_over_dim_strided: stride must be an int >= 1, got {stride!r}")
    if out_dim is None:
        out_dim = dim.ceildiv_right(stride)
    positions = _range_over_dim(out_dim, dtype=dtype, device=device) * stride
    if positions.dtype == "float32":
        return positions, out_dim
    return set_sparse_dim(positions, out_dim), out_dim


@takes_dims
def range_over_merged_dims(
    dims: Sequence[Dim], *, dtype: str | None = None, device: str | None = None
) -> Tensor:
    """The flat position of each entry of ``dims`` (row-major), to index the
    result of ``merge_dims(x, dims=dims)``.

    :return: over ``dims``, sparse dim a new merged dim
    """
    dims = list(dims)
    if not dims:
        raise ValueError("range_over_merged_dims: needs at least one dim")
    with set_default_device_ctx(device):
        if len(dims) == 1:
            return _range_over_dim(dims[0], dtype=dtype)
        _, merged = _merge_dims(_full(dims=dims, fill_value=0.0, dtype="bool"), dims=dims)
        flat = _split_dims(_range_over_dim(merged, dtype=dtype), axis=merged, dims=dims)
    return flat if flat.dtype == "float32" else set_sparse_dim(flat, merged)


@takes_dims
def linspace_over_dim(
    dim: Dim,
    start: float | Tensor = 0.0,
    end: float | Tensor = 1.0,
    *,
    dtype: str | None = None,
    device: str | None = None,
) -> Tensor:
    """``start + (end - start) * i / n`` for the positions ``i`` of ``dim`` (``n``
    its size, per sequence for a dynamic dim, at least 1): evenly spaced, ``end``
    excluded.

    :return: float over ``[dim]`` (dynamic: plus the lengths' dims)
    """
    dtype = dtype or "float32"
    if dtype != "float32":
        raise ValueError(f"linspace_over_dim: dtype must be float32, got {dtype!r}")
    pos = _range_over_dim(dim, dtype="float32", device=device)
    if dim.is_dynamic():
        lens = _cast(dim.dyn_size_ext, "float32")
        count = _combine(lens, "maximum", 1.0)
        out = _combine(pos, "/", count, allow_broadcast_all_sources=True)
    else:
        out = pos / float(max(dim.dimension, 1))
    if isinstance(end, Tensor) or isinstance(start, Tensor) or end - start != 1:
        out = _combine(out, "*", end - start, allow_broadcast_all_sources=True)
    if isinstance(start, Tensor) or start != 0:
        out = _combine(out, "+", start, allow_broadcast_all_sources=True)
    return out


@takes_dims
def last_frame_position_of_dim(
    dim: Dim, *, device: str | None = None, allow_scalar_on_cpu: bool = True
) -> int | Tensor:
    """The position of the last frame of ``dim``: an int for a static dim, else
    ``max(length - 1, 0)`` per sequence (sparse dim ``dim``).

    :param device: where a dynamic dim's positions go (default: the default
        device, or the CPU for scalar lengths with ``allow_scalar_on_cpu``)
    """
    if not dim.is_dynamic():
        if dim.dimension is None:
            raise ValueError(f"last_frame_position_of_dim: {dim!r} has no known size")
        return max(dim.dimension - 1, 0)
    lens = dim.dyn_size_ext
    if device is None and allow_scalar_on_cpu and not lens.dims:
        device = "cpu"
    with set_default_device_ctx(device):
        return host_tensor(np.maximum(lens.numpy() - 1, 0), lens.dims, lens.dtype, sparse_dim=dim)


@takes_dims
def replace_dim_v2(
    source: Tensor,
    *,
    in_dim: Dim,
    out_dim: Dim,
    allow_expand: bool = True,
    allow_shrink: bool = True,
) -> Tensor:
    """``source`` with ``in_dim`` replaced by ``out_dim`` of any size: cut (shrink)
    or zero-padded (expand) at the end, per sequence for dynamic dims.

    :param source: ``{..., in_dim, ...}``
    :param in_dim: the dim to replace
    :param out_dim: the new dim, not yet in ``source``
    :param allow_expand: else a larger ``out_dim`` (by its longest size) is an error
    :param allow_shrink: else a smaller ``out_dim`` is an error
    :return: ``{..., out_dim, ...}``
    """
    check_has("replace_dim_v2", source, [in_dim])
    if out_dim in source.dims:
        raise ValueError(f"replace_dim_v2: out_dim {out_dim!r} is already in {names(source.dims)}")
    old, new = in_dim.size, out_dim.size
    if old is None or new is None:
        raise ValueError(f"replace_dim_v2: {in_dim!r} and {out_dim!r} need known sizes")
    if new > old and not allow_expand:
        raise ValueError(f"replace_dim_v2: not allowed to expand {in_dim!r} to {out_dim!r}")
    if new < old and not allow_shrink:
        raise ValueError(f"replace_dim_v2: not allowed to shrink {in_dim!r} to {out_dim!r}")
    if new == old and not in_dim.is_dynamic() and not out_dim.is_dynamic():
        return replace_dim(source, in_dim=in_dim, out_dim=out_dim)[0]
    lengths = in_dim.dyn_size_ext if in_dim.is_dynamic() else None
    widened = new > old or not out_dim.is_dynamic()
    if lengths is not None and widened and set(lengths.dims) <= set(source.dims):
        # The padding may become frames that count (of a longer or a static dim):
        # zeros there, as RETURNN's per-sequence padding gives, never whatever
        # the padding held.
        source = _where(_sequence_mask([in_dim]), source, 0.0).copy_transpose(list(source.dims))
    # As RETURNN's (eagerly): the padded layout is cut or zero-padded at its end,
    # and relabelled. Frames are not moved per sequence, and the old lengths do not
    # mask anything: after a gather (of hypotheses, say) they no longer describe the
    # data; out_dim's lengths say which frames count.
    layout, layout_dim = _slice(source, axis=in_dim, size=old)
    if new > old:
        layout, (layout_dim,) = _pad(layout, axes=[layout_dim], padding=[(0, new - old)])
    elif new < old:
        layout, layout_dim = _slice(layout, axis=layout_dim, size=new)
    out, _ = _merge_dims(layout, dims=[layout_dim], out_dim=out_dim)
    front = [out_dim if d == in_dim else d for d in source.dims]
    return out.copy_transpose(front)


@takes_dims
def slice_update(target: Tensor, value: Tensor, *, axis: Dim, start: int | Tensor) -> Tensor:
    """``target`` with the frame ``value`` written at position ``start`` of ``axis``.

    :param target: ``{..., axis, ...}``
    :param value: the frame: ``target``'s dims without ``axis`` (or fewer,
        broadcast)
    :param axis: the dim written into
    :param start: the position, an int or a scalar int Tensor
    :return: ``target``'s dims; the gradient of the overwritten frame goes to
        ``value``
    """
    check_has("slice_update", target, [axis], "target")
    if axis in value.dims:
        raise ValueError(f"slice_update: value {names(value.dims)} must not have axis {axis.name}")
    extra = [d for d in value.dims if d not in target.dims]
    if extra:
        raise ValueError(f"slice_update: value has dims {names(extra)} that target lacks")
    if isinstance(start, Tensor) and start.dims:
        raise ValueError(f"slice_update: start must be a scalar, got dims {names(start.dims)}")
    at = _compare(_range_over_dim(axis), "==", start)
    out = _where(at, value, target, allow_broadcast_all_sources=True)
    return out.copy_transpose(list(target.dims))


@takes_dims
def sort(
    source: Tensor, *, axis: Dim, descending: bool = False, stable: bool = True
) -> tuple[Tensor, Tensor, Dim]:
    """``source`` sorted along ``axis``; a dynamic ``axis`` per sequence, its
    padding staying at the end.

    The order is computed on the host from the values (no gradient there); the
    values are then gathered in that order, so the gradient goes to the entry
    each sorted value came from. Equal values keep their order (``stable`` is
    accepted for RETURNN's signature; the sort is always stable).

    :param source: ``{other..., axis}``
    :param axis: the dim to sort along
    :param descending: largest first
    :return: ``(values, indices, out_dim)``, both over ``[other..., out_dim]``
        (``axis`` replaced by ``out_dim``, of its size or lengths, moved last);
        the int64 indices have sparse dim ``axis``
    """
    del stable  # np.lexsort is stable
    check_has("sort", source, [axis])
    others = [d for d in source.dims if d != axis]
    order = [*others, axis]
    moved = source.copy_transpose(order)
    values = moved.numpy()
    pad = ~valid_frames(order, moved.shape, "sort")
    key = -values if descending else values
    perm = np.lexsort((key.reshape(-1, key.shape[-1]), pad.reshape(-1, pad.shape[-1])), axis=-1)
    size = axis.dyn_size_ext if axis.is_dynamic() else axis.dimension
    out_dim = Dim(size, name=f"{axis.name}:sorted")
    indices = host_tensor(perm.reshape(values.shape), [*others, out_dim], "int64", sparse_dim=axis)
    out = gather(source, indices=indices, axis=axis).copy_transpose([*others, out_dim])
    if source.feature_dim == axis:
        out = with_feature_dim(out, out_dim)
    return out, indices, out_dim


@takes_dims
def search_sorted(
    sorted_seq: Tensor,
    values: Tensor,
    *,
    axis: Dim,
    side: str = "left",
    out_dtype: str = "int32",
) -> Tensor:
    """For each of ``values``, its insertion position in ``sorted_seq`` (sorted
    ascending along ``axis``): the number of entries ``< value`` (``side="left"``)
    or ``<= value`` (``"right"``). A dynamic ``axis`` counts each sequence's own
    entries. Computed as a masked count (memory: ``sorted_seq`` times ``values``).

    :param sorted_seq: ``{shared..., axis}``
    :param values: ``{shared..., other...}``
    :param axis: the sorted dim
    :param side: ``"left"`` or ``"right"``
    :param out_dtype: ``"int32"`` or ``"int64"``
    :return: ``{shared..., other...}``, sparse dim ``axis``
    """
    check_has("search_sorted", sorted_seq, [axis], "sorted_seq")
    shared = [d for d in sorted_seq.dims if d != axis]
    check_has("search_sorted", values, shared, "values")
    if axis in values.dims:
        raise ValueError(f"search_sorted: values {names(values.dims)} must not have {axis.name}")
    if side not in ("left", "right"):
        raise ValueError(f"search_sorted: side must be 'left' or 'right', got {side!r}")
    if out_dtype not in ("int32", "int64"):
        raise ValueError(f"search_sorted: out_dtype must be int32 or int64, got {out_dtype!r}")
    below = _compare(
        sorted_seq, "<" if side == "left" else "<=", values, allow_broadcast_all_sources=True
    )
    count = _reduce_sum(_cast(below, "float32"), axis=axis)
    rest = [d for d in values.dims if d not in shared]
    out = _cast(count, out_dtype).copy_transpose(shared + rest)
    return set_sparse_dim(out, axis)
