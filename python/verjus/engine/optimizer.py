"""The engine's optimizer: RETURNN's ``optimizer`` dict over an RF model.

RETURNN's PyTorch engine turns ``{"class": "adam", "epsilon": 1e-8, ...}`` into
a ``torch.optim`` optimizer; here the same dict becomes a ``verjus.optim`` one,
with RETURNN's rules: ``epsilon`` is ``eps``, the learning rate comes from
outside (``learning_rate``, never inside the dict), and with ``weight_decay``
the parameters are split in two groups as RETURNN splits them (no decay on
biases and on the modules of ``weight_decay_modules_blacklist``). An option
verjus does not know is an error naming it, never dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from verjus import optim
from verjus.rf.module import Module

__all__ = ["ParamOptimizer"]

# RETURNN's optimizer class names (lower case, as RETURNN matches them) and the
# keyword arguments each takes besides the parameters and the learning rate.
_CLASSES: dict[str, tuple[type[optim.Optimizer], frozenset[str]]] = {
    "sgd": (optim.SGD, frozenset({"momentum", "dampening", "nesterov", "weight_decay"})),
    "adam": (optim.Adam, frozenset({"betas", "eps", "weight_decay"})),
    "adamw": (optim.AdamW, frozenset({"betas", "eps", "weight_decay"})),
    "nadam": (
        optim.NAdam,
        frozenset({"betas", "eps", "weight_decay", "momentum_decay", "decoupled_weight_decay"}),
    ),
}
# Defaults of the classes' weight decay (AdamW decays by default, as in PyTorch).
_DEFAULT_DECAY = {"adamw": 0.01}


class ParamOptimizer:
    """The optimizer(s) of one model: one per weight-decay group, stepped together."""

    def __init__(self, model: Module, options: Mapping[str, Any] | str | None, lr: float) -> None:
        """``options``: RETURNN's ``optimizer`` (a dict with ``"class"``, or a class
        name); ``None`` is RETURNN's default, SGD."""
        if options is None:
            options = {"class": "sgd"}
        elif isinstance(options, str):
            options = {"class": options}
        opts = dict(options)
        name = str(opts.pop("class", "")).lower()
        if name not in _CLASSES:
            raise ValueError(
                f"optimizer: unknown class {name!r}; verjus has {sorted(_CLASSES)} "
                "(RETURNN's names)"
            )
        cls, accepted = _CLASSES[name]
        if "epsilon" in opts:
            opts["eps"] = opts.pop("epsilon")
        if "learning_rate" in opts or "lr" in opts:
            raise ValueError("optimizer: set learning_rate outside of the optimizer dict")
        blacklist = _blacklist(opts.pop("weight_decay_modules_blacklist", None))
        unknown = sorted(set(opts) - accepted)
        if unknown:
            raise ValueError(
                f"optimizer {name!r}: verjus does not support the options {unknown} "
                f"(it takes {sorted(accepted)})"
            )
        decay = float(opts.pop("weight_decay", _DEFAULT_DECAY.get(name, 0.0)))
        groups = _decay_groups(model, blacklist) if decay else {"all": _trainable(model)}
        self.names: list[str] = []  # the parameters, part after part
        self.counts: list[int] = []  # how many of them each part has
        self.parts: list[optim.Optimizer] = []
        for group, params in groups.items():
            if not params:
                continue
            group_decay = decay if group == "decay" else 0.0
            extra = {"weight_decay": group_decay} if "weight_decay" in accepted else {}
            self.parts.append(cls([p for _, p in params], lr=lr, **opts, **extra))
            self.names.extend(n for n, _ in params)
            self.counts.append(len(params))
        if not self.parts:
            raise ValueError(f"optimizer: {type(model).__name__} has no trainable parameters")
        self.description = f"{name} {dict(options)}"
        self.lr = lr

    def zero_grad(self) -> None:
        """Clears every gradient."""
        for part in self.parts:
            part.zero_grad()

    def step(self, *, clip_value: float = 0.0, clip_global_norm: float = 0.0) -> None:
        """One update, after clipping each gradient to ``[-clip_value, clip_value]``
        and then all of them together to the global L2 norm ``clip_global_norm``
        (RETURNN's ``gradient_clip`` and ``gradient_clip_global_norm``; 0: off)."""
        if clip_value:
            for part in self.parts:
                part.clip_grad_value_(clip_value)
        if clip_global_norm:
            optim.clip_grad_norm_(self.parts, clip_global_norm)
        for part in self.parts:
            part.step()

    def set_lr(self, lr: float) -> None:
        """The learning rate from the next step on."""
        for part in self.parts:
            part.set_lr(lr)
        self.lr = lr

    def state_arrays(self) -> dict[str, np.ndarray]:
        """The state as named arrays (``{param}.{slot}``, ``{param}.steps``, ``steps``),
        for a checkpoint file."""
        out: dict[str, np.ndarray] = {}
        names = iter(self.names)
        for i, part in enumerate(self.parts):
            state = part.state_dict()
            out[f"steps.{i}"] = np.asarray(state["steps"], np.int64)
            for steps, buffers in state["params"]:
                name = next(names)
                out[f"{name}.steps"] = np.asarray(steps, np.int64)
                for slot, buffer in zip(state["slot_names"], buffers, strict=True):
                    out[f"{name}.{slot}"] = buffer
        return out

    def load_state_arrays(self, arrays: Mapping[str, np.ndarray], source: str) -> None:
        """Restores ``state_arrays``'s output (read from ``source``, named in errors)."""
        names = iter(self.names)
        states = []
        try:
            for i, (part, count) in enumerate(zip(self.parts, self.counts, strict=True)):
                slots = part.state_slot_names
                params = []
                for name in (next(names) for _ in range(count)):
                    buffers = [arrays[f"{name}.{slot}"] for slot in slots]
                    params.append((int(arrays[f"{name}.steps"]), buffers))
                states.append(
                    {"steps": int(arrays[f"steps.{i}"]), "slot_names": slots, "params": params}
                )
        except KeyError as e:
            raise ValueError(f"{source}: no optimizer state {e.args[0]!r}") from None
        for part, state in zip(self.parts, states, strict=True):
            part.load_state_dict(state)


def _trainable(model: Module) -> list[tuple[str, Any]]:
    return [
        (n, p) for n, p in model.named_parameters() if getattr(p, "trainable", None) is not False
    ]


def _decay_groups(model: Module, blacklist: tuple[type, ...]) -> dict[str, list[tuple[str, Any]]]:
    """RETURNN's split: biases and parameters of blacklisted modules get no decay."""
    exempt: set[str] = set()
    for prefix, module in model.named_modules():
        if isinstance(module, blacklist):
            exempt.update(f"{prefix}.{n}" if prefix else n for n, _ in module.named_parameters())
    groups: dict[str, list[tuple[str, Any]]] = {"decay": [], "no_decay": []}
    for name, param in _trainable(model):
        no_decay = name.endswith("bias") or name in exempt
        groups["no_decay" if no_decay else "decay"].append((name, param))
    return groups


def _blacklist(mods: Any) -> tuple[type, ...]:
    """``weight_decay_modules_blacklist``: RF module classes, or their names
    (``"rf.LayerNorm"``). Torch modules do not occur in RF models; RETURNN's
    default list names only those, so by default nothing is exempt but biases."""
    if mods is None:
        return ()
    import verjus.rf as rf

    out = []
    for mod in mods:
        if isinstance(mod, str):
            if not mod.startswith("rf."):
                raise ValueError(
                    f"weight_decay_modules_blacklist: {mod!r} is not an RF module ('rf.<Name>')"
                )
            mod = getattr(rf, mod[3:], None)
        if not (isinstance(mod, type) and issubclass(mod, Module)):
            raise ValueError(f"weight_decay_modules_blacklist: {mod!r} is not an rf.Module class")
        out.append(mod)
    return tuple(out)
