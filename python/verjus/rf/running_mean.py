"""``RunningMean``, after RETURNN's ``rf.RunningMean`` (``returnn/frontend/reduce.py``):
an exponential moving average of the mean of its inputs, kept in the auxiliary
parameter ``mean`` (RETURNN's name, so state dicts load by name).

Each call (in training, or always with ``update_only_in_train=False``) takes
the masked mean of the input over every dim but the mean's and moves ``mean``
towards it: ``mean += alpha * (new - mean)``. The update is an assignment
(no gradient), as RETURNN's ``assign_add``.
"""

from __future__ import annotations

from collections.abc import Sequence

from verjus._verjus import Dim, Tensor
from verjus.rf.module import Module
from verjus.rf.parameter import Parameter
from verjus.rf.run_ctx import get_run_ctx

__all__ = ["RunningMean"]


class RunningMean(Module):
    """Running mean by exponential moving average (RETURNN's).

    :param in_dim: the dim of the mean vector, or its dims
    :param alpha: the weight of the new value (0: never changes, 1: the latest
        value); e.g. 0.1 or 0.001
    :param dtype: float32 (None)
    :param is_prob_distribution: start at ``1 / in_dim`` (else 0)
    :param update_only_in_train: update only while
        ``get_run_ctx().train_flag`` (else on every call)
    """

    def __init__(
        self,
        in_dim: Dim | Sequence[Dim],
        *,
        alpha: float,
        dtype: str | None = None,
        is_prob_distribution: bool | None = None,
        update_only_in_train: bool = True,
    ) -> None:
        super().__init__()
        self.in_dim = in_dim
        self.shape = (in_dim,) if isinstance(in_dim, Dim) else tuple(in_dim)
        if not all(isinstance(d, Dim) for d in self.shape):
            raise TypeError(f"RunningMean: in_dim must be a Dim or Dims, got {in_dim!r}")
        self.alpha = alpha
        self.is_prob_distribution = is_prob_distribution
        initial = 0.0
        if is_prob_distribution:
            if not isinstance(in_dim, Dim) or in_dim.dimension is None:
                raise ValueError("RunningMean: is_prob_distribution needs one static in_dim")
            initial = 1.0 / in_dim.dimension
        self.mean = Parameter(
            list(self.shape), dtype=dtype, auxiliary=True, trainable=False, initial=initial
        )
        self.update_only_in_train = update_only_in_train

    def __call__(self, x: Tensor) -> Tensor:
        """Updates the mean by ``x`` (see the class doc) and returns it.

        :param x: over the mean's dims and any others (averaged over, padding masked)
        :return: ``mean``, over ``in_dim``
        """
        from verjus import rf

        missing = [d.name for d in self.shape if d not in x.dims]
        if missing:
            have = ", ".join(d.name for d in x.dims)
            raise ValueError(f"RunningMean: {missing} not among the input's dims [{have}]")
        if not self.update_only_in_train or get_run_ctx().train_flag:
            rest = [d for d in x.dims if d not in self.shape]
            new = rf.reduce_mean(x, axis=rest) if rest else x
            old = self.mean.numpy()
            new = new.copy_transpose(list(self.shape)).numpy()
            self.mean.assign(old + self.alpha * (new - old))
        return self.mean
