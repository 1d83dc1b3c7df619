"""CUDA: whether a GPU is usable, how many there are, and allocator memory counters.

The CUDA libraries are loaded at run time, so every build of verjus has this module;
where no GPU, driver or library is present, ``is_available()`` is ``False`` and
``unavailable_reason()`` says what is missing. Select a GPU with ``device="cuda"``
or ``device="cuda:N"`` (for example ``Trainer(..., device="cuda")``).
"""

from __future__ import annotations

from verjus import _verjus

__all__ = [
    "device_count",
    "is_available",
    "max_memory_allocated",
    "memory_allocated",
    "reset_peak_memory_stats",
    "unavailable_reason",
]


def is_available() -> bool:
    """Whether a CUDA GPU and the libraries verjus needs (cuBLAS, cuDNN, NVRTC) are usable."""
    return _verjus.cuda_is_available()


def device_count() -> int:
    """The number of CUDA devices (0 where CUDA is unavailable)."""
    return _verjus.cuda_device_count()


def unavailable_reason() -> str | None:
    """Why CUDA is unavailable, or ``None`` where it is available."""
    return _verjus.cuda_unavailable_reason()


def memory_allocated(device: int = 0) -> int:
    """Bytes held by live tensors on the device (in allocator size classes)."""
    return _verjus.cuda_memory_stats(device)[0]


def max_memory_allocated(device: int = 0) -> int:
    """The allocator's high-water mark in bytes since the last reset."""
    return _verjus.cuda_memory_stats(device)[1]


def reset_peak_memory_stats(device: int = 0) -> None:
    """Starts a new high-water mark at the current use."""
    _verjus.cuda_reset_peak_memory(device)
