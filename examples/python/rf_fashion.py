"""Trains Fashion-MNIST with a model written in verjus.rf (RETURNN's frontend API).

    python examples/python/rf_fashion.py [--model mlp|cnn] [--epochs N] [--seed S]

``mlp``: 784-512-512-10 with ReLU (default 5 epochs; PyTorch reaches 0.874-0.880
test accuracy with this recipe). ``cnn``: conv3x3(32)-ReLU-maxpool2-conv3x3(64)-
ReLU-maxpool2-Linear(128)-ReLU-Linear(10) (default 3 epochs; PyTorch 0.885-0.896);
it needs ``rf.Conv2d`` and ``rf.max_pool``. Both: Adam lr 1e-3, batch 128, inputs
in [0, 1], RETURNN's default initialization (Glorot-uniform weights, zero biases)
drawn after ``rf.set_random_seed(seed)``.

``verjus.engine.Engine``, RETURNN's training engine, runs the epochs, as for a
RETURNN config: ``train_step`` marks the cross-entropy (its mean over the batch
is what Adam minimizes) and, as an error, the misclassified images; after each
epoch the same step scores the test set with the train flag off, and its error
rate gives the test accuracy. Every op of a step runs in Rust on the autograd
tape; the engine batches the arrays in a thread beside the steps.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

import verjus
from verjus import rf
from verjus.engine import ArrayDataset, Engine

BATCH = 128

in_dim = rf.Dim(784, name="pixels")
classes = rf.Dim(10, name="classes")


class Mlp(rf.Module):
    """784-512-512-10 with ReLU on ``[batch, pixels]``."""

    def __init__(self) -> None:
        h1, h2 = rf.Dim(512, name="hidden1"), rf.Dim(512, name="hidden2")
        self.layers = rf.Sequential(
            rf.Linear(in_dim, h1), rf.relu, rf.Linear(h1, h2), rf.relu, rf.Linear(h2, classes)
        )

    def __call__(self, images: rf.Tensor) -> rf.Tensor:
        return self.layers(images)


class Cnn(rf.Module):
    """Two conv3x3 + max-pool blocks and two Linear layers on ``[batch, 1, 28, 28]``."""

    def __init__(self) -> None:
        c32, c64 = rf.Dim(32, name="conv1"), rf.Dim(64, name="conv2")
        self.conv1 = rf.Conv2d(channel, c32, [3, 3], padding="same")
        self.conv2 = rf.Conv2d(c32, c64, [3, 3], padding="same")
        self.flat_dim = rf.Dim(64 * 7 * 7, name="flat")
        hidden = rf.Dim(128, name="hidden")
        self.fc1 = rf.Linear(self.flat_dim, hidden)
        self.fc2 = rf.Linear(hidden, classes)

    def __call__(self, images: rf.Tensor) -> rf.Tensor:
        x, spatial = images, [height, width]
        for conv in (self.conv1, self.conv2):
            x, spatial = conv(x, in_spatial_dims=spatial)
            x, spatial = rf.max_pool(
                rf.relu(x), pool_size=[2, 2], padding="valid", in_spatial_dims=spatial
            )
        x, _ = rf.merge_dims(x, dims=[self.conv2.out_dim, *spatial], out_dim=self.flat_dim)
        return self.fc2(rf.relu(self.fc1(x)))


channel = rf.Dim(1, name="channel")
height, width = rf.Dim(28, name="height"), rf.Dim(28, name="width")


def image_dims(model: str) -> list[rf.Dim]:
    return [rf.batch_dim, in_dim] if model == "mlp" else [rf.batch_dim, channel, height, width]


def extern_data(model: str) -> dict[str, Any]:
    """The engine's inputs: the images and their classes."""
    return {
        "data": {"dims": image_dims(model), "dtype": "float32"},
        "classes": {"dims": [rf.batch_dim], "sparse_dim": classes, "dtype": "int32"},
    }


def train_step(*, model: rf.Module, extern_data: rf.TensorDict, **_kwargs: Any) -> None:
    """The cross-entropy per image (its mean over the batch is optimized) and,
    reported only, whether the image is misclassified."""
    logits = model(extern_data["data"])
    labels = extern_data["classes"]
    ce = rf.cross_entropy(estimated=logits, target=labels, axis=classes, estimated_type="logits")
    ce.mark_as_loss("ce", use_normalized_loss=True)
    (rf.reduce_argmax(logits, axis=classes) != labels).mark_as_loss("error", as_error=True)


def dataset(images: np.ndarray, labels: np.ndarray, **options: Any) -> ArrayDataset:
    """Each image one sequence. The engine batches by padded frames and reads the
    first axis of an array as time; here that axis is the pixels (MLP) or the one
    channel (CNN), static dims in ``extern_data``, and the engine gets no frame
    limit (``batch_size=None``), so ``max_seqs`` alone cuts the batches: BATCH
    images each, as a batch size counts images."""
    return ArrayDataset({"data": images, "classes": labels}, **options)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("mlp", "cnn"), default="mlp")
    parser.add_argument("--epochs", type=int, default=None, help="default: mlp 5, cnn 3")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> list[float]:
    """Trains and prints a line per epoch; returns the test accuracy of each epoch."""
    args = parse_args(argv)
    epochs = args.epochs or (5 if args.model == "mlp" else 3)
    if args.model == "cnn" and not (hasattr(rf, "Conv2d") and hasattr(rf, "max_pool")):
        raise SystemExit(
            "--model cnn needs rf.Conv2d and rf.max_pool, which this verjus build does not "
            "have yet (they come with the RF convolution ops); use --model mlp"
        )

    train_x, train_y = verjus.data.fashion_mnist("train")
    test_x, test_y = verjus.data.fashion_mnist("test")
    if args.model == "mlp":
        train_x, test_x = train_x.reshape(-1, 784), test_x.reshape(-1, 784)
    train = dataset(train_x, train_y, seq_ordering="random", seed=args.seed)
    test = dataset(test_x, test_y)

    accuracies: list[float] = []

    def report(row: dict[str, Any]) -> None:
        """After each epoch: the test accuracy and the line."""
        start = time.perf_counter()
        accuracies.append(1.0 - engine.evaluate(test, name="test")["error"])
        print(
            f"epoch {row['epoch']}: train loss {row['train']['ce']:.4f}, "
            f"test accuracy {accuracies[-1]:.4f}, {row['seconds']:.1f} s training "
            f"({1e3 * row['seconds'] / row['steps']:.2f} ms/step), "
            f"{time.perf_counter() - start:.1f} s test"
        )

    engine = Engine(
        get_model=lambda **_: Mlp() if args.model == "mlp" else Cnn(),
        train_step=train_step,
        extern_data=extern_data(args.model),
        optimizer={"class": "adam"},
        learning_rate=1e-3,
        batch_size=None,
        max_seqs=BATCH,
        # The images are in memory: a batch is made in less time than a worker
        # process would take to ship it, and the steps keep both cores.
        data_worker="thread",
        num_epochs=epochs,
        random_seed=args.seed,
        log=lambda line: None,
        on_epoch_end=report,
    )
    model = engine.init_model()
    n_params = sum(int(np.prod(p.shape)) for p in model.parameters())
    count = f"{epochs} epoch" + ("" if epochs == 1 else "s")
    print(f"{args.model}: {n_params} parameters, {count}, batch {BATCH}, Adam lr 1e-3")
    engine.train(train)
    return accuracies


if __name__ == "__main__":
    main()
