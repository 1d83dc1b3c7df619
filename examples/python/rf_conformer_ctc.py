"""A Conformer-CTC model written in verjus.rf, trained on strips of Fashion-MNIST images.

    python examples/python/rf_conformer_ctc.py [--epochs 4] [--train-strips 6000]
        [--test-strips 1000] [--batch-size 32] [--seed 0] [--device cpu|cuda]
        [--model-dim 128] [--layers 3] [--heads 4] [--data DIR]
        [--precision 32|bf16-mixed|16-mixed]

The task (issue 24): a strip is 1 to 6 Fashion-MNIST images side by side
(``verjus.data.ImageStrips``: training strips drawn from the training split,
test strips from the test split, by seed), read column by column as a sequence
over a dynamic spatial dim with the 28 pixel rows as features; the target is
the images' classes, left to right. The model: RETURNN's
``ConformerEncoder`` (``rf.encoder.conformer``) with a
``ConformerConvSubsample`` frontend (two 3x3 convolutions of 32 channels, each
followed by ReLU and 2x2 max-pooling: a frame per 4 columns, 7 per image),
``--layers`` Conformer blocks of ``--model-dim`` (feed-forward 4x, ``--heads``
relative-position attention heads, depthwise convolution of 15, dropout 0.1),
then a linear layer to 11 classes (the 10 and the blank, last); ``rf.ctc_loss``
summed over the batch / batch size. AdamW (lr 1e-3, weight decay 0.01, gradient
clipped to norm 5) with a linear warm-up over the first 10 % of the steps and a
half cosine down to 1e-5. RETURNN's initialization (Glorot-uniform weights,
zero biases) drawn after ``rf.set_random_seed(seed)``.

``verjus.engine.Engine``, RETURNN's training engine, trains it as for a RETURNN
config: each strip is a sequence of ``data`` (its columns) and ``classes`` (its
labels); ``train_step`` marks the loss above. The batches are
``ImageStrips.plan``'s, made RETURNN's way: the strips in ``laplace:.<20
batches>`` order (per epoch a random order cut into buckets of 20 batches'
strips, each sorted by width), ``--batch-size`` at a time (``max_seqs``), and
the epoch's batches shuffled (``online_shuffle_batches``). The optimizer is
RETURNN's ``{"class": "adamw"}`` (whose weight decay spares the biases, as
RETURNN's does), the schedule its ``dynamic_learning_rate``.

After each epoch it prints the mean training loss, the test label error rate
(greedy CTC decoding, ``rf.ctc_greedy_decode``; the summed ``rf.edit_distance``
to the references / the summed reference lengths) and the training time.
``examples/python/torch_conformer_ctc.py`` is the same in PyTorch (a test
checks that it computes the same logits from the same weights).

Measured on a 2-core machine (``--epochs 2``, the defaults otherwise; two
runs, each followed by the PyTorch twin's on 2 threads): test LER 23.02 /
16.60 % and 22.67 / 16.78 %, 10.7-11.1 s per epoch; the twin 22.99 / 16.46 %,
13.8-14.4 s per epoch (BENCHMARKS.md, "Examples end to end"). Those runs had a
hand-written training loop; through the engine, alternating with that loop on 2 cores
shared with other work: 21.73 / 15.60 % and 21.84 / 15.89 % in 32-35 s an
epoch, the loop 22.50 / 16.46 % and 23.07 / 16.69 % in 30-36 s; on an H200
(``--device cuda``) 16.55-16.75 % after epoch 2 at 3.8-4.2 s an epoch, the loop
16.46-16.58 % at 3.8-4.1 s.
"""

from __future__ import annotations

import argparse
import functools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import verjus
from verjus import rf
from verjus.engine import ArrayDataset, Engine
from verjus.rf.encoder.conformer import ConformerConvSubsample, ConformerEncoder

LR, MIN_LR, WEIGHT_DECAY, CLIP, WARMUP = 1e-3, 1e-5, 0.01, 5.0, 0.1
CONV_CHANNELS, CONV_KERNEL, DROPOUT, NUM_CLASSES = 32, 15, 0.1, 10
EVAL_BATCH = 100
POOL = 20  # batches of strips of similar width: the buckets of the order hold POOL batches

# The dynamic dims of the engine's inputs: a strip's columns and its labels.
columns_dim = rf.Dim(None, name="columns")
label_dim = rf.Dim(None, name="label_positions")


class ConformerCtc(rf.Module):
    """Conformer encoder over the columns of a strip, then logits over the 10
    classes and the blank (``wb_dim``, blank last)."""

    def __init__(self, rows: int, model_dim: int, layers: int, heads: int) -> None:
        self.in_dim = rf.Dim(rows, name="rows")
        frontend = ConformerConvSubsample(
            self.in_dim,
            out_dims=[rf.Dim(CONV_CHANNELS, name="conv1"), rf.Dim(CONV_CHANNELS, name="conv2")],
            filter_sizes=[(3, 3), (3, 3)],
            pool_sizes=[(2, 2), (2, 2)],
        )
        self.encoder = ConformerEncoder(
            self.in_dim,
            rf.Dim(model_dim, name="model"),
            num_layers=layers,
            input_layer=frontend,
            ff_dim=rf.Dim(4 * model_dim, name="ff"),
            conv_kernel_size=CONV_KERNEL,
            num_heads=heads,
            dropout=DROPOUT,
            att_dropout=DROPOUT,
            input_dropout=DROPOUT,
        )
        self.wb_dim = rf.Dim(NUM_CLASSES + 1, name="classes_wb")
        self.output = rf.Linear(self.encoder.out_dim, self.wb_dim)

    def __call__(self, x: rf.Tensor, *, spatial_dim: rf.Dim) -> tuple[rf.Tensor, rf.Dim]:
        """Logits over ``[batch, frames, wb_dim]`` and the (4x shorter) frames dim."""
        enc, frames = self.encoder(x, in_spatial_dim=spatial_dim)
        return self.output(enc), frames


@dataclass
class Batch:
    """A ``StripBatch`` as rf tensors."""

    batch_dim: rf.Dim
    features: rf.Tensor
    columns: rf.Dim
    labels: rf.Tensor
    label_positions: rf.Dim
    size: int


def to_batch(
    batch: verjus.data.StripBatch,
    model: ConformerCtc,
    batch_dim: rf.Dim = rf.batch_dim,
) -> Batch:
    """Features over ``[batch_dim, columns, rows]`` and labels over
    ``[batch_dim, label_positions]`` (sparse ``model.wb_dim``), both spatial
    dims dynamic."""
    columns = rf.Dim(rf.convert_to_tensor(batch.lengths, dims=[batch_dim]), name="columns")
    positions = rf.Dim(
        rf.convert_to_tensor(batch.label_lengths, dims=[batch_dim]), name="label_positions"
    )
    return Batch(
        batch_dim=batch_dim,
        features=rf.convert_to_tensor(
            batch.features, dims=[batch_dim, columns, model.in_dim], feature_dim=model.in_dim
        ),
        columns=columns,
        labels=rf.convert_to_tensor(
            batch.labels, dims=[batch_dim, positions], sparse_dim=model.wb_dim
        ),
        label_positions=positions,
        size=len(batch.lengths),
    )


def ctc_objective(model: ConformerCtc, batch: Batch) -> rf.Tensor:
    """The CTC loss summed over the batch / its size."""
    logits, frames = model(batch.features, spatial_dim=batch.columns)
    ctc = rf.ctc_loss(
        logits=logits,
        targets=batch.labels,
        input_spatial_dim=frames,
        targets_spatial_dim=batch.label_positions,
        blank_index=NUM_CLASSES,
    )
    return rf.reduce_sum(ctc, axis=batch.batch_dim) * (1.0 / batch.size)


def extern_data(in_dim: rf.Dim, classes_dim: rf.Dim) -> dict[str, Any]:
    """The engine's inputs: the strips' columns (``in_dim`` features) and labels
    (sparse ``classes_dim``)."""
    return {
        "data": {"dims": [rf.batch_dim, columns_dim, in_dim], "dtype": "float32"},
        "classes": {"dims": [rf.batch_dim, label_dim], "sparse_dim": classes_dim, "dtype": "int32"},
    }


def strips_dataset(strips: verjus.data.ImageStrips, **options: Any) -> ArrayDataset:
    """Per strip: ``data``, its columns ``[k * 28, 28]``, and ``classes``, its
    ``k`` labels."""
    pairs = [strips.strip(i) for i in range(len(strips))]
    return ArrayDataset(
        {"data": [columns for columns, _ in pairs], "classes": [labels for _, labels in pairs]},
        **options,
    )


def train_step(*, model: ConformerCtc, extern_data: rf.TensorDict, **_kwargs: Any) -> None:
    """The engine's step: :func:`ctc_objective` of the batch."""
    batch = Batch(
        batch_dim=rf.batch_dim,
        features=extern_data["data"],
        columns=columns_dim,
        labels=extern_data["classes"],
        label_positions=label_dim,
        size=rf.batch_dim.get_dim_value(),
    )
    ctc_objective(model, batch).mark_as_loss("ctc")


def label_error_rate(model: ConformerCtc, strips: verjus.data.ImageStrips) -> float:
    """Greedy CTC decoding of every test strip: the summed edit distances to
    the references / the summed reference lengths."""
    rf.init_forward_step_run_ctx()
    errors, total = 0, 0
    for arrays in strips.batches(EVAL_BATCH):
        batch = to_batch(arrays, model)
        logits, frames = model(batch.features, spatial_dim=batch.columns)
        hyp, hyp_dim = rf.ctc_greedy_decode(
            logits, in_spatial_dim=frames, blank_index=NUM_CLASSES, wb_target_dim=model.wb_dim
        )
        dist = rf.edit_distance(hyp, hyp_dim, batch.labels, batch.label_positions)
        errors += int(dist.numpy().sum())
        total += int(arrays.label_lengths.sum())
    return errors / total


@dataclass
class Result:
    """What a run printed, for tests: per epoch the mean training loss, the
    test label error rate and the seconds of training."""

    train_loss: list[float] = field(default_factory=list)
    ler: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    return make_parser(__doc__).parse_args(argv)


def make_parser(doc: str) -> argparse.ArgumentParser:
    """The options of this example (the attention variant adds its own)."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--train-strips", type=int, default=6000)
    p.add_argument("--test-strips", type=int, default=1000)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--model-dim", type=int, default=128)
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--data", default=None, help="Fashion-MNIST folder (default: system's)")
    p.add_argument(
        "--precision",
        choices=tuple(verjus.precision.PRECISIONS),
        default="32",
        help="mixed precision: matrix products in bfloat16 / float16 (verjus.autocast)",
    )
    return p


def make_strips(args: argparse.Namespace) -> tuple[verjus.data.ImageStrips, ...]:
    """The training strips (from the training split, seed ``seed``) and the
    test strips (test split, seed ``seed + 1``); the PyTorch twin uses these."""
    train_x, train_y = verjus.data.fashion_mnist("train", args.data)
    test_x, test_y = verjus.data.fashion_mnist("test", args.data)
    train = verjus.data.ImageStrips(train_x, train_y, args.train_strips, seed=args.seed)
    test = verjus.data.ImageStrips(test_x, test_y, args.test_strips, seed=args.seed + 1)
    return train, test


def cosine_warmup(
    *, global_train_step: int, learning_rate: float, warmup_steps: int, total_steps: int, **_: Any
) -> float:
    """The engine's ``dynamic_learning_rate``: ``verjus.optim.CosineWarmup``'s
    rate of the step, a linear warm-up over ``warmup_steps``, then a half
    cosine down to MIN_LR at ``total_steps``."""
    if global_train_step < warmup_steps:
        return learning_rate * (global_train_step + 1) / warmup_steps
    done = min((global_train_step - warmup_steps) / max(total_steps - warmup_steps, 1), 1.0)
    return MIN_LR + (learning_rate - MIN_LR) * 0.5 * (1.0 + math.cos(math.pi * done))


def main(argv: Sequence[str] | None = None) -> Result:
    args = parse_args(argv)
    train, test = make_strips(args)
    if args.device != "cpu":
        rf.set_default_device(args.device)
    rf.set_random_seed(args.seed)
    model = ConformerCtc(train.height, args.model_dim, args.layers, args.heads)
    return fit(
        args,
        model,
        train,
        test,
        extern_data(model.in_dim, model.wb_dim),
        train_step,
        lambda strips: label_error_rate(model, strips),
    )


def fit(
    args: argparse.Namespace,
    model: rf.Module,
    train: verjus.data.ImageStrips,
    test: verjus.data.ImageStrips,
    inputs: dict[str, Any],
    step: Callable[..., None],
    test_ler: Callable[[verjus.data.ImageStrips], float],
) -> Result:
    """Trains ``model`` with the engine for ``args.epochs`` epochs over ``train``
    (``inputs``: its ``extern_data``; ``step``: its ``train_step``; AdamW with
    the warm-up and cosine schedule); after each epoch prints the mean of the
    first loss marked, ``test_ler(test)`` and the seconds. The attention
    variant (``rf_conformer_att.py``) uses it too."""
    batches = math.ceil(len(train) / args.batch_size)
    steps = args.epochs * batches
    schedule = functools.partial(
        cosine_warmup, warmup_steps=max(1, int(WARMUP * steps)), total_steps=max(2, steps)
    )
    n_params = sum(int(np.prod(p.shape)) for p in model.parameters() if p.trainable is not False)
    print(
        f"{len(train)} training strips, {len(test)} test strips; model dim {args.model_dim}, "
        f"{args.layers} layers, {args.heads} heads; {n_params} parameters; {args.device}"
    )
    result = Result()
    amp = verjus.precision.precision_dtype(args.precision)

    def report(row: dict[str, Any]) -> None:
        """After each epoch: the test label error rate and the line."""
        start = time.perf_counter()
        with verjus.autocast(amp):
            ler = test_ler(test)
        loss = next(iter(row["train"].values()))
        result.train_loss.append(loss)
        result.ler.append(ler)
        result.seconds.append(row["seconds"])
        print(
            f"epoch {row['epoch']}: train loss {loss:.4f}, test LER {100 * ler:.2f} %, "
            f"{row['seconds']:.1f} s/epoch ({1e3 * row['seconds'] / row['steps']:.0f} ms/step), "
            f"{time.perf_counter() - start:.1f} s test"
        )

    engine = Engine(
        get_model=lambda **_: model,  # made before, as ``inputs`` holds its dims
        train_step=step,
        extern_data=inputs,
        optimizer={"class": "adamw", "weight_decay": WEIGHT_DECAY},
        learning_rate=LR,
        dynamic_learning_rate=schedule,
        gradient_clip_global_norm=CLIP,
        batch_size=None,
        max_seqs=args.batch_size,
        online_shuffle_batches=batches,  # all of an epoch's
        # The strips are in memory: a batch is made in less time than a worker
        # process would take to ship it, and the steps keep both cores.
        data_worker="thread",
        num_epochs=args.epochs,
        device=args.device,
        random_seed=args.seed,
        torch_amp=amp,
        log=lambda line: None,
        on_epoch_end=report,
    )
    order = f"laplace:.{POOL * args.batch_size}"
    engine.train(strips_dataset(train, seq_ordering=order, seed=args.seed))
    return result


if __name__ == "__main__":
    main()
