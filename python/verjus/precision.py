"""Mixed precision: ``verjus.autocast`` runs matrix products and convolutions
in bfloat16 or float16 and the rest in float32, as ``torch.autocast`` and
RETURNN's ``torch_amp`` do.

    with verjus.autocast("bfloat16"):
        loss = model(x)          # verjus.rf code: its matmuls and Linear layers
    loss.backward()              # gradients are float32

Inside the block, a matrix product of float32 operands (``rf.matmul``,
``rf.Linear``, attention's projections, ...) or a convolution (``rf.Conv1d``,
``rf.Conv2d``, the depthwise one) rounds input and weight to the block's dtype
and computes with float32 accumulation into a float32 result (products on
tensor cores on a GPU; a widening to float32 otherwise: the same numbers).
The tape keeps the rounded operands, half the bytes of float32 ones.
Everything else (elementwise ops, softmax, normalization, losses, reductions,
optimizer updates) runs in float32, gradients stay float32 and parameters are
the float32 master copies: no loss scaling is needed, since no gradient is
ever held in float16. The setting belongs to the thread that enters the block.

The static-graph ``Trainer(precision=...)`` and ``verjus train --precision``
take Lightning's names (``PRECISIONS``); there the Linear and Conv2d layers
also round the output gradient in backward, so ``"16-mixed"`` scales the loss
(``Trainer.skipped_steps``; docs/mixed_precision.md).
"""

from __future__ import annotations

from collections.abc import Mapping

from verjus._native_scope import NativeScope
from verjus._verjus import AutocastScope

__all__ = ["PRECISIONS", "autocast", "precision_dtype", "skipped_note"]


class autocast(NativeScope):  # noqa: N801 (torch.autocast's name)
    """Products and convolutions in ``dtype`` (``"bfloat16"`` or ``"float16"``)
    inside the ``with`` block; ``None`` or ``enabled=False`` keeps float32 (and
    turns off an outer block's autocast), so a precision option can switch it
    off in place."""

    guard_type = AutocastScope

    def __init__(self, dtype: str | None = "bfloat16", *, enabled: bool = True) -> None:
        super().__init__(dtype if enabled else None)


# Lightning's names of a training precision, and the autocast dtype of each.
PRECISIONS = {"32": None, "bf16-mixed": "bfloat16", "16-mixed": "float16"}


def precision_dtype(precision: str) -> str | None:
    """The autocast dtype of a ``precision`` option (``"32"``, ``"bf16-mixed"``,
    ``"16-mixed"``, as Lightning names them): None for float32."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision: expected one of {', '.join(PRECISIONS)}, got {precision!r}")
    return PRECISIONS[precision]


def skipped_note(metrics: Mapping[str, float]) -> str:
    """The part of an epoch's line that reports float16 steps skipped for
    overflow (``metrics["skipped_steps"]``, which ``fit`` records under
    ``"16-mixed"``): empty when none were."""
    skipped = int(metrics.get("skipped_steps", 0))
    if not skipped:
        return ""
    return f", {skipped} step{'s' if skipped > 1 else ''} skipped (float16 overflow)"
