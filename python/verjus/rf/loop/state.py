"""``State``: a recurrent value for ``Loop`` bodies (returnn_common's design).

A module that keeps recurrent state makes a ``State`` in its constructor and
``get()`` / ``assign()`` s it when called in a loop body, so its caller does
not thread the state by hand. The ``Loop`` steps it belongs to are found from
the open ``with Loop()`` blocks (``verjus.rf.loop.context``): at the end of
each step the loop keeps the old value for entries past their end, and a State
not assigned in a step keeps its value. Nested loops: an inner loop's
assignments also count as the outer step's (entries the outer loop has ended
keep their value). This is not ``rf.State``, RETURNN's nested state container.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from verjus._verjus import Dim, Tensor
from verjus._verjus import rf_full as _full
from verjus._verjus import rf_where as _where
from verjus.rf.loop.context import stepping_loops
from verjus.rf.loop.functional import _assert_same_structure, _flatten, _unflatten

__all__ = ["State"]


class State:
    """A recurrent value: ``get()`` reads it, ``assign(value)`` sets it for the
    next step (in a ``Loop`` body) or right away (outside any loop).

    :param dims: with a number (or None) as ``initial``: the initial value is
        that number (0) over ``dims``
    :param initial: the initial value: a Tensor, a nested structure of Tensors
        (e.g. an ``rf.LstmState``), a number, or None (then the State must be
        assigned before it is read, unless ``dims`` is given)
    :param dtype: the dtype of a number ``initial`` (default float32)
    :param name: names the State in errors
    """

    def __init__(
        self,
        dims: Sequence[Dim] | None = None,
        *,
        initial: Any = None,
        dtype: str | None = None,
        name: str = "state",
    ) -> None:
        self.name = name
        if _is_value(initial) or (initial is None and dims is None):
            self._value = initial
        elif isinstance(initial, (int, float)) or initial is None:
            fill = 0.0 if initial is None else float(initial)
            self._value = _full(dims=list(dims or ()), fill_value=fill, dtype=dtype)
        else:
            raise TypeError(
                f"State {name}: initial must be a Tensor (or a nested structure of them), a "
                f"number or None, got "
                f"{type(initial).__name__}"
            )

    def __repr__(self) -> str:
        return f"State({self.name}, {self._value!r})"

    def get(self) -> Any:
        """The current value: at a step's start, the value after the previous
        step (or the initial one); after ``assign`` in this step, the assigned
        one; after the loop, each entry's last value.

        :return: the value; raises RuntimeError before any value is there
        """
        if self._value is None:
            if not stepping_loops():
                raise RuntimeError(
                    f"State {self.name}: read outside any loop before it was assigned; give "
                    f"State(dims, initial=...) or assign it first"
                )
            raise RuntimeError(
                f"State {self.name}: read in a loop step before it was ever assigned; give "
                f"State(dims, initial=...)"
            )
        return self._value

    def assign(self, value: Any) -> None:
        """Sets the value: in a loop body, for the rest of this step and the
        next steps (once per step; entries past their end keep the old value);
        outside any loop, right away.

        :param value: the new value: a Tensor, or a nested structure of them of
            the same structure as the value before
        """
        if not (isinstance(value, Tensor) and isinstance(self._value, Tensor)):
            if not _is_value(value):  # (the structure checks: not for Tensor to Tensor)
                raise TypeError(
                    f"State {self.name}: assign a Tensor (or a nested structure of them), got "
                    f"{type(value).__name__}"
                )
            if self._value is not None:
                _assert_same_structure(f"State {self.name}: assign", self._value, value)
        loops = stepping_loops()
        if loops:
            self._check_dims(value)
            inner = loops[-1]
            if self in inner._assigned:
                raise RuntimeError(
                    f"State {self.name}: assigned twice in step {inner._step} of the loop "
                    f"{inner.name}; assign once per step"
                )
            inner._assigned.add(self)
            for loop in loops:
                loop._touch(self)
        self._value = value

    def _check_dims(self, value: Any) -> None:
        """In a loop, a value keeps the state's dims: the masked merge at the step's
        end would broadcast other dims into a bigger tensor. (It may add dims: an
        initial state broadcast over the batch.)"""
        if self._value is None:
            return
        for n, o in zip(_flatten(value), _flatten(self._value), strict=True):
            if isinstance(n, Tensor) and isinstance(o, Tensor) and not set(o.dims) <= set(n.dims):
                raise ValueError(
                    f"State {self.name}: assigned a value over {[d.name for d in n.dims]}, "
                    f"the state is over {[d.name for d in o.dims]}; a loop state keeps its dims"
                )

    def _commit(self, mask: Tensor | None, before: Any) -> None:
        """At a step's end: the assigned value where ``mask`` holds, else the
        value at the step's start (0 if there was none), for each Tensor."""
        if mask is None:
            return
        new = _flatten(self._value)
        old = [None] * len(new) if before is None else _flatten(before)
        merged = [
            _where(mask, n, _zero(n) if o is None else o, allow_broadcast_all_sources=True)
            if isinstance(n, Tensor)
            else n
            for n, o in zip(new, old, strict=True)
        ]
        self._value = _unflatten(self._value, merged)


def _zero(like: Tensor) -> Tensor:
    return _full(dims=[], fill_value=0.0, dtype=like.dtype)


def _is_value(value: Any) -> bool:
    """Whether ``value`` is a Tensor or a nested structure with Tensor leaves."""
    leaves = _flatten(value)
    return any(isinstance(leaf, Tensor) for leaf in leaves) and all(
        isinstance(leaf, Tensor) or leaf is None for leaf in leaves
    )
