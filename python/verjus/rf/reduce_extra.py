"""The reductions of RETURNN's ``returnn/frontend/reduce.py`` and ``dims.py``
that the native ops leave out: the generic ``reduce(mode=...)``,
``reduce_any`` / ``reduce_all`` / ``reduce_argmin`` / ``reduce_logmeanexp``,
maxout's ``reduce_out``, the element counts ``num_elements_of_shape`` /
``masked_fraction_of_shape``, and the sampling masks ``top_k_mask`` /
``top_p_mask``.

They are composed from the native masked reductions, so they mask the padding
of dynamic dims the same way. Element counts are planned on the host from the
sequence lengths (exact integers, no gradient); the sampling masks are bool
results of ``top_k`` and ``cumsum``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from verjus._verjus import Dim, Tensor
from verjus._verjus import combine as _combine
from verjus._verjus import compare as _compare
from verjus._verjus import rf_cast as _cast
from verjus._verjus import rf_from_numpy as _from_numpy
from verjus._verjus import rf_gather as _gather
from verjus._verjus import rf_pad as _pad
from verjus._verjus import rf_range_over_dim as _range_over_dim
from verjus._verjus import rf_reduce_argmax as _reduce_argmax
from verjus._verjus import rf_reduce_logsumexp as _reduce_logsumexp
from verjus._verjus import rf_reduce_max as _reduce_max
from verjus._verjus import rf_reduce_mean as _reduce_mean
from verjus._verjus import rf_reduce_min as _reduce_min
from verjus._verjus import rf_reduce_sum as _reduce_sum
from verjus._verjus import rf_safe_log as _safe_log
from verjus._verjus import rf_sequence_mask as _sequence_mask
from verjus._verjus import rf_slice as _slice
from verjus._verjus import rf_split_dims as _split_dims
from verjus.rf._dim_args import takes_dims
from verjus.rf.cumsum import cumsum
from verjus.rf.search import top_k

__all__ = [
    "masked_fraction_of_shape",
    "num_elements_of_shape",
    "reduce",
    "reduce_all",
    "reduce_any",
    "reduce_argmin",
    "reduce_logmeanexp",
    "reduce_out",
    "top_k_mask",
    "top_p_mask",
]

Axis = Dim | Sequence[Dim]


def _axes(axis: Axis) -> list[Dim]:
    return [axis] if isinstance(axis, Dim) else list(axis)


def _check_axes(name: str, source: Tensor, axis: Axis) -> None:
    for d in _axes(axis):
        if d not in source.dims:
            have = ", ".join(x.name for x in source.dims)
            raise ValueError(f"{name}: axis {d.name} is not a dim of source [{have}]")


def _check_not_distributed(name: str, distributed: bool) -> None:
    if distributed:
        raise ValueError(f"{name}: distributed reductions are not supported (one process)")


@takes_dims
def reduce_any(source: Tensor, *, axis: Axis, use_mask: bool = True) -> Tensor:
    """Whether any entry of the bool ``source`` over ``axis`` is True.

    :param source: bool (other dtypes count as ``!= 0``)
    :param axis: the dim(s) to reduce over
    :param use_mask: if True (default), the padding of dynamic dims in ``axis``
        is left out (a sequence of length 0 gives False)
    :return: bool, ``source`` without ``axis``
    """
    _check_axes("reduce_any", source, axis)
    top = _reduce_max(_cast(_cast(source, "bool"), "float32"), axis=axis, use_mask=use_mask)
    return _compare(top, "greater", 0.0)


@takes_dims
def reduce_all(source: Tensor, *, axis: Axis, use_mask: bool = True) -> Tensor:
    """Whether all entries of the bool ``source`` over ``axis`` are True.

    :param source: bool (other dtypes count as ``!= 0``)
    :param axis: the dim(s) to reduce over
    :param use_mask: if True (default), the padding of dynamic dims in ``axis``
        is left out (a sequence of length 0 gives True)
    :return: bool, ``source`` without ``axis``
    """
    _check_axes("reduce_all", source, axis)
    low = _reduce_min(_cast(_cast(source, "bool"), "float32"), axis=axis, use_mask=use_mask)
    return _compare(low, "greater", 0.0)


@takes_dims
def reduce_argmin(source: Tensor, *, axis: Axis, use_mask: bool = True) -> Tensor:
    """The index of the minimum of ``source`` along ``axis`` (the first one on
    ties).

    :param source: float32 or an integer dtype (compared in float32)
    :param axis: one dim (or a sequence of one dim)
    :param use_mask: if True (default), the padding of a dynamic ``axis`` never
        wins; a sequence of length 0 gives 0
    :return: int64 indices without ``axis``, ``sparse_dim`` = ``axis``
    """
    axes = _axes(axis)
    if len(axes) != 1:
        raise ValueError(f"reduce_argmin: axis must be one dim, got {[d.name for d in axes]}")
    _check_axes("reduce_argmin", source, axes)
    return _reduce_argmax(-_cast(source, "float32"), axis=axes[0], use_mask=use_mask)


@takes_dims
def reduce_logmeanexp(source: Tensor, *, axis: Axis, use_mask: bool = True) -> Tensor:
    """``log(mean(exp(source)))`` over ``axis``: ``reduce_logsumexp`` minus the
    log of the number of entries.

    :param source: float32
    :param axis: the dim(s) to reduce over
    :param use_mask: if True (default), the padding of dynamic dims in ``axis``
        is left out, and each sequence divides by its own length (a sequence
        of length 0 gives -inf)
    :return: ``source`` without ``axis``
    """
    _check_axes("reduce_logmeanexp", source, axis)
    total = _reduce_logsumexp(source, axis=axis, use_mask=use_mask)
    n = num_elements_of_shape(axis, use_mask=use_mask, source=source)
    if isinstance(n, int):
        return total - math.log(n) if n > 0 else total
    return total - _safe_log(_cast(n, "float32"))


_MODES = {
    "sum": _reduce_sum,
    "max": _reduce_max,
    "min": _reduce_min,
    "mean": _reduce_mean,
    "logsumexp": _reduce_logsumexp,
    "any": reduce_any,
    "all": reduce_all,
    "argmin": reduce_argmin,
    "argmax": _reduce_argmax,
}


@takes_dims
def reduce(
    source: Tensor,
    *,
    mode: str,
    axis: Axis,
    use_mask: bool = True,
    distributed: bool = False,
) -> Tensor:
    """``source`` reduced over ``axis`` by ``mode``: the ``reduce_<mode>`` op.

    :param source: the tensor
    :param mode: ``"sum"``, ``"max"``, ``"min"``, ``"mean"``, ``"logsumexp"``,
        ``"any"``, ``"all"``, ``"argmin"`` or ``"argmax"``
    :param axis: the dim(s) to reduce over (one dim for argmin / argmax)
    :param use_mask: if True (default), the padding of dynamic dims in ``axis``
        is left out, as the ``reduce_<mode>`` op describes
    :param distributed: only False: there is one process
    :return: ``source`` without ``axis``
    """
    _check_not_distributed("reduce", distributed)
    if mode not in _MODES:
        raise ValueError(f"reduce: unknown mode {mode!r}, expected one of {sorted(_MODES)}")
    if mode == "argmax":
        axes = _axes(axis)
        if len(axes) != 1:
            raise ValueError(f"reduce: argmax needs one axis, got {[d.name for d in axes]}")
        axis = axes[0]
    return _MODES[mode](source, axis=axis, use_mask=use_mask)


def _with_feature_dim(x: Tensor, feature_dim: Dim) -> Tensor:
    """A new handle to ``x``'s values with ``feature_dim`` as its feature dim."""
    out = Tensor(x)
    out.feature_dim = feature_dim
    return out


@takes_dims
def reduce_out(source: Tensor, *, mode: str, num_pieces: int, out_dim: Dim | None = None) -> Tensor:
    """Maxout-style reduction of the feature dim: it is split into
    ``(out_dim, num_pieces)`` and each group of ``num_pieces`` consecutive
    features is reduced by ``mode``.

    :param source: float32 with a static ``feature_dim``, its size a multiple
        of ``num_pieces``
    :param mode: ``"sum"``, ``"max"`` or ``"mean"`` (any mode of ``reduce``
        that gives float32)
    :param num_pieces: the size of each group
    :param out_dim: the result's feature dim, of size ``feature_dim /
        num_pieces`` (by default a new one)
    :return: ``source`` with its feature dim replaced by ``out_dim`` (in its
        place), ``feature_dim`` = ``out_dim``
    """
    feature = source.feature_dim
    if feature is None:
        raise ValueError("reduce_out: source needs a feature_dim")
    if feature.dimension is None or num_pieces < 1 or feature.dimension % num_pieces:
        raise ValueError(
            f"reduce_out: feature dim {feature!r} must be static and a multiple of "
            f"num_pieces={num_pieces}"
        )
    parts = Dim(num_pieces, name="readout-parts")
    out_dim = out_dim or feature.div_right(num_pieces)
    if out_dim.dimension != feature.dimension // num_pieces:
        raise ValueError(
            f"reduce_out: out_dim {out_dim!r} must have size {feature.dimension // num_pieces}"
        )
    split = _split_dims(source, axis=feature, dims=[out_dim, parts])
    return _with_feature_dim(reduce(split, mode=mode, axis=parts), out_dim)


def _known_sizes(dims: list[Dim], source: Tensor | None) -> dict[Dim, int]:
    """The sizes of the dims of the lengths of the dynamic ``dims`` (e.g. the
    batch) and of ``source``'s dims."""
    sizes: dict[Dim, int] = {}
    for d in dims:
        if d.is_dynamic():
            sizes.update(zip(d.dyn_size_ext.dims, d.dyn_size_ext.shape, strict=True))
    if source is not None:
        sizes.update(zip(source.dims, source.shape, strict=True))
    return sizes


def _size(name: str, dim: Dim, sizes: dict[Dim, int]) -> int:
    """``dim``'s (padded) size: static, the longest sequence, or from ``sizes``."""
    if dim.dimension is not None:
        return dim.dimension
    if dim.is_dynamic():
        return dim.size
    if dim in sizes:
        return sizes[dim]
    raise ValueError(
        f"{name}: the size of dim {dim.name} is unknown here (give source=, a tensor over it)"
    )


def _lengths(dim: Dim, layout: list[Dim], sizes: dict[Dim, int]) -> np.ndarray:
    """``dim``'s sequence lengths as int64, laid out over ``layout`` (size-1
    axes where the lengths lack a dim)."""
    lens = dim.dyn_size_ext
    arr = np.asarray(lens.numpy(), np.int64)
    have = list(lens.dims)
    arr = np.transpose(arr, [have.index(d) for d in layout if d in have])
    return arr.reshape([sizes[d] if d in have else 1 for d in layout])


@takes_dims
def num_elements_of_shape(
    dims: Axis,
    *,
    use_mask: bool = True,
    device: str | None = None,
    source: Tensor | None = None,
    distributed: bool = False,
) -> int | Tensor:
    """How many entries a tensor over ``dims`` has, e.g. what a mean over
    ``dims`` divides by.

    :param dims: the dims
    :param use_mask: if True (default), only the frames within each
        sequence's length count; a dim among ``dims`` that the lengths of
        another run over (e.g. the batch) is summed over
    :param device: accepted for RETURNN; a computed count is made on the
        default device
    :param source: the tensor reduced over ``dims``, which must have them all
        (it holds the padded layout, so the count is the same; it also gives
        the size of a dim like the batch dim)
    :param distributed: only False: there is one process
    :return: an int when all ``dims`` are static; otherwise, with
        ``use_mask``, the lengths of a single dynamic dim themselves, or an
        int64 count over the lengths' dims not in ``dims``; without
        ``use_mask`` an int64 scalar (the padded sizes' product)
    """
    del device
    name = "num_elements_of_shape"
    _check_not_distributed(name, distributed)
    dims = _axes(dims)
    if source is not None:
        _check_axes(name, source, dims)
    sizes = _known_sizes(dims, source)
    if not any(d.is_dynamic() for d in dims):
        return math.prod(_size(name, d, sizes) for d in dims)
    if not use_mask:
        n = np.array(math.prod(_size(name, d, sizes) for d in dims), np.int64)
        return _from_numpy(n, [], "int64", False, None, None)
    if len(dims) == 1:
        return dims[0].dyn_size_ext
    # Laid out over the lengths' dims (the batch dims).
    layout = [d for d in sizes if any(d in x.dyn_size_ext.dims for x in dims if x.is_dynamic())]
    n = np.ones([1] * len(layout), np.int64)
    for d in dims:
        if d in layout:
            continue  # a batch dim of some lengths: summed over below
        n = n * (_lengths(d, layout, sizes) if d.is_dynamic() else _size(name, d, sizes))
    n = np.broadcast_to(n, [sizes[d] for d in layout])
    summed = tuple(i for i, d in enumerate(layout) if d in dims)
    n = n.sum(axis=summed) if summed else n
    rest = [d for d in layout if d not in dims]
    return _from_numpy(np.array(n, np.int64), rest, "int64", False, None, None)


@takes_dims
def masked_fraction_of_shape(
    dims: Axis, *, inverse: bool = False, device: str | None = None
) -> int | Tensor:
    """The fraction of a tensor over ``dims`` that is not padding:
    ``num_elements_of_shape(dims)`` over the padded size.

    :param dims: the dims
    :param inverse: if True, the padded size over the number of valid entries
    :param device: accepted for RETURNN (see ``num_elements_of_shape``)
    :return: 1 when no dim is dynamic, else a float32 tensor over the
        lengths' dims not in ``dims``
    """
    dims = _axes(dims)
    if not any(d.is_dynamic() for d in dims):
        return 1
    sizes = _known_sizes(dims, None)
    valid = _cast(num_elements_of_shape(dims, device=device), "float32")
    total = float(math.prod(_size("masked_fraction_of_shape", d, sizes) for d in dims))
    return _combine(total, "truediv", valid) if inverse else valid / total


def _scalar_k(k: int | Tensor) -> int:
    if isinstance(k, Tensor):
        if k.dims:
            raise ValueError(f"top_k_mask: k must be an int or a scalar, got dims {k.dims}")
        return int(k.numpy())
    return k


@takes_dims
def top_k_mask(values: Tensor, *, axis: Dim, k: int | Tensor) -> Tensor:
    """The mask of the ``k`` largest entries of ``values`` along ``axis`` (e.g.
    for top-k sampling).

    :param values: ``{other dims..., axis}``
    :param axis: the dim to choose along
    :param k: how many per entry of the other dims (an int or a scalar)
    :return: bool over ``values``' dims (in its order): True at the top
        ``k``; the padding of a dynamic ``axis`` is False
    """
    _check_axes("top_k_mask", values, axis)
    _, indices, k_dim = top_k(values, axis=axis, k=_scalar_k(k))
    hit = _compare(_range_over_dim(axis), "equal", indices, allow_broadcast_all_sources=True)
    mask = reduce_any(hit, axis=k_dim)
    return _valid_only(mask, axis).copy_transpose(list(values.dims))


def _valid_only(mask: Tensor, axis: Dim) -> Tensor:
    """``mask`` and False on the padding of a dynamic ``axis``."""
    if not axis.is_dynamic():
        return mask
    return _combine(mask, "logical_and", _sequence_mask([axis]), allow_broadcast_all_sources=True)


@takes_dims
def top_p_mask(
    probs: Tensor,
    *,
    axis: Dim,
    p: float | Tensor,
    one_more: bool = True,
    min_tokens_to_keep: int = 1,
) -> Tensor:
    """The mask of the most probable entries along ``axis`` whose probabilities
    sum up to ``p`` (nucleus sampling, Holtzman et al., 2019).

    :param probs: ``{other dims..., axis}``, probabilities along ``axis``
    :param axis: the dim to choose along
    :param p: the probability mass to keep, in ``[0, 1]`` (a number, or a
        tensor without ``axis``)
    :param one_more: if True (default), also keep the entry that crosses ``p``
    :param min_tokens_to_keep: keep at least this many entries
    :return: bool over ``probs``' dims (in its order): True for the kept
        entries (in descending order of probability, those whose sum is at
        most ``p``); the padding of a dynamic ``axis`` is False
    """
    _check_axes("top_p_mask", probs, axis)
    if isinstance(p, Tensor):
        if axis in p.dims:
            raise ValueError(f"top_p_mask: p must not have axis {axis.name}")
    elif not 0.0 <= p <= 1.0:
        raise ValueError(f"top_p_mask: p must be in [0, 1], got {p}")
    if axis.size is None:
        raise ValueError(f"top_p_mask: axis {axis.name} has no known size")
    sorted_probs, order, sorted_dim = top_k(probs, axis=axis, k=axis.size)
    mass = cumsum(sorted_probs, spatial_dim=sorted_dim)
    if one_more:
        # The mass before each entry: keep the entry while that is at most p.
        padded, (wide,) = _pad(mass, axes=[sorted_dim], padding=[(1, 0)], value=0.0)
        mass, _ = _slice(padded, axis=wide, size=sorted_dim)
    keep = _compare(mass, "less_equal", p, allow_broadcast_all_sources=True)
    if min_tokens_to_keep > 0:
        first = _compare(_range_over_dim(sorted_dim), "less", min_tokens_to_keep)
        keep = _combine(keep, "logical_or", first, allow_broadcast_all_sources=True)
    # Back from sorted order: entry j is at the place where order == j, which
    # the host inverts (an integer permutation, no gradient).
    perm = np.asarray(order.numpy())
    inverse = np.argsort(perm, axis=-1, kind="stable").astype(np.int32)
    place = _from_numpy(inverse, [*order.dims[:-1], axis], "int32", False, sorted_dim, None)
    mask = _gather(keep, indices=place, axis=sorted_dim, clip_to_valid=False)
    return _valid_only(mask, axis).copy_transpose(list(probs.dims))
