"""Datasets as numpy arrays, read in Rust.

``fashion_mnist`` reads the gzip'd IDX files that Debian's
``dataset-fashion-mnist`` package installs in
``/usr/share/datasets/fashion-mnist`` (or another folder: the ``data_dir``
argument, else the ``VERJUS_FASHION_MNIST`` environment variable).
"""

from __future__ import annotations

import os

import numpy as np
import numpy.typing as npt

from verjus import _verjus

__all__ = ["DEFAULT_DIR", "ENV_VAR", "FASHION_MNIST_CLASSES", "fashion_mnist"]

DEFAULT_DIR = "/usr/share/datasets/fashion-mnist"
ENV_VAR = "VERJUS_FASHION_MNIST"

# The label names of Fashion-MNIST, by class index.
FASHION_MNIST_CLASSES = (
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
)


def fashion_mnist(
    split: str = "train", data_dir: str | os.PathLike[str] | None = None
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
    """One split (``"train"``: 60,000 images, ``"test"``: 10,000) as images
    ``[N, 1, 28, 28]`` float32 in ``[0, 1]`` and labels ``[N]`` int64.

    Missing files raise ``OSError`` saying how to install them
    (``apt-get install dataset-fashion-mnist``); a damaged file raises ``OSError``
    naming the file and the byte offset."""
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    return _verjus.fashion_mnist(split, None if data_dir is None else os.fspath(data_dir))
