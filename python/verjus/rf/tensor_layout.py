"""``TensorLayout`` and ``get_tensor_layout``, after RETURNN's ``rf.tensor_layout``:
where a tensor is kept, as far as a new tensor made like it follows it — the
backend, the device and a backend-specific storage (not the dtype, not the dims).

verjus has one backend (``verjus.rf._backend.Backend``) and one plain storage
per device, so a layout is the device (None for a template, which has no values).
Equal layouts make new tensors the same way, so a layout can be part of a cache
key.
"""

from __future__ import annotations

from typing import Any

from verjus._verjus import Tensor

__all__ = ["TensorLayout", "get_tensor_layout"]


class TensorLayout:
    """The backend, the device and the storage layout of a tensor (see the module
    docs); compares and hashes by those three."""

    def __init__(self, *, backend: type, device: str | None, storage: Any = None) -> None:
        """
        :param backend: the backend class (``verjus.rf._backend.Backend``)
        :param device: e.g. ``"cpu"``, ``"cuda:0"``; None for a template
        :param storage: a backend-specific hashable layout; None: the plain one
        """
        self.backend = backend
        self.device = device
        self.storage = storage

    def _key(self) -> tuple[Any, ...]:
        return self.backend, self.device, self.storage

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TensorLayout) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        name = self.backend.__name__
        return f"TensorLayout(backend={name}, device={self.device!r}, storage={self.storage!r})"


def get_tensor_layout(x: Tensor) -> TensorLayout:
    """The layout of ``x``: verjus's backend, ``x.device`` (None for a template),
    the plain storage."""
    from verjus.rf._backend import global_backend

    device = None if x.is_template() else x.device
    return TensorLayout(backend=type(global_backend), device=device)
