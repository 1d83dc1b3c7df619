"""RETURNN's ``rf.cond`` and ``rf.assert_``: control flow decided by a tensor's value.

verjus runs eagerly, so a condition is read when it is reached: ``cond``
calls one branch, and only that branch's ops are on the autograd tape (the
gradient flows through the branch taken, as in any eager framework).

RETURNN's control flow context (``rf.control_flow_ctx`` /
``rf.get_current_control_flow_ctx``) names the loop or branch a graph backend
builds ops in. On RETURNN's torch backend, as here, no loop or ``cond`` sets one:
loops run their steps eagerly and a tensor's ``control_flow_ctx`` is None. So the
current context is None unless code sets one with ``control_flow_ctx(ctx)`` for a
block (RETURNN code does, with None, around ops that must not see a loop's);
the context is kept per thread.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

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


_control_flow_ctx: contextvars.ContextVar[Any] = contextvars.ContextVar(
    "verjus_rf_control_flow_ctx", default=None
)


@contextmanager
def control_flow_ctx(ctx: Any = None) -> Iterator[Any]:
    """``with rf.control_flow_ctx(ctx):`` makes ``ctx`` (a RETURNN
    ``ControlFlowContext``, or None) the current control flow context for the block,
    and yields it (see the module docs)."""
    token = _control_flow_ctx.set(ctx)
    try:
        yield ctx
    finally:
        _control_flow_ctx.reset(token)


def get_current_control_flow_ctx() -> Any:
    """The control flow context set by the innermost ``control_flow_ctx`` block
    around this call; None outside any (verjus's loops set none, see the module
    docs)."""
    return _control_flow_ctx.get()
