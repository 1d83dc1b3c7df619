"""The run context, as RETURNN's: what the current step is, its losses and outputs.

A training loop calls ``init_train_step_run_ctx(train_flag=, step=, epoch=)``
and a forward or evaluation loop ``init_forward_step_run_ctx(epoch=, step=)``;
ops such as ``rf.dropout`` read ``get_run_ctx().train_flag``, and outside any
step the flag is False. ``get_run_ctx().train_flag_ctx(flag)`` sets the flag
for a block, for example to evaluate a model with weight dropout inside a
training step.

The model code of a step marks what it produced: ``mark_as_loss`` (training
steps) collects ``Loss`` objects whose arithmetic is RETURNN's — the loss
that is optimized is the sum over all frames unless ``use_normalized_loss``
(then divided by the number of frames), scaled by ``scale``; what is reported
is the sum divided by the frame count (or ``custom_inv_norm_factor``'s sum) —
and ``mark_as_output`` / ``mark_as_default_output`` collect named outputs in
``outputs`` (a ``TensorDict``), with their dims in the given order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from verjus._verjus import Dim, Tensor
from verjus.rf.tensor_dict import TensorDict


class RunCtx:
    """What the current step is (``stage``: ``"init"``, ``"train_step"`` or
    ``"forward_step"``), its ``train_flag``, ``epoch`` and ``step``, and what the
    step's code marked: ``losses`` (name -> ``Loss``) and ``outputs``."""

    def __init__(
        self,
        *,
        stage: str = "init",
        train_flag: bool = False,
        step: int = 0,
        epoch: int = 1,
        expected_outputs: TensorDict | None = None,
    ) -> None:
        self.stage = stage
        self.train_flag = train_flag
        # Flags set for single functions (``train_flag_ctx(flag, func=rf.dropout)``).
        self._func_train_flags: dict[Any, bool] = {}
        self.step = step
        self.epoch = epoch
        self.expected_outputs = expected_outputs
        self.losses: dict[str, Loss] = {}
        self.outputs = TensorDict()

    def __repr__(self) -> str:
        return (
            f"RunCtx(stage={self.stage!r}, train_flag={self.train_flag}, "
            f"epoch={self.epoch}, step={self.step})"
        )

    @contextmanager
    def train_flag_ctx(
        self, train_flag: bool, *, func: Callable | Sequence[Callable] | None = None
    ) -> Iterator[None]:
        """Sets ``train_flag`` for the ``with`` block, restoring it after. With
        ``func`` (a function such as ``rf.dropout`` or ``rf.BatchNorm.__call__``, or a
        sequence of them), only ``is_train_flag_enabled(func=...)`` of those changes."""
        if func is None:
            old = self.train_flag
            self.train_flag = train_flag
            try:
                yield
            finally:
                self.train_flag = old
            return
        funcs = list(func) if isinstance(func, (list, tuple)) else [func]
        for f in funcs:
            if not callable(f):
                raise TypeError(f"train_flag_ctx: func must be a function, got {f!r}")
        old_flags = dict(self._func_train_flags)
        self._func_train_flags.update(dict.fromkeys(funcs, train_flag))
        try:
            yield
        finally:
            self._func_train_flags = old_flags

    def is_train_flag_enabled(self, *, func: Callable | None = None) -> bool:
        """Whether ``func`` (e.g. ``rf.dropout``) is to act as in training: its own
        flag from ``train_flag_ctx(..., func=func)`` if set, else ``train_flag``."""
        return self._func_train_flags.get(func, self.train_flag)

    def get_step_tensor(self) -> Tensor:
        """The step as a scalar int64 Tensor."""
        return _scalar(self.step)

    def get_epoch_tensor(self) -> Tensor:
        """The epoch as a scalar int64 Tensor."""
        return _scalar(self.epoch)

    def mark_as_loss(
        self,
        loss: Tensor,
        name: str,
        *,
        dims: Sequence[Dim] | None = None,
        scale: float = 1.0,
        as_error: bool = False,
        use_normalized_loss: bool = False,
        use_flatten_frames: bool = True,
        custom_inv_norm_factor: Tensor | None = None,
    ) -> None:
        """Marks ``loss`` (per frame or per sequence, e.g. ``[batch, time]``; not
        reduced over what is to be normalized) as the loss ``name``. The
        optimized loss is ``scale`` times its sum (its mean with
        ``use_normalized_loss``); ``as_error`` losses are only reported. See
        the module docs."""
        if self.stage != "train_step":
            raise RuntimeError(
                f"mark_as_loss({name!r}): only in a training step, this is {self.stage!r}"
            )
        if name in self.losses:
            raise ValueError(f"mark_as_loss: a loss named {name!r} was already marked in this step")
        if not isinstance(loss, Tensor):
            import verjus.rf as rf

            loss = rf.convert_to_tensor(loss, dims=dims or ())
        if loss.dtype != "float32":
            import verjus.rf as rf

            loss = rf.cast(loss, "float32")
        self.losses[name] = Loss(
            loss=loss,
            name=name,
            scale=scale,
            as_error=as_error,
            use_normalized_loss=use_normalized_loss,
            use_flatten_frames=use_flatten_frames,
            custom_inv_norm_factor=custom_inv_norm_factor,
        )

    def mark_as_output(
        self, tensor: Tensor | Any, name: str, *, dims: Sequence[Dim] | None = None
    ) -> None:
        """Adds ``tensor`` to ``outputs`` as ``name``, its axes in the order of
        ``dims`` (all of its dims); without ``dims``, in RETURNN's default order
        (batch, then the dynamic dim, then the rest, which must then be one dim)."""
        if name in self.outputs.data:
            raise ValueError(
                f"mark_as_output: an output named {name!r} was already marked in this step"
            )
        if not isinstance(tensor, Tensor):
            import verjus.rf as rf

            tensor = rf.convert_to_tensor(tensor, dims=dims or ())
        if dims is None:
            dims = _default_dim_order(tensor)
        dims = list(dims)
        if set(dims) != set(tensor.dims) or len(dims) != len(tensor.dims):
            raise ValueError(
                f"mark_as_output({name!r}): dims {[d.name for d in dims]} are not the "
                f"tensor's dims {[d.name for d in tensor.dims]}"
            )
        out = tensor.copy_transpose(dims)
        out.name = name
        if self.expected_outputs is not None and name in self.expected_outputs.data:
            expected = self.expected_outputs.data[name]
            if expected.dtype != out.dtype:
                raise ValueError(
                    f"mark_as_output({name!r}): dtype {out.dtype}, expected {expected.dtype}"
                )
        self.outputs.data[name] = out

    def mark_as_default_output(
        self, tensor: Tensor | Any, *, shape: Sequence[Dim] | None = None
    ) -> None:
        """``mark_as_output(tensor, "output", dims=shape)``."""
        self.mark_as_output(tensor, "output", dims=shape)

    def check_outputs_complete(self) -> None:
        """With ``expected_outputs``: the marked outputs are exactly those."""
        if self.expected_outputs is not None:
            want, got = set(self.expected_outputs.data), set(self.outputs.data)
            if want != got:
                raise ValueError(
                    f"check_outputs_complete: expected outputs {sorted(want)}, got {sorted(got)}"
                )

    def total_loss(self) -> Tensor:
        """The loss that training optimizes: the sum of the scaled reduced losses
        (``as_error`` and zero-scale losses left out)."""
        if not self.losses:
            raise RuntimeError(
                "total_loss: no loss was marked (rf.get_run_ctx().mark_as_loss(...))"
            )
        total: Tensor | None = None
        for loss in self.losses.values():
            if loss.scale == 0.0 or loss.as_error:
                continue
            part = loss.get_scaled_reduced_loss()
            total = part if total is None else total + part
        if total is None:
            raise RuntimeError("total_loss: every marked loss is an error or has scale 0")
        return total


@dataclass
class Loss:
    """A loss marked in a step (``RunCtx.mark_as_loss``), with RETURNN's arithmetic."""

    loss: Tensor
    name: str
    scale: float = 1.0
    as_error: bool = False
    use_normalized_loss: bool = False
    use_flatten_frames: bool = True
    custom_inv_norm_factor: Tensor | None = None
    _cache: dict[str, Any] = field(default_factory=dict, repr=False)

    def get_summed_loss(self) -> Tensor:
        """The sum over every dim (padding excluded)."""
        if not self.loss.dims:
            return self.loss
        if "sum" not in self._cache:
            import verjus.rf as rf

            self._cache["sum"] = rf.reduce_sum(self.loss, axis=list(self.loss.dims))
        return self._cache["sum"]

    def get_mean_loss(self) -> Tensor:
        """The sum divided by the inverse norm factor (the frame count by default)."""
        if "mean" not in self._cache:
            import verjus.rf as rf

            if self.custom_inv_norm_factor is not None:
                inv = self.get_inv_norm_factor()
                self._cache["mean"] = self.get_summed_loss() / rf.cast(inv, "float32")
            elif not self.loss.dims:
                self._cache["mean"] = self.loss
            else:
                self._cache["mean"] = rf.reduce_mean(self.loss, axis=list(self.loss.dims))
        return self._cache["mean"]

    def get_inv_norm_factor(self) -> int | Tensor:
        """The number of entries summed (non-padding frames), or the sum of
        ``custom_inv_norm_factor``: what reporting divides by."""
        if "inv" not in self._cache:
            import verjus.rf as rf

            custom = self.custom_inv_norm_factor
            if custom is not None:
                inv = rf.reduce_sum(custom, axis=list(custom.dims)) if custom.dims else custom
            else:
                # the loss gives the sizes of dims without lengths (the batch dim)
                inv = rf.num_elements_of_shape(list(self.loss.dims), source=self.loss)
            self._cache["inv"] = inv
        return self._cache["inv"]

    def get_scaled_reduced_loss(self) -> Tensor:
        """What training optimizes: ``scale`` times the summed (or, with
        ``use_normalized_loss``, the mean) loss."""
        loss = self.get_mean_loss() if self.use_normalized_loss else self.get_summed_loss()
        return loss * self.scale if self.scale != 1.0 else loss


def _scalar(value: int) -> Tensor:
    import verjus.rf as rf

    return rf.convert_to_tensor(np.int64(value), dims=[], dtype="int64")


def _default_dim_order(tensor: Tensor) -> list[Dim]:
    """Batch, then the one dynamic dim, then the one other dim (RETURNN's default)."""
    rest = list(tensor.dims)
    order = [d for d in rest if d.is_batch_dim()]
    rest = [d for d in rest if d not in order]
    dynamic = [d for d in rest if d.is_dynamic()]
    if len(dynamic) > 1 or len(rest) - len(dynamic) > 1:
        raise ValueError(
            "mark_as_output: cannot choose an order for the dims "
            f"{[d.name for d in tensor.dims]}; give dims="
        )
    return order + dynamic + [d for d in rest if d not in dynamic]


_ctx = RunCtx()


def get_run_ctx() -> RunCtx:
    """The current run context."""
    return _ctx


def get_run_ctx_step() -> Tensor:
    """``get_run_ctx().get_step_tensor()``."""
    return _ctx.get_step_tensor()


def reset_run_ctx() -> None:
    """Back to the context outside any step."""
    global _ctx
    _ctx = RunCtx()


def init_train_step_run_ctx(*, train_flag: bool = True, step: int = 0, epoch: int = 1) -> None:
    """Starts a training step (``train_flag`` True unless given)."""
    global _ctx
    _ctx = RunCtx(stage="train_step", train_flag=train_flag, step=step, epoch=epoch)


def init_forward_step_run_ctx(
    *, epoch: int = 1, step: int = 0, expected_outputs: TensorDict | None = None
) -> None:
    """Starts a forward / evaluation step (``train_flag`` False)."""
    global _ctx
    _ctx = RunCtx(stage="forward_step", step=step, epoch=epoch, expected_outputs=expected_outputs)
