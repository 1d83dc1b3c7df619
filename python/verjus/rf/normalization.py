"""Normalisation, after RETURNN's ``returnn/frontend/normalization.py``: ``moments``,
``normalize``, ``Normalize``, ``LayerNorm``, ``RMSNorm``, ``BatchNorm``, and the
functions ``layer_norm`` / ``rms_norm`` (verjus names for what the modules compute,
given the scale and bias).

``layer_norm`` over static dims (a feature dim, as ``LayerNorm`` and the
Conformer use it) is the core's fused op, one pass forward and one backward;
the rest is composed from the native ops (masked ``reduce_mean``, ``rsqrt``,
elementwise arithmetic), each of which runs on the tape in one call. The
statistics over a dynamic dim are masked, so a sequence gives the same result in
a batch as alone. ``BatchNorm`` keeps RETURNN's parameter names (``gamma``,
``beta``, ``running_mean``, ``running_variance``) and its two paths: masked
statistics (biased running variance) when the input has dynamic dims and
``use_mask`` is not False, and with ``distributed`` (then masked as ``use_mask``
says); else PyTorch's ``batch_norm`` semantics (the running variance is updated
with the unbiased batch variance).

RETURNN's behavior version 34 (config option ``rf_moments_use_fixed_masking``)
fixed the masking of ``moments`` and ``BatchNorm``: before it, ``moments``
takes its local mean over the valid frames even with ``use_mask=False`` (only
the variance follows ``use_mask``), and ``BatchNorm``'s masked path (taken
with ``use_mask`` or ``distributed``) calls ``moments`` with ``use_mask=True``.
verjus follows that where RETURNN's settings are in effect
(``verjus.rf.backend.returnn_behavior_version``), else the fixed behavior.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from verjus._verjus import Dim, Tensor
from verjus._verjus import rf_layer_norm as _fused_layer_norm
from verjus._verjus import rf_reduce_mean as _reduce_mean
from verjus._verjus import rf_rsqrt as _rsqrt
from verjus._verjus import rf_square as _square
from verjus._verjus import rf_stop_gradient as _stop_gradient
from verjus.rf._dim_args import takes_dims
from verjus.rf.backend import behavior_version_at_least, returnn_config_bool, use_mask_default
from verjus.rf.module import Module
from verjus.rf.parameter import Parameter
from verjus.rf.run_ctx import get_run_ctx

__all__ = [
    "BatchNorm",
    "LayerNorm",
    "Normalize",
    "RMSNorm",
    "batch_norm_distributed_default",
    "layer_norm",
    "moments",
    "normalize",
    "rms_norm",
]


def _dim_list(axis: Dim | Sequence[Dim]) -> list[Dim]:
    return [axis] if isinstance(axis, Dim) else list(axis)


def _check_axis(who: str, x: Tensor, axis: Dim | Sequence[Dim]) -> list[Dim]:
    axes = _dim_list(axis)
    missing = [d.name for d in axes if d not in x.dims]
    if not axes or missing:
        have = ", ".join(d.name for d in x.dims)
        raise ValueError(f"{who}: axis {missing or '[]'} not among the input's dims [{have}]")
    return axes


def _num_elements(x: Tensor, axes: list[Dim]) -> int:
    return math.prod(x.shape[list(x.dims).index(d)] for d in axes)


def _moments_use_fixed_masking() -> bool:
    """Whether ``moments`` applies ``use_mask`` to its (local) mean too and
    ``BatchNorm`` passes its ``use_mask`` on to ``moments``, as RETURNN decides
    it: its config option ``rf_moments_use_fixed_masking``, else behavior version
    34 or newer (True without RETURNN's settings)."""
    value = returnn_config_bool("rf_moments_use_fixed_masking")
    if value is not None:
        return value
    return behavior_version_at_least(34)


def batch_norm_distributed_default() -> bool:
    """RETURNN's default of ``BatchNorm``'s ``distributed`` (statistics over all
    workers' batches): its config option ``rf_batch_norm_distributed`` where
    RETURNN's settings are in effect, else False."""
    return bool(returnn_config_bool("rf_batch_norm_distributed"))


@takes_dims
def moments(
    x: Tensor,
    axis: Dim | Sequence[Dim],
    *,
    use_mask: bool = True,
    correction: float = 0,
    distributed: bool = False,
    compute_dtype: str | None = None,
) -> tuple[Tensor, Tensor]:
    """Mean and variance of ``x`` over ``axis`` (padding of dynamic dims masked
    with ``use_mask``).

    :param x: input
    :param axis: the dim(s) to reduce over
    :param use_mask: whether to leave the padding of dynamic dims out; the mean
        follows it only from RETURNN's behavior version 34 on (or with its config
        option ``rf_moments_use_fixed_masking``) or with ``distributed``, before
        that the mean is always masked (see the module's docstring)
    :param correction: the variance is ``sum((x - mean)**2) / (n - correction)``;
        0 (default) is the biased estimate, 1 Bessel's correction (only without
        dynamic dims among ``axis``, where ``n`` is one number)
    :param distributed: statistics over all workers' batches (RETURNN's, with a
        process group); verjus runs one worker, whose statistics these are
    :param compute_dtype: the dtype of the statistics: None or ``"float32"``
        (verjus's float dtype)
    :return: ``(mean, variance)``, each ``x``'s dims without ``axis``
    """
    if compute_dtype not in (None, "float32"):
        raise ValueError(f"moments: compute_dtype must be None or 'float32', got {compute_dtype!r}")
    axes = _check_axis("moments", x, axis)
    # distributed: one worker, so the local statistics are the global ones; RETURNN's
    # distributed path masks the mean by use_mask in every version.
    mean_use_mask = use_mask if distributed or _moments_use_fixed_masking() else True
    mean, variance = _statistics(x, axes, use_mask=use_mask, mean_use_mask=mean_use_mask)
    if correction != 0:
        if use_mask and any(d.is_dynamic() for d in axes):
            raise ValueError("moments: correction over dynamic dims is not supported")
        n = _num_elements(x, axes)
        variance = variance * (n / (n - correction))
    return mean, variance


def _statistics(
    x: Tensor, axes: list[Dim], *, use_mask: bool, mean_use_mask: bool
) -> tuple[Tensor, Tensor]:
    """The biased mean and variance of ``x`` over ``axes``, the mean masked as
    ``mean_use_mask`` says, the variance around it as ``use_mask``."""
    mean = _reduce_mean(x, axis=axes, use_mask=mean_use_mask)
    variance = _reduce_mean(_square(x - _stop_gradient(mean)), axis=axes, use_mask=use_mask)
    return mean, variance


@takes_dims
def normalize(a: Tensor, *, axis: Dim | Sequence[Dim], epsilon: float = 1e-6) -> Tensor:
    """``(a - mean) / sqrt(variance + epsilon)`` over ``axis``.

    :param a: input
    :param axis: the dim(s) the mean and variance are taken over
    :param epsilon: added to the variance
    :return: ``a`` normalised, same dims
    """
    mean, variance = moments(a, axis=axis)
    return (a - mean) * _rsqrt(variance + epsilon)


@takes_dims
def layer_norm(
    x: Tensor,
    *,
    axis: Dim | Sequence[Dim],
    eps: float = 1e-6,
    scale: Tensor | None = None,
    bias: Tensor | None = None,
) -> Tensor:
    """Layer normalisation (what ``LayerNorm`` computes): ``x`` normalised over
    ``axis`` to mean 0 and variance 1, times ``scale``, plus ``bias``.

    :param x: input
    :param axis: the dim(s) to normalise over (usually the feature dim)
    :param eps: added to the variance
    :param scale: optional, over (some of) ``x``'s dims
    :param bias: optional, over (some of) ``x``'s dims
    :return: same dims as ``x``
    """
    axes = _check_axis("layer_norm", x, axis)
    if _fused_layer_norm_applies(x, axes, scale, bias):
        return _fused_layer_norm(x, axis=axes, eps=eps, scale=scale, bias=bias)
    mean, variance = moments(x, axis=axes)
    out = (x - mean) * _rsqrt(variance + eps)
    if scale is not None:
        out = out * scale
    if bias is not None:
        out = out + bias
    return out


def _fused_layer_norm_applies(
    x: Tensor, axes: list[Dim], scale: Tensor | None, bias: Tensor | None
) -> bool:
    """Whether ``layer_norm`` runs as the core's fused op: float32 over distinct
    static dims, with a scale and bias (if any) over exactly those dims."""
    if x.dtype != "float32" or len(set(axes)) != len(axes):
        return False
    if any(d.is_dynamic() or d.dimension is None for d in axes):
        return False
    over_axes = [t for t in (scale, bias) if t is not None]
    return all(
        t.dtype == "float32" and len(t.dims) == len(axes) and set(t.dims) == set(axes)
        for t in over_axes
    )


@takes_dims
def rms_norm(
    x: Tensor,
    *,
    axis: Dim | Sequence[Dim],
    eps: float = 1e-6,
    scale: Tensor | None = None,
    bias: Tensor | None = None,
) -> Tensor:
    """Root-mean-square normalisation (what ``RMSNorm`` computes):
    ``x / sqrt(mean(x**2) + eps)`` over ``axis`` (no mean subtracted), times
    ``scale``, plus ``bias``.

    :param x: input
    :param axis: the dim(s) to normalise over
    :param eps: added to the mean square
    :param scale: optional, over (some of) ``x``'s dims
    :param bias: optional, over (some of) ``x``'s dims
    :return: same dims as ``x``
    """
    axes = _check_axis("rms_norm", x, axis)
    out = x * _rsqrt(_reduce_mean(_square(x), axis=axes) + eps)
    if scale is not None:
        out = out * scale
    if bias is not None:
        out = out + bias
    return out


class _ScaleBiasNorm(Module):
    """``scale`` (starting at 1) and optional ``bias`` (at 0) over ``in_dim``."""

    def __init__(self, in_dim: Dim | Sequence[Dim], *, eps: float, with_bias: bool):
        self.in_dim = in_dim
        self.eps = eps
        self.scale = Parameter(_dim_list(in_dim), initial=1.0)
        self.bias = Parameter(self.scale.dims, initial=0.0) if with_bias else None


class LayerNorm(_ScaleBiasNorm):
    """`Layer normalization <https://arxiv.org/abs/1607.06450>`__ over ``in_dim``
    (RETURNN's options and parameters ``scale``, ``bias``).

    :param in_dim: the dim(s) to normalise over
    :param eps: added to the variance
    :param with_bias: whether to add the learnt ``bias``
    """

    def __init__(self, in_dim: Dim | Sequence[Dim], *, eps: float = 1e-6, with_bias: bool = True):
        super().__init__(in_dim, eps=eps, with_bias=with_bias)

    def __call__(self, x: Tensor) -> Tensor:
        """``x`` normalised over ``in_dim``, scaled and shifted."""
        return layer_norm(x, axis=self.in_dim, eps=self.eps, scale=self.scale, bias=self.bias)


class RMSNorm(_ScaleBiasNorm):
    """`RMSNorm <https://arxiv.org/abs/1910.07467>`__ over ``in_dim``: no mean
    subtracted; the bias is off by default (RETURNN's options and parameters).

    :param in_dim: the dim(s) to normalise over
    :param eps: added to the mean square
    :param with_bias: whether to add a learnt ``bias``
    """

    def __init__(self, in_dim: Dim | Sequence[Dim], *, eps: float = 1e-6, with_bias: bool = False):
        super().__init__(in_dim, eps=eps, with_bias=with_bias)

    def __call__(self, x: Tensor) -> Tensor:
        """``x`` RMS-normalised over ``in_dim``, scaled (and shifted)."""
        return rms_norm(x, axis=self.in_dim, eps=self.eps, scale=self.scale, bias=self.bias)


class Normalize(Module):
    """``normalize`` with a learnt ``scale`` and ``bias`` over ``param_dims``.

    :param param_dims: the dims of ``scale`` and ``bias``
    :param epsilon: added to the variance
    :param scale: whether to have ``scale``
    :param bias: whether to have ``bias``
    """

    def __init__(
        self,
        *,
        param_dims: Dim | Sequence[Dim],
        epsilon: float = 1e-6,
        scale: bool = True,
        bias: bool = True,
    ):
        self.epsilon = epsilon
        dims = _dim_list(param_dims)
        self.scale = Parameter(dims, initial=1.0) if scale else None
        self.bias = Parameter(dims, initial=0.0) if bias else None

    def __call__(self, a: Tensor, *, axis: Dim | Sequence[Dim]) -> Tensor:
        """``a`` normalised over ``axis``, scaled and shifted."""
        norm = normalize(a, axis=axis, epsilon=self.epsilon)
        if self.scale is not None:
            norm = self.scale * norm
        if self.bias is not None:
            norm = norm + self.bias
        return norm


class BatchNorm(Module):
    """`Batch normalization <https://arxiv.org/abs/1502.03167>`__: statistics over
    every dim but ``in_dim``; in training those of the batch (and the running
    statistics updated), in evaluation the running ones (RETURNN's options and
    parameters ``gamma``, ``beta``, ``running_mean``, ``running_variance``).

    :param in_dim: the feature dim
    :param affine: whether to learn ``gamma`` (starting at 1) and ``beta`` (at 0)
    :param momentum: ``running = (1 - momentum) * running + momentum * batch``
    :param eps: added to the variance
    :param track_running_stats: keep running statistics for evaluation; if False
        the batch's statistics are used in evaluation too
    :param use_mask: leave the padding of dynamic dims out of the statistics
        (None: as ``rf.use_mask_default(default=True, func_name="BatchNorm")``,
        RETURNN's default: True unless RETURNN's config options say otherwise);
        False gives PyTorch's statistics over every frame, padding included
        (but before RETURNN's behavior version 34, with ``distributed``, the masked
        ones, see the module's docstring)
    :param distributed: statistics over all workers' batches (RETURNN's; None: its
        config option ``rf_batch_norm_distributed``, else False); verjus runs one
        worker, so they are its own, but as in RETURNN this takes the masked path
        (biased running variance, masking as ``use_mask`` and the version say)
    """

    def __init__(
        self,
        in_dim: Dim,
        *,
        affine: bool = True,
        momentum: float = 0.1,
        eps: float = 1e-3,
        track_running_stats: bool = True,
        use_mask: bool | None = None,
        distributed: bool | None = None,
    ):
        if not isinstance(in_dim, Dim):
            raise TypeError(f"BatchNorm: in_dim must be a Dim, got {type(in_dim).__name__}")
        self.in_dim = in_dim
        self.distributed = (
            distributed if distributed is not None else batch_norm_distributed_default()
        )
        self.use_mask = use_mask
        self.momentum = momentum
        self.eps = eps
        self.running_mean: Parameter | None = None
        self.running_variance: Parameter | None = None
        if track_running_stats:
            self.running_mean = Parameter([in_dim], auxiliary=True, trainable=False, initial=0.0)
            self.running_variance = Parameter(
                [in_dim], auxiliary=True, trainable=False, initial=1.0
            )
        self.affine = affine
        self.gamma: Parameter | None = None
        self.beta: Parameter | None = None
        if affine:
            self.gamma = Parameter([in_dim], initial=1.0)
            self.beta = Parameter([in_dim], initial=0.0)

    def __call__(self, source: Tensor) -> Tensor:
        """``source`` normalised per ``in_dim`` entry, scaled by ``gamma``,
        shifted by ``beta``."""
        if self.in_dim not in source.dims:
            have = ", ".join(d.name for d in source.dims)
            raise ValueError(
                f"BatchNorm: in_dim {self.in_dim.name} not in the input's dims [{have}]"
            )
        axes = [d for d in source.dims if d != self.in_dim]
        use_mask = False  # not needed without dynamic dims (PyTorch's path)
        if any(d.is_dynamic() for d in axes):
            use_mask = self.use_mask
            if use_mask is None:
                use_mask = use_mask_default(default=True, func_name="BatchNorm")
            use_mask = bool(use_mask)
        # RETURNN's masked path (with use_mask, or distributed): moments with use_mask
        # (always masked before behavior version 34) and the biased running variance;
        # else PyTorch's batch_norm: unmasked, the unbiased running variance.
        generic = use_mask or bool(self.distributed)
        if generic and not _moments_use_fixed_masking():
            use_mask = True
        train = get_run_ctx().is_train_flag_enabled(func=BatchNorm.__call__)
        if self.running_mean is None or train:
            if generic:
                mean, variance = moments(
                    source, axis=axes, use_mask=use_mask, distributed=bool(self.distributed)
                )
            else:  # RETURNN's backend batch_norm: no moments, so whatever the version
                mean, variance = _statistics(source, axes, use_mask=False, mean_use_mask=False)
            if self.running_mean is not None:
                n = None if generic else _num_elements(source, axes)
                self._update_running(mean, variance, n)
        else:
            mean, variance = self.running_mean, self.running_variance
        out = (source - mean) * _rsqrt(variance + self.eps)
        if self.gamma is not None:
            out = out * self.gamma
        if self.beta is not None:
            out = out + self.beta
        return out

    def _update_running(self, mean: Tensor, variance: Tensor, n: int | None) -> None:
        """Moves the running statistics towards the batch's; a batch without any
        frame (NaN statistics) leaves them. Unmasked, the variance is taken
        unbiased (``n / (n - 1)``), as PyTorch's ``batch_norm``."""
        assert self.running_mean is not None
        assert self.running_variance is not None
        batch_mean = mean.numpy()
        batch_var = variance.numpy()
        if n is not None and n > 1:
            batch_var = batch_var * (n / (n - 1))
        if not (np.isfinite(batch_mean).all() and np.isfinite(batch_var).all()):
            return
        for running, batch in (
            (self.running_mean, batch_mean),
            (self.running_variance, batch_var),
        ):
            old = running.numpy()
            running.assign(old + (batch - old) * np.float32(self.momentum))
