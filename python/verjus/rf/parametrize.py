"""Parametrizations of module parameters, after RETURNN's
``returnn.frontend.parametrize`` (which follows PyTorch's API).

``register_parametrization(module, "weight", f)`` makes ``module.weight`` a
property computed on each access: ``f(original)``, with the original
``rf.Parameter`` kept where it was (``named_parameters``, the optimizers and
checkpoints see it, unchanged), or, with ``keep_existing_param=False``,
``f()`` of a parametrization module that replaces the parameter and brings
its own parameters (``rf.weight_norm``'s ``g`` and ``v``). The derived value
is never stored: it lives as long as the caller holds it. Registering several
parametrizations on one name composes them in order (each gets the previous
one's result). As in RETURNN, the module's class is swapped for a subclass
that carries the properties, so other instances are not affected;
``remove_parametrization`` removes them all for that name and restores the
class when none is left. Loading a checkpoint restores the parameters; the
parametrizations come from the code that builds the model.
"""

from __future__ import annotations

import weakref
from typing import Any

from verjus.rf.module import Module
from verjus.rf.parameter import Parameter

__all__ = ["is_parametrized", "register_parametrization", "remove_parametrization"]


class _Metaclass(type):
    """The type of the per-instance subclasses that carry the properties."""


class _Property:
    """The data descriptor that computes ``module.<name>`` on access."""

    def __init__(self, module: Module, name: str, original: Parameter | None, first: Any) -> None:
        self.module_ref = weakref.ref(module)
        self.name = name
        self.original = original
        self.chain: list[Any] = [first]

    def __get__(self, obj: Any, objtype: type | None = None) -> Any:
        if obj is None:
            return self
        if self.original is not None:
            value = self.original
            for f in self.chain:
                value = f(value)
            return value
        value = self.chain[0]()
        for f in self.chain[1:]:
            value = f(value)
        return value

    def __set__(self, obj: Any, value: Any) -> None:
        if self.original is not None:
            self.original.assign(value)
        elif hasattr(self.chain[0], "assign"):
            self.chain[0].assign(value)
        else:
            raise AttributeError(
                f"cannot assign to {self.name}: its parametrization {self.chain[0]!r} has no assign"
            )


def register_parametrization(
    module: Module,
    param_name: str,
    parametrization: Any,
    *,
    keep_existing_param: bool = True,
) -> Module:
    """Makes ``module.<param_name>`` the parametrized value (see the module doc).

    :param module: the module holding the parameter
    :param param_name: the attribute name of the ``rf.Parameter``
    :param parametrization: with ``keep_existing_param``, a callable on the
        original value (it must not have parameters); otherwise a callable
        without arguments (e.g. a module with its own parameters) that replaces
        the parameter, given the original through its ``assign`` if it has one
    :param keep_existing_param: whether the original parameter stays
    :return: ``module``
    """
    if not isinstance(module, Module):
        raise TypeError(f"register_parametrization: expected an rf.Module, got {module!r}")
    prop = vars(type(module)).get(param_name) if is_parametrized(module) else None
    if isinstance(prop, _Property):
        if not keep_existing_param:
            raise ValueError(
                f"register_parametrization: {param_name} is parametrized already; "
                "keep_existing_param=False must come first"
            )
        prop.chain.append(parametrization)
        return module
    original = vars(module).get(param_name)
    if not isinstance(original, Parameter):
        raise TypeError(
            f"register_parametrization: {type(module).__name__}.{param_name} is not an "
            f"rf.Parameter, got {type(original).__name__}"
        )
    if keep_existing_param:
        if isinstance(parametrization, Module) and parametrization.has_parameters:
            raise ValueError(
                f"register_parametrization: {parametrization!r} has parameters; "
                "use keep_existing_param=False"
            )
    else:
        if hasattr(parametrization, "assign"):
            parametrization.assign(original)
        setattr(module, param_name, parametrization)
        original = None
    if not is_parametrized(module):
        cls = type(module)
        module.__class__ = _Metaclass(f"Parametrized{cls.__name__}", (cls,), {})
    setattr(type(module), param_name, _Property(module, param_name, original, parametrization))
    return module


def remove_parametrization(module: Module, param_name: str) -> Module:
    """Removes every parametrization of ``module.<param_name>``: the original
    parameter (or, for ``keep_existing_param=False``, a new ``rf.Parameter`` of
    the parametrized value) is the attribute again.

    :param module: a module with a parametrization of ``param_name``
    :param param_name: the parametrized name
    :return: ``module``
    """
    prop = vars(type(module)).get(param_name) if is_parametrized(module) else None
    if not isinstance(prop, _Property):
        raise ValueError(f"remove_parametrization: {param_name} of {module!r} is not parametrized")
    delattr(type(module), param_name)
    if prop.original is None:
        setattr(module, param_name, Parameter(prop.chain[0]()))
    if not any(isinstance(v, _Property) for v in vars(type(module)).values()):
        module.__class__ = type(module).__bases__[0]
    return module


def is_parametrized(module: Module, param_name: str | None = None) -> bool:
    """Whether ``module`` has a parametrization (of ``param_name``, if given).

    :param module: any module
    :param param_name: a parameter name, or None for any
    :return: True if parametrized
    """
    if type(type(module)) is not _Metaclass:
        return False
    return param_name is None or isinstance(vars(type(module)).get(param_name), _Property)
