"""Tests of the Python package: import, metadata and the native GEMM."""

import re
import threading

import numpy as np
import pytest

import verjus


def test_version_is_a_release_string():
    assert re.fullmatch(r"\d+\.\d+\.\d+([.-]?\w+)?", verjus.__version__)


def test_cpu_is_always_a_device():
    devices = verjus.devices()
    assert devices[0] == "cpu"
    assert all(d == "cpu" or d.startswith("cuda:") for d in devices)


@pytest.mark.parametrize(("m", "k", "n"), [(1, 1, 1), (3, 5, 4), (64, 100, 33), (257, 129, 65)])
def test_gemm_matches_numpy(m, k, n):
    rng = np.random.default_rng(m * k * n)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    c = verjus.gemm(a, b)
    assert c.dtype == np.float32
    assert c.shape == (m, n)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_gemm_reads_strided_arrays():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((40, 30), dtype=np.float32).T  # a transposed view
    b = rng.standard_normal((80, 20), dtype=np.float32)[::2]  # every other row
    np.testing.assert_allclose(verjus.gemm(a, b), a @ b, rtol=1e-4, atol=1e-4)


def test_gemm_batches_leading_axes():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((4, 6, 7), dtype=np.float32)
    w = rng.standard_normal((7, 3), dtype=np.float32)
    np.testing.assert_allclose(verjus.gemm(a, w), a @ w, rtol=1e-4, atol=1e-4)


def test_gemm_shape_error_names_both_shapes():
    a = np.zeros((2, 3), dtype=np.float32)
    b = np.zeros((4, 5), dtype=np.float32)
    with pytest.raises(ValueError, match=r"gemm") as info:
        verjus.gemm(a, b)
    assert "[2, 3]" in str(info.value)
    assert "[4, 5]" in str(info.value)


def test_gemm_rejects_vectors():
    with pytest.raises(ValueError, match=r"rank >= 2"):
        verjus.gemm(np.zeros(3, dtype=np.float32), np.zeros((3, 1), dtype=np.float32))


def test_gemm_rejects_other_dtypes():
    f32 = np.zeros((2, 2), dtype=np.float32)
    with pytest.raises(TypeError, match=r"gemm: a must be a float32 numpy array, got .*float64"):
        verjus.gemm(np.zeros((2, 2)), f32)
    with pytest.raises(TypeError, match=r"gemm: b must be a float32 numpy array, got .*list"):
        verjus.gemm(f32, [[1.0, 0.0], [0.0, 1.0]])


def test_gemm_from_several_threads():
    a = np.ones((256, 256), dtype=np.float32)
    results = []
    threads = [threading.Thread(target=lambda: results.append(verjus.gemm(a, a))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4
    assert all(np.all(r == 256.0) for r in results)
