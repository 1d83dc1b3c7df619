"""Label smoothing, after RETURNN's ``returnn/frontend/label_smoothing.py``:
``label_smoothing`` (of targets, sparse or dense), ``smooth_one_hot`` and
``label_smoothed_log_prob_gradient`` (smoothing applied to the gradient of
log-probabilities, e.g. in front of CTC), all composed of rf ops on the tape.
"""

from __future__ import annotations

from collections.abc import Sequence

from verjus._verjus import Dim, Tensor
from verjus._verjus import rf_one_hot as _one_hot
from verjus._verjus import rf_range_over_dim as _range_over_dim
from verjus._verjus import rf_reduce_sum as _reduce_sum
from verjus._verjus import rf_stop_gradient as _stop_gradient
from verjus._verjus import rf_where as _where
from verjus.rf._dim_args import takes_dims

__all__ = ["label_smoothed_log_prob_gradient", "label_smoothing", "smooth_one_hot"]


def _class_dim(t: Tensor, axis: Dim | None, op: str) -> Dim:
    axis = axis or t.feature_dim or t.sparse_dim
    if axis is None:
        raise ValueError(f"{op}: give axis, or a tensor with a feature_dim or sparse_dim")
    if axis.dimension is None:
        raise ValueError(f"{op}: the class dim {axis.name} must be static")
    return axis


@takes_dims
def label_smoothing(prob: Tensor, smoothing: float | Tensor, *, axis: Dim | None = None) -> Tensor:
    """Label smoothing, as RETURNN: sparse labels become dense, the label gets
    ``1 - smoothing`` and every other class ``smoothing / (dim - 1)``; dense
    probabilities ``p`` become ``p * (1 - dim * f) + f`` with
    ``f = smoothing / (dim - 1)`` (a 1 becomes ``1 - smoothing``, sums stay 1).

    :param prob: sparse labels (``sparse_dim`` the class dim) or probabilities
        over ``axis``
    :param smoothing: the mass moved off the label
    :param axis: the class dim; by default ``feature_dim`` or ``sparse_dim``
    :return: the smoothed probabilities over the class dim
    """
    axis = _class_dim(prob, axis, "label_smoothing")
    if prob.sparse_dim is not None:
        if prob.sparse_dim != axis:
            raise ValueError(
                f"label_smoothing: axis {axis.name} is not the labels' sparse_dim "
                f"{prob.sparse_dim.name}"
            )
        return smooth_one_hot(prob, label_prob=1.0 - smoothing)
    if axis not in prob.dims:
        raise ValueError(f"label_smoothing: axis {axis.name} is not a dim of prob")
    floor_prob = smoothing / (axis.dimension - 1)
    return prob * (1.0 - axis.dimension * floor_prob) + floor_prob


def smooth_one_hot(source: Tensor, *, label_prob: float | Tensor) -> Tensor:
    """``one_hot`` with ``label_prob`` on the label and ``(1 - label_prob) /
    (dim - 1)`` elsewhere, as RETURNN.

    :param source: sparse labels
    :param label_prob: the label's probability
    :return: float32 over the labels' dims and their ``sparse_dim``
    """
    if source.sparse_dim is None:
        raise ValueError("smooth_one_hot: source must be sparse (have a sparse_dim)")
    dim = _class_dim(source, source.sparse_dim, "smooth_one_hot")
    other = (1.0 - label_prob) / (dim.dimension - 1)
    return _one_hot(source) * (label_prob - other) + other


@takes_dims
def label_smoothed_log_prob_gradient(
    log_prob: Tensor,
    smoothing: float | Tensor,
    *,
    axis: Dim | None = None,
    exclude_labels: Sequence[int] | None = None,
) -> Tensor:
    """``log_prob`` unchanged, its gradient label-smoothed, as RETURNN: the
    gradient ``g`` over ``axis`` becomes ``g * factor - floor_prob * sum(|g|)``
    (``factor``, ``floor_prob`` of ``label_smoothing``; ``exclude_labels``,
    e.g. the blank, keep their gradient and get no floor).

    Composed on the tape, exactly RETURNN's where the gradient over ``axis``
    is non-positive (the negative of a scaled target distribution, as from
    cross entropy and CTC, and 0 on masked frames), where ``sum(|g|) =
    -sum(g)`` is linear in ``g``.

    :param log_prob: over ``axis`` (and any other dims)
    :param smoothing: the smoothing factor (0: ``log_prob`` itself)
    :param axis: the class dim; by default ``log_prob.feature_dim``
    :param exclude_labels: classes left unsmoothed
    :return: ``log_prob``'s value, with the smoothed gradient
    """
    if not isinstance(smoothing, Tensor) and smoothing == 0:
        return log_prob
    axis = _class_dim(log_prob, axis or log_prob.feature_dim, "label_smoothed_log_prob_gradient")
    excluded = list(exclude_labels or [])
    floor_prob = smoothing / (axis.dimension - len(excluded) - 1)
    factor = 1.0 - (axis.dimension - len(excluded)) * floor_prob
    if excluded:
        indices = _range_over_dim(axis)
        mask = indices != excluded[0]
        for label in excluded[1:]:
            mask = mask & (indices != label)
        factor = _where(mask, factor, 1.0)
        floor_prob = _where(mask, floor_prob, 0.0)
    held = _stop_gradient(log_prob)
    zero = log_prob - held
    # Each entry's backward gets factor * g plus floor * (the sum of g over
    # axis), from the sum of the zeros weighted by floor, added to every entry.
    return held + zero * factor + _reduce_sum(zero * floor_prob, axis=axis)
