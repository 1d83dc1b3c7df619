"""RETURNN's encoder interfaces (``returnn/frontend/encoder/base.py``): what a
model may expect of an encoder. A frame-wise encoder keeps the sequence's dim;
a downsampling one (a Conformer's frontend, the Conformer itself) returns a new,
shorter spatial dim with the output.
"""

from __future__ import annotations

from verjus._verjus import Dim, Tensor
from verjus.rf.module import Module

__all__ = ["IEncoder", "ISeqDownsamplingEncoder", "ISeqFramewiseEncoder"]


class IEncoder(Module):
    """An encoder ``x -> y`` with feature dim ``out_dim``."""

    out_dim: Dim

    def __call__(self, source: Tensor) -> Tensor:
        """The encoding of ``source``."""
        raise NotImplementedError


class ISeqFramewiseEncoder(Module):
    """An encoder over a sequence that keeps its length."""

    out_dim: Dim

    def __call__(self, source: Tensor, *, spatial_dim: Dim) -> Tensor:
        """The encoding of ``source`` over ``spatial_dim``."""
        raise NotImplementedError


class ISeqDownsamplingEncoder(Module):
    """An encoder over a sequence that shortens it, by about
    ``downsample_factor``."""

    out_dim: Dim
    downsample_factor: int | float

    def __call__(self, source: Tensor, *, in_spatial_dim: Dim) -> tuple[Tensor, Dim]:
        """The encoding of ``source`` and its new spatial dim."""
        raise NotImplementedError
