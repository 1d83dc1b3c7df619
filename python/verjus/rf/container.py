"""``rf.ModuleList``, ``rf.Sequential``, ``rf.sequential``, ``rf.ParameterList``,
after RETURNN's ``returnn.frontend.container``.

The entries are plain attributes named ``"0"``, ``"1"``, ... (or the keys of a
dict), so the ``Module`` walks find them with no extra machinery and
``named_parameters()`` gives names such as ``"0.weight"``, as in RETURNN and
PyTorch. Plain callables (``rf.relu``, lambdas) are wrapped in
``rf.Functional``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from verjus._verjus import Tensor
from verjus.rf.module import Functional, Module
from verjus.rf.parameter import Parameter

__all__ = ["ModuleList", "ParameterList", "Sequential", "sequential"]


def _as_module(obj: Module | Callable[..., Any]) -> Module:
    if isinstance(obj, Module):
        return obj
    if callable(obj):
        return Functional(obj)
    raise TypeError(f"expected an rf.Module or a callable, got {type(obj).__name__}")


class ModuleList(Module):
    """Modules in order: ``ModuleList(m1, m2)``, ``ModuleList([m1, m2])`` or
    ``ModuleList({"enc": m1, "dec": m2})``; ``append``, ``extend``, ``len``,
    iteration, indexing (a slice gives a ModuleList with the same names), item
    and slice assignment and ``del``."""

    def __init__(self, *modules: Any) -> None:
        single = modules[0] if len(modules) == 1 else None
        if isinstance(single, (dict, ModuleList)):  # keeps the names
            items = list(single.items())
        elif single is not None and not isinstance(single, Module) and _iterable(single):
            items = [(str(i), m) for i, m in enumerate(single)]
        else:
            items = [(str(i), m) for i, m in enumerate(modules)]
        for key, module in items:
            setattr(self, str(key), _as_module(module))

    def _modules(self) -> dict[str, Module]:
        return {k: v for k, v in vars(self).items() if isinstance(v, Module)}

    def items(self) -> Iterable[tuple[str, Module]]:
        """``(name, module)`` in order."""
        return self._modules().items()

    def append(self, module: Module | Callable[..., Any]) -> ModuleList:
        """Adds ``module`` at the end (named by the new length - 1)."""
        setattr(self, str(len(self)), _as_module(module))
        return self

    def extend(self, modules: Iterable[Module | Callable[..., Any]]) -> ModuleList:
        """Appends each of ``modules``."""
        for module in modules:
            self.append(module)
        return self

    def __len__(self) -> int:
        return len(self._modules())

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules().values())

    def __getitem__(self, idx: int | slice) -> Any:
        if isinstance(idx, slice):
            items = list(self._modules().items())[idx]
            if all(k.isdigit() for k, _ in items):  # numbered entries are renumbered
                return type(self)([m for _, m in items])
            return type(self)(dict(items))
        return list(self._modules().values())[idx]

    def __setitem__(self, idx: int | slice, module: Any) -> None:
        """``self[i] = m`` replaces one entry; ``self[a:b] = modules`` replaces that
        range by any number of modules (numbered entries after it are renumbered)."""
        if not isinstance(idx, slice):
            key = list(self._modules())[idx]
            setattr(self, key, _as_module(module))
            return
        items = list(self._modules().items())
        if idx.step not in (None, 1):
            raise ValueError(f"rf.ModuleList: slice assignment needs step 1, got {idx.step}")
        start, stop, _ = idx.indices(len(items))
        stop = max(stop, start)
        for key, _ in items[start:]:  # re-added below, in order
            delattr(self, key)
        tail = [_as_module(m) for m in module] + [m for _, m in items[stop:]]
        keys = [k for k, _ in items[stop:]]
        for i, mod in enumerate(tail):
            j = i - (len(tail) - len(keys))
            key = keys[j] if j >= 0 and not keys[j].isdigit() else str(start + i)
            setattr(self, key, mod)

    def __delitem__(self, idx: int | slice) -> None:
        """Removes one entry or a range (numbered entries after it are renumbered)."""
        if not isinstance(idx, slice):
            idx = range(len(self))[idx]  # a negative index from the end; IndexError if out
            idx = slice(idx, idx + 1)
        self[idx] = []

    __call__ = Module.__call__  # a list has no call of its own


class Sequential(ModuleList):
    """Calls its modules in order, each on the previous one's output; keyword
    arguments go to every module; ``collected_outputs`` (a dict), if given,
    receives each output under the module's name."""

    def __call__(
        self, inp: Any, *, collected_outputs: dict[str, Tensor] | None = None, **kwargs: Any
    ) -> Any:
        """The last module's output (see the class docs)."""
        for name, module in self.items():
            inp = module(inp, **kwargs)
            if collected_outputs is not None:
                collected_outputs[name] = inp
        return inp


def sequential(source: Tensor, *modules: Module | Callable[..., Any]) -> Any:
    """``Sequential(*modules)(source)``."""
    return Sequential(*modules)(source)


class ParameterList(Module):
    """Parameters in order, as attributes ``"0"``, ``"1"``, ...; ``append``,
    ``extend``, ``len``, iteration, indexing."""

    def __init__(self, *parameters: Any) -> None:
        one_iterable = len(parameters) == 1 and not isinstance(parameters[0], Tensor)
        self.extend(parameters[0] if one_iterable else parameters)

    def __repr__(self) -> str:
        return f"ParameterList({', '.join(map(repr, self))})"

    def _params(self) -> dict[str, Parameter]:
        return {k: v for k, v in vars(self).items() if isinstance(v, Parameter)}

    def append(self, parameter: Parameter) -> ParameterList:
        """Adds ``parameter`` at the end."""
        if not isinstance(parameter, Parameter):
            raise TypeError(f"rf.ParameterList: expected a Parameter, got {type(parameter)}")
        setattr(self, str(len(self)), parameter)
        return self

    def extend(self, parameters: Iterable[Parameter]) -> ParameterList:
        """Appends each of ``parameters``."""
        for parameter in parameters:
            self.append(parameter)
        return self

    def __len__(self) -> int:
        return len(self._params())

    def __iter__(self) -> Iterator[Parameter]:
        return iter(self._params().values())

    def __getitem__(self, idx: int | slice) -> Any:
        if isinstance(idx, slice):
            return type(self)(list(self._params().values())[idx])
        return list(self._params().values())[idx]

    __call__ = Module.__call__


def _iterable(obj: Any) -> bool:
    try:
        iter(obj)
    except TypeError:
        return False
    return True
