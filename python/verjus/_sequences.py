"""Batches of sequences as the core takes them: padded batch-major arrays and
each example's length.

Sequence networks (a definition input with a leading ``null`` time axis) take
token ids ``[batch, T]`` (int32) or frames ``[batch, T, ...]`` (float32) with
per-example lengths. Python callers often hold a list of variable-length
arrays instead; ``pad`` turns one into the padded form, and ``check_lengths``
checks given lengths, each naming the example and the value at fault.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["check_lengths", "is_ragged", "pad"]

_I32 = np.iinfo(np.int32)


def is_ragged(x: object) -> bool:
    """Whether ``x`` is a list (or tuple) of per-example arrays rather than one array."""
    return isinstance(x, list | tuple) and not (x and np.isscalar(x[0]))


def _ids(values: npt.NDArray[Any], what: str) -> npt.NDArray[np.int32]:
    if values.dtype.kind not in "iu":
        raise TypeError(f"{what} must hold integer token ids, got {values.dtype}")
    if values.size and (values.min() < _I32.min or values.max() > _I32.max):
        bad = values.min() if values.min() < _I32.min else values.max()
        raise ValueError(f"{what}: token id {bad} does not fit int32")
    return values.astype(np.int32, copy=False)


def pad(
    items: Sequence[npt.ArrayLike], what: str, *, ids: bool
) -> tuple[npt.NDArray[Any], npt.NDArray[np.int32]]:
    """``items`` (one array per example, time first) as a padded ``[batch, T, ...]``
    array (int32 token ids when ``ids``, else float32; zeros past each length)
    and the lengths ``[batch]``."""
    if not items:
        raise ValueError(f"{what}: no examples")
    arrays = [np.asarray(a) for a in items]
    unit = arrays[0].shape[1:]
    for b, a in enumerate(arrays):
        if a.ndim == 0:
            raise ValueError(f"{what}: example {b} is a scalar, not a sequence")
        if a.shape[1:] != unit:
            raise ValueError(
                f"{what}: example {b} has frames of shape {list(a.shape[1:])}, "
                f"example 0 {list(unit)}"
            )
    lengths = np.array([len(a) for a in arrays], dtype=np.int32)
    time = max(int(lengths.max()), 1)
    out = np.zeros((len(arrays), time, *unit), dtype=np.int32 if ids else np.float32)
    for b, a in enumerate(arrays):
        out[b, : len(a)] = _ids(a, f"{what}: example {b}") if ids else a
    return out, lengths


def check_lengths(
    lengths: npt.ArrayLike, batch: int, time: int, what: str, *, least: int = 0
) -> npt.NDArray[np.int32]:
    """``lengths`` as int32 ``[batch]``, each in ``least..=time``; a bad one is a
    ``ValueError`` naming its example."""
    given = np.asarray(lengths)
    if given.shape != (batch,) or given.dtype.kind not in "iu":
        raise ValueError(
            f"{what}: lengths must be integers of shape [{batch}] (one per example), "
            f"got {given.dtype} {list(given.shape)}"
        )
    bad = np.flatnonzero((given < least) | (given > time))
    if bad.size:
        b = int(bad[0])
        why = (
            "the loss needs at least one frame"
            if given[b] < least <= time
            else f"the inputs are padded to {time} frames"
        )
        raise ValueError(
            f"{what}: example {b} has length {int(given[b])}, outside {least}..={time} ({why})"
        )
    return given.astype(np.int32, copy=False)
