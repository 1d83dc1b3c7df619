"""SpecAugment (Park et al. 2019, https://arxiv.org/abs/1904.08779), after
RETURNN's ``rf.audio.specaugment``, ``random_mask`` and ``mask``: in training,
random spans of time frames and of feature channels are set to ``mask_value``,
more of them as the training step passes RETURNN's ``steps``.

The mask positions are data, not computation: they are drawn from the rf
random stream (``rf.random_uniform``, so ``rf.set_random_seed`` makes them
reproducible) and laid out on the host as RETURNN's eager backend lays them
(distinct span starts among each sequence's valid frames, ranked by random
scores; span lengths uniform in ``[1, max_dims]``; spans cut at the sequence's
end); the masking itself is one ``rf.where`` on the tape.

Differences from RETURNN: ``max_dims`` / ``max_consecutive_spatial_dims`` are
ints.

``num_masks_per_seq`` defaults as in RETURNN: True, unless RETURNN's settings
are in effect (``verjus.rf.backend.returnn_behavior_version``) with its option
``rf_specaugment_num_masks_per_seq`` False or, without it, a behavior version
below 28 (then the number of time masks follows the longest sequence of the
batch).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import numpy as np

from verjus._verjus import Dim, Tensor
from verjus.rf.backend import behavior_version_at_least, returnn_config_bool

__all__ = ["mask", "random_mask", "specaugment"]


def _uniform(shape: tuple[int, ...]) -> np.ndarray:
    """Uniform ``[0, 1)`` values of ``shape`` from the rf random stream."""
    from verjus import rf

    dims = [Dim(n, name=f"rand{i}") for i, n in enumerate(shape)]
    return rf.random_uniform(dims, minval=0.0, maxval=1.0).numpy().astype(np.float64)


def _shape(x: Tensor, dims: Sequence[Dim]) -> tuple[int, ...]:
    """The sizes of ``dims`` (all dims of ``x``) in ``x``."""
    return tuple(x.shape[list(x.dims).index(d)] for d in dims)


def _entries(who: str, value: int | Tensor, batch_dims: Sequence[Dim], shape: tuple) -> np.ndarray:
    """``value`` (an int, or a Tensor over some of ``batch_dims``) as an int
    array of ``shape`` (the sizes of ``batch_dims``)."""
    if not isinstance(value, Tensor):
        return np.full(shape, int(value), np.int64)
    extra = [d.name for d in value.dims if d not in batch_dims]
    if extra:
        raise ValueError(
            f"{who}: a Tensor argument over {[d.name for d in value.dims]} has dims {extra}"
            f" beyond the batch dims {[d.name for d in batch_dims]}"
        )
    ordered = [d for d in batch_dims if d in value.dims]
    array = value.copy_transpose(ordered).numpy() if ordered else value.numpy()
    array = array.reshape(
        [n if d in value.dims else 1 for d, n in zip(batch_dims, shape, strict=True)]
    )
    return np.broadcast_to(array, shape).astype(np.int64)


def _lengths(who: str, dim: Dim, batch_dims: Sequence[Dim], shape: tuple) -> np.ndarray:
    """The length of ``dim`` per entry of ``batch_dims`` (of ``shape``)."""
    lengths = dim.dyn_size_ext
    return _entries(who, dim.size if lengths is None else lengths, batch_dims, shape)


def _batch_dims(who: str, x: Tensor, mask_axis: Dim, broadcast: Collection[Dim]) -> list[Dim]:
    missing = [d.name for d in [mask_axis, *broadcast] if d not in x.dims]
    if missing:
        raise ValueError(f"{who}: {missing} not among x's dims {[d.name for d in x.dims]}")
    return [d for d in x.dims if d != mask_axis and d not in broadcast]


def _apply(x: Tensor, cond: np.ndarray, dims: list[Dim], mask_value: float | Tensor) -> Tensor:
    """``mask_value`` where ``cond`` (over ``dims``), else ``x``; ``x``'s dim order."""
    from verjus import rf

    out = rf.where(rf.convert_to_tensor(cond, dims=dims, dtype="bool"), mask_value, x)
    return out.copy_transpose(list(x.dims))


def _spans(starts: np.ndarray, max_amount: int, length: np.ndarray, size: int) -> np.ndarray:
    """Whether each position of a dim of ``size`` lies in a span: from each of
    ``starts`` a random ``1 .. max_amount`` long, cut at ``length`` (broadcast
    to ``starts``)."""
    amount = 1 + np.floor(_uniform(starts.shape) * max_amount).astype(np.int64)
    ends = np.minimum(starts + amount, length)
    pos = np.arange(size)
    return (pos >= starts[..., None]) & (pos < ends[..., None])


def _random_mask(
    x: Tensor,
    mask_axis: Dim,
    batch_dims: list[Dim],
    min_num: np.ndarray,
    max_num: np.ndarray,
    max_dims: int,
    mask_value: float | Tensor,
) -> Tensor:
    """``random_mask`` with the numbers of spans given per batch entry
    (arrays over ``batch_dims``)."""
    size = mask_axis.size
    length = _lengths("random_mask", mask_axis, batch_dims, min_num.shape)
    num = min_num + np.floor(_uniform(min_num.shape) * (max_num - min_num + 1)).astype(np.int64)
    num = np.clip(num, 0, length)
    k = int(num.max(initial=0))
    if k == 0 or max_dims <= 0:
        return x
    scores = _uniform((*min_num.shape, size))
    scores[np.arange(size) >= length[..., None]] = -1.0  # padding is never a start
    starts = np.argsort(-scores, axis=-1, kind="stable")[..., :k]
    inside = _spans(starts, max_dims, length[..., None], size)
    inside &= (np.arange(k) < num[..., None])[..., None]
    return _apply(x, inside.any(axis=-2), [*batch_dims, mask_axis], mask_value)


def random_mask(
    x: Tensor,
    *,
    mask_axis: Dim,
    broadcast_axis: Dim | Collection[Dim],
    min_num: int | Tensor,
    max_num: int | Tensor,
    max_dims: int,
    mask_value: float | Tensor = 0.0,
    max_num_bound: int | None = None,
) -> Tensor:
    """Masks a random number (``min_num .. max_num``, per batch entry) of
    spans along ``mask_axis``, each ``1 .. max_dims`` long, starting at
    distinct valid positions; the same spans for all of ``broadcast_axis``.

    :param x: e.g. ``(batch, time, feature)``
    :param mask_axis: the dim masked along
    :param broadcast_axis: dim(s) the mask is shared over; other dims are batch dims
    :param min_num: fewest spans (int, or a Tensor over batch dims)
    :param max_num: most spans, inclusive (int, or a Tensor over batch dims)
    :param max_dims: the longest span, inclusive
    :param mask_value: the value put in the spans
    :param max_num_bound: accepted for RETURNN's signature (for static
        tracing there; unused)
    :return: ``x`` masked, same dims
    """
    del max_num_bound
    broadcast = [broadcast_axis] if isinstance(broadcast_axis, Dim) else list(broadcast_axis)
    batch_dims = _batch_dims("random_mask", x, mask_axis, broadcast)
    shape = _shape(x, batch_dims)
    lo = _entries("random_mask", min_num, batch_dims, shape)
    hi = _entries("random_mask", max_num, batch_dims, shape)
    return _random_mask(x, mask_axis, batch_dims, lo, hi, int(max_dims), mask_value)


def mask(
    x: Tensor,
    *,
    mask_axis: Dim,
    pos: Tensor,
    max_amount: int,
    mask_value: float | Tensor = 0.0,
) -> Tensor:
    """Masks one span per entry of ``pos``: from ``pos`` along ``mask_axis``,
    a random ``1 .. max_amount`` long, cut at the sequence's end.

    :param x: e.g. ``(batch, time, feature)``; dims not in ``pos`` nor
        ``mask_axis`` share the span
    :param mask_axis: the dim masked along
    :param pos: int, the span starts, over batch dims of ``x``
    :param max_amount: the longest span, inclusive
    :param mask_value: the value put in the span
    :return: ``x`` masked, same dims
    """
    batch_dims = list(pos.dims)
    missing = [d.name for d in [mask_axis, *batch_dims] if d not in x.dims]
    if missing or mask_axis in batch_dims:
        raise ValueError(
            f"mask: x {[d.name for d in x.dims]} must have mask_axis {mask_axis.name} and the"
            f" dims of pos {[d.name for d in batch_dims]} (without mask_axis)"
        )
    shape = _shape(x, batch_dims)
    starts = _entries("mask", pos, batch_dims, shape)
    length = _lengths("mask", mask_axis, batch_dims, shape)
    inside = _spans(starts, int(max_amount), length, mask_axis.size)
    return _apply(x, inside, [*batch_dims, mask_axis], mask_value)


def _num_masks_per_seq_default() -> bool:
    """RETURNN's default of ``specaugment``'s ``num_masks_per_seq``: its config
    option ``rf_specaugment_num_masks_per_seq``, else behavior version >= 28
    (True without RETURNN's settings). Before, a short sequence batched with a
    long one got as many time masks as the long one (up to its own length)."""
    value = returnn_config_bool("rf_specaugment_num_masks_per_seq")
    return value if value is not None else behavior_version_at_least(28)


def specaugment(
    x: Tensor,
    *,
    spatial_dim: Dim,
    feature_dim: Dim | None = None,
    global_train_step_dependent: bool = True,
    only_on_train: bool = True,
    max_consecutive_spatial_dims: int = 20,
    max_consecutive_feature_dims: int | None = None,
    num_spatial_mask_factor: int = 100,
    num_masks_per_seq: bool | None = None,
    steps: tuple[int, int, int] = (0, 1000, 2000),
) -> Tensor:
    """SpecAugment as RETURNN's: time masks (up to
    ``max_consecutive_spatial_dims`` frames each, about one per
    ``num_spatial_mask_factor`` frames) and feature masks (up to
    ``max_consecutive_feature_dims`` channels each), shared over the other of
    the two dims; more masks after each of ``steps`` (of the train step).

    :param x: ``{..., spatial_dim, feature_dim}``
    :param spatial_dim: the time dim
    :param feature_dim: the feature dim (default ``x.feature_dim``)
    :param global_train_step_dependent: grow the numbers of masks with the step
    :param only_on_train: only while ``get_run_ctx().train_flag`` (else always)
    :param max_consecutive_spatial_dims: the longest time mask
    :param max_consecutive_feature_dims: the longest feature mask (default a fifth
        of ``feature_dim``)
    :param num_spatial_mask_factor: frames per time mask (0: no time masks)
    :param num_masks_per_seq: the number of time masks follows each sequence's
        own length, else the longest (None: ``_num_masks_per_seq_default()``)
    :param steps: the train steps at which the numbers of masks grow
    :return: ``x`` masked (or ``x`` itself outside training), same dims
    """
    from verjus.rf.run_ctx import get_run_ctx

    ctx = get_run_ctx()
    if only_on_train and not ctx.train_flag:
        return x
    feature_dim = feature_dim or x.feature_dim
    if feature_dim is None:
        raise ValueError("specaugment: x has no feature_dim; give feature_dim")
    batch_dims = _batch_dims("specaugment", x, spatial_dim, [feature_dim])
    if max_consecutive_feature_dims is None:
        max_consecutive_feature_dims = feature_dim.dimension // 5
    step0 = step1 = step2 = 1
    if global_train_step_dependent:
        step = ctx.step
        step = int(step.numpy()) if isinstance(step, Tensor) else int(step)
        step0, step1, step2 = (int(step >= s) for s in steps)
    shape = _shape(x, batch_dims)
    if num_masks_per_seq is None:
        num_masks_per_seq = _num_masks_per_seq_default()
    if not num_masks_per_seq:
        spatial_len = np.full(shape, spatial_dim.size, np.int64)
    else:
        spatial_len = _lengths("specaugment", spatial_dim, batch_dims, shape)
    if num_spatial_mask_factor > 0 and max_consecutive_spatial_dims > 0:
        lo = np.minimum(step1 + step2, spatial_len)
        per = np.maximum(spatial_len // num_spatial_mask_factor, 2)
        hi = np.minimum(per * (step0 + step1 + 2 * step2), spatial_len)
        x = _random_mask(x, spatial_dim, batch_dims, lo, hi, max_consecutive_spatial_dims, 0.0)
    if max_consecutive_feature_dims > 0:
        lo = np.full(shape, step1 + step2, np.int64)
        hi = np.full(shape, 2 * step0 + step1 + 2 * step2, np.int64)
        x = _random_mask(x, feature_dim, batch_dims, lo, hi, max_consecutive_feature_dims, 0.0)
    return x
