"""``rf.Parameter``: a trainable leaf tensor, after RETURNN's ``rf.Parameter``.

A ``Parameter`` is a ``Tensor`` (usable in every op) that is a leaf of the
autograd tape: ``loss.backward()`` adds ``d loss / d param`` to ``param.grad``.
Its values start at zero and are set by ``initial`` (a number, a Tensor, a
numpy array or an ``rf.init.ParamInit``, which is called with the dims) or by
``assign``. As in RETURNN, ``initial`` keeps what it was given, so an
initializer (not its values) is what describes the parameter.

``trainable`` is RETURNN's flag: None (the default) means trainable for a
float32 parameter; the optimizers of ``verjus.rf.optim`` skip parameters whose
flag is False. Parameters of ``int32``, ``int64`` and ``bool`` dtype (counters,
masks, running statistics of integers) hold values that ``assign`` replaces;
they get no gradient and are not trainable.

Copying a parameter (``copy.copy``, ``copy.deepcopy``, so copying a module)
makes a new parameter over the same dims, initialized anew by the same
``initial`` (RETURNN's ``"copy_init"``); inside
``set_parameter_copy_behavior_ctx("share")`` a copy is the parameter itself, so
a copied module shares its parameters.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from verjus._verjus import Dim, Tensor
from verjus._verjus import combine as _combine
from verjus._verjus import rf_from_numpy as _from_numpy
from verjus.rf.init import ParamInit, ParamInitType

__all__ = ["Parameter", "set_parameter_copy_behavior_ctx"]

_COPY_BEHAVIORS = ("copy_init", "share")
_copy_behavior = "copy_init"


@contextmanager
def set_parameter_copy_behavior_ctx(mode: str) -> Iterator[None]:
    """What copying a parameter gives inside the block, as RETURNN's
    ``rf.set_parameter_copy_behavior_ctx``: ``"copy_init"`` (the default) a new
    parameter initialized anew by the same ``initial`` (not the values),
    ``"share"`` the parameter itself.

    :param mode: ``"copy_init"`` or ``"share"``
    """
    global _copy_behavior
    if mode not in _COPY_BEHAVIORS:
        raise ValueError(f"set_parameter_copy_behavior_ctx: mode must be one of {_COPY_BEHAVIORS}")
    previous, _copy_behavior = _copy_behavior, mode
    try:
        yield
    finally:
        _copy_behavior = previous


# Each dtype's numpy storage (bool values are kept as float32 0/1).
_STORAGE = {"float32": np.float32, "int32": np.int32, "int64": np.int64, "bool": np.float32}


def _static_shape(dims: Sequence[Dim]) -> list[int]:
    shape = []
    for d in dims:
        if not isinstance(d, Dim):
            raise TypeError(f"rf.Parameter: dims must be Dims, got {type(d).__name__}")
        if d.dimension is None:
            raise ValueError(f"rf.Parameter: dim {d.name} has no static size")
        shape.append(d.dimension)
    if len(set(dims)) != len(dims):
        names = ", ".join(d.name for d in dims)
        raise ValueError(f"rf.Parameter: dims must be unique, got [{names}]")
    return shape


class Parameter(Tensor):
    """A float32 leaf over ``dims`` (static dims); see the module doc.

    ``Parameter(dims, dtype=None, *, initial=None, trainable=None,
    weight_decay=0.0, auxiliary=False)``; ``Parameter(tensor)`` takes dims and
    initial values from ``tensor``.
    """

    def __new__(cls, dims_or_tensor: Any = None, dtype: str | None = None, **kwargs: Any):
        dims = kwargs.get("dims")
        if isinstance(dims_or_tensor, Tensor):
            dims = dims or dims_or_tensor.dims
            dtype = dtype or dims_or_tensor.dtype
        elif dims_or_tensor is not None:
            if dims is not None:
                raise ValueError("rf.Parameter: dims given twice")
            dims = dims_or_tensor
        if dims is None:
            raise ValueError("rf.Parameter: dims must be given")
        if not isinstance(dims, (list, tuple)):
            raise TypeError(f"rf.Parameter: dims must be a sequence of Dims, got {type(dims)}")
        dtype = dtype or "float32"
        if dtype not in _STORAGE:
            raise ValueError(
                f"rf.Parameter: dtype must be one of {sorted(_STORAGE)}, got {dtype!r}"
            )
        zeros = np.zeros(_static_shape(dims), _STORAGE[dtype])
        leaf = _from_numpy(zeros, list(dims), dtype, dtype == "float32", None, None)
        return super().__new__(cls, leaf)

    def __init__(
        self,
        dims_or_tensor: Sequence[Dim] | Tensor | None = None,
        dtype: str | None = None,
        *,
        dims: Sequence[Dim] | None = None,
        sparse_dim: Dim | None = None,
        trainable: bool | None = None,
        auxiliary: bool = False,
        non_critical_for_restore: bool = False,
        weight_decay: float | None = 0.0,
        initial: ParamInitType | np.ndarray | None = None,
        device: str | None = None,
    ) -> None:
        if sparse_dim is not None:
            raise ValueError(f"rf.Parameter: sparse parameters are not supported ({sparse_dim})")
        if isinstance(dims_or_tensor, Tensor):
            if initial is not None:
                raise ValueError("rf.Parameter: initial given twice (a Tensor and initial=)")
            initial = dims_or_tensor
        if trainable and self.dtype != "float32":
            raise ValueError(f"rf.Parameter: a {self.dtype} parameter cannot be trainable")
        self.trainable = trainable if self.dtype == "float32" else False
        self.auxiliary = auxiliary
        self.non_critical_for_restore = non_critical_for_restore
        self.weight_decay = weight_decay
        self.initial = initial

    @property
    def initial(self) -> ParamInitType | np.ndarray | None:
        """What the values were initialized from (assigning it sets them)."""
        return self._initial

    @initial.setter
    def initial(self, value: ParamInitType | np.ndarray | None) -> None:
        self._initial = value
        if isinstance(value, ParamInit):
            value = value(list(self.dims), self.dtype)
        self.assign(0.0 if value is None else value)

    @property
    def weight_decay(self) -> float:
        """RETURNN's per-parameter weight decay (0 unless set)."""
        return self._weight_decay or 0.0

    @weight_decay.setter
    def weight_decay(self, value: float | None) -> None:
        self._weight_decay = value

    def assign(self, value: Tensor | np.ndarray | float) -> None:
        """Replaces the values by ``value``: a Tensor with the same dims (in any
        order), a numpy array of this shape, or a number for every element.
        Graphs recorded before keep the old values."""
        if isinstance(value, Tensor):
            if set(value.dims) != set(self.dims) or len(value.dims) != len(self.dims):
                mine = ", ".join(d.name for d in self.dims)
                theirs = ", ".join(d.name for d in value.dims)
                raise ValueError(
                    f"rf.Parameter.assign: value has dims [{theirs}], the parameter [{mine}]"
                )
            array = value.copy_transpose(list(self.dims)).numpy()
        elif np.isscalar(value):
            array = np.full(self.shape, value)
        else:
            array = np.asarray(value)
            if array.shape != tuple(self.shape):
                raise ValueError(
                    f"rf.Parameter.assign: value has shape {array.shape}, "
                    f"the parameter {tuple(self.shape)}"
                )
        if self.dtype != "float32":
            self.raw_tensor = array.astype(_STORAGE[self.dtype])
            return
        Tensor.assign(self, np.ascontiguousarray(array, dtype=np.float32))

    def assign_add(self, value: Tensor | float) -> None:
        """Adds ``value`` (a number, or a Tensor over some of the parameter's
        dims, broadcast over the others) to the values, as ``assign``."""
        if isinstance(value, Tensor):
            extra = [d for d in value.dims if d not in self.dims]
            if extra:
                theirs = ", ".join(d.name for d in extra)
                raise ValueError(
                    f"rf.Parameter.assign_add: value has dims [{theirs}] not in the parameter"
                )
        self.assign(_combine(self, "+", value, allow_broadcast_all_sources=True))

    def __copy__(self) -> Parameter:
        """As ``__deepcopy__``, with the same ``initial`` object."""
        if _copy_behavior == "share":
            return self
        return self._copy_init(self.initial)

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> Parameter:
        """A new parameter over the same dims and options, initialized anew by
        the same scheme (RETURNN's ``copy_init``: a deep-copied module, e.g. each
        layer of ``ConformerEncoder``, draws its own initial values); inside
        ``set_parameter_copy_behavior_ctx("share")`` the parameter itself."""
        if _copy_behavior == "share":
            return self
        initial = self.initial
        if isinstance(initial, ParamInit):
            initial = copy.deepcopy(initial, memo)
        return self._copy_init(initial)

    def _copy_init(self, initial: ParamInitType | np.ndarray | None) -> Parameter:
        return type(self)(
            list(self.dims),
            self.dtype,
            trainable=self.trainable,
            auxiliary=self.auxiliary,
            non_critical_for_restore=self.non_critical_for_restore,
            weight_decay=self._weight_decay,
            initial=initial,
        )

    def __repr__(self) -> str:
        dims = ", ".join(f"{d.name}({d.dimension})" for d in self.dims)
        return f"Parameter([{dims}])"
