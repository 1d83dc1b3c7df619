"""Settings handed to the Rust core as JSON.

JSON has no NaN or infinity: ``json.dumps`` would write ``NaN``, which the
core's parser refuses with a line and column but no field name. So a
non-finite setting is refused here, naming it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

__all__ = ["dumps_finite"]


def dumps_finite(config: Mapping[str, Any], what: str) -> str:
    """``config`` as JSON text; ``ValueError`` naming the first NaN or infinite
    number by its field (``SGD: lr must be a finite number, got nan``)."""
    _check_finite(config, what, "")
    return json.dumps(config, allow_nan=False)


def _check_finite(value: Any, what: str, field: str) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{what}: {field} must be a finite number, got {value}")
    if isinstance(value, Mapping):
        for key, item in value.items():
            _check_finite(item, what, str(key))
    elif isinstance(value, (list, tuple)):
        for item in value:
            _check_finite(item, what, field)
