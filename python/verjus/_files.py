"""Atomic file writes for the Python side (run folders, definitions, metrics).

A file is written to a temporary file in the same folder, flushed and fsynced,
then renamed over the target, and the folder is fsynced: a crash leaves either
the old file or the new one, never a torn one. The Rust core does the same for
weights (``Network.save_weights``).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["write_bytes_atomic", "write_text_atomic"]


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Replaces ``path`` with ``data`` atomically."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Replaces ``path`` with the UTF-8 ``text`` atomically."""
    write_bytes_atomic(path, text.encode("utf-8"))
