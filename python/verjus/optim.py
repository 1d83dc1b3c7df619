"""Optimizers and learning-rate schedules, for the ``Trainer`` and for
``verjus.rf`` models alike.

These are settings, not algorithms: each object turns into the Rust solver's
configuration (``SolverConfig`` JSON), and the update itself runs in Rust as a
fused op on the parameters' device. The update equations are those of
``torch.optim.SGD``, ``Adam`` and ``AdamW`` (see ``crates/verjus-core/src/optim``),
the same for both uses (``NAdam``, ``torch.optim.NAdam``'s, is composed
from elementwise ops in ``crates/verjus-core/src/optim/nadam.rs``). A
``Trainer`` applies them to the mean gradient of the actual batch:

    trainer = verjus.Trainer(net, verjus.optim.Adam(lr=1e-3))
    verjus.optim.SGD(lr=0.1, momentum=0.9, nesterov=True,
                     schedule=verjus.optim.StepLR(step_size=1000, gamma=0.5))

Given RF parameters first (as ``torch.optim``), an optimizer is bound to them
and steps them itself, with the gradients ``backward`` left (``verjus.rf.SGD``,
``Adam`` and ``AdamW`` are these classes). Parameters marked
``trainable=False`` (RETURNN's flag on ``rf.Parameter``) are left out, as
RETURNN's engine does:

    opt = verjus.rf.Adam(model.parameters(), lr=1e-3, clip_norm=1.0)
    opt.zero_grad(); loss.backward(); opt.step()

Values are checked by the core when an optimizer or a schedule is made, as
in PyTorch: a bad one (``Adam(lr=-1)``, ``lr=float("nan")``,
``StepLR(step_size=0)``) raises ``ValueError`` naming the field, where the
mistake is written. Settings changed on the object afterwards are checked
again when a ``Trainer`` is made from it. A bound optimizer reads its
settings once, when it is made.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from verjus import distributed
from verjus._config import dumps_finite
from verjus._verjus import RfOptimizer, Tensor, check_schedule, check_solver_config

__all__ = [
    "SGD",
    "Adam",
    "AdamW",
    "Constant",
    "CosineWarmup",
    "NAdam",
    "Optimizer",
    "Schedule",
    "StepLR",
    "clip_grad_norm_",
]


# Settings that are counts or flags; every other one is a real number.
_COUNTS = frozenset({"step_size", "warmup_steps", "total_steps"})
_FLAGS = frozenset({"nesterov", "decoupled"})


def _check_types(owner: str, fields: Mapping[str, Any]) -> None:
    """Each setting has its type (``TypeError`` naming it if not), and a count is
    not negative: the core reads counts as unsigned and would not name the field."""
    for field, value in fields.items():
        if value is None and field == "clip_norm":
            continue
        if field in _FLAGS:
            if not isinstance(value, bool):
                raise TypeError(f"{owner}: {field} must be True or False, got {value!r}")
        elif field in _COUNTS:
            if isinstance(value, bool) or not isinstance(value, numbers.Integral):
                raise TypeError(f"{owner}: {field} must be an int, got {value!r}")
            if value < 0:
                raise ValueError(f"{owner}: {field} must be >= 0, got {value}")
        elif isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"{owner}: {field} must be a number, got {value!r}")


class Schedule:
    """How the learning rate changes with the step number."""

    def config(self) -> Any:
        """The Rust ``LrSchedule`` as JSON-ready data."""
        raise NotImplementedError

    def _check(self) -> None:
        """Checks the settings with the core's rules; called last by each
        subclass's ``__init__``, so a bad one fails where it is written."""
        ((_, fields),) = self.config().items()
        _check_types(type(self).__name__, fields)
        check_schedule(dumps_finite(self.config(), type(self).__name__))


class Constant(Schedule):
    """The base learning rate at every step."""

    def config(self) -> Any:
        return "Constant"

    def __repr__(self) -> str:
        return "Constant()"


class StepLR(Schedule):
    """``lr · gamma ** (step // step_size)`` (``torch.optim.lr_scheduler.StepLR``, per step)."""

    def __init__(self, step_size: int, gamma: float = 0.1) -> None:
        self.step_size = step_size
        self.gamma = gamma
        self._check()

    def config(self) -> Any:
        return {"Step": {"step_size": self.step_size, "gamma": self.gamma}}

    def __repr__(self) -> str:
        return f"StepLR(step_size={self.step_size}, gamma={self.gamma})"


class CosineWarmup(Schedule):
    """Linear warm-up over ``warmup_steps``, then a half cosine down to ``min_lr``
    at ``total_steps`` (and ``min_lr`` after)."""

    def __init__(self, warmup_steps: int, total_steps: int, min_lr: float = 0.0) -> None:
        self.warmup_steps = warmup_steps
        self.total_steps = total_steps
        self.min_lr = min_lr
        self._check()

    def config(self) -> Any:
        return {
            "Cosine": {
                "warmup_steps": self.warmup_steps,
                "total_steps": self.total_steps,
                "min_lr": self.min_lr,
            }
        }

    def __repr__(self) -> str:
        return (
            f"CosineWarmup(warmup_steps={self.warmup_steps}, total_steps={self.total_steps}, "
            f"min_lr={self.min_lr})"
        )


class Optimizer:
    """An update rule with a schedule and optional clipping of the mean
    gradient to a global L2 norm (``clip_norm``); bound to RF parameters when
    made with them."""

    _bound: RfOptimizer | None = None

    def __init__(self, lr: float, schedule: Schedule | None, clip_norm: float | None) -> None:
        if schedule is not None and not isinstance(schedule, Schedule):
            raise TypeError(f"schedule must be a verjus.optim schedule, got {schedule!r}")
        self.lr = lr
        self.schedule = schedule or Constant()
        self.clip_norm = clip_norm

    def rule(self) -> dict[str, Any]:
        """The Rust ``UpdateRule`` as JSON-ready data."""
        raise NotImplementedError

    def config(self) -> dict[str, Any]:
        """The Rust ``SolverConfig`` as JSON-ready data."""
        return {
            "rule": self.rule(),
            "schedule": self.schedule.config(),
            "clip_norm": self.clip_norm,
        }

    def to_json(self) -> str:
        """The ``SolverConfig`` as JSON text; a NaN or infinite setting raises
        ``ValueError`` naming it (JSON has no such numbers)."""
        return dumps_finite(self.config(), type(self).__name__)

    def _bind(self, params: Iterable[Tensor] | None) -> None:
        """Checks the settings with the core's rules (so a bad one fails where it
        is written) and binds to the trainable ones of ``params`` (if given),
        with the settings as they are now; called last by each subclass's
        ``__init__``."""
        ((_, fields),) = self.rule().items()
        _check_types(type(self).__name__, {**fields, "clip_norm": self.clip_norm})
        check_solver_config(self.to_json())
        if params is not None:
            trainable = [p for p in params if getattr(p, "trainable", None) is not False]
            self._bound = RfOptimizer(trainable, self.to_json())
            if distributed.communicator() is not None:
                self.replicate()

    def replicate(self, param_sync_step: int | None = None) -> None:
        """Trains data-parallel with the ranks ``verjus.distributed.init``
        joined (done when made after ``init``): the parameters become rank 0's,
        and each ``step`` (which every rank must call) averages the gradients
        over the ranks first, or, with ``param_sync_step`` N, averages the
        parameters after every N-th step (RETURNN's ``reduce_type`` "param";
        call ``average_parameters`` before saving)."""
        comm = distributed.communicator()
        if comm is None:
            raise RuntimeError(
                f"{type(self).__name__}.replicate: no ranks joined; call "
                "verjus.distributed.init() in a process started by mpirun"
            )
        self._rf().replicate(comm, param_sync_step)

    def average_parameters(self) -> None:
        """Replaces the bound parameters by their mean over the ranks (parameter
        averaging's sync at an epoch's end); nothing when not data-parallel."""
        self._rf().average_parameters()

    def _rf(self) -> RfOptimizer:
        if self._bound is None:
            raise TypeError(
                f"this {type(self).__name__} has no parameters: give them first "
                f"({type(self).__name__}(model.parameters(), ...)) to step RF parameters; "
                "a Trainer steps its network itself"
            )
        return self._bound

    def step(self) -> None:
        """One update of every bound parameter that has a gradient."""
        self._rf().step()

    def zero_grad(self) -> None:
        """Clears every bound parameter's gradient."""
        self._rf().zero_grad()

    @property
    def steps(self) -> int:
        """The number of steps taken over the bound parameters."""
        return self._rf().steps

    def set_lr(self, lr: float) -> None:
        """Sets the base learning rate from the next step on (a learning-rate
        control between epochs or steps); checked as when made."""
        _check_types(type(self).__name__, {"lr": lr})
        if self._bound is not None:
            self._bound.lr = lr
        self.lr = lr

    def clip_grad_value_(self, max_value: float) -> None:
        """Clips every bound gradient to ``[-max_value, max_value]`` elementwise
        (``torch.nn.utils.clip_grad_value_``), before ``step``."""
        self._rf().clip_grad_values(max_value)

    @property
    def state_slot_names(self) -> list[str]:
        """The names of the state buffers each bound parameter has."""
        return list(self._rf().slot_names)

    def state_dict(self) -> dict[str, Any]:
        """The bound optimizer's state, to save beside the parameters:
        ``{"steps": n, "slot_names": [...], "params": [(steps, [buffer, ...]), ...]}``
        (per bound parameter, in the order given; float32 arrays)."""
        bound = self._rf()
        steps, params = bound.state()
        return {"steps": steps, "slot_names": list(bound.slot_names), "params": params}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restores what ``state_dict`` gave, for the same parameters; a state of
        another rule or other parameters is a ValueError and changes nothing."""
        bound = self._rf()
        if list(state["slot_names"]) != list(bound.slot_names):
            raise ValueError(
                f"{type(self).__name__}.load_state_dict: the state has buffers "
                f"{list(state['slot_names'])}, this optimizer keeps {list(bound.slot_names)}"
            )
        bound.load_state(int(state["steps"]), [(int(n), list(b)) for n, b in state["params"]])


class SGD(Optimizer):
    """Stochastic gradient descent with momentum, Nesterov momentum and L2 weight decay."""

    def __init__(
        self,
        params: Iterable[Tensor] | None = None,
        *,
        lr: float,
        momentum: float = 0.0,
        dampening: float = 0.0,
        nesterov: bool = False,
        weight_decay: float = 0.0,
        schedule: Schedule | None = None,
        clip_norm: float | None = None,
    ) -> None:
        super().__init__(lr, schedule, clip_norm)
        self.momentum = momentum
        self.dampening = dampening
        self.nesterov = nesterov
        self.weight_decay = weight_decay
        self._bind(params)

    def rule(self) -> dict[str, Any]:
        """The Rust ``UpdateRule`` as JSON-ready data."""
        return {
            "Sgd": {
                "lr": self.lr,
                "momentum": self.momentum,
                "dampening": self.dampening,
                "nesterov": self.nesterov,
                "weight_decay": self.weight_decay,
            }
        }

    def __repr__(self) -> str:
        return (
            f"SGD(lr={self.lr}, momentum={self.momentum}, nesterov={self.nesterov}, "
            f"weight_decay={self.weight_decay})"
        )


class Adam(Optimizer):
    """Adam; ``weight_decay`` is an L2 penalty added to the gradient."""

    decoupled = False

    def __init__(
        self,
        params: Iterable[Tensor] | None = None,
        *,
        lr: float = 1e-3,
        betas: Sequence[float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        schedule: Schedule | None = None,
        clip_norm: float | None = None,
    ) -> None:
        super().__init__(lr, schedule, clip_norm)
        beta1, beta2 = betas
        self.betas = (float(beta1), float(beta2))
        self.eps = eps
        self.weight_decay = weight_decay
        self._bind(params)

    def rule(self) -> dict[str, Any]:
        """The Rust ``UpdateRule`` as JSON-ready data."""
        return {
            "Adam": {
                "lr": self.lr,
                "beta1": self.betas[0],
                "beta2": self.betas[1],
                "eps": self.eps,
                "weight_decay": self.weight_decay,
                "decoupled": self.decoupled,
            }
        }

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(lr={self.lr}, betas={self.betas}, eps={self.eps}, "
            f"weight_decay={self.weight_decay})"
        )


class AdamW(Adam):
    """Adam with decoupled weight decay (``torch.optim.AdamW``; default decay 0.01)."""

    decoupled = True

    def __init__(
        self,
        params: Iterable[Tensor] | None = None,
        *,
        lr: float = 1e-3,
        betas: Sequence[float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.01,
        schedule: Schedule | None = None,
        clip_norm: float | None = None,
    ) -> None:
        super().__init__(
            params,
            lr=lr,
            betas=betas,
            eps=eps,
            weight_decay=weight_decay,
            schedule=schedule,
            clip_norm=clip_norm,
        )


class NAdam(Optimizer):
    """NAdam (``torch.optim.NAdam``): Adam with Nesterov momentum whose factor
    rises by ``momentum_decay``; ``weight_decay`` is an L2 penalty, or a
    decoupled decay with ``decoupled_weight_decay``."""

    def __init__(
        self,
        params: Iterable[Tensor] | None = None,
        *,
        lr: float = 2e-3,
        betas: Sequence[float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        momentum_decay: float = 0.004,
        decoupled_weight_decay: bool = False,
        schedule: Schedule | None = None,
        clip_norm: float | None = None,
    ) -> None:
        super().__init__(lr, schedule, clip_norm)
        beta1, beta2 = betas
        self.betas = (float(beta1), float(beta2))
        self.eps = eps
        self.weight_decay = weight_decay
        self.momentum_decay = momentum_decay
        self.decoupled_weight_decay = decoupled_weight_decay
        self._bind(params)

    def rule(self) -> dict[str, Any]:
        """The Rust ``UpdateRule`` as JSON-ready data."""
        return {
            "NAdam": {
                "lr": self.lr,
                "beta1": self.betas[0],
                "beta2": self.betas[1],
                "eps": self.eps,
                "weight_decay": self.weight_decay,
                "momentum_decay": self.momentum_decay,
                "decoupled": self.decoupled_weight_decay,
            }
        }

    def __repr__(self) -> str:
        return (
            f"NAdam(lr={self.lr}, betas={self.betas}, eps={self.eps}, "
            f"weight_decay={self.weight_decay}, momentum_decay={self.momentum_decay})"
        )


def clip_grad_norm_(optimizers: Sequence[Optimizer], max_norm: float) -> float:
    """Scales the gradients of the parameters bound to ``optimizers`` (for
    example one per weight-decay group) together to global L2 norm at most
    ``max_norm``, as ``torch.nn.utils.clip_grad_norm_``; returns the norm before.
    A non-finite norm is a ``FloatingPointError``: the loss has diverged."""
    norm = sum(opt._rf().grad_norm() ** 2 for opt in optimizers) ** 0.5
    if not math.isfinite(norm):
        raise FloatingPointError(f"clip_grad_norm_: the gradient norm is {norm}")
    factor = max_norm / (norm + 1e-6)
    if factor < 1.0:
        for opt in optimizers:
            opt._rf().scale_grads(factor)
    return norm


def from_config(config: dict[str, Any]) -> Optimizer:
    """The optimizer of a Rust ``SolverConfig`` (JSON-ready data, as ``config()``
    writes it; ``Trainer.resume`` reads it from a checkpoint)."""
    schedule = _schedule_from_config(config.get("schedule", "Constant"))
    clip_norm = config.get("clip_norm")
    ((kind, rule),) = config["rule"].items()
    if kind == "Sgd":
        return SGD(
            lr=rule["lr"],
            momentum=rule["momentum"],
            dampening=rule["dampening"],
            nesterov=rule["nesterov"],
            weight_decay=rule["weight_decay"],
            schedule=schedule,
            clip_norm=clip_norm,
        )
    if kind == "Adam":
        cls = AdamW if rule["decoupled"] else Adam
        return cls(
            lr=rule["lr"],
            betas=(rule["beta1"], rule["beta2"]),
            eps=rule["eps"],
            weight_decay=rule["weight_decay"],
            schedule=schedule,
            clip_norm=clip_norm,
        )
    if kind == "NAdam":
        return NAdam(
            lr=rule["lr"],
            betas=(rule["beta1"], rule["beta2"]),
            eps=rule["eps"],
            weight_decay=rule["weight_decay"],
            momentum_decay=rule["momentum_decay"],
            decoupled_weight_decay=rule["decoupled"],
            schedule=schedule,
            clip_norm=clip_norm,
        )
    raise ValueError(f"unknown update rule {kind!r}")


def _schedule_from_config(config: Any) -> Schedule:
    if config == "Constant":
        return Constant()
    ((kind, fields),) = config.items()
    if kind == "Step":
        return StepLR(fields["step_size"], fields["gamma"])
    if kind == "Cosine":
        return CosineWarmup(fields["warmup_steps"], fields["total_steps"], fields["min_lr"])
    raise ValueError(f"unknown learning-rate schedule {kind!r}")
