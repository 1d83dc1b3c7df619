"""``rf.build_from_dict``, after RETURNN's: a module (or function) built from a
dict naming its class, as model configs give submodules (e.g. the Conformer's
``self_att={"class": "rf.RelPosSelfAttention", ...}``).

Class names are ``"rf.Name"`` (an attribute of ``verjus.rf``) or a dotted import
path; RETURNN's own paths (``returnn.frontend...``, e.g.
``returnn.frontend.decoder.transformer.FeedForwardGated``) and ``rf.``-prefixed
sub-module paths resolve to the same names under ``verjus.rf``, so a RETURNN
config's dicts work unchanged. ``NotSpecified`` is RETURNN's marker of a module
option left at its default, shared by all the modules built from options.
"""

from __future__ import annotations

import functools
import importlib
from types import BuiltinFunctionType, FunctionType
from typing import Any

__all__ = ["NotSpecified", "build_dict", "build_from_dict"]

_PREFIXES = ("rf", "returnn.frontend")


class NotSpecified:
    """RETURNN's placeholder default: the argument was not given (the class
    itself is the marker)."""


def build_from_dict(d: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
    """``cls(*args, **d_without_class, **kwargs)`` for ``cls`` named by
    ``d["class"]``; a function is returned as it is, or bound to the arguments
    by ``functools.partial`` if there are any.

    :param d: ``{"class": name, **options}``
    :param args: passed to the class
    :param kwargs: passed to the class
    :return: the built object
    """
    if "class" not in d:
        raise ValueError(f"build_from_dict: missing 'class' key in dict: {d}")
    d = dict(d)
    cls = _get_cls(d.pop("class"))
    if isinstance(cls, (FunctionType, BuiltinFunctionType)) or (
        callable(cls) and not isinstance(cls, type)
    ):
        if args or kwargs or d:
            return functools.partial(cls, *args, **d, **kwargs)
        return cls
    if not isinstance(cls, type):
        raise ValueError(f"build_from_dict: expected a class, got {cls!r}")
    return cls(*args, **d, **kwargs)


def build_dict(cls: Any, **kwargs: Any) -> dict[str, Any]:
    """The dict that :func:`build_from_dict` turns back into ``cls`` (with
    ``kwargs`` as its options): ``{"class": name, **kwargs}``.

    The name is ``"rf.Name"`` when ``verjus.rf.Name`` is ``cls`` (so the dict
    stays the same when the class moves within ``rf``), else the class's
    ``module.Name``.

    :param cls: a class or a function
    :param kwargs: its options (serializable values)
    :return: the dict
    """
    if not isinstance(cls, (type, FunctionType, BuiltinFunctionType)):
        raise TypeError(f"build_dict: expected a class or function, got {cls!r}")
    import verjus.rf as rf

    # Native ops have their own __name__ (``rf_relu``); their rf name is where they are bound.
    names = [cls.__name__] + [k for k, v in vars(rf).items() if v is cls and not k.startswith("_")]
    for name in names:
        if getattr(rf, name, None) is cls:
            return {"class": f"rf.{name}", **kwargs}
    return {"class": f"{cls.__module__}.{cls.__qualname__}", **kwargs}


def _get_cls(name: str) -> Any:
    if not isinstance(name, str) or "." not in name:
        raise ValueError(f"build_from_dict: expected a dotted class name, got {name!r}")
    mod_name, attr = name.rsplit(".", 1)
    for prefix in _PREFIXES:
        if mod_name == prefix or mod_name.startswith(prefix + "."):
            mod_name = "verjus.rf" + mod_name[len(prefix) :]
            break
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as e:
        raise ValueError(f"build_from_dict: cannot import {mod_name} (class {name!r}): {e}") from e
    try:
        return getattr(mod, attr)
    except AttributeError:
        raise ValueError(f"build_from_dict: {mod_name} has no {attr!r} (class {name!r})") from None
