"""``rf.gradient_checkpoint_scope``: values made inside are recomputed in
backward instead of kept, after RETURNN's ``gradient_checkpoint_scope``.

RETURNN on PyTorch records the ops with a dispatch mode and swaps saved
tensors through ``saved_tensors_hooks``. verjus owns its tape, so the scope is
the tape's (``crates/verjus-core/src/autograd/checkpoint.rs``): every op run
inside records how to run again (its forward and its inputs from outside the
scope) instead of what its backward would save, and ops after the scope that
read one of its values keep a reference to that recipe, not the value. Random
ops replay their Philox counter, so the gradients are bitwise those of the run
without the scope. Weight dropout and weight noise use it, so the dropped-out
or noisy weight is never kept for backward.
"""

from __future__ import annotations

from verjus._native_scope import NativeScope
from verjus._verjus import CheckpointScopeGuard

__all__ = ["gradient_checkpoint_scope"]


class gradient_checkpoint_scope(NativeScope):  # noqa: N801 (RETURNN's name)
    """``with rf.gradient_checkpoint_scope(): ...``: the ops in the block are
    not kept for backward but run again there (same random numbers). Scopes
    nest; the scope belongs to the thread that enters it."""

    guard_type = CheckpointScopeGuard
