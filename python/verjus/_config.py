"""Settings handed to the Rust core as JSON.

JSON has no NaN or infinity: ``json.dumps`` would write ``NaN``, which the
core's parser refuses with a line and column but no field name. So a
non-finite setting is refused here, naming it (and, in a network definition,
its layer). numpy scalars (``np.float32(1e-3)``, ``np.int64(3)``) are written
as the numbers they hold.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["dumps_finite"]


def dumps_finite(config: Mapping[str, Any], what: str, *, part: str | None = None) -> str:
    """``config`` as JSON text; ``ValueError`` naming the first NaN or infinite
    number by its field (``SGD: lr must be a finite number, got nan``). With
    ``part``, a nested mapping with a string ``"name"`` is named instead of
    ``what`` (``part="layer"``: ``layer 'drop': p must be ...``)."""
    _check_finite(config, what, "", part)
    return json.dumps(config, allow_nan=False, default=_numpy_scalar)


def _check_finite(value: Any, what: str, field: str, part: str | None) -> None:
    if isinstance(value, float | np.floating) and not math.isfinite(value):
        raise ValueError(f"{what}: {field} must be a finite number, got {value}")
    if isinstance(value, Mapping):
        name = value.get("name")
        if part is not None and isinstance(name, str):
            what = f"{part} {name!r}"
        for key, item in value.items():
            _check_finite(item, what, str(key), part)
    elif isinstance(value, list | tuple):
        for item in value:
            _check_finite(item, what, field, part)


def _numpy_scalar(value: object) -> object:
    """``json.dumps``'s fallback: a numpy scalar as the Python number it holds."""
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"a setting cannot be a {type(value).__name__}")
