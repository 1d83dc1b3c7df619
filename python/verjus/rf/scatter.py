"""The scatter family, after RETURNN's ``rf.array_``: ``scatter`` (the inverse of
``gather``: entries sent to positions of a new dim, duplicates combined by
sum / max / min / mean / logsumexp / logmeanexp / argmax), ``scatter_mean``,
``scatter_count``, ``scatter_argmax``, ``scatter_logsumexp``,
``scatter_logmeanexp`` and ``sparse_to_dense``.

There is no native scatter kernel; each mode is composed of native ops on the
one-hot match ``indices == range_over_dim(out_dim)``: the sum is a ``matmul``
with it over the indices dims (one GEMM), max / min a masked ``reduce_max`` /
``reduce_min`` over the indices dims of the values placed on it (memory: the
source times the out dim). Gradients come from the tape. Integer sources are
combined in float32, exact up to 2**24. The padding frames of dynamic indices
dims are left out (RETURNN's ``use_mask``), and indices outside the out dim are
an error.

Where RETURNN's settings are in effect (``verjus.rf.backend.
returnn_behavior_version``), its older behavior: ``use_mask`` (of ``scatter``,
and so of ``scatter_count`` and ``scatter_mean``) is False by default up to
behavior version 22, and below 25 (or with ``rf_scatter_use_fixed_masking=False``)
a ``fill_value`` other than the mode's neutral value is what the padding frames
send to their indices (``_fill_value_masking``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from verjus._verjus import Dim, Tensor
from verjus._verjus import combine as _combine
from verjus._verjus import compare as _compare
from verjus._verjus import rf_cast as _cast
from verjus._verjus import rf_exp as _exp
from verjus._verjus import rf_full as _full
from verjus._verjus import rf_log as _log
from verjus._verjus import rf_matmul as _matmul
from verjus._verjus import rf_range_over_dim as _range_over_dim
from verjus._verjus import rf_reduce_max as _reduce_max
from verjus._verjus import rf_reduce_min as _reduce_min
from verjus._verjus import rf_reduce_sum as _reduce_sum
from verjus._verjus import rf_sequence_mask as _sequence_mask
from verjus._verjus import rf_split_dims as _split_dims
from verjus._verjus import rf_stop_gradient as _stop_gradient
from verjus._verjus import rf_where as _where
from verjus.rf import convert_to_tensor
from verjus.rf._dim_args import takes_dims
from verjus.rf.array_ import gather
from verjus.rf.backend import behavior_version_at_least, returnn_config_bool, use_mask_default
from verjus.rf.shape_ops import check_has, names, scalar, set_sparse_dim, valid_frames

__all__ = [
    "scatter",
    "scatter_argmax",
    "scatter_count",
    "scatter_logmeanexp",
    "scatter_logsumexp",
    "scatter_mean",
    "sparse_to_dense",
]

_INT_RANGE = {"int32": np.iinfo(np.int32), "int64": np.iinfo(np.int64)}


class _Plan:
    """What every scatter needs: the indices dims, the (flat) out dim, the one-hot
    match of the indices on it (False on padding) and the result's dim order."""

    def __init__(
        self,
        op: str,
        source: Tensor | None,
        indices: Tensor,
        indices_dim: Dim | Sequence[Dim],
        out_dim: Dim | Sequence[Dim] | None,
        use_mask: bool,
    ) -> None:
        self.indices_dims = [indices_dim] if isinstance(indices_dim, Dim) else list(indices_dim)
        check_has(op, indices, self.indices_dims, "indices")
        if source is not None:
            check_has(op, source, self.indices_dims)
        if indices.dtype not in ("int32", "int64"):
            raise ValueError(f"{op}: indices must be integers, got {indices.dtype}")
        if out_dim is None:
            out_dim = indices.sparse_dim
            if out_dim is None:
                raise ValueError(f"{op}: give out_dim, or indices with a sparse_dim")
        self.out_dims = [out_dim] if isinstance(out_dim, Dim) else list(out_dim)
        if any(d.size is None for d in self.out_dims):
            raise ValueError(f"{op}: out_dim {names(self.out_dims)} needs known sizes")
        if len(self.out_dims) == 1:
            self.flat_dim = self.out_dims[0]
        elif any(d.is_dynamic() for d in self.out_dims):
            raise ValueError(f"{op}: several out dims {names(self.out_dims)} must all be static")
        else:
            self.flat_dim = Dim(int(np.prod([d.dimension for d in self.out_dims])), name="scatter")
        self.masked = use_mask and any(d.is_dynamic() for d in self.indices_dims)
        _check_range(op, indices, self.indices_dims if use_mask else [], self.flat_dim.size)
        self.batch_dims = [d for d in indices.dims if d not in self.indices_dims]
        features = [] if source is None else list(source.dims)
        self.feature_dims = [
            d for d in features if d not in self.batch_dims and d not in self.indices_dims
        ]
        if self.masked:
            inside = _sequence_mask(self.indices_dims)
            indices = _where(
                inside, indices, scalar(0, indices.dtype), allow_broadcast_all_sources=True
            )
        # With 0 on the padding, so that gathering by them stays in range.
        self.indices = indices
        hit = _compare(
            indices, "==", _range_over_dim(self.flat_dim), allow_broadcast_all_sources=True
        )
        if self.masked:
            hit = _combine(hit, "logical_and", inside, allow_broadcast_all_sources=True)
        self.hit = hit

    def valid(self, source: Tensor, neutral: float) -> Tensor:
        """``source`` as float32, ``neutral`` on the padding of the indices dims."""
        values = source if source.dtype == "float32" else _cast(source, "float32")
        if not self.masked:
            return values
        return _where(
            _sequence_mask(self.indices_dims), values, neutral, allow_broadcast_all_sources=True
        )

    def finish(self, out: Tensor) -> Tensor:
        """``out`` (over the flat out dim) split into the out dims, in RETURNN's
        order ``[batch..., out dims..., features...]``."""
        rest = [d for d in out.dims if d not in self.batch_dims and d != self.flat_dim]
        out = out.copy_transpose([*self.batch_dims, self.flat_dim, *rest])
        if len(self.out_dims) > 1:
            out = _split_dims(out, axis=self.flat_dim, dims=self.out_dims)
        return out

    def counts(self) -> Tensor:
        """How many (valid) indices hit each out position, float32 over ``[batch..., flat]``."""
        return _reduce_sum(_cast(self.hit, "float32"), axis=self.indices_dims, use_mask=False)


def _check_range(op: str, indices: Tensor, masked_dims: list[Dim], size: int) -> None:
    """A ValueError if an index (outside the padding of ``masked_dims``) is not in ``[0, size)``."""
    order = [*[d for d in indices.dims if d not in masked_dims], *masked_dims]
    moved = indices.copy_transpose(order)
    values = moved.numpy()
    if masked_dims:
        values = values[valid_frames(order, moved.shape, op)]
    bad = values[(values < 0) | (values >= size)]
    if bad.size:
        raise ValueError(f"{op}: indices {bad[:5].tolist()} are outside the out dim of size {size}")


def _use_mask(use_mask: bool | None) -> bool:
    """``use_mask`` of ``scatter``, by default as RETURNN's ``rf.use_mask_default``."""
    if use_mask is not None:
        return use_mask
    return use_mask_default(
        default=True, default_false_for_behavior_version_up_to=22, func_name="scatter"
    )


def _fill_value_masking(mode: str, dtype: str, fill_value: float | int | None) -> bool:
    """Whether a masked scatter puts ``fill_value`` on the padding frames and
    scatters them by their indices, as RETURNN before behavior version 25 (its
    ``rf_scatter_use_fixed_masking`` False): with a ``fill_value`` other than the
    mode's neutral value (0 for sum, the lowest value for max, the highest for min)."""
    if fill_value is None:
        return False
    if mode == "sum":
        neutral = 0
    elif dtype in _INT_RANGE:
        limits = _INT_RANGE[dtype]
        neutral = int(limits.min if mode == "max" else limits.max)
    else:
        neutral = float("-inf") if mode == "max" else float("inf")
    if fill_value == neutral:
        return False
    fixed = returnn_config_bool("rf_scatter_use_fixed_masking")
    return not (fixed if fixed is not None else behavior_version_at_least(25))


def _fill(out: Tensor, counts: Tensor, fill_value: float | int) -> Tensor:
    """``out`` where some index hit, ``fill_value`` elsewhere."""
    return _where(counts > 0.0, out, scalar(fill_value, out.dtype))


@takes_dims
def scatter(
    source: Tensor,
    *,
    indices: Tensor,
    indices_dim: Dim | Sequence[Dim],
    mode: str = "sum",
    fill_value: float | int | None = None,
    out_dim: Dim | Sequence[Dim] | None = None,
    use_mask: bool | None = None,
) -> Tensor:
    """Scatters ``source`` into a new tensor over ``out_dim``: entry ``i`` of the
    indices dims goes to position ``indices[i]``; entries sent to the same
    position are combined by ``mode``. The inverse of ``gather``.

    :param source: ``{batch..., indices_dim(s)..., features...}``
    :param indices: int ``{batch..., indices_dim(s)...}``, values in ``out_dim``
        (for several out dims: the row-major position in them)
    :param indices_dim: the dim(s) of ``source`` scattered from
    :param mode: ``"sum"``, ``"max"``, ``"min"``, ``"mean"``, ``"logsumexp"``,
        ``"logmeanexp"`` or ``"argmax"`` (see ``scatter_argmax``)
    :param fill_value: the value of positions nothing goes to: by default 0
        for sum, -inf / +inf for max / min of float32 (the integer range's end
        for integers); for argmax the invalid index
    :param out_dim: the dim(s) to scatter into; by default ``indices.sparse_dim``
    :param use_mask: True: the padding of dynamic indices dims is left out;
        False: padding frames are scattered like the others; None: as RETURNN's
        ``rf.use_mask_default`` (True, but False with a RETURNN behavior version
        up to 22)
    :return: ``{batch..., out_dim(s)..., features...}``, ``source``'s dtype;
        the padding of a dynamic ``out_dim`` is 0 for modes other than sum
    """
    if mode == "mean":
        return scatter_mean(
            source, indices=indices, indices_dim=indices_dim, fill_value=fill_value, out_dim=out_dim
        )
    if mode == "logsumexp":
        return scatter_logsumexp(
            source, indices=indices, indices_dim=indices_dim, fill_value=fill_value, out_dim=out_dim
        )
    if mode == "logmeanexp":
        return scatter_logmeanexp(
            source, indices=indices, indices_dim=indices_dim, fill_value=fill_value, out_dim=out_dim
        )
    if mode == "argmax":
        if not isinstance(indices_dim, Dim):
            raise ValueError("scatter: mode='argmax' needs a single indices_dim")
        return scatter_argmax(
            source,
            indices=indices,
            indices_dim=indices_dim,
            invalid_idx=fill_value,
            out_dim=out_dim,
        )
    if mode not in ("sum", "max", "min"):
        raise ValueError(f"scatter: unknown mode {mode!r}")
    use_mask = _use_mask(use_mask)
    dims = [indices_dim] if isinstance(indices_dim, Dim) else list(indices_dim)
    dynamic = any(d.is_dynamic() for d in dims)
    if use_mask and dynamic and _fill_value_masking(mode, source.dtype, fill_value):
        # RETURNN's older masking: the padding frames send fill_value to their indices.
        filler = scalar(fill_value, source.dtype)
        source = _where(_sequence_mask(dims), source, filler, allow_broadcast_all_sources=True)
        use_mask = False
    plan = _Plan("scatter", source, indices, indices_dim, out_dim, use_mask)
    if mode == "sum":
        out = _matmul(
            _cast(plan.hit, "float32"),
            plan.valid(source, 0.0),
            reduce=plan.indices_dims,
            use_mask=False,
        )
    else:
        neutral = float("-inf") if mode == "max" else float("inf")
        reduce = _reduce_max if mode == "max" else _reduce_min
        placed = _where(
            plan.hit, plan.valid(source, neutral), neutral, allow_broadcast_all_sources=True
        )
        out = reduce(placed, axis=plan.indices_dims, use_mask=False)
    if source.dtype != "float32":
        out = _where(plan.counts() > 0.0, out, 0.0)
        out = _cast(out, source.dtype)
    if fill_value is None and mode != "sum" and source.dtype in _INT_RANGE:
        limits = _INT_RANGE[source.dtype]
        fill_value = int(limits.min if mode == "max" else limits.max)
    if fill_value is not None and not (mode == "sum" and fill_value == 0):
        out = _fill(out, plan.counts(), fill_value)
    if mode != "sum" and plan.flat_dim.is_dynamic():
        out = _where(_sequence_mask([plan.flat_dim]), out, scalar(0, out.dtype))
    return plan.finish(out)


@takes_dims
def scatter_count(
    *,
    indices: Tensor,
    indices_dim: Dim | Sequence[Dim],
    out_dim: Dim | Sequence[Dim] | None = None,
    fill_value: int | None = None,
) -> Tensor:
    """How many of the (non-padding) ``indices`` go to each position of ``out_dim``.

    :param fill_value: the count of positions nothing goes to (default 0)
    :return: int32 ``{batch..., out_dim(s)...}``
    """
    if _fill_value_masking("sum", "int32", fill_value):
        ones = _full(dims=list(indices.dims), fill_value=1, dtype="int32")
        return scatter(
            ones, indices=indices, indices_dim=indices_dim, fill_value=fill_value, out_dim=out_dim
        )
    plan = _Plan("scatter_count", None, indices, indices_dim, out_dim, _use_mask(None))
    counts = plan.counts()
    out = _cast(counts, "int32")
    if fill_value:
        out = _fill(out, counts, fill_value)
    return plan.finish(out)


@takes_dims
def scatter_mean(
    source: Tensor,
    *,
    indices: Tensor,
    indices_dim: Dim | Sequence[Dim],
    fill_value: float | None = None,
    out_dim: Dim | Sequence[Dim] | None = None,
) -> Tensor:
    """``scatter`` with the mean of the entries sent to each position
    (``fill_value``, default 0, where none is).

    :return: float32 ``{batch..., out_dim(s)..., features...}``
    """
    counts = scatter_count(indices=indices, indices_dim=indices_dim, fill_value=1, out_dim=out_dim)
    total = scatter(
        source, indices=indices, indices_dim=indices_dim, fill_value=fill_value, out_dim=out_dim
    )
    return total / counts


@takes_dims
def scatter_logsumexp(
    source: Tensor,
    *,
    indices: Tensor,
    indices_dim: Dim | Sequence[Dim],
    fill_value: float | None = None,
    out_dim: Dim | Sequence[Dim] | None = None,
) -> Tensor:
    """``scatter`` with ``log(sum(exp(x)))`` of the entries sent to each position,
    stabilized by their max; -inf where none is.

    :param fill_value: must be None (as in RETURNN)
    :return: float32 ``{batch..., out_dim(s)..., features...}``
    """
    if fill_value is not None:
        raise ValueError(f"scatter_logsumexp: fill_value {fill_value!r} is not supported")
    plan = _Plan("scatter_logsumexp", source, indices, indices_dim, out_dim, True)
    placed = _where(
        plan.hit, plan.valid(source, float("-inf")), float("-inf"), allow_broadcast_all_sources=True
    )
    top = _stop_gradient(_reduce_max(placed, axis=plan.indices_dims, use_mask=False))
    empty = _compare(top, "==", float("-inf"))
    shift = _where(empty, 0.0, top)
    at_index = gather(shift, indices=plan.indices, axis=plan.flat_dim)
    terms = _exp(plan.valid(source, 0.0) - at_index)
    if plan.masked:
        terms = _where(
            _sequence_mask(plan.indices_dims), terms, 0.0, allow_broadcast_all_sources=True
        )
    total = _matmul(_cast(plan.hit, "float32"), terms, reduce=plan.indices_dims, use_mask=False)
    # 1 for the empty positions, so that log's gradient there is 0, not 0 / 0.
    return plan.finish(_log(_where(empty, 1.0, total)) + top)


@takes_dims
def scatter_logmeanexp(
    source: Tensor,
    *,
    indices: Tensor,
    indices_dim: Dim | Sequence[Dim],
    fill_value: float | None = None,
    out_dim: Dim | Sequence[Dim] | None = None,
) -> Tensor:
    """``scatter`` with ``log(mean(exp(x)))`` of the entries sent to each position
    (``scatter_logsumexp`` minus the log of the count); -inf where none is.

    :return: float32 ``{batch..., out_dim(s)..., features...}``
    """
    counts = scatter_count(indices=indices, indices_dim=indices_dim, fill_value=1, out_dim=out_dim)
    total = scatter_logsumexp(
        source, indices=indices, indices_dim=indices_dim, fill_value=fill_value, out_dim=out_dim
    )
    return total - _log(_cast(counts, "float32"))


@takes_dims
def scatter_argmax(
    source: Tensor,
    *,
    indices: Tensor,
    indices_dim: Dim,
    invalid_idx: int | None = -1,
    out_dim: Dim | None = None,
) -> Tensor:
    """For each position of ``out_dim``: the position along ``indices_dim`` of the
    largest entry sent there (the first of equal ones), ``invalid_idx`` (default
    -1) where none is.

    :return: ``{batch..., out_dim, features...}`` of ``indices``' dtype, sparse dim
        ``indices_dim``
    """
    if invalid_idx is None:
        invalid_idx = -1
    if not isinstance(indices_dim, Dim):
        raise TypeError(f"scatter_argmax: indices_dim must be one Dim, got {indices_dim!r}")
    plan = _Plan("scatter_argmax", source, indices, indices_dim, out_dim, True)
    values = plan.valid(source, float("-inf"))
    placed = _where(plan.hit, values, float("-inf"), allow_broadcast_all_sources=True)
    top = _reduce_max(placed, axis=indices_dim, use_mask=False)
    at_index = gather(top, indices=plan.indices, axis=plan.flat_dim)
    is_top = _compare(values, "==", at_index)
    first_hit = _combine(is_top, "logical_and", plan.hit, allow_broadcast_all_sources=True)
    position = _cast(_range_over_dim(indices_dim), "float32")
    beyond = float(indices_dim.size)
    candidate = _where(first_hit, position, beyond, allow_broadcast_all_sources=True)
    first = _reduce_min(candidate, axis=indices_dim, use_mask=False)
    out = _cast(_where(first < beyond, first, float(invalid_idx)), indices.dtype)
    return set_sparse_dim(plan.finish(out), indices_dim)


@takes_dims
def sparse_to_dense(
    labels: Tensor | int,
    *,
    label_value: Tensor | float | int | bool,
    other_value: Tensor | float | int | bool,
    axis: Dim | None = None,
) -> Tensor:
    """Dense vectors from class indices: ``label_value`` at each label's class,
    ``other_value`` elsewhere (``one_hot`` is the float 1 / 0 case).

    :param labels: int class indices (or an int)
    :param label_value: the value at the label (a number or a scalar Tensor)
    :param other_value: the value elsewhere
    :param axis: the class dim; by default ``labels.sparse_dim``
    :return: over ``labels``' dims plus ``axis``; the dtype of a Tensor value,
        else int32 for two ints, bool for two bools, float32 otherwise
    """
    labels = convert_to_tensor(labels)
    if axis is None:
        axis = labels.sparse_dim
        if axis is None:
            raise ValueError("sparse_to_dense: give axis, or labels with a sparse_dim")
    dtype = _value_dtype(label_value, other_value)
    on = label_value if isinstance(label_value, Tensor) else scalar(label_value, dtype)
    off = other_value if isinstance(other_value, Tensor) else scalar(other_value, dtype)
    match = _compare(labels, "==", _range_over_dim(axis), allow_broadcast_all_sources=True)
    return _where(match, on, off, allow_broadcast_all_sources=True)


def _value_dtype(*values: Tensor | float | int | bool) -> str:
    """The dtype of ``sparse_to_dense``'s values: a Tensor's, else from the numbers."""
    for value in values:
        if isinstance(value, Tensor):
            return value.dtype
    if all(isinstance(v, bool | np.bool_) for v in values):
        return "bool"
    if all(isinstance(v, int | np.integer) and not isinstance(v, bool) for v in values):
        return "int32"
    return "float32"
