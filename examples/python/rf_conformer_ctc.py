"""A Conformer-CTC model written in verjus.rf, trained on strips of Fashion-MNIST images.

    python examples/python/rf_conformer_ctc.py [--epochs 4] [--train-strips 6000]
        [--test-strips 1000] [--batch-size 32] [--seed 0] [--device cpu|cuda]
        [--model-dim 128] [--layers 3] [--heads 4] [--data DIR]

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

Each epoch prints the mean training loss, the test label error rate (greedy
CTC decoding, ``rf.ctc_greedy_decode``; the summed ``rf.edit_distance`` to the
references / the summed reference lengths) and the training time.
``examples/python/torch_conformer_ctc.py`` is the same in PyTorch (a test
checks that it computes the same logits from the same weights).

Measured on a 2-core machine (``--epochs 2``, the defaults otherwise; two
runs, each followed by the PyTorch twin's on 2 threads): test LER 23.02 /
16.60 % and 22.67 / 16.78 %, 10.7-11.1 s per epoch; the twin 22.99 / 16.46 %,
13.8-14.4 s per epoch (BENCHMARKS.md, stop 31).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

import verjus
from verjus import rf
from verjus.rf.encoder.conformer import ConformerConvSubsample, ConformerEncoder

LR, MIN_LR, WEIGHT_DECAY, CLIP, WARMUP = 1e-3, 1e-5, 0.01, 5.0, 0.1
CONV_CHANNELS, CONV_KERNEL, DROPOUT, NUM_CLASSES = 32, 15, 0.1, 10
EVAL_BATCH = 100


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


def train_step(model: ConformerCtc, opt: rf.AdamW, batch: Batch) -> rf.Tensor:
    """One update on :func:`ctc_objective`; returns that loss (not read here,
    so nothing waits on it)."""
    loss = ctc_objective(model, batch)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return rf.stop_gradient(loss)


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
    """What a run printed, for tests: per epoch the mean training loss of its
    first and last tenth of steps, the test label error rate and the seconds."""

    first_loss: list[float] = field(default_factory=list)
    last_loss: list[float] = field(default_factory=list)
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
    return p


def make_strips(args: argparse.Namespace) -> tuple[verjus.data.ImageStrips, ...]:
    """The training strips (from the training split, seed ``seed``) and the
    test strips (test split, seed ``seed + 1``); the PyTorch twin uses these."""
    train_x, train_y = verjus.data.fashion_mnist("train", args.data)
    test_x, test_y = verjus.data.fashion_mnist("test", args.data)
    train = verjus.data.ImageStrips(train_x, train_y, args.train_strips, seed=args.seed)
    test = verjus.data.ImageStrips(test_x, test_y, args.test_strips, seed=args.seed + 1)
    return train, test


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
        lambda opt, arrays: train_step(model, opt, to_batch(arrays, model)),
        lambda strips: label_error_rate(model, strips),
    )


def fit(
    args: argparse.Namespace,
    model: rf.Module,
    train: verjus.data.ImageStrips,
    test: verjus.data.ImageStrips,
    step: Callable[[rf.AdamW, verjus.data.StripBatch], rf.Tensor],
    test_ler: Callable[[verjus.data.ImageStrips], float],
) -> Result:
    """Trains ``model`` for ``args.epochs`` epochs over ``train`` (AdamW with
    the warm-up and cosine schedule), ``step(opt, arrays)`` per batch returning
    its loss; after each epoch prints the mean loss, ``test_ler(test)`` and the
    seconds. The attention variant (``rf_conformer_att.py``) uses it too."""
    steps = args.epochs * len(train.plan(args.batch_size, args.seed))
    schedule = verjus.optim.CosineWarmup(
        warmup_steps=max(1, int(WARMUP * steps)), total_steps=max(2, steps), min_lr=MIN_LR
    )
    opt = rf.AdamW(
        model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY, schedule=schedule, clip_norm=CLIP
    )
    n_params = sum(int(np.prod(p.shape)) for p in model.parameters() if p.trainable is not False)
    print(
        f"{len(train)} training strips, {len(test)} test strips; model dim {args.model_dim}, "
        f"{args.layers} layers, {args.heads} heads; {n_params} parameters; {args.device}"
    )
    result = Result()
    for epoch in range(args.epochs):
        rf.init_train_step_run_ctx(train_flag=True)
        start = time.perf_counter()
        losses = [step(opt, arrays) for arrays in train.batches(args.batch_size, args.seed, epoch)]
        values = [float(v.numpy()) for v in losses]  # read once, after the epoch
        train_s = time.perf_counter() - start
        ler = test_ler(test)
        tenth = max(1, len(values) // 10)
        result.first_loss.append(float(np.mean(values[:tenth])))
        result.last_loss.append(float(np.mean(values[-tenth:])))
        result.ler.append(ler)
        result.seconds.append(train_s)
        print(
            f"epoch {epoch + 1}: train loss {np.mean(values):.4f}, test LER {100 * ler:.2f} %, "
            f"{train_s:.1f} s/epoch ({1e3 * train_s / len(values):.0f} ms/step), "
            f"{time.perf_counter() - start - train_s:.1f} s test"
        )
    return result


if __name__ == "__main__":
    main()
