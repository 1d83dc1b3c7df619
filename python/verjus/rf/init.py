"""Parameter initialization, after RETURNN's ``returnn.frontend.init``.

An initializer is a ``ParamInit``: called with a parameter's dims it returns a
Tensor of values, so ``rf.Parameter(dims, initial=rf.init.Glorot())`` (or
``param.initial = rf.init.Glorot()``) fills the parameter. Keeping the
initializer rather than the values is what RETURNN does: a copied parameter
draws fresh values.

The values come from ``rf.random_uniform`` / ``rf.random_normal``, i.e. from
verjus's one Philox stream, so ``rf.set_random_seed(s)`` before building a model
makes its initial values reproducible (on every device).

The fan rules are RETURNN's (and TensorFlow's): for dims ``[d]`` fan-in =
fan-out = ``d``; for ``[in, out]`` (a ``Linear`` weight) fan-in ``in``, fan-out
``out``; for three or more dims a convolution filter laid out as
``[out, in, *filter_size]`` (as ``rf.Conv*`` keeps it): fan-in ``in * prod(filter)``,
fan-out ``out * prod(filter)``.

- ``VarianceScaling(scale, mode, distribution)``: variance ``scale / n`` with
  ``n`` = fan-in, fan-out or their mean (``mode`` "fan_in" / "fan_out" /
  "fan_avg"); ``distribution`` "uniform", "truncated_normal" (= "normal",
  truncated at two standard deviations and rescaled to keep the variance) or
  "untruncated_normal";
- ``Glorot`` (scale 1, fan_avg, uniform; RETURNN's default for ``Linear``,
  ``Embedding`` and convolutions), ``He`` = ``HeNormal`` (scale 2, fan_in,
  truncated normal), ``HeUniform``;
- ``Normal(stddev, truncated=True)``: independent of the fans.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from verjus._verjus import Dim, Tensor
from verjus._verjus import rf_abs as _abs
from verjus._verjus import rf_random_normal as _random_normal
from verjus._verjus import rf_random_uniform as _random_uniform
from verjus._verjus import rf_where as _where

__all__ = [
    "Glorot",
    "He",
    "HeNormal",
    "HeUniform",
    "Normal",
    "ParamInit",
    "ParamInitType",
    "VarianceScaling",
]

# scipy.stats.truncnorm.std(a=-2, b=2): the std of a standard normal cut at +-2.
_TRUNCATED_STD = 0.87962566103423978
_MAX_REDRAWS = 64  # each redraw keeps ~4.6% of the values: 64 rounds leave none


class ParamInit:
    """An initializer: ``init(dims, dtype)`` returns the values over ``dims``."""

    def __call__(
        self,
        dims: Sequence[Dim],
        dtype: str | None = None,
        *,
        sparse_dim: Dim | None = None,
        device: str | None = None,
        out: Tensor | None = None,
    ) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} does not define __call__")


ParamInitType = Tensor | float | int | ParamInit


def _check_dtype(who: str, dtype: str | None) -> None:
    if dtype not in (None, "float32"):
        raise ValueError(f"rf.init.{who}: only float32 values can be drawn, got dtype {dtype!r}")


def _sizes(who: str, dims: Sequence[Dim]) -> list[int]:
    sizes = []
    for d in dims:
        if d.dimension is None:
            raise ValueError(f"rf.init.{who}: dim {d.name} has no static size")
        sizes.append(d.dimension)
    return sizes


def truncated_normal(dims: Sequence[Dim], *, stddev: float) -> Tensor:
    """Normal values with ``stddev`` redrawn until all lie within two ``stddev``
    (the distribution TensorFlow and RETURNN call "truncated_normal")."""
    z = _random_normal(list(dims))
    for _ in range(_MAX_REDRAWS):
        outside = _abs(z) > 2.0
        if not outside.numpy().any():  # one host check per round, at build time only
            break
        z = _where(outside, _random_normal(list(dims)), z)
    return z * stddev


def compute_fans(dims: Sequence[Dim]) -> tuple[int, int]:
    """``(fan_in, fan_out)`` of a weight over ``dims`` (see the module doc)."""
    sizes = _sizes("compute_fans", dims)
    if not sizes:
        return 1, 1
    if len(sizes) == 1:
        return sizes[0], sizes[0]
    if len(sizes) == 2:
        return sizes[0], sizes[1]
    receptive_field = math.prod(sizes[2:])
    return sizes[1] * receptive_field, sizes[0] * receptive_field


class Normal(ParamInit):
    """Normal values with ``stddev`` (truncated at two stddev by default),
    independent of the fans."""

    def __init__(self, stddev: float, *, truncated: bool = True, dtype: str | None = None):
        if stddev <= 0.0:
            raise ValueError(f"rf.init.Normal: stddev must be positive, got {stddev}")
        _check_dtype("Normal", dtype)
        self.stddev, self.truncated, self.dtype = stddev, truncated, dtype or "float32"

    def __call__(
        self,
        dims: Sequence[Dim],
        dtype: str | None = None,
        *,
        sparse_dim: Dim | None = None,
        device: str | None = None,
        out: Tensor | None = None,
    ) -> Tensor:
        _check_dtype("Normal", dtype)
        _sizes("Normal", dims)
        if self.truncated:
            return truncated_normal(dims, stddev=self.stddev)
        return _random_normal(list(dims), stddev=self.stddev)


class VarianceScaling(ParamInit):
    """Values of variance ``scale / n``, ``n`` from the fans by ``mode``
    (see the module doc); the base of ``Glorot`` and ``He``."""

    scale = 1.0
    mode = "fan_in"  # fan_in, fan_out, fan_avg
    distribution = "truncated_normal"  # normal (= truncated_normal), untruncated_normal, uniform

    def __init__(
        self,
        scale: float | None = None,
        mode: str | None = None,
        distribution: str | None = None,
        dtype: str | None = None,
    ):
        if scale is not None:
            self.scale = scale
        if mode is not None:
            self.mode = mode
        if distribution is not None:
            self.distribution = distribution
        who = type(self).__name__
        _check_dtype(who, dtype)
        self.dtype = dtype or "float32"
        if self.scale <= 0.0:
            raise ValueError(f"rf.init.{who}: scale must be positive, got {self.scale}")
        if self.mode not in ("fan_in", "fan_out", "fan_avg"):
            raise ValueError(
                f"rf.init.{who}: mode must be 'fan_in', 'fan_out' or 'fan_avg', got {self.mode!r}"
            )
        if self.distribution not in ("normal", "uniform", "truncated_normal", "untruncated_normal"):
            raise ValueError(
                f"rf.init.{who}: distribution must be 'normal', 'uniform', 'truncated_normal' "
                f"or 'untruncated_normal', got {self.distribution!r}"
            )

    def __call__(
        self,
        dims: Sequence[Dim],
        dtype: str | None = None,
        *,
        sparse_dim: Dim | None = None,
        device: str | None = None,
        out: Tensor | None = None,
    ) -> Tensor:
        _check_dtype(type(self).__name__, dtype)
        fan_in, fan_out = compute_fans(dims)
        n = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2.0}[self.mode]
        scale = self.scale / max(1.0, n)
        if self.distribution == "uniform":
            limit = math.sqrt(3.0 * scale)
            return _random_uniform(list(dims), minval=-limit, maxval=limit)
        if self.distribution == "untruncated_normal":
            return _random_normal(list(dims), stddev=math.sqrt(scale))
        return truncated_normal(dims, stddev=math.sqrt(scale) / _TRUNCATED_STD)


class Glorot(VarianceScaling):
    """Xavier Glorot: scale 1, fan_avg, uniform (limit ``sqrt(6 / (fan_in + fan_out))``)."""

    scale = 1.0
    mode = "fan_avg"
    distribution = "uniform"


class He(VarianceScaling):
    """Kaiming He: scale 2, fan_in, (truncated) normal."""

    scale = 2.0
    mode = "fan_in"
    distribution = "normal"


HeNormal = He


class HeUniform(He):
    """He with a uniform distribution (limit ``sqrt(6 / fan_in)``)."""

    distribution = "uniform"
