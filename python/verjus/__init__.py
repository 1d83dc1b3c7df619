"""verjus: a deep learning framework with a Rust core.

This package is the thin Python layer over the native module ``verjus._verjus``:
every computation runs in Rust with the GIL released.

- ``verjus.nn``: network definitions (``Sequential``, the functional ``Graph``);
- ``verjus.Network``: a built network (``from_def``, ``forward``, ``summary``,
  ``state_dict``, ``save``/``load``);
- ``verjus.optim``: ``SGD``, ``Adam``, ``AdamW`` and learning-rate schedules;
- ``verjus.Trainer``: ``train_minibatch``, ``evaluate``, ``fit``,
  ``save_checkpoint`` and ``Trainer.resume``;
- ``verjus.Runner``: hot-swap serving (``infer``, ``swap``, ``watch``);
- ``verjus.data``: Fashion-MNIST as numpy arrays;
- ``verjus.cuda``: ``is_available``, ``device_count``, GPU memory counters
  (train on a GPU with ``Trainer(..., device="cuda")``);
- ``verjus.autocast("bfloat16")``: mixed precision for the products and convolutions
  of ``verjus.rf`` code in a ``with`` block (``verjus.precision``);
- ``verjus.memory_stats(device)``, ``verjus.reset_peak_memory_stats(device)``:
  current and peak bytes on the CPU or a GPU (``verjus.memory``);
- the ``verjus`` command (``verjus.cli``): ``train``, ``info``, ``predict``.
"""

from verjus import cuda, data, nn, optim
from verjus._verjus import __version__, devices, gemm
from verjus.memory import memory_stats, reset_peak_memory_stats
from verjus.network import Network
from verjus.precision import autocast
from verjus.runner import Runner
from verjus.trainer import Callback, History, Metrics, Trainer

__all__ = [
    "Callback",
    "History",
    "Metrics",
    "Network",
    "Runner",
    "Trainer",
    "__version__",
    "autocast",
    "cuda",
    "data",
    "devices",
    "gemm",
    "memory_stats",
    "nn",
    "optim",
    "reset_peak_memory_stats",
]
