"""Data sources of the training engine: the sequences of one epoch, one at a time.

A source has ``data_keys`` and ``iter_epoch(epoch)``, which yields each sequence of the
epoch as a dict ``{data_key: numpy array}`` (time first where the data has a time axis),
the input of :func:`verjus.engine.batching.batches`.

- :class:`ArrayDataset` holds the sequences in memory and orders them with
  :func:`verjus.engine.batching.seq_order`, as RETURNN's datasets order theirs.
- :class:`ReturnnDataset` reads a RETURNN dataset object (``returnn.datasets``) the way
  RETURNN's PyTorch engine does, so a RETURNN config's data trains unchanged. RETURNN is
  not imported here; the object is used through its methods only.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from verjus.engine.batching import seq_order

__all__ = ["ArrayDataset", "ReturnnDataset"]


class ArrayDataset:
    """Sequences held in memory, per data key a list of per-sequence arrays, or one array
    whose first axis is the sequence (each row one sequence, e.g. ``[N, T, F]`` or the
    labels ``[N]``). All keys hold the same number of sequences.

    ``seq_ordering`` and ``seed`` are RETURNN's ``seq_ordering`` and ``random_seed_offset``
    (see :func:`~verjus.engine.batching.seq_order`). The orderings by length use the key
    ``"data"`` when it has a time axis, else the first key (in the given order) that has
    one: RETURNN orders by its default key's length, which is ``"data"`` for RETURNN's
    ``StaticDataset`` and most others (``StaticDataset`` without ``"data"`` takes the
    alphabetically first key instead). Without any time axis every length is 1.
    """

    def __init__(
        self,
        data: dict[str, list[np.ndarray] | np.ndarray],
        *,
        seq_ordering: str = "default",
        seed: int = 0,
    ) -> None:
        """Keeps the sequences of ``data``; ValueError when the keys differ in count."""
        self._seqs = {key: [np.asarray(seq) for seq in value] for key, value in data.items()}
        counts = {key: len(seqs) for key, seqs in self._seqs.items()}
        if len(set(counts.values())) > 1:
            raise ValueError(
                f"ArrayDataset: data keys with different numbers of sequences: {counts}"
            )
        self.seq_ordering = seq_ordering
        self.seed = seed
        self._num_seqs = next(iter(counts.values()), 0)
        timed = [key for key, seqs in self._seqs.items() if seqs and seqs[0].ndim > 0]
        self._length_key = "data" if "data" in timed else next(iter(timed), None)

    @property
    def num_seqs(self) -> int:
        """The number of sequences."""
        return self._num_seqs

    @property
    def data_keys(self) -> list[str]:
        """The data keys, in the given order."""
        return list(self._seqs)

    def seq_lengths(self, key: str) -> np.ndarray:
        """The lengths (first axis) of the sequences of ``key``, int64 ``[num_seqs]``."""
        if key not in self._seqs:
            raise KeyError(f"ArrayDataset: no data key {key!r}, the keys are {self.data_keys}")
        if any(seq.ndim == 0 for seq in self._seqs[key]):
            raise ValueError(f"ArrayDataset: data key {key!r} has no time axis")
        return np.array([len(seq) for seq in self._seqs[key]], dtype=np.int64)

    def iter_epoch(self, epoch: int) -> Iterator[dict[str, np.ndarray]]:
        """The sequences of ``epoch`` (from 1), in ``seq_order(...)`` order."""
        if self._length_key is None:
            lengths = np.ones(self._num_seqs, dtype=np.int64)
        else:
            lengths = self.seq_lengths(self._length_key)
        for i in seq_order(lengths, self.seq_ordering, epoch=epoch, seed=self.seed):
            yield {key: seqs[i] for key, seqs in self._seqs.items()}


class ReturnnDataset:
    """A RETURNN dataset object (``returnn.datasets.basic.Dataset``) as a source.

    Reads an epoch as RETURNN's ``ReturnnDatasetIterDataPipe.__iter__``
    (``returnn/torch/data/returnn_dataset_wrapper.py``) does after its reset:
    ``init_seq_order(epoch=epoch)``, then for ``i = 0, 1, ...`` while
    ``is_less_than_num_seqs(i)``: ``load_seqs(i, i + 1)`` and ``get_data(i, key)`` per data
    key; then ``finish_epoch()`` where the dataset has it (also when the epoch is left
    early). The sequence order is the dataset's own (its ``seq_ordering``).
    Unlike RETURNN's wrapper, the sequences hold the data keys only (no ``seq_tag``,
    ``seq_idx``, ``epoch``, ``num_seqs``, ``complete_frac``).
    """

    def __init__(self, dataset: Any, data_keys: Sequence[str] | None = None) -> None:
        """Wraps ``dataset``; ``data_keys``: the keys to read (default: all of the dataset's
        ``get_data_keys()``), ValueError naming those the dataset does not have."""
        keys = list(dataset.get_data_keys())
        if data_keys is not None:
            missing = [key for key in data_keys if key not in keys]
            if missing:
                raise ValueError(f"ReturnnDataset: the dataset has no data keys {missing}: {keys}")
            keys = [key for key in keys if key in data_keys]
        self.dataset = dataset
        self._data_keys = keys

    @property
    def data_keys(self) -> list[str]:
        """The keys read, in the dataset's order."""
        return list(self._data_keys)

    def iter_epoch(self, epoch: int) -> Iterator[dict[str, np.ndarray]]:
        """The sequences of ``epoch`` (from 1) in the dataset's order for that epoch."""
        dataset = self.dataset
        dataset.init_seq_order(epoch=epoch)
        try:
            i = 0
            while dataset.is_less_than_num_seqs(i):
                dataset.load_seqs(i, i + 1)
                yield {key: dataset.get_data(i, key) for key in self._data_keys}
                i += 1
        finally:
            if hasattr(dataset, "finish_epoch"):
                dataset.finish_epoch()
