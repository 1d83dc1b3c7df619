"""Memory counters of a device: ``memory_stats`` and ``reset_peak_memory_stats``.

Memory-saving features (``rf.gradient_checkpoint_scope``, weight dropout and
noise) are shown by these numbers. On the CPU they count the bytes that host
tensors own (every tensor adds its size when made and takes it off when
freed; views count nothing); on CUDA they are the allocator's counters (in
its size classes). Every device's stats also hold the autograd tape's
counters: the bytes its graphs keep for backward (distinct saved tensors,
parameters not counted; process-wide, over all devices), which show what a
gradient checkpoint scope saves. Reset the peaks at the start of a step to get
the step's high-water marks.
"""

from __future__ import annotations

from verjus import _verjus

__all__ = ["memory_stats", "reset_peak_memory_stats"]


def _cuda_ordinal(device: str) -> int | None:
    if device == "cpu":
        return None
    if device == "cuda":
        return 0
    if device.startswith("cuda:") and device[5:].isdigit():
        return int(device[5:])
    raise ValueError(f"memory_stats: unknown device {device!r}; expected 'cpu', 'cuda' or 'cuda:N'")


def memory_stats(device: str = "cpu") -> dict[str, int]:
    """The memory counters of ``device`` (``"cpu"``, ``"cuda"``, ``"cuda:N"``).

    :param device: the device
    :return: ``{"current_bytes": ..., "peak_bytes": ..., "tape_saved_bytes": ...,
        "tape_saved_peak_bytes": ...}`` (CUDA adds ``"reserved_bytes"``, what the
        allocator holds including its cache)
    """
    ordinal = _cuda_ordinal(device)
    saved, saved_peak = _verjus.tape_saved_stats()
    tape = {"tape_saved_bytes": saved, "tape_saved_peak_bytes": saved_peak}
    if ordinal is None:
        current, peak = _verjus.host_memory_stats()
        return {"current_bytes": current, "peak_bytes": peak, **tape}
    in_use, peak, reserved = _verjus.cuda_memory_stats(ordinal)
    return {"current_bytes": in_use, "peak_bytes": peak, "reserved_bytes": reserved, **tape}


def reset_peak_memory_stats(device: str = "cpu") -> None:
    """Starts new high-water marks of ``device`` and of the tape's saved
    bytes at their current use.

    :param device: ``"cpu"``, ``"cuda"`` or ``"cuda:N"``
    """
    ordinal = _cuda_ordinal(device)
    _verjus.reset_tape_saved_peak()
    if ordinal is None:
        _verjus.reset_host_peak_memory()
    else:
        _verjus.cuda_reset_peak_memory(ordinal)
