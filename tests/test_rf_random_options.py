"""``rf.random_uniform`` / ``rf.random_normal`` with RETURNN's options: integer
dtypes, ``sparse_dim`` (any index of it by default), ``feature_dim``."""

from __future__ import annotations

import numpy as np

import verjus.rf as rf
from verjus.rf import Dim


def test_random_uniform_int_range() -> None:
    rf.set_random_seed(1)
    n = Dim(2000, name="n")
    x = rf.random_uniform([n], dtype="int32", minval=-3, maxval=4)
    assert x.dtype == "int32"
    values = x.numpy()
    assert values.min() == -3
    assert values.max() == 3


def test_random_uniform_sparse_dim_indexes_it() -> None:
    rf.set_random_seed(2)
    n, vocab = Dim(500, name="n"), Dim(7, name="vocab")
    x = rf.random_uniform([n], sparse_dim=vocab)
    assert x.sparse_dim == vocab
    assert x.dtype == rf.get_default_array_index_dtype()
    assert set(np.unique(x.numpy())) == set(range(7))


def test_random_uniform_and_normal_floats() -> None:
    rf.set_random_seed(3)
    n, feat = Dim(4000, name="n"), Dim(2, name="feat")
    u = rf.random_uniform([n, feat], minval=2.0, maxval=3.0, feature_dim=feat)
    assert u.feature_dim == feat
    assert u.dtype == "float32"
    assert u.numpy().min() >= 2.0
    assert u.numpy().max() < 3.0
    g = rf.random_normal([n], mean=5.0, stddev=0.5).numpy()
    assert abs(g.mean() - 5.0) < 0.05
    assert abs(g.std() - 0.5) < 0.05
    # the same stream as before: a seed gives the same numbers
    rf.set_random_seed(3)
    np.testing.assert_array_equal(
        rf.random_uniform([n, feat], minval=2.0, maxval=3.0).numpy(), u.numpy()
    )
