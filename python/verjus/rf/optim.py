"""Optimizers for RF parameters: ``SGD``, ``Adam``, ``AdamW``.

The updates run in Rust (the fused update ops every backend has); these
classes hold the optimizer and its state. A step: ``opt.zero_grad()``,
``loss.backward()``, ``opt.step()``. Parameters marked ``trainable=False``
(RETURNN's flag on ``rf.Parameter``) are left out, as RETURNN's engine does.
"""

from __future__ import annotations

from collections.abc import Iterable

from verjus._verjus import RfOptimizer, Tensor


def _trainable(params: Iterable[Tensor]) -> list[Tensor]:
    return [p for p in params if getattr(p, "trainable", None) is not False]


class _Optimizer:
    _opt: RfOptimizer

    def step(self) -> None:
        """One update of every parameter that has a gradient."""
        self._opt.step()

    def zero_grad(self) -> None:
        """Clears every parameter's gradient."""
        self._opt.zero_grad()

    @property
    def steps(self) -> int:
        """The number of steps taken."""
        return self._opt.steps


class SGD(_Optimizer):
    """SGD with optional (Nesterov) momentum and L2 weight decay (PyTorch's rule)."""

    def __init__(
        self,
        params: Iterable[Tensor],
        *,
        lr: float,
        momentum: float = 0.0,
        nesterov: bool = False,
        weight_decay: float = 0.0,
    ) -> None:
        self._opt = RfOptimizer.sgd(
            _trainable(params),
            lr=lr,
            momentum=momentum,
            nesterov=nesterov,
            weight_decay=weight_decay,
        )


class Adam(_Optimizer):
    """Adam with L2 weight decay."""

    _decoupled = False

    def __init__(
        self,
        params: Iterable[Tensor],
        *,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
    ) -> None:
        self._opt = RfOptimizer.adam(
            _trainable(params),
            lr=lr,
            betas=betas,
            eps=eps,
            weight_decay=weight_decay,
            decoupled=self._decoupled,
        )


class AdamW(Adam):
    """Adam with decoupled weight decay."""

    _decoupled = True
