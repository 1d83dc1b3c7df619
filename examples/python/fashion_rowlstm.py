"""Classifies Fashion-MNIST with an LSTM reading each image's 28 rows as 28
steps (LSTM 128, last frame, Linear 10; Adam 1e-3, batch 128, 3 epochs).

    python examples/python/fashion_rowlstm.py [--epochs N] [--max-batches N]

PyTorch reaches 0.845 test accuracy after 3 epochs with the same recipe.
"""

import argparse

import verjus
from verjus import nn

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--max-batches", type=int, default=None, help="quick runs: fewer examples")
args = parser.parse_args()

net = verjus.Network.from_def(
    nn.Sequential(
        nn.LSTM(128, name="rnn"),
        nn.LastFrame(name="last"),
        nn.Linear(10, name="fc"),
        input_shape=(None, 28),
        input_name="rows",
    ),
    seed=0,
)
net.summary()
x, y = verjus.data.fashion_mnist("train")
xt, yt = verjus.data.fashion_mnist("test")
rows, test_rows = x.reshape(-1, 28, 28), xt.reshape(-1, 28, 28)  # [N, T=28 rows, 28 pixels]
if args.max_batches is not None:
    rows, y = rows[: args.max_batches * 128], y[: args.max_batches * 128]
trainer = verjus.Trainer(net, verjus.optim.Adam(lr=1e-3))
# Every image has all 28 rows: no lengths needed. Validation is the test split.
history = trainer.fit(
    rows, y, epochs=args.epochs, batch_size=128, validation_data=(test_rows, yt), seed=0
)
if len(history):
    print(f"final test accuracy: {history['val_accuracy'][-1]:.4f}")
