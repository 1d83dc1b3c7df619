"""``rf.random`` and friends (``random_truncated_normal``,
``random_choice_with_replacement``, ``random_choice_without_replacement``,
the step-based seeds): reproducible from the rf random stream, the right
ranges and distributions (by sample statistics), dims and dtypes, bad input.
"""

from __future__ import annotations

import numpy as np
import pytest

from verjus import rf

N = rf.Dim(4000, name="n")


def test_uniform_normal_and_ints_reproducible() -> None:
    rf.set_random_seed(7)
    a = rf.random([N], distribution="uniform", minval=-2.0, maxval=3.0).numpy()
    rf.set_random_seed(7)
    b = rf.random([N], distribution="uniform", minval=-2.0, maxval=3.0).numpy()
    np.testing.assert_array_equal(a, b)
    assert a.min() >= -2.0
    assert a.max() < 3.0
    assert abs(a.mean() - 0.5) < 0.1
    v = rf.Dim(5, name="v")
    ints = rf.random([N], distribution="uniform", maxval=5, dtype="int32", sparse_dim=v)
    assert ints.dtype == "int32"
    assert ints.sparse_dim == v
    assert set(np.unique(ints.numpy())) == set(range(5))
    bounded = rf.random([N], distribution="uniform", bound=0.5).numpy()
    assert bounded.min() >= -0.5
    assert bounded.max() < 0.5
    normal = rf.random([N], distribution="normal", mean=1.0, stddev=2.0).numpy()
    assert abs(normal.mean() - 1.0) < 0.15
    assert abs(normal.std() - 2.0) < 0.15


def test_truncated_normal_within_its_cut() -> None:
    rf.set_random_seed(1)
    x = rf.random_truncated_normal([N], mean=1.0, stddev=0.5).numpy()
    assert x.min() >= 0.0
    assert x.max() <= 2.0
    assert abs(x.mean() - 1.0) < 0.05
    # truncation to +-2 sigma shrinks the std to about 0.88 sigma
    assert abs(x.std() - 0.88 * 0.5) < 0.03
    y = rf.random_truncated_normal([N], minval=0.5, maxval=1.0).numpy()
    assert y.min() >= 0.5
    assert y.max() <= 1.0


def test_static_draws_repeat_each_step() -> None:
    rf.reset_step_random_state()
    a = rf.random([rf.Dim(5, name="d")], distribution="normal", static=True).numpy()
    b = rf.random([rf.Dim(5, name="d")], distribution="normal", static=True).numpy()
    assert not np.array_equal(a, b)  # the next seed within a step
    rf.reset_step_random_state()
    np.testing.assert_array_equal(
        rf.random([rf.Dim(5, name="d")], distribution="normal", static=True).numpy(), a
    )
    rf.reset_step_random_state()
    s1 = rf.get_static_step_based_seed(size=3)
    rf.reset_step_random_state()
    np.testing.assert_array_equal(rf.get_static_step_based_seed(size=3), s1)


def test_choice_with_replacement_follows_probs() -> None:
    rf.set_random_seed(2)
    lens = [3, 2]
    axis = rf.Dim(rf.convert_to_tensor(np.array(lens, np.int32), dims=[rf.batch_dim]), name="c")
    probs = np.array([[0.2, 0.0, 0.8], [0.5, 0.5, 0.9]], np.float32)  # entry [1, 2] is padding
    p = rf.convert_to_tensor(probs, dims=[rf.batch_dim, axis])
    out = rf.random_choice_with_replacement([rf.batch_dim, N], probs=p, axis=axis)
    assert out.dims == (rf.batch_dim, N)
    assert out.sparse_dim == axis
    assert out.dtype == "int32"
    got = out.numpy()
    freq0 = np.bincount(got[0], minlength=3) / N.dimension
    freq1 = np.bincount(got[1], minlength=3) / N.dimension
    np.testing.assert_allclose(freq0, [0.2, 0.0, 0.8], atol=0.03)
    np.testing.assert_allclose(freq1, [0.5, 0.5, 0.0], atol=0.03)


def test_choice_without_replacement_distinct_and_top_k_without_noise() -> None:
    rf.set_random_seed(4)
    v, k = rf.Dim(6, name="v"), rf.Dim(3, name="k")
    logits = np.log(np.array([[0.1, 0.3, 0.05, 0.25, 0.2, 0.1]] * 2, np.float32))
    lp = rf.convert_to_tensor(logits, dims=[rf.batch_dim, v])
    idx = rf.random_choice_without_replacement(log_probs=lp, axis=v, num_samples_dim=k)
    assert set(idx.dims) == {rf.batch_dim, k}
    for row in idx.copy_transpose([rf.batch_dim, k]).numpy():
        assert len(set(row)) == 3
    greedy = rf.random_choice_without_replacement(
        log_probs=lp, axis=v, num_samples_dim=k, noise_scale=0.0
    )
    np.testing.assert_array_equal(greedy.copy_transpose([rf.batch_dim, k]).numpy()[0], [1, 3, 4])


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="random: distribution must be"):
        rf.random([N], distribution="poisson")
    with pytest.raises(ValueError, match="random: integer dtypes need distribution='uniform'"):
        rf.random([N], distribution="normal", dtype="int32")
    with pytest.raises(NotImplementedError, match="random: explicit_state, out and like"):
        rf.random([N], distribution="normal", like=rf.zeros([N]))
    v = rf.Dim(3, name="v")
    with pytest.raises(ValueError, match="random_choice_with_replacement: probs"):
        rf.random_choice_with_replacement([N], probs=rf.ones([v]), axis=rf.Dim(3, name="w"))
