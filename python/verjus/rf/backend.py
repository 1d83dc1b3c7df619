"""RETURNN's backend selection and dtype defaults, for RETURNN code on verjus.

RETURNN's frontend runs on one of several backends (``rf.select_backend_torch()``
and friends); on verjus the backend is verjus, so these calls are accepted and
select nothing, and the queries say what verjus is: eager, float32 by default,
int32 for dim sizes and indices. Devices are chosen with
``rf.set_default_device``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol


class GetModelFunc(Protocol):
    """RETURNN's type of ``get_model``: ``get_model(*, epoch, step) -> rf.Module``."""

    def __call__(self, *, epoch: int, step: int) -> Any:
        """Makes the model for ``epoch`` and ``step``."""


class StepFunc(Protocol):
    """RETURNN's type of ``train_step`` / ``forward_step``: ``(*, model, extern_data)``."""

    def __call__(self, *, model: Any, extern_data: Any) -> None:
        """Runs one step of ``model`` on ``extern_data``, marking losses or outputs."""


def select_backend(name: str) -> None:
    """Accepted for RETURNN code (``"torch"``, ``"numpy"``, ...): verjus is the backend."""
    del name


def select_backend_torch() -> None:
    """Accepted for RETURNN code: verjus is the backend."""


def select_backend_numpy() -> None:
    """Accepted for RETURNN code: verjus is the backend."""


def get_selected_backend() -> str:
    """``"verjus"``."""
    return "verjus"


def is_executing_eagerly() -> bool:
    """True: every op computes when called."""
    return True


def get_default_float_dtype() -> str:
    """``"float32"``."""
    return "float32"


def set_default_float_dtype(dtype: str) -> None:
    """Only ``"float32"`` is supported (reduced precision is not in verjus yet)."""
    if dtype != "float32":
        raise ValueError(f"set_default_float_dtype: only float32 is supported, got {dtype!r}")


@contextmanager
def set_default_float_dtype_ctx(dtype: str) -> Iterator[None]:
    """``set_default_float_dtype`` for a block (only float32)."""
    set_default_float_dtype(dtype)
    yield


def get_default_int_dtype() -> str:
    """``"int32"``, the dtype of sizes and indices verjus makes."""
    return "int32"


def get_default_array_index_dtype() -> str:
    """``"int32"``."""
    return "int32"


def is_float_dtype(dtype: str) -> bool:
    """Whether ``dtype`` is a float dtype."""
    return dtype.startswith("float") or dtype.startswith("bfloat")


def use_mask_default(
    *,
    default: bool | None = None,
    default_false_for_behavior_version_up_to: int | None = None,
    func_name: str | None = None,
) -> bool | None:
    """RETURNN's default of ``use_mask`` arguments: verjus has no global config
    that sets it, so ``default`` (masking is what verjus's ops do unless told)."""
    del default_false_for_behavior_version_up_to, func_name
    return default


@contextmanager
def set_default_device_ctx(device: str | None) -> Iterator[None]:
    """``rf.set_default_device(device)`` for a block (None: unchanged)."""
    from verjus import _verjus

    old = _verjus.rf_get_default_device()
    if device is not None:
        _verjus.rf_set_default_device(device)
    try:
        yield
    finally:
        _verjus.rf_set_default_device(old)
