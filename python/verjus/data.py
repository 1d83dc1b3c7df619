"""Datasets as numpy arrays, read in Rust.

``fashion_mnist`` reads the gzip'd IDX files that Debian's
``dataset-fashion-mnist`` package installs in
``/usr/share/datasets/fashion-mnist`` (or another folder: the ``data_dir``
argument, else the ``VERJUS_FASHION_MNIST`` environment variable).

Text for sequence models: ``fortunes`` reads the texts of Debian's ``fortunes``
package (``/usr/share/games/fortunes``, else the ``path`` argument or the
``VERJUS_FORTUNES`` environment variable); ``CharVocab`` maps characters to ids
(with ``<pad>`` and ``<eot>``) and is saved with a network; ``TextBatcher``
yields padded int32 batches ``(inputs, targets, lengths)`` for a character
language model, bucketed by length and shuffled per epoch by seed.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import numpy as np
import numpy.typing as npt

from verjus import _verjus

__all__ = [
    "DEFAULT_DIR",
    "ENV_VAR",
    "FASHION_MNIST_CLASSES",
    "FORTUNES_DIR",
    "FORTUNES_ENV_VAR",
    "CharVocab",
    "TextBatcher",
    "fashion_mnist",
    "fortunes",
]

DEFAULT_DIR = "/usr/share/datasets/fashion-mnist"
ENV_VAR = "VERJUS_FASHION_MNIST"
FORTUNES_DIR = "/usr/share/games/fortunes"
FORTUNES_ENV_VAR = "VERJUS_FORTUNES"

CharVocab = _verjus.CharVocab

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


def fortunes(
    path: str | os.PathLike[str] | None = None,
    max_len: int | None = 512,
    val_every: int | None = 20,
) -> tuple[list[str], list[str], CharVocab]:
    """The texts of Debian's ``fortunes`` package as ``(train, validation, vocab)``.

    Every regular file in the folder (``path``, else ``$VERJUS_FORTUNES``, else
    ``/usr/share/games/fortunes``) except ``*.dat``, ``*.u8``, symbolic links and
    subfolders (``off/`` holds rot13-encoded offensive fortunes), in name order,
    split on lines holding only ``%``; each text without its final newline,
    empty ones dropped. Texts over ``max_len`` characters are left out
    (``None``: none), and texts 0, n, 2n, ... of the rest (n = ``val_every``;
    ``None``: no validation) form the validation part. ``vocab`` holds the
    characters of both parts. With the defaults (the char-LM recipe) the
    Debian package gives 13,540 training texts of 1.65 M characters and 713
    validation texts, with 112 characters.

    A missing folder raises ``OSError`` saying to ``apt-get install
    fortunes``; a file that is empty, unreadable or not UTF-8 raises
    ``OSError`` naming it (and the byte offset)."""
    folder = None if path is None else os.fspath(path)
    return _verjus.fortunes(folder, max_len, val_every)


class TextBatcher(_verjus.TextBatcher):
    """Padded int32 batches ``(inputs, targets, lengths)`` of texts for a
    character language model, by similar length.

    ``TextBatcher(texts, vocab, batch_size=32, pool=100)``: ``inputs [B, T]`` is
    ``<eot>`` then a text's characters, ``targets [B, T]`` the characters then
    ``<eot>``, both padded with ``<pad>`` past ``lengths [B]`` (characters + 1).
    ``epoch(seed, epoch)`` gives every text once, in batches that change with the
    seed and the epoch (pools of ``pool`` batches sorted by length, then the
    batches shuffled); ``len()`` is the number of batches and ``tokens`` the real
    frames of an epoch."""

    def __len__(self) -> int:
        return self.num_batches

    def epoch(
        self, seed: int | None = None, epoch: int = 0
    ) -> Iterator[tuple[npt.NDArray[np.int32], npt.NDArray[np.int32], npt.NDArray[np.int32]]]:
        """The batches of epoch ``epoch``: shuffled from ``seed`` and ``epoch``, or
        sorted by length with ``seed=None`` (for evaluation)."""
        for rows in self.plan(seed, epoch):
            yield self.batch(rows)
