"""Trains Fashion-MNIST with a model written in verjus.rf (RETURNN's frontend API).

    python examples/python/rf_fashion.py [--model mlp|cnn] [--epochs N] [--seed S]

``mlp``: 784-512-512-10 with ReLU (default 5 epochs; PyTorch reaches 0.874-0.880
test accuracy with this recipe). ``cnn``: conv3x3(32)-ReLU-maxpool2-conv3x3(64)-
ReLU-maxpool2-Linear(128)-ReLU-Linear(10) (default 3 epochs; PyTorch 0.885-0.896);
it needs ``rf.Conv2d`` and ``rf.max_pool``. Both: Adam lr 1e-3, batch 128, inputs
in [0, 1], RETURNN's default initialization (Glorot-uniform weights, zero biases)
drawn after ``rf.set_random_seed(seed)``.

Every op of a step runs in Rust on the autograd tape; per step Python only slices
the batch out of the numpy arrays and hands it over. The epoch's loss is summed in
an rf tensor and read once per epoch.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import verjus
from verjus import rf

BATCH = 128
EVAL_BATCH = 1000

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


def evaluate(model: rf.Module, images: np.ndarray, labels: np.ndarray, dims: list[rf.Dim]) -> float:
    """Test accuracy, in batches of EVAL_BATCH."""
    rf.init_forward_step_run_ctx()
    correct = 0
    for start in range(0, len(labels), EVAL_BATCH):
        x = rf.convert_to_tensor(images[start : start + EVAL_BATCH], dims=dims)
        predicted = rf.reduce_argmax(model(x), axis=classes).numpy()
        correct += int((predicted == labels[start : start + EVAL_BATCH]).sum())
    return correct / len(labels)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("mlp", "cnn"), default="mlp")
    parser.add_argument("--epochs", type=int, default=None, help="default: mlp 5, cnn 3")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
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
    dims = image_dims(args.model)

    rf.set_random_seed(args.seed)
    model = Mlp() if args.model == "mlp" else Cnn()
    n_params = sum(int(np.prod(p.shape)) for p in model.parameters())
    count = f"{epochs} epoch" + ("" if epochs == 1 else "s")
    print(f"{args.model}: {n_params} parameters, {count}, batch {BATCH}, Adam lr 1e-3")
    opt = rf.Adam(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(args.seed)

    for epoch in range(1, epochs + 1):
        rf.init_train_step_run_ctx(train_flag=True)
        start = time.perf_counter()
        order = rng.permutation(len(train_y))
        total = rf.zeros([])
        steps = 0
        for first in range(0, len(order), BATCH):
            rows = order[first : first + BATCH]
            x = rf.convert_to_tensor(train_x[rows], dims=dims)
            y = rf.convert_to_tensor(train_y[rows], dims=[rf.batch_dim], sparse_dim=classes)
            ce = rf.cross_entropy(
                estimated=model(x), target=y, axis=classes, estimated_type="logits"
            )
            loss = rf.reduce_mean(ce, axis=rf.batch_dim)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total = total + rf.stop_gradient(loss)
            steps += 1
        train_s = time.perf_counter() - start
        train_loss = float(total.numpy()) / steps
        accuracy = evaluate(model, test_x, test_y, dims)
        print(
            f"epoch {epoch}: train loss {train_loss:.4f}, test accuracy {accuracy:.4f}, "
            f"{train_s:.1f} s training ({1e3 * train_s / steps:.2f} ms/step), "
            f"{time.perf_counter() - start - train_s:.1f} s test"
        )


if __name__ == "__main__":
    main()
