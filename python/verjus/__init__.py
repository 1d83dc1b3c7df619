"""verjus: a deep learning framework with a Rust core.

This package is the thin Python layer over the native module ``verjus._verjus``.
For now it exposes the version, the available devices and a float32 GEMM on
numpy arrays; the network, training and ``rf`` frontend APIs will follow.
"""

from verjus._verjus import __version__, devices, gemm

__all__ = ["__version__", "devices", "gemm"]
