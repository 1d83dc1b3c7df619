"""Runs RETURNN model code on verjus: ``returnn.frontend`` and ``returnn.tensor`` resolve to verjus.

RETURNN model files, configs and tests import ``returnn.frontend as rf`` and
``from returnn.tensor import Tensor, Dim, TensorDict, batch_dim``. After
``install()``, those imports (and their submodules, such as
``returnn.frontend.encoder.conformer`` or ``returnn.frontend.tensor_array``)
give verjus's modules, so such code runs on verjus as it is written::

    from verjus.rf import returnn_compat
    returnn_compat.install()
    import returnn.frontend as rf      # verjus.rf

Only these two packages are redirected: the rest of RETURNN (its config,
datasets, learning-rate control) is RETURNN's own where it is installed.
Without RETURNN, a bare ``returnn`` package is provided so that the imports
resolve. ``uninstall()`` removes the redirection and puts back RETURNN's own
modules that were imported before ``install()``.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from typing import Any

# RETURNN's package -> verjus's module it resolves to.
_REDIRECTS = {"returnn.frontend": "verjus.rf", "returnn.tensor": "verjus.rf.returnn_tensor"}


def _target(fullname: str) -> str | None:
    for prefix, target in _REDIRECTS.items():
        if fullname == prefix or fullname.startswith(prefix + "."):
            return target + fullname[len(prefix) :]
    return None


class _Redirect(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """A finder that gives verjus's modules for RETURNN's redirected ones.

    The import system sets ``__spec__`` on the module a loader creates; the
    verjus module keeps its own (``exec_module`` puts it back), so it still
    imports its submodules under its own name.
    """

    def __init__(self) -> None:
        self._specs: dict[str, Any] = {}

    def find_spec(
        self, fullname: str, path: Any, target: Any = None
    ) -> importlib.machinery.ModuleSpec | None:
        del path, target
        if fullname == "returnn" and importlib.machinery.PathFinder.find_spec("returnn") is None:
            return importlib.util.spec_from_loader(fullname, self, is_package=True)
        if _target(fullname) is None:
            return None
        return importlib.util.spec_from_loader(fullname, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        target = _target(spec.name)
        if target is None:  # the bare `returnn` package
            module = types.ModuleType(
                spec.name, "RETURNN is not installed: a bare package (verjus)"
            )
            module.__path__ = []
            return module
        module = importlib.import_module(target)
        self._specs[target] = module.__spec__
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        # verjus's module is already initialised: only its own spec goes back.
        for target, spec in self._specs.items():
            if sys.modules.get(target) is module:
                module.__spec__ = spec


_finder = _Redirect()
# RETURNN's own modules that install() took out of sys.modules, for uninstall(),
# each with whether it was its parent's attribute of that name.
_real: dict[str, tuple[types.ModuleType, bool]] = {}


def _take_redirected() -> dict[str, tuple[types.ModuleType, bool]]:
    """Removes the modules under the redirected names from ``sys.modules`` (and
    from their parents' attributes, where they are those); returns them."""
    taken = {}
    for name in [n for n in sys.modules if _target(n) is not None]:
        module = sys.modules.pop(name)
        parent, _, child = name.rpartition(".")
        attribute = getattr(sys.modules.get(parent), child, None) is module
        if attribute:
            delattr(sys.modules[parent], child)
        taken[name] = (module, attribute)
    return taken


def install() -> None:
    """Makes ``returnn.frontend`` and ``returnn.tensor`` (and their submodules)
    resolve to verjus (see the module docs). Calling it twice is harmless."""
    if _finder in sys.meta_path:
        return
    sys.meta_path.insert(0, _finder)
    _real.update(_take_redirected())  # RETURNN's own, imported before


def uninstall() -> None:
    """Removes the redirection: the redirected modules leave ``sys.modules`` and
    RETURNN's own modules imported before ``install()`` come back (so RETURNN's
    code imported before and after sees one ``Tensor`` class)."""
    if _finder in sys.meta_path:
        sys.meta_path.remove(_finder)
    _take_redirected()
    for name, (module, attribute) in sorted(_real.items()):
        sys.modules[name] = module
        parent, _, child = name.rpartition(".")
        if attribute and parent in sys.modules:
            setattr(sys.modules[parent], child, module)
    _real.clear()


def is_installed() -> bool:
    """Whether ``install()`` is in effect."""
    return _finder in sys.meta_path


__all__ = ["install", "is_installed", "uninstall"]
