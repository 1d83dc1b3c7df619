"""``verjus.Trainer``: training and evaluation of a ``Network``.

The trainer owns the solver and the loss and trains the network it was given
(the same object: its ``forward`` sees the new weights). Each step — forward,
loss, backward and the fused optimizer update — runs in Rust with the GIL
released; ``fit`` only loops over epochs, keeps the history, shows the
progress (on stderr: a tqdm bar on a terminal, elsewhere a line every 30 s;
``verjus._progress``) and prints one line per epoch on stdout (``verbose=0``
turns it off).

    trainer = verjus.Trainer(net, verjus.optim.Adam(lr=1e-3), loss="cross_entropy")
    history = trainer.fit(x, y, epochs=5, batch_size=128, validation_data=(xt, yt))
    history["val_accuracy"]  # one value per epoch

``save_checkpoint(folder)`` saves everything a run needs to go on exactly as
it would have (network, weights, solver moments and step counts, schedule
position, dropout stream position) as one folder, replaced atomically;
``Trainer.resume(folder)`` continues it, bit for bit on the CPU. ``fit``
draws each epoch's shuffle from ``seed`` and the epoch's number, so a run
resumed at an epoch boundary continues with ``fit(..., epochs=epochs,
initial_epoch=epochs_done)`` (as Keras names them): the same batches as a run
never stopped.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, overload

import numpy as np
import numpy.typing as npt

from verjus import _verjus, distributed
from verjus._config import dumps_finite
from verjus._progress import EpochProgress
from verjus._seqfit import SequenceBatches, fit_sequences
from verjus.data import TextBatcher
from verjus.network import Network
from verjus.optim import Optimizer, from_config
from verjus.precision import precision_dtype, skipped_note

__all__ = ["LOSSES", "Callback", "History", "Metrics", "Trainer"]

# Loss names accepted by ``Trainer(loss=...)`` and the Rust ``Loss`` each means.
LOSSES: dict[str, dict[str, Any]] = {
    "cross_entropy": {"type": "SoftmaxCrossEntropy", "label_smoothing": 0.0},
    "nll": {"type": "Nll"},
    "mse": {"type": "Mse"},
}

_U64 = (1 << 64) - 1


@dataclass(frozen=True)
class Metrics:
    """The mean loss over a dataset and, for class labels, the accuracy."""

    loss: float
    accuracy: float | None

    def as_dict(self, prefix: str = "") -> dict[str, float]:
        """``{prefix + "loss": ..., prefix + "accuracy": ...}`` (accuracy only when known)."""
        out = {f"{prefix}loss": self.loss}
        if self.accuracy is not None:
            out[f"{prefix}accuracy"] = self.accuracy
        return out


class History:
    """Per-epoch metrics of ``fit``: ``history.epochs`` is a list of dicts, and
    ``history["train_loss"]`` the values of one metric over the epochs."""

    def __init__(self) -> None:
        self.epochs: list[dict[str, float]] = []

    def __getitem__(self, key: str) -> list[float]:
        return [e[key] for e in self.epochs if key in e]

    def __len__(self) -> int:
        return len(self.epochs)

    def __iter__(self) -> Iterator[dict[str, float]]:
        return iter(self.epochs)

    def __repr__(self) -> str:
        return f"History({self.epochs!r})"


class Callback:
    """Hooks into ``fit``; override what you need. Set ``trainer.stop_training =
    True`` in a hook to stop after the current epoch. A plain function passed
    in ``callbacks=`` is called like ``on_epoch_end`` with ``(trainer, metrics)``."""

    def on_epoch_end(self, trainer: Trainer, metrics: Mapping[str, float]) -> None:
        """After each epoch (and its validation), with that epoch's metrics."""

    def on_step_end(self, trainer: Trainer, examples: int, loss: float) -> None:
        """After each training step, with its batch size and mean loss."""


class _FunctionCallback(Callback):
    def __init__(self, fn: Callable[[Trainer, Mapping[str, float]], object]) -> None:
        self.fn = fn

    def on_epoch_end(self, trainer: Trainer, metrics: Mapping[str, float]) -> None:
        self.fn(trainer, metrics)


def _loss_json(loss: str | Mapping[str, Any], label_smoothing: float) -> str:
    if isinstance(loss, Mapping):
        return dumps_finite(dict(loss), "loss")
    if loss not in LOSSES:
        raise ValueError(f"unknown loss {loss!r}; expected one of {sorted(LOSSES)}")
    config = dict(LOSSES[loss])
    if label_smoothing:
        if loss != "cross_entropy":
            raise ValueError("label_smoothing applies to the cross_entropy loss only")
        config["label_smoothing"] = label_smoothing
    return dumps_finite(config, "loss")


class _Progress:
    """An epoch's steps on a bar or in log lines (``verjus._progress``), with the
    running mean loss and the examples a second."""

    def __init__(self, total: int, desc: str, enabled: bool) -> None:
        self.progress = EpochProgress(desc, enabled, total)
        self.loss_sum = 0.0
        self.seen = 0

    def step(self, examples: int, loss: float) -> None:
        self.loss_sum += loss * examples
        self.seen += examples
        self.progress.step(self.describe)

    def describe(self) -> str:
        rate = self.seen / max(self.progress.elapsed(), 1e-9)
        return f"loss {self.loss_sum / max(self.seen, 1):.4f}, {rate:,.0f} ex/s"

    def close(self) -> None:
        self.progress.close()


class Trainer:
    """Trains ``network`` with ``optimizer`` on ``device`` (``"cpu"``, ``"cuda"``,
    ``"cuda:N"``).

    ``device=None`` (the default) trains the network where it lives
    (``network.device``). Another device moves the network there first, like
    ``network.to(device)``: its parameters are copied bit-identical and stay there
    after training (``forward`` then computes on that device too). A device that
    cannot be used here raises ``RuntimeError`` naming what is missing, and the
    network is left where it was.

    ``loss`` is ``"cross_entropy"`` (logits against int labels),
    ``"nll"`` (log-probabilities against int labels) or ``"mse"`` (float targets
    of the output's shape).

    ``precision`` is ``"32"`` (float32), ``"bf16-mixed"`` or ``"16-mixed"``
    (Lightning's names): mixed precision, where the Linear and Conv2d layers'
    products read their operands rounded to bfloat16 / float16 and accumulate
    in float32, while parameters, gradients and every other op stay float32
    (docs/mixed_precision.md)."""

    def __init__(
        self,
        network: Network,
        optimizer: Optimizer,
        loss: str | Mapping[str, Any] = "cross_entropy",
        *,
        device: str | None = None,
        label_smoothing: float = 0.0,
        precision: str = "32",
    ) -> None:
        if not isinstance(network, Network):
            raise TypeError(f"network must be a verjus.Network, got {type(network).__name__}")
        if not isinstance(optimizer, Optimizer):
            raise TypeError(
                f"optimizer must be a verjus.optim optimizer, got {type(optimizer).__name__}"
            )
        self.network = network
        self.optimizer = optimizer
        self.stop_training = False
        dtype = precision_dtype(precision)  # checked before anything moves
        self._native = _verjus.Trainer(
            network._native, optimizer.to_json(), _loss_json(loss, label_smoothing), device
        )
        self._native.set_precision(dtype)
        self.precision = precision
        self._join_ranks()

    def _join_ranks(self) -> None:
        """Trains data-parallel with the ranks ``verjus.distributed.init`` joined
        (every rank must make its trainer), starting from rank 0's parameters."""
        comm = distributed.communicator()
        if comm is not None:
            self._native.set_communicator(comm)

    @classmethod
    def resume(
        cls, folder: str | os.PathLike[str], *, device: str = "cpu", precision: str = "32"
    ) -> Trainer:
        """A trainer continuing the checkpoint ``folder`` (written by
        ``save_checkpoint``) on ``device`` in ``precision`` (as for the
        constructor), with a new ``network``. Every file is checked first; a
        broken checkpoint raises ``OSError`` or ``ValueError`` naming the file."""
        dtype = precision_dtype(precision)
        native = _verjus.Trainer.resume(os.fspath(folder), device)
        native.set_precision(dtype)
        trainer = cls.__new__(cls)
        trainer.precision = precision
        trainer.network = Network(native.network)
        trainer.optimizer = from_config(json.loads(native.solver_json()))
        trainer.stop_training = False
        trainer._native = native
        trainer._join_ranks()
        return trainer

    @property
    def device(self) -> str:
        """The device this trainer and its network compute on (``"cpu"``, ``"cuda:0"``...)."""
        return self._native.device

    def save_checkpoint(
        self, folder: str | os.PathLike[str], *, vocab: _verjus.CharVocab | None = None
    ) -> None:
        """Saves the training state as the folder ``folder``, replacing it
        atomically; files in it that are not the checkpoint's own (such as a
        run's ``metrics.jsonl``) are kept. A character model's ``vocab`` is
        saved with it, checked like the rest when read back
        (``CharVocab.from_run``). Data-parallel, rank 0 writes (the replicas
        are equal) while the others wait for it."""
        if distributed.is_main_process():
            self._native.save_checkpoint(os.fspath(folder), vocab)
        distributed.barrier()

    @property
    def step(self) -> int:
        """Optimizer steps taken so far."""
        return self._native.step

    @property
    def skipped_steps(self) -> int:
        """Steps skipped because their float16-scaled gradients overflowed
        (``"16-mixed"``'s dynamic loss scaling, as PyTorch's ``GradScaler``:
        the loss gradient is scaled by ``loss_scale``, halved on overflow and
        doubled after 2000 steps without one); 0 in other precisions."""
        return self._native.skipped_steps

    @property
    def loss_scale(self) -> float:
        """The loss scale of ``"16-mixed"`` (1.0 otherwise)."""
        return self._native.loss_scale

    @property
    def lr(self) -> float:
        """The learning rate of the next step (after the schedule)."""
        return self._native.lr

    @overload
    def train_minibatch(
        self, x: npt.ArrayLike, y: npt.ArrayLike, *, return_output: Literal[True] = ...
    ) -> tuple[float, npt.NDArray[np.float32]]: ...

    @overload
    def train_minibatch(
        self, x: npt.ArrayLike, y: npt.ArrayLike, *, return_output: Literal[False]
    ) -> tuple[float, None]: ...

    def train_minibatch(
        self, x: npt.ArrayLike, y: npt.ArrayLike, *, return_output: bool = True
    ) -> tuple[float, npt.NDArray[np.float32] | None]:
        """One step on one batch; returns the mean loss and a copy of the network's
        output. With ``return_output=False`` the output is not copied (nor
        downloaded from a GPU) and ``None`` takes its place: ``loss, _ =
        trainer.train_minibatch(x, y, return_output=False)`` is the cheaper
        step when only the loss is wanted (``fit`` steps that way)."""
        return self._native.train_minibatch(x, y, return_output)

    def train_sequences(self, x: npt.ArrayLike, lengths: npt.ArrayLike, y: npt.ArrayLike) -> float:
        """One step on one padded batch of sequences: ``x`` ``[B, T, ...]``
        (int32 token ids or floats, as the network's input says), ``lengths``
        ``[B]``, ``y`` the targets (``[B, T]`` for a per-frame loss, ``[B]``
        after a time reduction); returns the mean loss (per real frame or per
        example). ``fit`` steps this way."""
        return self._native.train_sequences(x, lengths, y)

    def train_no_rows(self) -> float:
        """A data-parallel step on a rank with no rows of the global batch (an
        epoch's short last batch; see ``verjus.distributed``): it takes the
        other ranks' update and returns the global batch's mean loss."""
        return self._native.train_no_rows()

    def evaluate_sequences(
        self, x: npt.ArrayLike, lengths: npt.ArrayLike, y: npt.ArrayLike
    ) -> tuple[float, int]:
        """The mean loss over one padded batch of sequences in inference mode
        and the count it is the mean over (real frames, or examples)."""
        return self._native.evaluate_sequences(x, lengths, y)

    def evaluate(self, x: npt.ArrayLike, y: npt.ArrayLike, *, batch_size: int = 1000) -> Metrics:
        """Loss and accuracy over ``(x, y)`` in inference mode (no dropout)."""
        loss, accuracy = self._native.evaluate(x, y, batch_size)
        return Metrics(loss, accuracy)

    def fit(
        self,
        x: Any,
        y: Any = None,
        *,
        lengths: npt.ArrayLike | None = None,
        epochs: int = 1,
        initial_epoch: int = 0,
        batch_size: int = 32,
        validation_data: tuple[npt.ArrayLike, npt.ArrayLike] | None = None,
        shuffle: bool = True,
        seed: int = 0,
        progress: bool = True,
        verbose: int = 1,
        callbacks: Sequence[Callback | Callable[[Trainer, Mapping[str, float]], object]] = (),
        eval_batch_size: int = 1000,
    ) -> History:
        """Trains epochs ``initial_epoch + 1`` to ``epochs`` over ``(x, y)`` in
        minibatches of ``batch_size`` (the last may be short), reshuffled each
        epoch from ``seed`` and the epoch's number when ``shuffle``: a resumed
        run (``Trainer.resume``) that gives the epochs it has done as
        ``initial_epoch`` trains the batches an uninterrupted run would.
        After each epoch it evaluates ``validation_data``, prints one line (unless
        ``verbose=0``) and calls the callbacks::

            epoch 1/3: train loss 0.4921, val loss 0.3935, val accuracy 0.8571 (9.8 s, ...)

        The two outputs are apart: ``verbose=0`` turns off the lines, and
        ``progress=False`` the progress over each epoch's steps, on stderr: a
        bar on a terminal (removed when the epoch ends), elsewhere (a log file)
        a line at most every 30 s (``VERJUS_PROGRESS_INTERVAL`` seconds when
        set), none in a shorter epoch.
        Returns the ``History``: per epoch ``epoch``, ``train_loss``,
        ``seconds``, ``examples_per_second`` and, with validation data,
        ``val_loss`` and ``val_accuracy``.

        A sequence network trains on a ``verjus.data.TextBatcher`` (``y``
        omitted), a list of per-example arrays (``y`` a list of per-frame
        targets, or labels), or padded arrays with ``lengths``; each batch is
        cut to its longest example. ``validation_data`` is then a
        ``TextBatcher``, ``(x, y)`` or ``(x, y, lengths)``. With a per-frame
        loss (the output is a sequence) the losses are means over real frames,
        also given in bits (``train_bpc``, ``val_bpc``: bits per character for
        a character model); every example needs a frame. Gradient-norm
        clipping is the optimizer's ``clip_norm``."""
        if epochs < 0 or initial_epoch < 0 or batch_size <= 0 or eval_batch_size <= 0:
            raise ValueError(
                "fit: need epochs >= 0, initial_epoch >= 0, batch_size > 0 and "
                f"eval_batch_size > 0, got {epochs}, {initial_epoch}, {batch_size} and "
                f"{eval_batch_size}"
            )
        hooks = [c if isinstance(c, Callback) else _FunctionCallback(c) for c in callbacks]
        if isinstance(x, TextBatcher) or self.network.takes_sequences:
            train = SequenceBatches(self, x, y, lengths, batch_size, "fit")
            validation = None
            if validation_data is not None:
                vx, vy, vl = _sequence_validation(validation_data)
                validation = SequenceBatches(self, vx, vy, vl, eval_batch_size, "validation_data")
            self.stop_training = False
            return fit_sequences(
                self,
                train,
                validation,
                epochs=epochs,
                initial_epoch=initial_epoch,
                shuffle=shuffle,
                seed=seed,
                progress=progress,
                verbose=verbose,
                hooks=hooks,
                history=History(),
            )
        if lengths is not None:
            raise ValueError("fit: lengths were given, but the network has no sequence input")
        data = _verjus.Dataset(x, y)
        validation = None if validation_data is None else _validation_set(validation_data)
        # Once, before training: an empty set, or a bad label (named by its
        # example's index; a minibatch could only name its row), is found
        # before an epoch is spent.
        for name, dataset in (("x", data), ("validation_data", validation)):
            if dataset is None:
                continue
            if len(dataset) == 0:
                raise ValueError(f"fit: {name} has no examples")
            self._native.check_dataset(dataset)
        history = History()
        self.stop_training = False
        steps = -(-len(data) // batch_size)
        main = distributed.is_main_process()
        for epoch in range(initial_epoch + 1, epochs + 1):
            bar = _Progress(steps, f"epoch {epoch}/{epochs}", progress and main)

            def on_step(examples: int, loss: float, bar: _Progress = bar) -> None:
                bar.step(examples, loss)
                for hook in hooks:
                    hook.on_step_end(self, examples, loss)

            start, skipped = time.perf_counter(), self.skipped_steps
            try:
                shuffle_seed = (seed + epoch) & _U64 if shuffle else None
                train_loss = self._native.train_epoch(data, batch_size, shuffle_seed, on_step)
            finally:
                bar.close()
            seconds = time.perf_counter() - start
            metrics: dict[str, float] = {
                "epoch": epoch,
                "train_loss": train_loss,
                "seconds": seconds,
                "examples_per_second": len(data) / max(seconds, 1e-9),
            }
            if self.precision == "16-mixed":
                metrics["skipped_steps"] = self.skipped_steps - skipped
            if validation is not None:
                loss, accuracy = self._native.evaluate_dataset(validation, eval_batch_size)
                metrics.update(Metrics(loss, accuracy).as_dict("val_"))
            history.epochs.append(metrics)
            if verbose > 0 and main:
                print(_epoch_line(metrics, epochs), flush=True)
            for hook in hooks:
                hook.on_epoch_end(self, metrics)
            if distributed.any_rank(self.stop_training):
                break
        return history

    def __repr__(self) -> str:
        try:
            where = f"device={self.device!r}"
        except RuntimeError:  # superseded by a newer Trainer of the same network
            where = "superseded"
        return f"Trainer({self.network!r}, {self.optimizer!r}, {where})"


def _epoch_line(metrics: Mapping[str, float], epochs: int) -> str:
    """``epoch 1/3: train loss ..., val loss ..., val accuracy ... (9.8 s, 6,122 examples/s)``."""
    parts = [f"train loss {metrics['train_loss']:.4f}"]
    if "val_loss" in metrics:
        parts.append(f"val loss {metrics['val_loss']:.4f}")
    if "val_accuracy" in metrics:
        parts.append(f"val accuracy {metrics['val_accuracy']:.4f}")
    return (
        f"epoch {int(metrics['epoch'])}/{epochs}: {', '.join(parts)} "
        f"({metrics['seconds']:.1f} s, {metrics['examples_per_second']:,.0f} examples/s"
        f"{skipped_note(metrics)})"
    )


def _validation_set(data: object) -> _verjus.Dataset:
    """``fit``'s ``validation_data``, checked to be a pair ``(x, y)``."""
    if not isinstance(data, (tuple, list)) or len(data) != 2:
        what = f"a {type(data).__name__}"
        if isinstance(data, (tuple, list)):
            what += f" of {len(data)} items"
        raise TypeError(f"fit: validation_data must be a pair (x, y), got {what}")
    return _verjus.Dataset(*data)


def _sequence_validation(data: object) -> tuple[Any, Any, Any]:
    """``fit``'s ``validation_data`` for sequences: a ``TextBatcher``, ``(x, y)``
    or ``(x, y, lengths)``."""
    if isinstance(data, TextBatcher):
        return data, None, None
    if isinstance(data, (tuple, list)) and len(data) in (2, 3):
        return data[0], data[1], data[2] if len(data) == 3 else None
    raise TypeError(
        "fit: validation_data must be a TextBatcher, (x, y) or (x, y, lengths), "
        f"got a {type(data).__name__}"
    )
