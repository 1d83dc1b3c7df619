"""Clear errors for the commonest slip of a newcomer from PyTorch or numpy: a number
(a size, an axis position) or a string (an axis name) where verjus.rf takes a ``Dim``.

verjus.rf names every axis by a ``Dim`` object, so ``rf.LSTM(4, 6)`` (PyTorch's
``nn.LSTM(4, 6)``) or ``rf.squeeze(x, axis=-1)`` cannot work; unchecked, they fail
deep inside (``'int' object has no attribute 'dimension'``). (The native ops, such
as ``rf.softmax``, name themselves and the Dim to give in their own wrappers:
``verjus.rf._public_ops``.) Which arguments take Dims is read from the annotations: an
argument annotated with ``Dim`` and no number or string type (``Dim``, ``Dim | None``,
``Dim | Sequence[Dim]``; not ``int | Dim``, which takes sizes too). Two users:

- ``Module.__new__`` checks every module's constructor arguments before ``__init__``
  runs (``check_module_args``), so ``rf.Conv1d(4, 6, 3)`` or ``rf.LayerNorm(512)``
  is named at once, whichever module it is;
- ``takes_dims`` decorates an op: when the op fails, a number or string in such an
  argument is named in a TypeError (checked only on failure; a call pays one Python
  frame, about half a microsecond).
"""

from __future__ import annotations

import functools
import inspect
import numbers
import re
from collections.abc import Callable
from typing import Any, TypeVar

from verjus._verjus import Tensor

__all__ = ["check_module_args", "takes_dims"]

F = TypeVar("F", bound=Callable[..., Any])


def _slip(value: Any) -> bool:
    """Whether ``value`` is a number or a string, or a list or tuple holding one."""
    if isinstance(value, (list, tuple)):
        return any(_slip(v) for v in value)
    return isinstance(value, (numbers.Number, str))


@functools.cache
def _dim_params(func: Callable[..., Any]) -> tuple[inspect.Signature, dict[str, str]]:
    """``func``'s signature and, for each parameter that takes only Dims, what it takes
    (``"a Dim"``, ``"Dims"`` or ``"a Dim or Dims"``)."""
    try:  # type aliases (``Axis = Dim | Sequence[Dim]``) are resolved
        sig = inspect.signature(func, eval_str=True)
    except (NameError, TypeError, SyntaxError):
        sig = inspect.signature(func)
    takes = {}
    for name, p in sig.parameters.items():
        text = str(p.annotation)
        if not re.search(r"\bDim\b", text) or re.search(r"\b(int|float|str|Any|object)\b", text):
            continue
        several = re.search(r"(Sequence|list|tuple)\[", text)
        one = re.search(r"\bDim\b", re.sub(r"\[[^]]*\]", "", text))  # outside the brackets
        takes[name] = "a Dim or Dims" if one and several else "Dims" if several else "a Dim"
    return sig, takes


def _misfit(func: Callable[..., Any], args: tuple, kwargs: dict) -> tuple[str, str, Any] | None:
    """``(name, what it takes, value)`` of the first Dims-only parameter of ``func``
    given a number or string by this call (None also where the call does not fit the
    signature: the function says so)."""
    sig, takes = _dim_params(func)
    if not takes:
        return None
    try:
        bound = sig.bind_partial(*args, **kwargs)
    except TypeError:
        return None
    for name, wanted in takes.items():
        if _slip(bound.arguments.get(name)):
            return name, wanted, bound.arguments[name]
    return None


_AXES = "verjus.rf names axes by Dim, not by position or name"


def _message(what: str, name: str, wanted: str, value: Any, hint: str = _AXES) -> str:
    return f"{what}: {name} must be {wanted} ({hint}), got {type(value).__name__} {value!r}"


def check_module_args(cls: type, args: tuple, kwargs: dict) -> None:
    """A TypeError naming the module and the argument if one of ``cls``'s
    constructor arguments that take only Dims is given a number or a string."""
    misfit = _misfit(cls.__init__, (None, *args), kwargs)
    if misfit is None:
        return
    name, wanted, value = misfit
    what = f"rf.{cls.__name__}" if cls.__module__.startswith("verjus.") else cls.__qualname__
    if isinstance(value, int) and value >= 0:  # a size, as PyTorch's modules take
        hint = f"e.g. rf.Dim({value}, name={name!r})"
        raise TypeError(_message(what, name, wanted, value, hint))
    raise TypeError(_message(what, name, wanted, value))


def takes_dims(op: F) -> F:
    """``op``, whose failure from a number or string given for a Dims-only argument
    is a TypeError naming ``rf.<op>``, the argument and the tensor's dims (and a
    ``dim=`` given to an op that takes ``axis=``)."""

    @functools.wraps(op)
    def checked(*args: Any, **kwargs: Any) -> Any:
        try:
            return op(*args, **kwargs)
        except (TypeError, AttributeError):
            message = _diagnosis(op, args, kwargs)
            if message is None:
                raise
        raise TypeError(message)  # outside the except: the failure deep inside is no help

    return checked  # type: ignore[return-value]


def _diagnosis(op: Callable[..., Any], args: tuple, kwargs: dict) -> str | None:
    what = f"rf.{op.__name__}"
    sig = _dim_params(op)[0]
    try:
        sig.bind_partial(*args, **kwargs)
    except TypeError:  # e.g. PyTorch's dim=-1
        wrong_name = "dim" in kwargs and "axis" in sig.parameters
        return f"{what} takes axis= (a Dim), not dim=" if wrong_name else None
    misfit = _misfit(op, args, kwargs)
    if misfit is None:
        return None
    hint = _AXES
    source = next((a for a in args if isinstance(a, Tensor)), None)
    if source is not None:
        hint += f"; the tensor's dims: [{', '.join(d.name for d in source.dims)}]"
    return _message(what, *misfit, hint)
