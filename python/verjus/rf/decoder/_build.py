"""How the decoder's options become modules, after RETURNN: an option may be a
class, a RETURNN-style build dict (``{"class": ..., **opts}``), a module
instance (copied, as RETURNN's ``copy.deepcopy``) or a plain callable.

``build_from_dict`` resolves ``"class"`` as RETURNN's ``rf.build_from_dict``
does, with ``rf.X`` and ``returnn.frontend.X`` (and their sub-modules, e.g.
``returnn.frontend.decoder.transformer.X``) looked up in ``verjus.rf`` (so
a RETURNN config's dicts work with only the import changed).

``copy_module`` stands in for ``copy.deepcopy`` of a module: verjus ``Dim``
and ``Tensor`` handles cannot be pickled, and dims must stay shared anyway (a
copied layer works on the same ``out_dim``), so sub-modules and parameters are
copied (the copy's parameters start with the same values) while dims,
functions and other values are shared.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from types import BuiltinFunctionType, FunctionType
from typing import Any

from verjus.rf.module import Module
from verjus.rf.parameter import Parameter

__all__ = ["build", "build_from_dict", "copy_module"]

_RETURNN_PREFIX = "returnn.frontend"


def _resolve(name: Any) -> Any:
    if not isinstance(name, str):
        return name
    if "." not in name:
        raise ValueError(f"build_from_dict: expected a dotted class name, got {name!r}")
    mod_name, attr = name.rsplit(".", 1)
    for prefix in ("rf", _RETURNN_PREFIX):
        if mod_name == prefix or mod_name.startswith(prefix + "."):
            mod_name = "verjus.rf" + mod_name[len(prefix) :]
            break
    try:
        return getattr(importlib.import_module(mod_name), attr)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"build_from_dict: cannot find class {name!r} ({e})") from e


def build_from_dict(d: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
    """``cls(*args, **d, **kwargs)`` for ``cls = d["class"]`` (a class, a
    function, or its dotted name), as RETURNN's ``rf.build_from_dict``; a
    function with options becomes a ``functools.partial``.

    :param d: ``{"class": ..., **options}``
    :param args: passed to the class
    :param kwargs: passed to the class
    :return: the built object
    """
    if "class" not in d:
        raise ValueError(f"build_from_dict: missing 'class' key in {d}")
    d = dict(d)
    cls = _resolve(d.pop("class"))
    if isinstance(cls, (FunctionType, BuiltinFunctionType, functools.partial)):
        return functools.partial(cls, *args, **d, **kwargs) if args or kwargs or d else cls
    if not isinstance(cls, type):
        raise ValueError(f"build_from_dict: expected a class or function, got {cls!r}")
    return cls(*args, **d, **kwargs)


def copy_module(module: Module) -> Module:
    """A copy of ``module`` with its own sub-modules and parameters (see the
    module doc).

    :param module: the module to copy
    :return: the copy
    """
    return _copy(module, {})


def _copy(obj: Any, memo: dict[int, Any]) -> Any:
    if id(obj) in memo:
        return memo[id(obj)]
    if isinstance(obj, Parameter):
        new: Any = Parameter(
            list(obj.dims),
            initial=obj.numpy(),
            trainable=obj.trainable,
            auxiliary=obj.auxiliary,
            weight_decay=obj.weight_decay,
        )
    elif isinstance(obj, Module):
        new = object.__new__(type(obj))
        memo[id(obj)] = new
        for key, value in vars(obj).items():
            object.__setattr__(new, key, _copy(value, memo))
    elif isinstance(obj, (list, tuple)):
        items = [_copy(v, memo) for v in obj]
        new = type(obj)(items) if not hasattr(obj, "_fields") else type(obj)(*items)
    elif isinstance(obj, dict):
        new = type(obj)([(k, _copy(v, memo)) for k, v in obj.items()])
    else:
        return obj
    memo[id(obj)] = new
    return new


def build(
    who: str, option: Any, default: Callable[..., Any], *args: Any, **kwargs: Any
) -> Callable[..., Any]:
    """The module for ``option``: ``default`` if None, a class called with
    ``*args, **kwargs``, a build dict (its own keys win), a copied module, or
    a plain callable used as it is.

    :param who: names the option in errors
    :param option: the option's value
    :param default: the class used when ``option`` is None
    :return: a module or callable
    """
    if option is None:
        option = default
    if isinstance(option, Module):
        return copy_module(option)
    if isinstance(option, type):
        return option(*args, **kwargs)
    if isinstance(option, dict):
        return build_from_dict(
            option, *args, **{k: v for k, v in kwargs.items() if k not in option}
        )
    if callable(option):
        return option
    raise TypeError(f"{who}: unexpected type {type(option).__name__} ({option!r})")
