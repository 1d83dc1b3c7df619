"""``rf.Module``, ``rf.Functional``, ``rf.Linear``, ``rf.Embedding``.

Models are plain Python objects, as in RETURNN's frontend and PyTorch: a
``Module`` finds its parameters (``rf.Parameter``, see ``parameter.py``) and
sub-modules among its attributes; there is no registration step. The default
initializations are RETURNN's: ``Linear`` and ``Embedding`` weights
``rf.init.Glorot()`` (drawn from the rf random stream, so ``rf.set_random_seed``
makes them reproducible), biases 0. ``LayerNorm`` and the other normalisations
are in ``normalization.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from verjus._verjus import Dim, Tensor
from verjus._verjus import rf_gather as _gather
from verjus._verjus import rf_matmul as _matmul
from verjus._verjus import rf_merge_dims as _merge_dims
from verjus.rf import init
from verjus.rf._dim_args import check_module_args
from verjus.rf.parameter import Parameter

__all__ = ["Embedding", "Functional", "Linear", "Module", "Parameter"]

M = TypeVar("M", bound="Module")


class Module:
    """Base of models: subclasses set parameters and sub-modules as attributes
    and define ``__call__``.

    The walks follow RETURNN's ``rf.Module``: ``named_modules`` goes breadth
    first through the attributes (self first, as ``""``), each module once;
    ``named_parameters`` lists, module by module in that order, the parameters
    among its attributes, each parameter once (under its first name).
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        """Checks the constructor's Dim arguments before ``__init__`` runs: ``rf.LSTM(4, 6)``
        (PyTorch's ``nn.LSTM(4, 6)``) is a TypeError naming the argument, for every
        module (``verjus.rf._dim_args``)."""
        check_module_args(cls, args, kwargs)
        return super().__new__(cls)

    def __repr__(self) -> str:
        """``Name(dims and options)`` with each sub-module as ``(name): ...`` indented
        under it, as PyTorch prints a model. The options are the public attributes
        that are Dims, numbers, strings or lists of them (not parameters, not None)."""
        options = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if _is_option(k, v))
        children = [f"({name}): {child!r}" for name, child in self.named_children()]
        if not children:
            return f"{type(self).__name__}({options})"
        body = "\n".join(([options] if options else []) + children).replace("\n", "\n  ")
        return f"{type(self).__name__}(\n  {body}\n)"

    def named_modules(
        self,
        *,
        recurse: bool = True,
        include_self: bool = True,
        memo: set[int] | None = None,
        prefix: str = "",
    ) -> Iterator[tuple[str, Module]]:
        """``(dotted name, module)`` of this module (as ``prefix``, if
        ``include_self``) and its sub-modules, breadth first; ``memo`` holds the
        ids of modules already listed."""
        memo = set() if memo is None else memo
        if id(self) in memo:
            return
        memo.add(id(self))
        if include_self:
            yield prefix, self
        queue = [(prefix, self)]
        while queue:
            prefix, mod = queue.pop(0)
            for name, value in vars(mod).items():
                if not isinstance(value, Module) or id(value) in memo:
                    continue
                memo.add(id(value))
                sub_prefix = f"{prefix}.{name}" if prefix else name
                yield sub_prefix, value
                if recurse:
                    queue.append((sub_prefix, value))

    def modules(self, *, recurse: bool = True, include_self: bool = True) -> Iterator[Module]:
        """The modules of ``named_modules``."""
        for _, mod in self.named_modules(recurse=recurse, include_self=include_self):
            yield mod

    def named_children(self) -> Iterator[tuple[str, Module]]:
        """``(name, module)`` of the direct sub-modules."""
        return self.named_modules(recurse=False, include_self=False)

    def children(self) -> Iterator[Module]:
        """The direct sub-modules."""
        return self.modules(recurse=False, include_self=False)

    def named_parameters(self, *, recurse: bool = True) -> Iterator[tuple[str, Parameter]]:
        """``(dotted name, parameter)`` of this module and (if ``recurse``) its
        sub-modules; a parameter shared by several attributes is listed once."""
        seen: set[int] = set()
        for prefix, mod in self.named_modules() if recurse else [("", self)]:
            for name, value in vars(mod).items():
                if isinstance(value, Parameter) and id(value) not in seen:
                    seen.add(id(value))
                    yield (f"{prefix}.{name}" if prefix else name), value

    def parameters(self, *, recurse: bool = True) -> Iterator[Parameter]:
        """The parameters of ``named_parameters``."""
        for _, param in self.named_parameters(recurse=recurse):
            yield param

    @property
    def has_parameters(self) -> bool:
        """Whether this module or a sub-module has a parameter."""
        return next(self.parameters(), None) is not None

    def apply(self: M, fn: Callable[[Module], None]) -> M:
        """Calls ``fn`` on every sub-module (depth first, children before their
        parent) and then on this module; returns this module."""
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    def get_deep(self, target: str) -> Any:
        """The attribute at the dotted path ``target`` (``""``: this module)."""
        if target == "":
            return self
        obj: Any = self
        for i, name in enumerate(target.split(".")):
            if not isinstance(obj, Module):
                done = ".".join(target.split(".")[:i])
                raise AttributeError(f"{self!r}: {done!r} is not an rf.Module")
            if not hasattr(obj, name):
                raise AttributeError(f"{obj!r} has no attribute {name!r}")
            obj = getattr(obj, name)
        return obj

    def set_deep(self, target: str, value: Any) -> None:
        """Sets the attribute at the dotted path ``target`` to ``value``."""
        if target == "":
            raise AttributeError("set_deep: cannot replace the root module")
        prefix, _, name = target.rpartition(".")
        mod = self.get_deep(prefix)
        if not isinstance(mod, Module):
            raise AttributeError(f"{self!r}: {prefix!r} is not an rf.Module")
        setattr(mod, name, value)

    def register_forward_hook(self, hook: Callable[..., Any], *, prepend: bool = False) -> Any:
        """Calls ``hook(module, args, kwargs, result)`` after each call of this
        module, its return value the call's result (RETURNN's; ``verjus.rf.hooks``).

        :param hook: ``(module, args, kwargs, result) -> new result``
        :param prepend: run it before the hooks already there
        :return: a ``RemovableHandle``: ``remove()`` removes the hook
        """
        from verjus.rf.hooks import setup_post_hook_on_method

        return setup_post_hook_on_method(self, "__call__", hook, prepend=prepend)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """The module's computation; each subclass defines its own."""
        raise NotImplementedError(f"{type(self).__name__} does not define __call__")


def _is_option(name: str, value: Any) -> bool:
    """Whether ``Module.__repr__`` shows the attribute ``name``."""
    if name.startswith("_") or isinstance(value, Tensor):
        return False
    if isinstance(value, (list, tuple)):
        return bool(value) and all(_is_option("", v) for v in value)
    return isinstance(value, (Dim, bool, int, float, str))


class Functional(Module):
    """A function as a module (``Sequential`` and ``ModuleList`` wrap plain
    callables in it)."""

    def __init__(self, func: Callable[..., Any]) -> None:
        if not callable(func):
            raise TypeError(f"rf.Functional: expected a callable, got {type(func).__name__}")
        self.func = func

    def __repr__(self) -> str:
        return f"Functional({getattr(self.func, '__qualname__', repr(self.func))})"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Calls the function with the same arguments."""
        return self.func(*args, **kwargs)


def _distinct(who: str, in_dim: Dim, out_dim: Dim) -> None:
    # RETURNN gives a square weight a copy of the dim with another match
    # priority; verjus has no match priorities, so the dims must differ.
    if in_dim == out_dim:
        raise ValueError(
            f"rf.{who}: in_dim and out_dim are the same dim {in_dim.name}; "
            "give the output its own Dim (a tensor cannot have a dim twice)"
        )


class Linear(Module):
    """``source @ weight + bias`` over ``in_dim`` -> ``out_dim``; ``weight``
    ``[in_dim, out_dim]`` starts Glorot-uniform, ``bias`` at 0.

    ``in_dim`` may be ``out_dim`` (a square map, as the Conformer's): a tensor
    cannot have a dim twice, so the weight's second dim is then a copy of it
    (RETURNN's copy with another match priority), the product over the copy is
    put back on ``out_dim``, and the weight's shape is RETURNN's. The result's
    ``feature_dim`` is ``out_dim``."""

    def __init__(self, in_dim: Dim, out_dim: Dim, *, with_bias: bool = True):
        self.in_dim, self.out_dim, self.with_bias = in_dim, out_dim, with_bias
        self._weight_out_dim = out_dim
        if in_dim == out_dim:
            self._weight_out_dim = Dim(out_dim.dimension, name=f"{out_dim.name}:out")
        self.weight = Parameter([in_dim, self._weight_out_dim], initial=init.Glorot())
        self.bias = Parameter([out_dim], initial=0.0) if with_bias else None

    def __call__(self, source: Tensor) -> Tensor:
        """``source`` (over ``in_dim``) mapped to ``out_dim``."""
        if self.in_dim not in source.dims:
            dims = ", ".join(d.name for d in source.dims)
            raise ValueError(f"rf.Linear: input [{dims}] does not have in_dim {self.in_dim.name}")
        out = _matmul(source, self.weight, reduce=self.in_dim)
        if self._weight_out_dim != self.out_dim:
            out, _ = _merge_dims(out, dims=[self._weight_out_dim], out_dim=self.out_dim)
        if self.bias is not None:
            out = out + self.bias
        out.feature_dim = self.out_dim  # as RETURNN's
        return out


class Embedding(Module):
    """A table ``weight`` over ``[in_dim, out_dim]`` (Glorot-uniform, as in
    RETURNN); calling it on integer indices with sparse dim ``in_dim`` gives
    their rows."""

    def __init__(self, in_dim: Dim, out_dim: Dim):
        _distinct("Embedding", in_dim, out_dim)
        self.in_dim, self.out_dim = in_dim, out_dim
        self.weight = Parameter([in_dim, out_dim], initial=init.Glorot())

    def __call__(self, source: Tensor) -> Tensor:
        """The rows of ``weight`` at the indices ``source`` (sparse dim ``in_dim``)."""
        if source.sparse_dim != self.in_dim:
            raise ValueError(
                f"rf.Embedding: indices have sparse_dim {source.sparse_dim}, "
                f"expected in_dim {self.in_dim.name}"
            )
        out = _gather(self.weight, indices=source, axis=self.in_dim)
        out.feature_dim = self.out_dim  # as RETURNN's
        return out
