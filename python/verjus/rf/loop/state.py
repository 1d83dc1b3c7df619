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

from verjus._verjus import Dim, Tensor
from verjus._verjus import rf_full as _full
from verjus._verjus import rf_where as _where
from verjus.rf.loop.context import stepping_loops

__all__ = ["State"]


class State:
    """A recurrent value: ``get()`` reads it, ``assign(value)`` sets it for the
    next step (in a ``Loop`` body) or right away (outside any loop).

    :param dims: with a number (or None) as ``initial``: the initial value is
        that number (0) over ``dims``
    :param initial: the initial value: a Tensor, a number, or None (then the
        State must be assigned before it is read, unless ``dims`` is given)
    :param dtype: the dtype of a number ``initial`` (default float32)
    :param name: names the State in errors
    """

    def __init__(
        self,
        dims: Sequence[Dim] | None = None,
        *,
        initial: Tensor | float | None = None,
        dtype: str | None = None,
        name: str = "state",
    ) -> None:
        self.name = name
        if isinstance(initial, Tensor) or (initial is None and dims is None):
            self._value = initial
        elif isinstance(initial, (int, float)) or initial is None:
            fill = 0.0 if initial is None else float(initial)
            self._value = _full(dims=list(dims or ()), fill_value=fill, dtype=dtype)
        else:
            raise TypeError(
                f"State {name}: initial must be a Tensor, a number or None, got "
                f"{type(initial).__name__}"
            )

    def __repr__(self) -> str:
        return f"State({self.name}, {self._value!r})"

    def get(self) -> Tensor:
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

    def assign(self, value: Tensor) -> None:
        """Sets the value: in a loop body, for the rest of this step and the
        next steps (once per step; entries past their end keep the old value);
        outside any loop, right away.

        :param value: the new value (a Tensor)
        """
        if not isinstance(value, Tensor):
            raise TypeError(f"State {self.name}: assign a Tensor, got {type(value).__name__}")
        loops = stepping_loops()
        if loops:
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

    def _commit(self, mask: Tensor | None, before: Tensor | None) -> None:
        """At a step's end: the assigned value where ``mask`` holds, else the
        value at the step's start (0 if there was none)."""
        if mask is None:
            return
        old = _full(dims=[], fill_value=0.0, dtype=self._value.dtype) if before is None else before
        self._value = _where(mask, self._value, old, allow_broadcast_all_sources=True)
