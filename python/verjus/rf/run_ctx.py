"""The run context: whether the current step trains (dropout applies) or not.

As in RETURNN, a training loop calls ``init_train_step_run_ctx()`` and an
evaluation ``init_forward_step_run_ctx()``; ops such as ``rf.dropout`` read
``get_run_ctx().train_flag``. Outside any step the flag is False.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class RunCtx:
    """What the current step is: ``train_flag`` is True while training."""

    train_flag: bool = False


_ctx = RunCtx()


def get_run_ctx() -> RunCtx:
    """The current run context."""
    return _ctx


def init_train_step_run_ctx(*, train_flag: bool = True) -> None:
    """Starts a training step (``train_flag`` True unless given)."""
    global _ctx
    _ctx = RunCtx(train_flag=train_flag)


def init_forward_step_run_ctx() -> None:
    """Starts an evaluation / forward step (``train_flag`` False)."""
    global _ctx
    _ctx = RunCtx(train_flag=False)
