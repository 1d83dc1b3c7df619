"""``rf.Parameter``, ``rf.Module``, ``rf.Linear``, ``rf.Embedding``, ``rf.LayerNorm``.

Models are plain Python objects.

A ``Parameter`` is a ``Tensor`` (usable in every op) that is a leaf of the autograd
tape: ``loss.backward()`` adds ``d loss / d param`` to ``param.grad``. A ``Module``
finds its parameters among its attributes (and those of sub-modules), as
PyTorch's ``nn.Module`` does; there is no registration step.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from verjus._verjus import Dim, Tensor
from verjus._verjus import rf_from_numpy as _from_numpy
from verjus._verjus import rf_gather as _gather
from verjus._verjus import rf_matmul as _matmul
from verjus._verjus import rf_reduce_mean as _reduce_mean
from verjus._verjus import rf_rsqrt as _rsqrt


class Parameter(Tensor):
    """A float32 leaf over ``dims`` (static dims), zeros until ``assign``-ed."""

    def __new__(cls, dims: Sequence[Dim]) -> Parameter:
        shape = []
        for d in dims:
            if d.dimension is None:
                raise ValueError(f"Parameter: dim {d.name} has no static size")
            shape.append(d.dimension)
        zeros = np.zeros(shape, np.float32)
        return super().__new__(cls, _from_numpy(zeros, list(dims), "float32", True, None, None))


class Module:
    """Base of models: subclasses set parameters and sub-modules as attributes
    and define ``__call__``."""

    def named_parameters(self, prefix: str = "") -> Iterator[tuple[str, Parameter]]:
        """``(dotted name, parameter)`` of this module and its sub-modules, in
        attribute order; a parameter shared by several attributes is listed once."""
        seen: set[int] = set()
        for name, value in self._walk(prefix):
            if id(value) not in seen:
                seen.add(id(value))
                yield name, value

    def _walk(self, prefix: str) -> Iterator[tuple[str, Parameter]]:
        for name, value in vars(self).items():
            if isinstance(value, Parameter):
                yield prefix + name, value
            elif isinstance(value, Module):
                yield from value._walk(f"{prefix}{name}.")

    def parameters(self) -> list[Parameter]:
        """The parameters (see ``named_parameters``)."""
        return [p for _, p in self.named_parameters()]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not define __call__")


class Linear(Module):
    """``x @ weight + bias`` over ``in_dim`` -> ``out_dim``; the weight is drawn
    Glorot-uniform from ``seed``, the bias starts at 0."""

    def __init__(self, in_dim: Dim, out_dim: Dim, *, with_bias: bool = True, seed: int = 0):
        self.in_dim, self.out_dim = in_dim, out_dim
        self.weight = Parameter([in_dim, out_dim])
        fan_in, fan_out = self.weight.shape
        limit = np.sqrt(6.0 / (fan_in + fan_out))
        rng = np.random.default_rng(seed)
        self.weight.assign(rng.uniform(-limit, limit, (fan_in, fan_out)).astype(np.float32))
        self.bias = Parameter([out_dim]) if with_bias else None

    def __call__(self, source: Tensor) -> Tensor:
        out = _matmul(source, self.weight, reduce=self.in_dim)
        return out + self.bias if self.bias is not None else out


class Embedding(Module):
    """A table over ``[in_dim, out_dim]`` (normal, std 1, from ``seed``); calling it
    on integer indices over ``in_dim`` gives their rows."""

    def __init__(self, in_dim: Dim, out_dim: Dim, *, seed: int = 0):
        self.in_dim, self.out_dim = in_dim, out_dim
        self.weight = Parameter([in_dim, out_dim])
        rng = np.random.default_rng(seed)
        self.weight.assign(rng.standard_normal(self.weight.shape).astype(np.float32))

    def __call__(self, source: Tensor) -> Tensor:
        return _gather(self.weight, indices=source, axis=self.in_dim)


class LayerNorm(Module):
    """Normalises over ``in_dim`` to mean 0 and variance 1, then scales and shifts
    (``scale`` starts at 1, ``bias`` at 0)."""

    def __init__(self, in_dim: Dim, *, eps: float = 1e-6):
        self.in_dim, self.eps = in_dim, eps
        self.scale = Parameter([in_dim])
        self.scale.assign(np.ones(self.scale.shape, np.float32))
        self.bias = Parameter([in_dim])

    def __call__(self, x: Tensor) -> Tensor:
        centered = x - _reduce_mean(x, axis=self.in_dim)
        variance = _reduce_mean(centered * centered, axis=self.in_dim)
        return centered * _rsqrt(variance + self.eps) * self.scale + self.bias
