"""Post hooks on an object's method, after RETURNN's ``rf.hooks`` (what
``Module.register_forward_hook`` is built on).

``setup_post_hook_on_method(obj, attr, hook)`` makes ``obj.<attr>(*args,
**kwargs)`` call the class's method and then each hook, in order, as
``result = hook(obj, args, kwargs, result)``: a hook's return value is the new
result (also None, as in RETURNN). The hooks belong to that one object: the
method becomes an instance attribute holding them. ``obj(...)`` looks ``__call__``
up on the class, so for ``attr="__call__"`` the class gets a ``__call__`` that
passes a call on to the object's hooks where it has any (and to the class's own
method otherwise), and loses it again when no object of the class has hooks.
``RemovableHandle.remove()`` removes a hook; the object's last one removed, the
method is the class's again.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

__all__ = ["RemovableHandle", "setup_post_hook_on_method"]

Hook = Callable[[Any, tuple, dict, Any], Any]

_ids = itertools.count()
# Per class with a dispatching ``__call__``: how many of its objects have hooks on it.
_hooked_calls: dict[type, int] = {}


def setup_post_hook_on_method(
    obj: Any, attr: str, hook: Hook, *, prepend: bool = False
) -> RemovableHandle:
    """Calls ``hook(obj, args, kwargs, result)`` after each ``obj.<attr>(*args,
    **kwargs)``, its return value the call's result (see the module docs).

    :param obj: e.g. a module (an object with a ``__dict__``)
    :param attr: the method's name, e.g. ``"__call__"``
    :param hook: ``(obj, args, kwargs, result) -> new result``
    :param prepend: run it before the hooks already there (else after them)
    :return: a handle whose ``remove()`` removes the hook
    """
    method = vars(obj).get(attr)
    if not isinstance(method, _HookedMethod):
        if not hasattr(type(obj), attr) or not callable(_class_method(type(obj), attr)):
            raise TypeError(f"setup_post_hook_on_method: {type(obj).__name__}.{attr} is no method")
        method = _HookedMethod(obj, attr)
    return method.add(hook, prepend=prepend)


class RemovableHandle:
    """The handle of one hook (``setup_post_hook_on_method``'s result)."""

    def __init__(self, method: _HookedMethod, key: int) -> None:
        self.id = key
        self._method: _HookedMethod | None = method

    def remove(self) -> None:
        """Removes the hook (again: nothing)."""
        if self._method is not None:
            self._method.discard(self.id)
            self._method = None


def _class_method(cls: type, attr: str) -> Callable[..., Any]:
    """The class's own method ``attr``, beneath a dispatching ``__call__``."""
    method = getattr(cls, attr)
    while isinstance(method, _DispatchingCall):
        method = method.original
    return method


class _HookedMethod:
    """``obj.<attr>`` while it has hooks: the class's method, then the hooks."""

    def __init__(self, obj: Any, attr: str) -> None:
        self.obj, self.attr = obj, attr
        self.hooks: dict[int, Hook] = {}

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        result = _class_method(type(self.obj), self.attr)(self.obj, *args, **kwargs)
        for hook in list(self.hooks.values()):
            result = hook(self.obj, args, kwargs, result)
        return result

    def add(self, hook: Hook, *, prepend: bool) -> RemovableHandle:
        if not self.hooks:
            self._install()
        key = next(_ids)
        self.hooks[key] = hook
        if prepend:
            self.hooks = {key: hook, **{k: h for k, h in self.hooks.items() if k != key}}
        return RemovableHandle(self, key)

    def discard(self, key: int) -> None:
        if self.hooks.pop(key, None) is not None and not self.hooks:
            self._uninstall()

    def _install(self) -> None:
        cls = type(self.obj)
        setattr(self.obj, self.attr, self)
        if self.attr == "__call__":
            own = vars(cls).get("__call__")
            if not isinstance(own, _DispatchingCall):
                cls.__call__ = _DispatchingCall(
                    own if own is not None else cls.__call__, inherited=own is None
                )
                _hooked_calls[cls] = 0
            _hooked_calls[cls] += 1

    def _uninstall(self) -> None:
        cls = type(self.obj)
        if vars(self.obj).get(self.attr) is self:
            delattr(self.obj, self.attr)
        if self.attr == "__call__" and cls in _hooked_calls:
            _hooked_calls[cls] -= 1
            if not _hooked_calls[cls]:
                del _hooked_calls[cls]
                dispatch = vars(cls).get("__call__")
                if isinstance(dispatch, _DispatchingCall):
                    if dispatch.inherited:
                        del cls.__call__
                    else:
                        cls.__call__ = dispatch.original


class _DispatchingCall:
    """A class's ``__call__`` while some of its objects have hooks on it: an object's
    hooked ``__call__`` where it has one, else the class's own."""

    def __init__(self, original: Callable[..., Any], *, inherited: bool) -> None:
        self.original = original  # the class's own, or (inherited) its base's
        self.inherited = inherited

    def __get__(self, obj: Any, objtype: type | None = None) -> Any:
        if obj is None:
            return self
        hooked = vars(obj).get("__call__") if hasattr(obj, "__dict__") else None
        if isinstance(hooked, _HookedMethod):
            return hooked
        return self.original.__get__(obj, objtype)
