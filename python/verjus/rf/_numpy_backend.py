"""What RETURNN code imports from ``returnn.frontend._numpy_backend``, on verjus.

RETURNN's numpy backend keeps values as numpy arrays on the host; RETURNN code
names it to make a small tensor there, ``rf.convert_to_tensor(...,
_backend=NumpyBackend)``. On verjus every tensor's ``raw_tensor`` is a numpy
array already, so that backend only means: on the CPU.
"""

from __future__ import annotations

from verjus.rf._backend import Backend


class NumpyBackend(Backend):
    """The host backend: ``convert_to_tensor(..., _backend=NumpyBackend)`` makes
    the tensor on the CPU."""

    name = "numpy"
