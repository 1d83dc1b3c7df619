"""Optimizers for RF parameters: ``SGD``, ``Adam``, ``AdamW``, ``NAdam``.

They are ``verjus.optim``'s classes, the ones a ``Trainer`` takes, given the
parameters first: ``rf.Adam(model.parameters(), lr=1e-3)``. The updates run in
Rust (the fused update ops every backend has, with the static graph's rules,
schedules and clipping). A step: ``opt.zero_grad()``, ``loss.backward()``,
``opt.step()``. Parameters marked ``trainable=False`` (RETURNN's flag on
``rf.Parameter``) are left out, as RETURNN's engine does.
"""

from __future__ import annotations

from verjus.optim import SGD, Adam, AdamW, NAdam

__all__ = ["SGD", "Adam", "AdamW", "NAdam"]
