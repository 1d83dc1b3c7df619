"""Piecewise linear functions, after RETURNN's ``rf.PiecewiseLinear`` and
``rf.PiecewiseLinearStepwiseScheduler`` (``returnn/frontend/piecewise_linear.py``,
``stepwise_scheduler.py``): a function given by its values at sorted points,
linear in between and constant outside, e.g. a learning-rate or dropout
schedule over the train step.

The points and values are RETURNN's auxiliary parameters ``_keys`` and
``_values`` (not trained), so state dicts load by name. The interpolation is
composed of rf ops (compare, ``reduce_sum``, ``gather``, arithmetic), so it is
differentiable in ``x`` and in the values.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from verjus._verjus import Dim, Tensor
from verjus.rf.module import Module
from verjus.rf.parameter import Parameter
from verjus.rf.run_ctx import get_run_ctx

__all__ = ["PiecewiseLinear", "PiecewiseLinearStepwiseScheduler"]


def _stacked_values(values: list[float | Tensor], points_dim: Dim) -> Parameter:
    """The values over ``[points_dim, *dims]``: numbers, or Tensors all of the same dims."""
    from verjus import rf

    tensors = [v if isinstance(v, Tensor) else rf.convert_to_tensor(float(v)) for v in values]
    dims = list(tensors[0].dims)
    for t in tensors:
        if set(t.dims) != set(dims) or len(t.dims) != len(dims):
            raise ValueError(
                f"PiecewiseLinear: the values must all have the same dims, got "
                f"{[d.name for d in dims]} and {[d.name for d in t.dims]}"
            )
    array = np.stack([t.copy_transpose(dims).numpy() if dims else t.numpy() for t in tensors])
    return Parameter([points_dim, *dims], initial=array, auxiliary=True, trainable=False)


class PiecewiseLinear(Module):
    """A piecewise linear function through ``points`` (RETURNN's): between two
    neighbouring keys the values are interpolated linearly; below the first
    key it is the first value, above the last the last.

    :param points: key -> value (a number, or a Tensor: then the function's
        result also has the value's dims); at least one
    """

    def __init__(self, points: dict[int | float, float | Tensor]) -> None:
        super().__init__()
        if not points:
            raise ValueError("PiecewiseLinear: points must not be empty")
        self._points_sorted = sorted(points.items(), key=lambda kv: kv[0])
        self.points_dim = Dim(len(self._points_sorted), name="pcw_schd_pieces")
        keys = np.array([k for k, _ in self._points_sorted], np.float32)
        self._keys = Parameter([self.points_dim], initial=keys, auxiliary=True, trainable=False)
        self._values = _stacked_values([v for _, v in self._points_sorted], self.points_dim)

    def __call__(self, x: Tensor | float) -> Tensor:
        """The function at ``x``.

        :param x: over any dims (or a number)
        :return: over ``x``'s dims (plus the values' dims), float32
        """
        from verjus import rf

        x = rf.cast(rf.convert_to_tensor(x), "float32")
        n = self.points_dim.dimension
        if n == 1:
            return rf.gather(self._values, indices=0, axis=self.points_dim) + x * 0.0
        # the first key >= x (RETURNN's search_sorted), kept within [1, n - 1]
        below = rf.cast(rf.compare(self._keys, "<", x, allow_broadcast_all_sources=True), "float32")
        index = rf.reduce_sum(below, axis=self.points_dim)
        index = rf.cast(rf.combine(rf.combine(index, "maximum", 1.0), "minimum", n - 1.0), "int32")
        x_start = rf.gather(self._keys, indices=index - 1, axis=self.points_dim)
        x_end = rf.gather(self._keys, indices=index, axis=self.points_dim)
        frac = (x - x_start) / (x_end - x_start)
        frac = rf.combine(rf.combine(frac, "maximum", 0.0), "minimum", 1.0)
        y_start = rf.gather(self._values, indices=index - 1, axis=self.points_dim)
        y_end = rf.gather(self._values, indices=index, axis=self.points_dim)
        return y_start + (y_end - y_start) * frac


class PiecewiseLinearStepwiseScheduler(PiecewiseLinear):
    """``PiecewiseLinear`` over the train step (RETURNN's): called with any
    arguments (ignored), it gives the function at ``get_run_ctx().step``.

    Example: ``PiecewiseLinearStepwiseScheduler({0: 1.0, 10000: 0.1})``
    decays from 1.0 at step 0 linearly to 0.1 at step 10000.
    """

    def __call__(self, *_args: Any, **_kwargs: Any) -> Tensor:
        """The function at the current train step."""
        step = get_run_ctx().step
        return super().__call__(step if isinstance(step, Tensor) else float(step))
