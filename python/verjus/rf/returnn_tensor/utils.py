"""``returnn.tensor.utils`` for RETURNN code on verjus: filling templates with test data."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from verjus._verjus import Dim
from verjus.rf.tensor_dict import TensorDict


def tensor_dict_fill_random_numpy_(
    tensor_dict: TensorDict,
    *,
    rnd: int | np.random.RandomState = 42,
    dyn_dim_max_sizes: Mapping[Dim, int] | None = None,
    dyn_dim_min_sizes: Mapping[Dim, int] | None = None,
    **_kwargs: Any,
) -> None:
    """Fills the templates of ``tensor_dict`` with random values (``TensorDict.fill_random_``)."""
    tensor_dict.fill_random_(
        rnd=rnd, dyn_dim_max_sizes=dyn_dim_max_sizes, dyn_dim_min_sizes=dyn_dim_min_sizes
    )
