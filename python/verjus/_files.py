"""Atomic file writes for the Python side (run folders, definitions, metrics).

A file is written to a temporary file in the same folder, flushed and fsynced,
then renamed over the target, and the folder is fsynced: a crash leaves either
the old file or the new one, never a torn one. Writing through a symbolic link
replaces the file it points to (the link stays), and a replaced file keeps its
permissions. The Rust core does the same for weights (``Network.save_weights``).
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path

__all__ = ["write_bytes_atomic", "write_text_atomic"]


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Replaces ``path`` with ``data`` atomically."""
    # realpath follows the links (a dangling one to the file it names), so the
    # rename below replaces the linked file, not the link. It leaves a loop of
    # links unresolved, which must not be replaced by a file either.
    path = Path(os.path.realpath(path))
    if path.is_symlink():
        raise OSError(errno.ELOOP, f"{path}: a loop of symbolic links")
    # Not tempfile.mkstemp: its files are private (0600), and the rename would
    # carry that mode over. os.open with 0666 applies the umask like any new file.
    tmp = path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(6)}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    except FileNotFoundError:  # os.open's own error names the temporary file
        raise FileNotFoundError(
            errno.ENOENT, f"the folder {path.parent} does not exist", str(path)
        ) from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            _keep_mode(path, f.fileno())
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


def _keep_mode(path: Path, fd: int) -> None:
    """Gives the open file ``fd`` the permissions of ``path``, if it exists."""
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        return
    os.fchmod(fd, mode)


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Replaces ``path`` with the UTF-8 ``text`` atomically."""
    write_bytes_atomic(path, text.encode("utf-8"))
