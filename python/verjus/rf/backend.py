"""RETURNN's backend selection and dtype defaults, for RETURNN code on verjus.

RETURNN's frontend runs on one of several backends (``rf.select_backend_torch()``
and friends); on verjus the backend is verjus, so these calls are accepted and
select nothing, and the queries say what verjus is: eager, float32 by default,
int32 for dim sizes and indices; a tensor's ``raw_tensor`` is a numpy array
(``get_raw_tensor_type``), which knows nothing of dims. Devices are chosen with
``rf.set_default_device``.

RETURNN's behavior version and its ``rf_*`` config options (``rf_use_mask``,
...) change what some of its ops compute. verjus has no global config of its
own and behaves as RETURNN's newest version, unless RETURNN's settings are in
effect in the process (``returnn_behavior_version``: a RETURNN config loaded,
as ``verjus returnn CONFIG`` does, or a behavior version set): then the ops
that depend on them follow RETURNN's (``use_mask_default``, ``rf.conv``,
``rf.pool``, ``rf.transposed_conv``, ``rf.stft``, the scatter family, ``rf.pad``,
the attention weights' dropout, SpecAugment, the Transformer decoder's and the
Conformer's defaults).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

import numpy as np

from verjus._verjus import Tensor

# RETURNN's type aliases (``rf.types``): a raw value ``convert_to_tensor`` takes, and
# a ``Tensor.__getitem__`` key.
RawTensorTypes = int | float | complex | np.number | np.ndarray | bool | str
ItemKeyType = RawTensorTypes | Tensor | slice | Sequence[RawTensorTypes | Tensor | slice]


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


def get_raw_tensor_type() -> type:
    """The type of a tensor's ``raw_tensor`` (RETURNN's backend's raw tensor type):
    ``numpy.ndarray``, the values copied from the device."""
    from verjus.rf._backend import global_backend

    return global_backend.RawTensorType


def is_backend_raw_tensor_dim_tag_independent() -> bool:
    """True: a ``raw_tensor`` (a numpy array) knows nothing of dims (RETURNN's
    TF-layers backend is the one where it does)."""
    return True


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


def _returnn_config() -> Any:
    """RETURNN's global config where RETURNN runs a config in this process (its
    ``returnn.config`` imported and a global config set), else None. RETURNN is
    not imported for this."""
    get = getattr(sys.modules.get("returnn.config"), "get_global_config", None)
    return get(raise_exception=False) if get is not None else None


def returnn_behavior_version() -> int | None:
    """RETURNN's behavior version where RETURNN's settings are in effect in this
    process (a behavior version set, or a RETURNN config loaded, as ``verjus
    returnn CONFIG`` does): ``BehaviorVersion.get()``, 0 for a config that sets
    none, as in RETURNN. None otherwise: verjus's own behavior, RETURNN's newest."""
    versions = getattr(sys.modules.get("returnn.util.basic"), "BehaviorVersion", None)
    if versions is None:
        return None
    if versions.get_if_set() is None and _returnn_config() is None:
        return None
    return versions.get()


def behavior_version_at_least(version: int) -> bool:
    """Whether RETURNN's behavior ``version`` (or a newer one) is in effect (see
    ``returnn_behavior_version``; True with none)."""
    current = returnn_behavior_version()
    return current is None or current >= version


def returnn_config_bool(key: str) -> bool | None:
    """The bool option ``key`` (e.g. ``rf_use_mask``) of RETURNN's global config
    (see ``returnn_behavior_version``), None where not set or there is none."""
    config = _returnn_config()
    if config is None:
        return None
    if key in config.typed_dict:
        value = config.typed_dict[key]
        if value is not None and not isinstance(value, bool):
            raise TypeError(f"config option {key}: expected a bool, got {value!r}")
        return value
    if key in config.dict:
        return config.bool(key, None)
    return None


def use_mask_default(
    *,
    default: bool | None = None,
    default_false_for_behavior_version_up_to: int | None = None,
    func_name: str | None = None,
) -> bool | None:
    """RETURNN's default of ``use_mask`` arguments: RETURNN's config options
    ``rf_use_mask`` and ``rf_use_mask_<func_name>`` where RETURNN's settings are
    in effect (see ``returnn_behavior_version``), then False with a behavior
    version up to ``default_false_for_behavior_version_up_to``, else ``default``
    (masking is what verjus's ops do unless told)."""
    value = returnn_config_bool("rf_use_mask")
    if value is None and func_name:
        value = returnn_config_bool(f"rf_use_mask_{func_name}")
    if value is not None:
        return value
    if default_false_for_behavior_version_up_to is not None and not behavior_version_at_least(
        default_false_for_behavior_version_up_to + 1
    ):
        return False
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
