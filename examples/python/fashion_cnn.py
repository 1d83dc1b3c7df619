"""Trains the small CNN of examples/nets/fashion_cnn.json on Fashion-MNIST from
Python (3 epochs, Adam), then saves it and reloads it.

    python examples/python/fashion_cnn.py [--epochs N] [--out runs/cnn_python]

PyTorch reaches 0.885-0.896 test accuracy after 3 epochs with the same recipe.
"""

import argparse
from pathlib import Path

import verjus

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--out", default="runs/cnn_python")
args = parser.parse_args()

net = verjus.Network.from_def(Path(__file__).parent.parent / "nets" / "fashion_cnn.json")
x, y = verjus.data.fashion_mnist("train")
xt, yt = verjus.data.fashion_mnist("test")
trainer = verjus.Trainer(net, verjus.optim.Adam(lr=1e-3), loss="cross_entropy")
# fit prints one line per epoch; validation here is the test split.
trainer.fit(x, y, epochs=args.epochs, batch_size=128, validation_data=(xt, yt))

folder = net.save(args.out)
again = verjus.Network.load(folder)
print(f"saved to {folder}; reloaded test accuracy "
      f"{(again.forward(xt).argmax(axis=1) == yt).mean():.4f}")  # fmt: skip
