"""The run context: whether the current step trains (dropout applies) or not.

As in RETURNN, a training loop calls ``init_train_step_run_ctx()`` and an
evaluation ``init_forward_step_run_ctx()``; ops such as ``rf.dropout`` read
``get_run_ctx().train_flag``. Outside any step the flag is False.
``get_run_ctx().train_flag_ctx(flag)`` sets it for a block (RETURNN's), for
example to evaluate a model with weight dropout inside a training step.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass
class RunCtx:
    """What the current step is: ``train_flag`` is True while training."""

    train_flag: bool = False

    @contextmanager
    def train_flag_ctx(self, train_flag: bool) -> Iterator[None]:
        """Sets ``train_flag`` for the ``with`` block, restoring it after."""
        old = self.train_flag
        self.train_flag = train_flag
        try:
            yield
        finally:
            self.train_flag = old


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
