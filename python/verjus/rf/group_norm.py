"""Group normalisation, after RETURNN's ``returnn/frontend/normalization.py``:
``GroupNorm`` and ``GroupNormSpatial``, with RETURNN's arguments and parameter
names (``scale``, ``bias`` over ``in_dim``), so state dicts load by name.

Both split ``in_dim`` into ``num_groups`` groups of ``in_group_dim`` channels
and normalise each group to mean 0 and variance 1. ``GroupNorm`` (RETURNN's,
non-standard) takes the statistics over a group's channels only, separately at
every position; ``GroupNormSpatial`` (``torch.nn.GroupNorm``) over the group's
channels and the given spatial dims, the padding of dynamic ones masked, so a
sequence gets the same result in a batch as alone. Composed from ``moments``.
"""

from __future__ import annotations

from collections.abc import Sequence

from verjus._verjus import Dim, Tensor
from verjus.rf.module import Module
from verjus.rf.normalization import moments
from verjus.rf.parameter import Parameter

__all__ = ["GroupNorm", "GroupNormSpatial"]


class _GroupNormBase(Module):
    """The shared setup: the group dims and the ``scale`` / ``bias`` parameters."""

    def __init__(self, in_dim: Dim, *, num_groups: int | Dim, eps: float) -> None:
        super().__init__()
        who = type(self).__name__
        if not isinstance(in_dim, Dim) or in_dim.dimension is None:
            raise TypeError(f"{who}: in_dim must be a static Dim, got {in_dim!r}")
        groups = num_groups.dimension if isinstance(num_groups, Dim) else num_groups
        if not groups or in_dim.dimension % groups != 0:
            raise ValueError(
                f"{who}: in_dim {in_dim.name} of size {in_dim.dimension} is not divisible"
                f" into num_groups={groups}"
            )
        self.in_dim = in_dim
        self.num_groups = num_groups if isinstance(num_groups, Dim) else Dim(groups, name="groups")
        self.in_group_dim = in_dim.ceildiv_left(groups)
        self.eps = eps
        self.scale = Parameter([in_dim], initial=1.0)
        self.bias = Parameter([in_dim], initial=0.0)

    def _normalize(self, x: Tensor, extra_axes: list[Dim]) -> Tensor:
        """``x`` normalised per group over its channels and ``extra_axes``,
        scaled and shifted."""
        from verjus import rf

        who = type(self).__name__
        missing = [d.name for d in [self.in_dim, *extra_axes] if d not in x.dims]
        if missing:
            have = ", ".join(d.name for d in x.dims)
            raise ValueError(f"{who}: {missing} not among the input's dims [{have}]")
        groups = (self.num_groups, self.in_group_dim)
        x = rf.split_dims(x, axis=self.in_dim, dims=groups)
        mean, variance = moments(x, axis=[self.in_group_dim, *extra_axes])
        norm = (x - mean) * rf.rsqrt(variance + self.eps)
        norm, _ = rf.merge_dims(norm, dims=groups, out_dim=self.in_dim)
        return norm * self.scale + self.bias


class GroupNorm(_GroupNormBase):
    """`Group normalization <https://arxiv.org/abs/1803.08494>`__ as RETURNN's
    ``GroupNorm``: the statistics over the channels of each group only, at
    every position separately (unlike ``torch.nn.GroupNorm``; see
    ``GroupNormSpatial``).

    :param in_dim: the channel dim, divisible by ``num_groups``
    :param num_groups: the number of groups (int or Dim)
    :param eps: added to the variance
    """

    def __init__(self, in_dim: Dim, *, num_groups: int | Dim, eps: float = 1e-6) -> None:
        super().__init__(in_dim, num_groups=num_groups, eps=eps)

    def __call__(self, x: Tensor) -> Tensor:
        """``x`` normalised per group, times ``scale``, plus ``bias``.

        :return: same dims as ``x``
        """
        return self._normalize(x, [])


class GroupNormSpatial(_GroupNormBase):
    """Standard `group normalization <https://arxiv.org/abs/1803.08494>`__
    (``torch.nn.GroupNorm``), RETURNN's ``GroupNormSpatial``: the statistics
    over each group's channels and the spatial dims given to the call, per
    batch entry; padding of dynamic spatial dims is left out.

    :param in_dim: the channel dim, divisible by ``num_groups``
    :param num_groups: the number of groups (int or Dim)
    :param eps: added to the variance
    """

    def __init__(self, in_dim: Dim, *, num_groups: int | Dim, eps: float = 1e-6) -> None:
        super().__init__(in_dim, num_groups=num_groups, eps=eps)

    def __call__(self, x: Tensor, *, spatial_dim: Dim | Sequence[Dim]) -> Tensor:
        """``x`` normalised per group and batch entry over ``spatial_dim``,
        times ``scale``, plus ``bias``.

        :param x: ``{..., spatial_dim, in_dim}``
        :param spatial_dim: one dim or several, pooled into the statistics
        :return: same dims as ``x``
        """
        spatial = [spatial_dim] if isinstance(spatial_dim, Dim) else list(spatial_dim)
        return self._normalize(x, spatial)
