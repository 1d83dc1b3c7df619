"""RETURNN's ``rf.cond`` and ``rf.assert_``: control flow decided by a tensor's value.

verjus runs eagerly, so a condition is read when it is reached: ``cond``
calls one branch, and only that branch's ops are on the autograd tape (the
gradient flows through the branch taken, as in any eager framework).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from verjus._verjus import Tensor

T = TypeVar("T")


def _truth(what: str, pred: bool | Tensor) -> bool:
    if isinstance(pred, bool):
        return pred
    if not isinstance(pred, Tensor):
        kind = type(pred).__name__
        raise TypeError(f"{what}: the condition must be a bool or a scalar bool Tensor, got {kind}")
    if pred.dims or pred.dtype != "bool":
        raise ValueError(f"{what}: the condition must be a scalar bool Tensor, got {pred!r}")
    return bool(pred)


def cond(pred: bool | Tensor, true_fn: Callable[[], T], false_fn: Callable[[], T]) -> T:
    """``true_fn()`` if ``pred`` (a bool or a scalar bool Tensor) is true, else ``false_fn()``."""
    return true_fn() if _truth("cond", pred) else false_fn()


def assert_(condition: bool | Tensor, message: str, *, stop: bool = True) -> None:
    """Raises AssertionError with ``message`` when ``condition`` (a bool, or a bool
    Tensor, all of whose values must hold) is false; ``stop=False`` prints instead."""
    if isinstance(condition, Tensor) and condition.dims:
        import verjus.rf as rf

        condition = rf.reduce_all(condition, axis=list(condition.dims))
    if not _truth("assert_", condition):
        if stop:
            raise AssertionError(message)
        print(f"assert_ failed: {message}")
