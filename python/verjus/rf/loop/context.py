"""``Loop``: a recurrent loop written inline, after returnn_common's Loop design.

The body runs eagerly, once per step, in a ``for`` over the loop inside its
``with`` block::

    with rf.loop.Loop() as loop:        # or Loop(axis=time_dim)
        for _ in loop:                  # one pass of the body per step
            x_t = loop.unstack(x)       # the frame of x at this step
            h = state.get()             # rf.loop.State: recurrent values
            ...
            state.assign(h_new)
            ys = loop.stack(y_t)        # frames -> one tensor after the loop
            loop.end(y_t == eos, include_eos=True)  # (a loop without axis)
    out = ys.get()                      # y over loop.axis, 0 past each length

Why this protocol: an eager framework has to run the body Python code once
per step, and a ``for`` statement is the plain Python way to repeat a block;
the ``with`` block marks the loop's extent, so ``State`` objects (in any module
called from the body) find the loops they run in without being passed. Nothing
is traced or replayed, so any Python (host reads, prints, branches) works in
the body, and every op lands on the autograd tape: gradients flow back through
all steps.

``stack`` and ``last`` return a ``LoopOutput`` (the same object in every step,
matched by call order within the step) whose ``get()`` gives the tensor after
the loop, when all frames and each entry's length are known. A ``State`` keeps
its value in a step where it is not assigned, and an entry past its end keeps
its State values (and its ``last``) frozen; after the loop a State holds each
entry's last value.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from verjus._verjus import Dim, Tensor
from verjus._verjus import compare as _compare
from verjus._verjus import rf_cast as _cast
from verjus._verjus import rf_from_numpy as _from_numpy
from verjus._verjus import rf_full as _full
from verjus._verjus import rf_full_like as _full_like
from verjus._verjus import rf_where as _where
from verjus.rf.array_ import gather
from verjus.rf.loop.functional import check_max_seq_len, read_max_seq_len
from verjus.rf.tensor_array import TensorArray, masked_stack

__all__ = ["Loop", "LoopOutput", "stepping_loops"]

# The loops whose ``with`` block is open, outermost first.
_OPEN: list[Loop] = []


def stepping_loops() -> list[Loop]:
    """The open loops that are inside a step (their body is running),
    outermost first."""
    return [loop for loop in _OPEN if loop._step is not None]


def _scalar_index(i: int) -> Tensor:
    return _from_numpy(np.array(i, np.int32), [], "int32", False, None, None)


class LoopOutput:
    """What ``Loop.stack`` / ``Loop.last`` return: the same object in every
    step; ``get()`` gives the tensor once the loop has finished."""

    def __init__(self, loop: Loop, kind: str) -> None:
        self._loop = loop
        self.kind = kind
        self._frames: list[Tensor] = []
        self._value: Tensor | None = None

    def __repr__(self) -> str:
        state = "done" if self._value is not None else f"{len(self._frames)} frames so far"
        return f"LoopOutput({self.kind} of {self._loop.name}, {state})"

    def get(self) -> Tensor:
        """The stacked frames (``stack``: over the loop's axis, 0 past each
        entry's length) or each entry's value at its last frame (``last``: 0
        for an entry of length 0).

        :return: the tensor; raises RuntimeError while the loop runs
        """
        if self._value is None:
            raise RuntimeError(
                f"Loop.{self.kind}: the result is there after the loop {self._loop.name} has "
                f"finished (call .get() after the `for _ in loop:` block)"
            )
        return self._value

    def _finish(self, axis: Dim) -> None:
        frames = self._frames[: axis.size]
        template = self._frames[0]
        array = TensorArray(template, _entries=frames)
        lengths = axis.dyn_size_ext
        if self.kind == "stack":
            self._value = masked_stack(array, axis)
        elif not frames:
            self._value = _full_like(template, 0.0)
        elif lengths is None:
            self._value = frames[-1]
        else:
            stacked = array.stack(axis=axis)
            at_end = gather(stacked, indices=lengths - 1, axis=axis, clip_to_valid=True)
            zero = _full(dims=[], fill_value=0.0, dtype=at_end.dtype)
            self._value = _where(
                _compare(lengths, ">", 0), at_end, zero, allow_broadcast_all_sources=True
            )


class Loop:
    """A recurrent loop, run as ``with Loop() as loop: for _ in loop: ...``
    (see the module doc).

    :param axis: the dim to loop over (static or dynamic; a dynamic one runs
        each entry to its own length); by default the dim of the first
        ``unstack``, or none: then ``end`` (per entry) or ``max_seq_len`` ends
        the loop
    :param max_seq_len: at most this many steps (an int >= 0 or a scalar int
        Tensor; a negative one is a ValueError, anything else a TypeError)
    :param name: names the loop in errors and its new dim
    """

    def __init__(
        self,
        *,
        axis: Dim | None = None,
        max_seq_len: int | Tensor | None = None,
        name: str = "loop",
    ) -> None:
        self.name = name
        self.max_seq_len = check_max_seq_len(f"Loop {name}", max_seq_len)
        self._axis = axis
        self._step: int | None = None  # the step whose body runs now
        self._state = "new"  # new -> open -> iterating -> done
        self._index: Tensor | None = None
        self._shortest: int | None = None  # the shortest length of a dynamic axis
        self._outputs: list[LoopOutput] = []
        self._calls = 0  # stack/last calls in this step
        self._unstacked: set[Dim] = set()  # dims checked against the axis
        self._sources: list[Tensor] = []
        self._running: Tensor | None = None  # per entry: not ended (after end)
        self._lengths: Tensor | None = None  # per entry: frames so far (after end)
        self._counted: Tensor | None = None  # this step's end(): frame counted
        self._ended_now = False
        self._touched: dict[Any, Tensor | None] = {}  # State -> value at step start
        self._assigned: set[Any] = set()  # States assigned in this step

    def __repr__(self) -> str:
        return f"Loop({self.name}, axis={self._axis}, step={self._step})"

    @property
    def axis(self) -> Dim | None:
        """The loop's dim: the given or first unstacked one, or (a loop ended
        by ``end`` / ``max_seq_len``) the new one after the loop."""
        return self._axis

    def __enter__(self) -> Loop:
        if self._state != "new":
            raise RuntimeError(f"Loop {self.name}: a Loop runs once; make a new one")
        self._state = "open"
        _OPEN.append(self)
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        _OPEN.remove(self)
        self._step = None
        if exc_type is None and self._state != "done":
            raise RuntimeError(
                f"Loop {self.name}: the body must run in `for _ in loop:` inside the `with` "
                f"block, to its end (no break: end entries with loop.end)"
            )

    def __iter__(self) -> Iterator[int]:
        if self._state != "open":
            raise RuntimeError(
                f"Loop {self.name}: iterate it once, inside its `with Loop() as loop:` block"
            )
        self._state = "iterating"
        return self._steps()

    def _steps(self) -> Iterator[int]:
        i = 0
        while self._more(i):
            self._step, self._index, self._calls = i, None, 0
            self._counted, self._ended_now = None, False
            yield i
            self._end_step(i)
            i += 1
        self._step = None
        self._finish(i)

    def _more(self, i: int) -> bool:
        limit = self.max_seq_len = read_max_seq_len(f"Loop {self.name}", self.max_seq_len)
        if limit is not None and i >= limit:
            return False
        if self._axis is not None:
            return i < self._axis.size
        if self._running is not None:
            return bool(self._running.numpy().any())
        if i > 0 and limit is None:
            raise RuntimeError(
                f"Loop {self.name}: it has no axis, and no loop.end or max_seq_len to end it "
                f"(call loop.unstack, give Loop(axis=...), call loop.end, or set max_seq_len)"
            )
        return True

    def _in_step(self, what: str) -> int:
        if self._step is None:
            raise RuntimeError(f"Loop.{what}: call it in the body, inside `for _ in loop:`")
        return self._step

    def _step_index(self) -> Tensor:
        if self._index is None:
            self._index = _scalar_index(self._step)
        return self._index

    def _mask(self, i: int) -> Tensor | None:
        """Per entry: whether step ``i`` is one of its frames (None: all)."""
        if self._running is not None or self._lengths is not None:
            return self._counted if self._ended_now else self._running
        if self._axis is None:
            return None
        lengths = self._axis.dyn_size_ext
        if lengths is not None:
            if self._shortest is None:  # one host read per loop
                self._shortest = int(lengths.numpy().min(initial=self._axis.size))
            if i < self._shortest:  # every entry still runs: nothing to mask
                return None
            return _compare(lengths, ">", self._step_index())
        return None if i < self._axis.size else _full(dims=[], fill_value=0.0, dtype="bool")

    def _end_step(self, i: int) -> None:
        if self._running is not None and not self._ended_now:
            self._lengths = self._lengths + _cast(self._running, "int32")
        if self._touched:
            mask = self._mask(i)
            for state, before in self._touched.items():
                state._commit(mask, before)
            self._touched.clear()
        self._assigned.clear()
        if self._calls != len(self._outputs):
            raise RuntimeError(
                f"Loop {self.name}: step {i} called stack/last {self._calls} times, step 0 "
                f"{len(self._outputs)} times; call them in every step"
            )

    def _finish(self, steps: int) -> None:
        if self._axis is None:
            if self._lengths is not None:
                self._axis = Dim(self._lengths, name=self.name)
            else:
                self._axis = Dim(steps, name=self.name)
        for output in self._outputs:
            output._finish(self._axis)
        self._state = "done"

    def _touch(self, state: Any) -> None:
        """Called by ``State.assign``: remembers ``state``'s value at the step's
        start, to keep it for entries past their end."""
        if state not in self._touched:
            self._touched[state] = state._value

    def unstack(self, source: Tensor, *, axis: Dim | None = None) -> Tensor:
        """``source``'s frame at this step, along the loop's axis.

        :param source: a tensor over the loop's axis (or ``axis``)
        :param axis: the dim to take frames along: by default the loop's axis,
            or (the loop has none yet) ``source``'s one dynamic dim; it becomes
            the loop's axis; another dim must have the same lengths
        :return: ``source`` at this step, without ``axis`` (0 for a step past
            the dim's size)
        """
        i = self._in_step("unstack")
        if axis is None:
            axis = self._axis
        if axis is None:
            dynamic = [d for d in source.dims if d.is_dynamic()]
            if len(dynamic) != 1:
                raise ValueError(
                    f"Loop.unstack: the loop {self.name} has no axis yet and the source has "
                    f"{len(dynamic)} dynamic dims {[d.name for d in dynamic]}; give axis="
                )
            axis = dynamic[0]
        if axis not in source.dims:
            raise ValueError(
                f"Loop.unstack: axis {axis.name} is not a dim of the source "
                f"{[d.name for d in source.dims]}"
            )
        if self._axis is None:
            if i > 0 or self._running is not None:
                raise RuntimeError(
                    f"Loop.unstack: the loop {self.name} ran without an axis so far; give "
                    f"Loop(axis=...) or unstack in the first step, before loop.end"
                )
            self._axis = axis
        elif axis != self._axis and axis not in self._unstacked:
            _check_same_lengths(self._axis, axis)
            self._unstacked.add(axis)
        if i == 0:
            self._sources.append(source)
        if i >= axis.size:
            return _full(
                dims=[d for d in source.dims if d != axis], fill_value=0.0, dtype=source.dtype
            )
        return gather(source, indices=self._step_index(), axis=axis)

    def _output(self, kind: str, value: Tensor) -> LoopOutput:
        i = self._in_step(kind)
        if not isinstance(value, Tensor):
            raise TypeError(f"Loop.{kind}: expected a Tensor, got {type(value).__name__}")
        k = self._calls
        self._calls += 1
        if i == 0:
            if any(value is source for source in self._sources):
                raise ValueError(
                    f"Loop.{kind}: the value is the source of loop.unstack, from outside the "
                    f"loop {self.name}; {kind} a value computed in the loop body"
                )
            self._outputs.append(LoopOutput(self, kind))
        if k >= len(self._outputs) or self._outputs[k].kind != kind:
            raise RuntimeError(
                f"Loop {self.name}: step {i} calls stack/last in another order than step 0"
            )
        output = self._outputs[k]
        if i > 0 and value is output._frames[0]:
            raise ValueError(
                f"Loop.{kind}: the same tensor in every step is a value from outside the loop "
                f"{self.name}; {kind} a value computed in the loop body"
            )
        output._frames.append(value)
        return output

    def stack(self, value: Tensor) -> LoopOutput:
        """Collects ``value`` (computed in this step) as the step's frame.

        :param value: a tensor computed in the loop body, the same dims in every
            step; a value from outside the loop (an ``unstack`` source, or the
            same tensor object in every step) is a ValueError (a loop of one
            step cannot tell)
        :return: the ``LoopOutput`` whose ``get()`` gives, after the loop, the
            frames stacked over the loop's axis (0 past each entry's length)
        """
        return self._output("stack", value)

    def last(self, value: Tensor) -> LoopOutput:
        """Collects ``value`` to give each entry's value at its own last frame.

        :param value: a tensor computed in the loop body
        :return: the ``LoopOutput`` whose ``get()`` gives, after the loop, each
            entry's value at its last frame (0 for an entry without frames)
        """
        return self._output("last", value)

    def end(self, cond: Tensor, *, include_eos: bool = False) -> None:
        """Ends the entries where ``cond`` holds (a loop without axis); the loop
        stops when all have ended (or after ``max_seq_len`` steps), its new
        axis has each entry's number of frames.

        :param cond: a bool tensor, e.g. over ``[batch]``: True ends the entry
        :param include_eos: True: this step is the entry's last frame (its State
            assignments are kept); False: the entry ended before this step
            (this step's frame and State assignments are dropped)
        """
        i = self._in_step("end")
        if self._axis is not None:
            raise RuntimeError(
                f"Loop.end: the loop {self.name} runs over axis {self._axis.name}; end is for a "
                f"loop without an input dim"
            )
        if self._ended_now:
            raise RuntimeError(f"Loop.end: called twice in step {i} of the loop {self.name}")
        if not isinstance(cond, Tensor) or cond.dtype != "bool":
            raise TypeError(f"Loop.end: cond must be a bool Tensor, got {cond!r}")
        going = _compare(_cast(cond, "int32"), "==", 0)
        before = self._running
        if before is None:
            before = _compare(_cast(going, "int32"), ">=", 0)
        after = _compare(_cast(before, "int32") * _cast(going, "int32"), ">", 0)
        counted = before if include_eos else after
        lengths = self._lengths if self._lengths is not None else i
        self._lengths = lengths + _cast(counted, "int32")
        self._running, self._counted, self._ended_now = after, counted, True


def _check_same_lengths(axis: Dim, other: Dim) -> None:
    a, b = axis.dyn_size_ext, other.dyn_size_ext
    same = axis.size == other.size and (a is None) == (b is None)
    if same and a is not None:
        same = a.dims == b.dims and bool(np.array_equal(a.numpy(), b.numpy()))
    if not same:
        raise ValueError(
            f"Loop.unstack: dims of different lengths: the loop's axis {axis.name} "
            f"({_lengths_text(axis)}) and {other.name} ({_lengths_text(other)})"
        )


def _lengths_text(dim: Dim) -> str:
    if dim.dyn_size_ext is None:
        return f"size {dim.size}"
    return f"lengths {dim.dyn_size_ext.numpy().tolist()}"
