"""Recurrence after RETURNN's ``returnn.frontend``: the state container ``State``
and the ``LSTM`` module with its ``LstmState``.

``LSTM`` has RETURNN's parameters (``ff_weight [4*out_dim, in_dim]``,
``rec_weight [4*out_dim, out_dim]``, ``bias [4*out_dim]``, PyTorch's gate order
i, f, g, o), so a RETURNN checkpoint's LSTM maps by name, and a PyTorch
``nn.LSTM``'s ``weight_ih_l0``, ``weight_hh_l0`` and ``bias_ih_l0 + bias_hh_l0``
load unchanged. The computation is one fused op in Rust (``crates/verjus-rf``,
``lstm.rs``, exported as ``rf.lstm``): over a dynamic spatial dim each sequence
runs to its own length, and ``spatial_dim=rf.single_step_dim`` runs one step.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from verjus._verjus import Dim, Tensor
from verjus._verjus import rf_from_numpy as _from_numpy
from verjus._verjus import rf_lstm as _lstm
from verjus._verjus import rf_single_step_dim as _single_step_dim
from verjus.rf import init
from verjus.rf.module import Module, Parameter


class State(dict):
    """The state of a recurrent module (what it needs to be called again), as in
    RETURNN: a dict whose entries are also attributes (``state.h`` is
    ``state["h"]``), nestable, with Tensors (or nested States, dicts, lists)
    as values.

    ``State(h=..., c=...)``, ``State({"h": ...})``, ``State([("h", ...)])``, or
    ``State(x)`` for one entry named ``state``. A subclass must accept
    ``type(s)(pairs)`` (how tree utilities rebuild it), as ``LstmState`` does.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if kwargs:
            if args:
                raise TypeError(
                    "rf.State: give entries as keywords or one positional argument, not both"
                )
            super().__init__(**kwargs)
        elif args:
            if len(args) != 1:
                raise TypeError(f"rf.State: takes at most one positional argument, got {len(args)}")
            value = args[0]
            if isinstance(value, dict):
                super().__init__(**value)
            elif isinstance(value, Iterable) and not isinstance(value, Tensor):
                super().__init__(value)
            else:
                super().__init__(state=value)
        else:
            super().__init__()

    def __repr__(self) -> str:
        entries = ", ".join(f"{k}={v!r}" for k, v in self.items())
        return f"{type(self).__name__}({entries})"

    def __getattr__(self, item: str) -> Any:
        if item in self:
            return self[item]
        raise AttributeError(f"{self}.{item}")

    def __setattr__(self, key: str, value: Any) -> None:
        self[key] = value

    def flatten_tensors(self) -> list[Tensor]:
        """Every Tensor in the state and its nested entries, each once."""
        return self.cls_flatten_tensors(self)

    @classmethod
    def cls_flatten_tensors(cls, obj: Any) -> list[Tensor]:
        """Every Tensor in ``obj`` (a Tensor, or dicts, lists and tuples of them),
        each once (by identity)."""
        seen: set[int] = set()
        tensors: list[Tensor] = []
        queue = [obj]
        while queue:
            x = queue.pop()
            if isinstance(x, Tensor):
                if id(x) not in seen:
                    seen.add(id(x))
                    tensors.append(x)
            elif isinstance(x, dict):
                queue.extend(x.values())
            elif isinstance(x, (list, tuple)):
                queue.extend(x)
            else:
                raise TypeError(f"rf.State: unexpected type {type(x).__name__} in a state")
        return tensors


class LstmState(State):
    """The state of an ``LSTM``: ``h`` (hidden) and ``c`` (cell), each over the
    batch dims and ``out_dim``."""

    def __init__(self, *_args: Any, h: Tensor | None = None, c: Tensor | None = None) -> None:
        super().__init__(*_args)
        if not _args:
            self.h = h
            self.c = c


class LSTM(Module):
    """An LSTM layer ``in_dim -> out_dim``, as RETURNN's ``rf.LSTM``: weights
    Glorot-uniform, bias 0 (see the module doc for the layout).

    Call it as ``out, state = lstm(source, state=state, spatial_dim=time_dim)``.
    """

    def __init__(self, in_dim: Dim, out_dim: Dim, *, with_bias: bool = True):
        if out_dim.dimension is None:
            raise ValueError(f"rf.LSTM: out_dim {out_dim.name} must be static")
        self.in_dim = in_dim
        self.out_dim = out_dim
        gates = Dim(4 * out_dim.dimension, name=f"4*{out_dim.name}")
        self.ff_weight = Parameter([gates, in_dim], initial=init.Glorot())
        self.rec_weight = Parameter([gates, out_dim], initial=init.Glorot())
        self.bias = Parameter([gates], initial=0.0) if with_bias else None

    def __call__(
        self, source: Tensor, *, state: LstmState, spatial_dim: Dim
    ) -> tuple[Tensor, LstmState]:
        """Runs the LSTM over ``spatial_dim`` of ``source`` from ``state``.

        :param source: over ``{..., spatial_dim, in_dim}``, or ``{..., in_dim}``
            with ``spatial_dim=rf.single_step_dim`` (one step)
        :param state: ``h`` and ``c``, each over ``{..., out_dim}`` (dims of the
            source other than ``spatial_dim`` and ``in_dim``; missing ones are
            broadcast)
        :param spatial_dim: the time dim (over a dynamic one each sequence runs
            to its own length, padding frames give 0 and the new state is each
            sequence's at its last frame), or ``rf.single_step_dim``: then a
            dynamic (sequence) dim of the source that the state lacks is a
            ValueError (it would run each frame as a sequence of its own from
            the same state); a state over that dim runs each frame one step
        :return: the output over ``[spatial_dim, ..., out_dim]`` (``[...,
            out_dim]`` for one step), the other dims in the source's order, and
            the new ``LstmState``. The order is RETURNN's (its PyTorch backend
            returns ``[spatial_dim, batch dims..., out_dim]``, time-major like
            ``torch.lstm``, whatever the source's order), kept so that code
            reading RETURNN's raw layout ports unchanged; ops match dims, not
            positions, and ``out.copy_transpose([batch_dim, time_dim,
            out_dim]).numpy()`` gives a batch-major array
        """
        h = state.get("h") if isinstance(state, dict) else getattr(state, "h", None)
        c = state.get("c") if isinstance(state, dict) else getattr(state, "c", None)
        if h is None or c is None:
            raise ValueError(f"rf.LSTM: state {state!r} needs the entries h (hidden) and c (cell)")
        if self.in_dim not in source.dims:
            dims = ", ".join(d.name for d in source.dims)
            raise ValueError(f"rf.LSTM: input [{dims}] does not have in_dim {self.in_dim.name}")
        if spatial_dim == _single_step_dim:
            _check_single_step(source, h, c, self.in_dim)
        out, (new_h, new_c) = _lstm(
            source,
            state_h=h,
            state_c=c,
            ff_weight=self.ff_weight,
            rec_weight=self.rec_weight,
            bias=self.bias,
            spatial_dim=spatial_dim,
            in_dim=self.in_dim,
            out_dim=self.out_dim,
        )
        return out, LstmState(h=new_h, c=new_c)

    def default_initial_state(self, *, batch_dims: Sequence[Dim]) -> LstmState:
        """Zeros for ``h`` and ``c`` over ``batch_dims + [out_dim]``. Dims of
        unknown size (such as ``batch_dim``) are left out: the LSTM broadcasts
        the state over the source's batch dims it lacks."""
        dims = [d for d in batch_dims if d.size is not None] + [self.out_dim]
        zeros = np.zeros([d.size for d in dims], np.float32)
        return LstmState(
            h=_from_numpy(zeros, dims, "float32", False, None, self.out_dim),
            c=_from_numpy(zeros, dims, "float32", False, None, self.out_dim),
        )


def _check_single_step(source: Tensor, h: Tensor, c: Tensor, in_dim: Dim) -> None:
    """For ``spatial_dim=rf.single_step_dim``: a ValueError when the source has a
    dynamic (sequence) dim that the state lacks. The LSTM would take it as one
    more batch dim, run every frame one step from the same state and return a
    state over the frames: what passing a whole sequence where a frame belongs
    does. RETURNN refuses a source dim that the state lacks too (an assertion in
    its PyTorch backend); a state over the dim (RETURNN's way) is taken as meant.
    Dims of unknown or static size are still broadcast, as over time."""
    for d in source.dims:
        if d == in_dim or not d.is_dynamic() or (d in h.dims and d in c.dims):
            continue
        dims = ", ".join(x.name for x in source.dims)
        state_dims = ", ".join(x.name for x in h.dims)
        raise ValueError(
            f"rf.LSTM: spatial_dim=rf.single_step_dim runs one step, but the source "
            f"[{dims}] has the sequence dim {d.name}, which the state [{state_dims}] "
            f"lacks: each frame of {d.name} would run as a sequence of its own from the same "
            f"state. Over the whole sequence, pass the Dim {d.name} as spatial_dim; "
            f"for one step, give the step's frame without {d.name} (loop.unstack(x) "
            f"in an rf.Loop, or the frame rf.scan gives its body); to step every frame from "
            f"its own state, give a state over {d.name}"
        )
