"""``Trainer.fit`` on sequences: batches of variable-length examples, per-frame
or per-example losses, bits per character.

The data come as a ``verjus.data.TextBatcher`` (a character language model's
``(inputs, targets, lengths)`` batches), as a list of per-example arrays
(padded here), or as padded arrays with their lengths. Each batch is cut to
its longest example, so short batches run short. A per-frame loss (the
network's output is a sequence) is averaged over real frames and also shown
in bits per frame (``bpc``: bits per character for a character model).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from verjus import distributed
from verjus._sequences import check_lengths, is_ragged, pad
from verjus.data import TextBatcher
from verjus.precision import skipped_note

if TYPE_CHECKING:
    from verjus.trainer import Callback, History, Trainer

__all__ = ["SequenceBatches", "fit_sequences"]

Batch = tuple[npt.NDArray[Any], npt.NDArray[np.int32], npt.NDArray[Any]]


class SequenceBatches:
    """Examples ``(x, lengths, y)`` in batches of ``batch_size``, each cut to its
    longest example; ``TextBatcher``s pass through."""

    def __init__(
        self,
        trainer: Trainer,
        x: Any,
        y: Any,
        lengths: npt.ArrayLike | None,
        batch_size: int,
        what: str,
    ) -> None:
        self.per_frame = bool(trainer.network._native.sequence_outputs()[0])
        self.batcher = x if isinstance(x, TextBatcher) else None
        if self.batcher is not None:
            if y is not None or lengths is not None:
                raise TypeError(f"{what}: a TextBatcher holds its targets and lengths; give no y")
            self.examples = self.batcher.num_texts
            self.batches = len(self.batcher)
            return
        if y is None:
            raise TypeError(f"{what}: the targets y are missing")
        kinds = trainer.network._input_kinds()
        ids = kinds[0][2] == "int32"
        if is_ragged(x):
            x, found = pad(x, f"{what}: x", ids=ids)
            lengths = found if lengths is None else lengths
        x = np.asarray(x)
        if x.ndim < 2:
            raise ValueError(f"{what}: x must be [N, T, ...] (padded) or a list of arrays")
        if is_ragged(y):
            y, _ = pad(y, f"{what}: y", ids=True)
        y = np.asarray(y)
        if len(y) != len(x):
            raise ValueError(f"{what}: x has {len(x)} examples but y {len(y)}")
        time_ = x.shape[1]
        if lengths is None:
            lengths = np.full(len(x), time_, dtype=np.int32)
        # A per-frame loss needs a frame in every example.
        self.lengths = check_lengths(
            lengths, len(x), time_, f"{what}", least=1 if self.per_frame else 0
        )
        self.x, self.y = x, y
        self.batch_size = batch_size
        self.examples = len(x)
        self.batches = -(-len(x) // batch_size)

    def epoch(self, seed: int | None, epoch: int) -> Iterator[Batch]:
        """The batches of one epoch, shuffled from ``seed`` (None: in order)."""
        if self.batcher is not None:
            for inputs, targets, lengths in self.batcher.epoch(seed, epoch):
                yield inputs, lengths, targets
            return
        order = np.arange(self.examples)
        if seed is not None:
            order = np.random.default_rng([seed, epoch]).permutation(self.examples)
        for i in range(0, self.examples, self.batch_size):
            rows = order[i : i + self.batch_size]
            lengths = self.lengths[rows]
            cut = max(int(lengths.max()), 1)
            y = self.y[rows]
            if self.per_frame:
                y = y[:, :cut]
            yield np.ascontiguousarray(self.x[rows, :cut]), lengths, np.ascontiguousarray(y)


def _count(per_frame: bool, lengths: npt.NDArray[np.int32]) -> int:
    return int(lengths.sum()) if per_frame else len(lengths)


def _rows(batch: Batch, per_frame: bool) -> Batch | None:
    """This rank's rows of a global batch (see ``verjus.distributed``), cut to
    their longest example (the targets too, when ``per_frame``); None when it
    has none."""
    x, lengths, y = batch
    rows = distributed.shard_rows(len(lengths))
    if rows == slice(0, len(lengths)):
        return batch
    lengths = lengths[rows]
    if len(lengths) == 0:
        return None
    cut = max(int(lengths.max()), 1)
    y = y[rows, :cut] if per_frame else y[rows]
    return np.ascontiguousarray(x[rows, :cut]), lengths, np.ascontiguousarray(y)


def evaluate(trainer: Trainer, data: SequenceBatches) -> dict[str, float]:
    """Mean loss (per real frame or per example) and, for per-example class
    labels, the accuracy, in inference mode; data-parallel, each rank
    evaluates its rows of every batch and the sums are the ranks' together."""
    loss_sum, count, correct = 0.0, 0, 0
    labels = not data.per_frame and data.batcher is None and data.y.dtype.kind in "iu"
    for batch in data.epoch(None, 0):
        mine = _rows(batch, data.per_frame)
        if mine is None:
            continue
        x, lengths, y = mine
        loss, n = trainer.evaluate_sequences(x, lengths, y)
        loss_sum += loss * n
        count += n
        if labels:
            out = trainer.network.forward(x, lengths=lengths)
            correct += int((np.argmax(out, axis=-1) == y).sum())
    loss_sum, count, correct = distributed.sum_over_ranks([loss_sum, count, correct])
    out = {"loss": loss_sum / max(count, 1)}
    if data.per_frame:
        out["bpc"] = out["loss"] / math.log(2)
    if labels:
        out["accuracy"] = correct / max(data.examples, 1)
    return out


def fit_sequences(
    trainer: Trainer,
    train: SequenceBatches,
    validation: SequenceBatches | None,
    *,
    epochs: int,
    initial_epoch: int,
    shuffle: bool,
    seed: int,
    progress: bool,
    verbose: int,
    hooks: Sequence[Callback],
    history: History,
) -> History:
    """The epochs of ``Trainer.fit`` on sequences (see ``Trainer.fit``)."""
    from verjus.trainer import _Progress  # a cycle at import time otherwise

    main = distributed.is_main_process()
    for epoch in range(initial_epoch + 1, epochs + 1):
        bar = _Progress(train.batches, f"epoch {epoch}/{epochs}", progress and main)
        start, skipped = time.perf_counter(), trainer.skipped_steps
        loss_sum, count, frames = 0.0, 0, 0
        try:
            for batch in train.epoch(seed + epoch if shuffle else None, epoch):
                # Data-parallel: this rank's rows; the loss is the global batch's.
                mine = _rows(batch, train.per_frame)
                loss = trainer.train_no_rows() if mine is None else trainer.train_sequences(*mine)
                lengths = batch[1]
                n = _count(train.per_frame, lengths)
                loss_sum += loss * n
                count += n
                frames += int(lengths.sum())
                bar.step(len(lengths), loss)
                for hook in hooks:
                    hook.on_step_end(trainer, len(lengths), loss)
        finally:
            bar.close()
        seconds = time.perf_counter() - start
        skipped_in_epoch = trainer.skipped_steps - skipped
        metrics: dict[str, float] = {
            "epoch": epoch,
            "train_loss": loss_sum / max(count, 1),
            "seconds": seconds,
            "examples_per_second": train.examples / max(seconds, 1e-9),
            "frames_per_second": frames / max(seconds, 1e-9),
        }
        if trainer.precision == "16-mixed":
            metrics["skipped_steps"] = skipped_in_epoch
        if train.per_frame:
            metrics["train_bpc"] = metrics["train_loss"] / math.log(2)
        if validation is not None:
            metrics.update({f"val_{k}": v for k, v in evaluate(trainer, validation).items()})
        history.epochs.append(metrics)
        if verbose > 0 and main:
            print(epoch_line(metrics, epochs), flush=True)
        for hook in hooks:
            hook.on_epoch_end(trainer, metrics)
        if distributed.any_rank(trainer.stop_training):
            break
    return history


def epoch_line(metrics: dict[str, float], epochs: int) -> str:
    """``epoch 1/3: train loss 1.9, train bpc 2.74, val loss ..., val bpc ... (61.2 s, ...)``."""
    parts = [f"train loss {metrics['train_loss']:.4f}"]
    for key, label in (
        ("train_bpc", "train bpc"),
        ("val_loss", "val loss"),
        ("val_bpc", "val bpc"),
        ("val_accuracy", "val accuracy"),
    ):
        if key in metrics:
            parts.append(f"{label} {metrics[key]:.4f}")
    return (
        f"epoch {int(metrics['epoch'])}/{epochs}: {', '.join(parts)} "
        f"({metrics['seconds']:.1f} s, {metrics['frames_per_second']:,.0f} frames/s"
        f"{skipped_note(metrics)})"
    )
