"""Weight dropout, weight noise and weight norm as parametrizations, after
RETURNN's ``returnn.frontend.parametrizations`` (and PyTorch's weight norm).

``weight_dropout`` and ``weight_noise`` change the weight only in training
(``rf.get_run_ctx().train_flag``), and compute it in a
``gradient_checkpoint_scope``: neither the mask, the noise nor the derived
weight is kept for backward, only the Philox counter they were drawn at, so
a step costs no weight-sized memory beyond the parameter and its gradient.
Each access draws anew (an LSTM stepped by hand that reads its recurrent
weight every step gets a fresh mask every step, as in RETURNN).
``weight_norm`` replaces the parameter by ``g`` and ``v`` with
``weight = g * v / ||v||``, the norm over every dim but ``dim``.
"""

from __future__ import annotations

from verjus import _verjus
from verjus._verjus import Dim, Tensor
from verjus.rf._dim_args import takes_dims
from verjus.rf.gradient_checkpoint import gradient_checkpoint_scope
from verjus.rf.module import Module
from verjus.rf.parameter import Parameter
from verjus.rf.parametrize import register_parametrization
from verjus.rf.run_ctx import get_run_ctx

__all__ = [
    "WeightDropout",
    "WeightNoise",
    "WeightNorm",
    "weight_dropout",
    "weight_noise",
    "weight_norm",
]


def weight_dropout(module: Module, param_name: str, *, drop_prob: float) -> Module:
    """Dropout on ``module.<param_name>`` in training (RETURNN's
    ``param_dropout``; for an LSTM's ``rec_weight``, ``rec_weight_dropout``).

    :param module: the module holding the parameter
    :param param_name: the parameter's attribute name
    :param drop_prob: the probability to zero an entry, in ``[0, 1)``
    :return: ``module``
    """
    return register_parametrization(module, param_name, WeightDropout(drop_prob))


class WeightDropout:
    """Inverted dropout of a parameter in training, in a checkpoint scope
    (for ``register_parametrization``, or through ``weight_dropout``)."""

    def __init__(self, drop_prob: float) -> None:
        if not 0.0 <= drop_prob < 1.0:
            raise ValueError(f"rf.weight_dropout: drop_prob must be in [0, 1), got {drop_prob}")
        self.drop_prob = drop_prob

    def __repr__(self) -> str:
        return f"WeightDropout(drop_prob={self.drop_prob})"

    def __call__(self, param: Tensor) -> Tensor:
        """The parameter with dropout in training, itself otherwise."""
        if not get_run_ctx().train_flag:
            return param
        with gradient_checkpoint_scope():
            return _verjus.rf_dropout(param, self.drop_prob, None, True)


def weight_noise(module: Module, param_name: str, *, std: float) -> Module:
    """Gaussian noise on ``module.<param_name>`` in training (variational
    noise; RETURNN's ``param_variational_noise``).

    :param module: the module holding the parameter
    :param param_name: the parameter's attribute name
    :param std: the noise's standard deviation (>= 0)
    :return: ``module``
    """
    return register_parametrization(module, param_name, WeightNoise(std))


class WeightNoise:
    """``param + N(0, std^2)`` in training, in a checkpoint scope (for
    ``register_parametrization``, or through ``weight_noise``)."""

    def __init__(self, std: float) -> None:
        if not std >= 0.0:
            raise ValueError(f"rf.weight_noise: std must be >= 0, got {std}")
        self.std = std

    def __repr__(self) -> str:
        return f"WeightNoise(std={self.std})"

    def __call__(self, param: Tensor) -> Tensor:
        """The parameter with fresh noise in training, itself otherwise."""
        if not get_run_ctx().train_flag:
            return param
        with gradient_checkpoint_scope():
            noise = _verjus.rf_random_normal(list(param.dims), mean=0.0, stddev=self.std)
            return param + noise


@takes_dims
def weight_norm(module: Module, param_name: str, *, dim: Dim | None) -> Module:
    """Weight normalization of ``module.<param_name>`` (PyTorch's): the
    parameter is replaced by ``<param_name>.g`` (over ``dim``; a scalar for
    ``dim=None``) and ``<param_name>.v`` (the weight's dims), and the weight
    is ``g * v / ||v||`` with the norm over every dim but ``dim``. Both start
    so that the weight is what it was. Unlike dropout and noise it applies in
    inference too.

    :param module: the module holding the parameter
    :param param_name: the parameter's attribute name
    :param dim: the dim that keeps its own norm (the output dim), or None
    :return: ``module``
    """
    weight = getattr(module, param_name)
    if not isinstance(weight, Parameter):
        raise TypeError(f"rf.weight_norm: {param_name} is not an rf.Parameter")
    if dim is not None and dim not in weight.dims:
        names = ", ".join(d.name for d in weight.dims)
        raise ValueError(f"rf.weight_norm: dim {dim.name} is not one of the weight's [{names}]")
    return register_parametrization(
        module, param_name, WeightNorm(weight, dim=dim), keep_existing_param=False
    )


class WeightNorm(Module):
    """``g * v / ||v||`` (see ``weight_norm``); ``assign`` sets ``v`` to a
    weight and ``g`` to its norm."""

    def __init__(self, weight: Parameter, *, dim: Dim | None) -> None:
        self.dim = dim
        self.v = Parameter(list(weight.dims), initial=weight)
        self.g = Parameter([dim] if dim is not None else [], initial=self._norm(weight))

    def _norm(self, v: Tensor) -> Tensor:
        others = [d for d in v.dims if d != self.dim]
        return _verjus.rf_sqrt(_verjus.rf_reduce_sum(v * v, axis=others))

    def assign(self, weight: Tensor) -> None:
        """Makes the parametrized value ``weight``."""
        self.v.assign(weight)
        self.g.assign(self._norm(weight))

    def __call__(self) -> Tensor:
        """The weight ``g * v / ||v||``."""
        return self.v * (self.g / self._norm(self.v))
