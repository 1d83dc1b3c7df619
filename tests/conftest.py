"""Shared fixtures: small generated data sets in the Fashion-MNIST IDX format.

Tests never need the real data set: ``fashion_dir`` writes the four gzip'd IDX
files with a few hundred 28x28 images whose class is easy to learn (each class
lights up its own 7x7 patch over noise), so a real training run finishes in
seconds and still has to learn something to pass.

``VERJUS_TEST_DEVICE=cuda`` makes the RF frontend create its tensors on the GPU
for the whole session (``rf.set_default_device``), so the RF test files run
their ops there unchanged (``scripts/gpu_run.sh`` does this on a GPU machine).
"""

from __future__ import annotations

import gzip
import os
import struct
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

# RETURNN's rf tests run from a copy with these stand-ins
# (tests/test_returnn_rf_suite.py); they are not tests of their own.
collect_ignore = ["returnn_suite"]

# What a bare checkout's examples/nets holds.
NETS = Path(__file__).resolve().parent.parent / "examples" / "nets"

IDX_UBYTE = 0x08


def write_idx(path: Path, array: np.ndarray) -> None:
    """Writes a uint8 array as a gzip'd IDX file (magic, big-endian dims, data)."""
    header = struct.pack(">BBBB", 0, 0, IDX_UBYTE, array.ndim)
    header += struct.pack(f">{array.ndim}I", *array.shape)
    with gzip.open(path, "wb") as f:
        f.write(header + np.ascontiguousarray(array, dtype=np.uint8).tobytes())


def synthetic_images(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` uint8 images ``[n, 28, 28]`` and labels ``[n]``: noise plus a bright patch
    whose position is the class."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 10, size=n).astype(np.uint8)
    images = rng.integers(0, 80, size=(n, 28, 28)).astype(np.uint8)
    for i, k in enumerate(labels):
        r, c = (int(k) // 4) * 7 + 3, (int(k) % 4) * 7
        images[i, r : r + 7, c : c + 7] = 230
    return images, labels


def write_fashion_dir(folder: Path, n_train: int = 512, n_test: int = 128) -> Path:
    """The four Fashion-MNIST files of a small synthetic set in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    for prefix, n, seed in (("train", n_train, 1), ("t10k", n_test, 2)):
        images, labels = synthetic_images(n, seed)
        write_idx(folder / f"{prefix}-images-idx3-ubyte.gz", images)
        write_idx(folder / f"{prefix}-labels-idx1-ubyte.gz", labels)
    return folder


@pytest.fixture(scope="session")
def fashion_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with a small synthetic Fashion-MNIST (512 training, 128 test images)."""
    return write_fashion_dir(tmp_path_factory.mktemp("fashion"))


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)


def pytest_configure(config: pytest.Config) -> None:
    """``$VERJUS_TEST_DEVICE`` becomes the RF frontend's default device before the
    test modules are imported (some make tensors at import)."""
    device = os.environ.get("VERJUS_TEST_DEVICE", "cpu")
    if device != "cpu":
        from verjus import rf

        rf.set_default_device(device)


@pytest.fixture
def kept_behavior_version() -> Iterator[None]:
    """RETURNN's behavior version state (the version and minimum version) as
    before the test, after it: a test that sets a minimum version would
    otherwise leave it for every later test of the session."""
    basic = pytest.importorskip("returnn.util.basic", reason="RETURNN's own ops are the reference")
    state = basic.BehaviorVersion._get_state()
    version = basic.BehaviorVersion.get()
    yield
    basic.BehaviorVersion._reset(state)
    assert basic.BehaviorVersion._get_state() == state
    assert basic.BehaviorVersion.get() == version
