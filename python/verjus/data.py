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

Sequences of images: ``ImageStrips`` places 1 to 6 images side by side (a
strip ``28 * k`` columns wide, chosen by a seeded generator) and yields padded
batches read column by column, with the k labels as the target sequence (the
Conformer-CTC example, ``examples/python/rf_conformer_ctc.py``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

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
    "ImageStrips",
    "StripBatch",
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


@dataclass(frozen=True)
class StripBatch:
    """A padded batch of image strips, read column by column.

    ``features [B, T, H]`` float32 (frame ``t`` of entry ``b`` is column ``t`` of
    its strip, the ``H`` pixel rows its features; zero past ``lengths[b]``),
    ``lengths [B]`` int32 (columns), ``labels [B, L]`` int32 (the classes of the
    strip's images, left to right; zero past ``label_lengths[b]``),
    ``label_lengths [B]`` int32 (images)."""

    features: npt.NDArray[np.float32]
    lengths: npt.NDArray[np.int32]
    labels: npt.NDArray[np.int32]
    label_lengths: npt.NDArray[np.int32]


class ImageStrips:
    """Strips of ``min_images`` to ``max_images`` images placed side by side,
    drawn deterministically from ``images [N, H, W]`` (or ``[N, 1, H, W]``) and
    their ``labels [N]``.

    ``ImageStrips(images, labels, count, seed=0)``: strip ``i`` holds ``k_i``
    images (uniform in ``[min_images, max_images]``), each drawn uniformly (with
    replacement) from the ``N``, by ``numpy.random.default_rng(seed)``: the same
    arguments give the same strips. ``sources[i]`` are the image indices of strip
    ``i``; ``strip(i)`` its columns ``[k_i * W, H]`` and labels ``[k_i]``;
    ``batches(batch_size, seed, epoch)`` every strip once, padded
    (``StripBatch``)."""

    def __init__(
        self,
        images: npt.NDArray[np.floating],
        labels: npt.NDArray[np.integer],
        count: int,
        *,
        seed: int = 0,
        min_images: int = 1,
        max_images: int = 6,
    ) -> None:
        images = np.asarray(images, dtype=np.float32)
        if images.ndim == 4 and images.shape[1] == 1:
            images = images[:, 0]
        if images.ndim != 3:
            raise ValueError(f"ImageStrips: images must be [N, H, W], got shape {images.shape}")
        labels = np.asarray(labels)
        if labels.shape != images.shape[:1]:
            raise ValueError(
                f"ImageStrips: labels must be [N] = [{images.shape[0]}], got shape {labels.shape}"
            )
        if images.shape[0] == 0:
            raise ValueError("ImageStrips: no images to draw from")
        if count < 0:
            raise ValueError(f"ImageStrips: count must be >= 0, got {count}")
        if not 1 <= min_images <= max_images:
            raise ValueError(
                "ImageStrips: need 1 <= min_images <= max_images, got "
                f"min_images={min_images}, max_images={max_images}"
            )
        rng = np.random.default_rng(seed)
        sizes = rng.integers(min_images, max_images + 1, size=count)
        self.images = images
        self.labels = labels.astype(np.int32)
        self.sources = [rng.integers(0, images.shape[0], size=int(k)) for k in sizes]

    def __len__(self) -> int:
        return len(self.sources)

    @property
    def height(self) -> int:
        """The pixel rows of an image: the features of a frame."""
        return int(self.images.shape[1])

    @property
    def image_width(self) -> int:
        """The columns of one image."""
        return int(self.images.shape[2])

    def strip(self, i: int) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int32]]:
        """Strip ``i`` as columns ``[k * W, H]`` (the images left to right) and
        its labels ``[k]``."""
        source = self.sources[i]
        columns = np.concatenate(list(self.images[source]), axis=1).T
        return np.ascontiguousarray(columns), self.labels[source]

    def batch(self, rows: npt.ArrayLike) -> StripBatch:
        """The strips ``rows``, padded to the longest (see ``StripBatch``)."""
        rows = np.asarray(rows, dtype=np.int64)
        if rows.ndim != 1 or len(rows) == 0:
            raise ValueError(f"ImageStrips.batch: rows must be a non-empty list, got {rows!r}")
        counts = np.array([len(self.sources[r]) for r in rows], np.int32)
        width = self.image_width
        features = np.zeros((len(rows), int(counts.max()) * width, self.height), np.float32)
        labels = np.zeros((len(rows), int(counts.max())), np.int32)
        for b, r in enumerate(rows):
            columns, strip_labels = self.strip(int(r))
            features[b, : len(columns)] = columns
            labels[b, : len(strip_labels)] = strip_labels
        return StripBatch(features, counts * width, labels, counts)

    def plan(self, batch_size: int, seed: int | None = None, epoch: int = 0) -> list[list[int]]:
        """The strips of each batch of an epoch: with ``seed=None`` in order;
        else shuffled from ``(seed, epoch)``, then pools of 20 batches sorted by
        width (less padding) and the batches shuffled."""
        if batch_size < 1:
            raise ValueError(f"ImageStrips: batch_size must be >= 1, got {batch_size}")
        n = len(self)
        if seed is None:
            return [list(range(s, min(s + batch_size, n))) for s in range(0, n, batch_size)]
        rng = np.random.default_rng([seed, epoch])
        order = rng.permutation(n)
        counts = np.array([len(s) for s in self.sources])
        pool = 20 * batch_size
        plan = []
        for start in range(0, n, pool):
            part = order[start : start + pool]
            part = part[np.argsort(counts[part], kind="stable")]
            plan += [part[s : s + batch_size].tolist() for s in range(0, len(part), batch_size)]
        return [plan[i] for i in rng.permutation(len(plan))]

    def batches(
        self, batch_size: int, seed: int | None = None, epoch: int = 0
    ) -> Iterator[StripBatch]:
        """Every strip once, in padded batches (see ``plan``)."""
        for rows in self.plan(batch_size, seed, epoch):
            yield self.batch(rows)
