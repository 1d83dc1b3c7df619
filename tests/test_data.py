"""``verjus.data.fashion_mnist`` reads the IDX files; problems name the file."""

import gzip

import numpy as np
import pytest
from conftest import synthetic_images, write_fashion_dir

import verjus


def test_reads_images_scaled_and_labels(fashion_dir):
    x, y = verjus.data.fashion_mnist("train", fashion_dir)
    images, labels = synthetic_images(512, 1)
    assert x.shape == (512, 1, 28, 28)
    assert x.dtype == np.float32
    assert y.dtype == np.int64
    np.testing.assert_array_equal(y, labels)
    np.testing.assert_allclose(x[:, 0], images / 255.0, rtol=1e-6)
    xt, yt = verjus.data.fashion_mnist("test", fashion_dir)
    assert xt.shape == (128, 1, 28, 28)
    assert yt.shape == (128,)


def test_the_environment_variable_names_the_folder(fashion_dir, monkeypatch):
    monkeypatch.setenv("VERJUS_FASHION_MNIST", str(fashion_dir))
    x, _ = verjus.data.fashion_mnist("test")
    assert len(x) == 128


def test_missing_files_say_how_to_install_them(tmp_path):
    with pytest.raises(OSError, match=r"apt-get install dataset-fashion-mnist"):
        verjus.data.fashion_mnist("train", tmp_path)


def test_a_truncated_file_names_the_file(tmp_path):
    folder = write_fashion_dir(tmp_path / "data", n_train=16, n_test=8)
    path = folder / "t10k-images-idx3-ubyte.gz"
    raw = gzip.decompress(path.read_bytes())
    path.write_bytes(gzip.compress(raw[:100]))
    with pytest.raises(OSError, match=r"t10k-images-idx3-ubyte\.gz"):
        verjus.data.fashion_mnist("test", folder)


def test_a_bad_split_is_a_value_error(fashion_dir):
    with pytest.raises(ValueError, match=r"split"):
        verjus.data.fashion_mnist("validation", fashion_dir)
