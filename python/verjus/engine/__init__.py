"""``verjus.engine``: the training engine of the RF frontend (RETURNN's engine
on verjus).

- ``Engine`` (``engine.py``): epochs of ``train_step`` over a dataset, dev
  scores, per-epoch checkpoints with resumption, ``metrics.jsonl`` and
  ``curves.png``, and ``forward`` with ``forward_step``;
- ``ArrayDataset``, ``ReturnnDataset`` (``sources.py``): what it reads, from
  numpy arrays or from a RETURNN dataset;
- ``batching.py``: RETURNN's sequence orders and batching by padded frames,
  with the batches prepared in a background thread;
- ``extern_data.py``, ``optimizer.py``, ``checkpoints.py``: the templates each
  batch binds to, RETURNN's ``optimizer`` dict, the checkpoint files.

``verjus.returnn`` runs RETURNN config files on it.
"""

from verjus.engine.engine import Engine, Source
from verjus.engine.sources import ArrayDataset, ReturnnDataset

__all__ = ["ArrayDataset", "Engine", "ReturnnDataset", "Source"]
