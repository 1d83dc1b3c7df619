"""``sequence_mask`` with RETURNN's signature (a ``device`` to put the mask on).

The native ``sequence_mask`` builds the mask where the lengths are; RETURNN's
``rf.sequence_mask(dims, device=...)`` also names the device of the result.
"""

from __future__ import annotations

from collections.abc import Sequence

from verjus._verjus import Dim, Tensor
from verjus._verjus import rf_sequence_mask as _sequence_mask
from verjus.rf._dim_args import takes_dims
from verjus.rf.device import copy_to_device

__all__ = ["sequence_mask"]


@takes_dims
def sequence_mask(dims: Dim | Sequence[Dim], *, device: str | None = None) -> Tensor:
    """The bool mask of the valid frames of the dynamic dims among ``dims``
    (True within every sequence's length), over the lengths' dims and those
    dims; a True scalar when none is dynamic. ``device``: where to put it
    (default: where the lengths are)."""
    if isinstance(dims, Dim):
        dims = [dims]
    return copy_to_device(_sequence_mask(list(dims)), device)


sequence_mask.extends_native = _sequence_mask  # the native op this wraps (see tests/test_docs.py)
