"""verjus.rf.init and rf.Parameter: RETURNN's fan rules and distributions,
reproducibility through rf.set_random_seed, initial/assign/trainable, and the
default initializations of Linear, Embedding and LayerNorm."""

from __future__ import annotations

import math

import numpy as np
import pytest

from verjus import rf


def dims(*sizes: int) -> list[rf.Dim]:
    return [rf.Dim(n, name=f"d{i}") for i, n in enumerate(sizes)]


def test_compute_fans_follow_returnn() -> None:
    assert rf.init.compute_fans([]) == (1, 1)
    assert rf.init.compute_fans(dims(7)) == (7, 7)
    assert rf.init.compute_fans(dims(3, 5)) == (3, 5)
    # A conv filter [out, in, *filter_size]: fan-in in*k*k, fan-out out*k*k.
    assert rf.init.compute_fans(dims(8, 4, 3, 3)) == (36, 72)
    with pytest.raises(ValueError, match="dim time has no static size"):
        rf.init.compute_fans([rf.Dim(None, name="time")])


def test_glorot_is_uniform_within_the_fan_avg_limit() -> None:
    rf.set_random_seed(0)
    d = dims(300, 200)
    v = rf.init.Glorot()(d).numpy()
    limit = math.sqrt(6.0 / (300 + 200))
    assert v.shape == (300, 200)
    assert np.abs(v).max() <= limit
    assert np.abs(v).max() > 0.99 * limit  # the whole range is used
    np.testing.assert_allclose(v.var(), limit**2 / 3, rtol=0.03)
    # A convolution filter: fans include the receptive field.
    conv = rf.init.Glorot()(dims(16, 8, 3, 3)).numpy()
    assert np.abs(conv).max() <= math.sqrt(6.0 / (8 * 9 + 16 * 9))
    assert np.abs(conv).max() > 0.95 * math.sqrt(6.0 / (8 * 9 + 16 * 9))


def test_he_is_truncated_normal_with_variance_two_over_fan_in() -> None:
    rf.set_random_seed(1)
    v = rf.init.He()(dims(400, 300)).numpy()
    std = math.sqrt(2.0 / 400)
    np.testing.assert_allclose(v.std(), std, rtol=0.03)
    assert abs(v.mean()) < 0.1 * std
    # Truncated at two standard deviations of the underlying normal.
    assert np.abs(v).max() <= 2 * std / 0.87962566103423978 * (1 + 1e-6)
    assert rf.init.HeNormal is rf.init.He
    u = rf.init.HeUniform()(dims(400, 300)).numpy()
    assert np.abs(u).max() <= math.sqrt(6.0 / 400)
    np.testing.assert_allclose(u.std(), std, rtol=0.03)


def test_variance_scaling_modes_and_untruncated_normal() -> None:
    rf.set_random_seed(2)
    init = rf.init.VarianceScaling(scale=3.0, mode="fan_out", distribution="untruncated_normal")
    v = init(dims(100, 500)).numpy()
    std = math.sqrt(3.0 / 500)
    np.testing.assert_allclose(v.std(), std, rtol=0.03)
    assert (np.abs(v) > 2 * std).mean() > 0.03  # not truncated: ~4.6% beyond 2 std
    n = rf.init.Normal(0.5, truncated=False)(dims(200, 100)).numpy()
    np.testing.assert_allclose(n.std(), 0.5, rtol=0.03)
    t = rf.init.Normal(0.5)(dims(200, 100)).numpy()
    assert np.abs(t).max() <= 1.0
    with pytest.raises(ValueError, match="mode"):
        rf.init.VarianceScaling(mode="fan_max")
    with pytest.raises(ValueError, match="distribution"):
        rf.init.VarianceScaling(distribution="cauchy")
    with pytest.raises(ValueError, match="scale"):
        rf.init.VarianceScaling(scale=0.0)
    with pytest.raises(ValueError, match="float32"):
        rf.init.Glorot()(dims(2, 2), "int32")


def test_set_random_seed_makes_initial_values_reproducible() -> None:
    d = dims(20, 30)
    rf.set_random_seed(7)
    a = rf.Parameter(d, initial=rf.init.Glorot()).numpy()
    b = rf.Parameter(d, initial=rf.init.He()).numpy()
    rf.set_random_seed(7)
    np.testing.assert_array_equal(rf.Parameter(d, initial=rf.init.Glorot()).numpy(), a)
    np.testing.assert_array_equal(rf.Parameter(d, initial=rf.init.He()).numpy(), b)
    assert not np.array_equal(rf.Parameter(d, initial=rf.init.Glorot()).numpy(), a)


def test_parameter_initial_assign_and_flags() -> None:
    a, b = rf.Dim(2, name="a"), rf.Dim(3, name="b")
    p = rf.Parameter([a, b])
    assert (p.dims, p.dtype, p.requires_grad) == ((a, b), "float32", True)
    assert not p.numpy().any()
    assert p.initial is None
    p.initial = 2.5
    np.testing.assert_array_equal(p.numpy(), np.full((2, 3), 2.5))
    init = rf.init.Glorot()
    p.initial = init
    assert p.initial is init
    assert np.abs(p.numpy()).max() > 0
    # assign takes a Tensor with the same dims in any order, an array or a number.
    values = np.arange(6.0, dtype=np.float32).reshape(3, 2)
    p.assign(rf.convert_to_tensor(values, dims=[b, a]))
    np.testing.assert_array_equal(p.numpy(), values.T)
    p.assign(np.ones((2, 3)))
    np.testing.assert_array_equal(p.numpy(), np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"dims \[b\], the parameter \[a, b\]"):
        p.assign(rf.ones([b]))
    with pytest.raises(ValueError, match="shape"):
        p.assign(np.ones((3, 2)))
    # Parameter(tensor) takes dims and initial values from the tensor.
    q = rf.Parameter(rf.convert_to_tensor(values, dims=[b, a]))
    assert q.dims == (b, a)
    np.testing.assert_array_equal(q.numpy(), values)
    assert isinstance(q.initial, rf.Tensor)
    r = rf.Parameter(dims=[a], trainable=False, weight_decay=0.1)
    assert (r.trainable, r.weight_decay, rf.Parameter([a]).weight_decay) == (False, 0.1, 0.0)
    with pytest.raises(ValueError, match="unique"):
        rf.Parameter([a, a])
    with pytest.raises(ValueError, match="cannot be trainable"):
        rf.Parameter([a], "int32", trainable=True)
    counts = rf.Parameter([a], "int32", initial=3)
    assert (counts.dtype, counts.trainable, counts.requires_grad) == ("int32", False, False)
    assert counts.numpy().tolist() == [3] * a.dimension
    counts.assign(np.arange(a.dimension))
    assert counts.numpy().tolist() == list(range(a.dimension))
    with pytest.raises(ValueError, match="dims must be given"):
        rf.Parameter()


def test_optimizers_skip_untrainable_parameters() -> None:
    f = rf.Dim(3, name="f")
    w = rf.Parameter([f], initial=1.0)
    frozen = rf.Parameter([f], initial=1.0, trainable=False)
    opt = rf.SGD([w, frozen], lr=0.1)
    opt.zero_grad()
    rf.reduce_sum(w * frozen, axis=f).backward()
    opt.step()
    np.testing.assert_allclose(w.numpy(), np.full(3, 0.9))
    np.testing.assert_array_equal(frozen.numpy(), np.ones(3))


def test_module_defaults_follow_returnn() -> None:
    i, o, v = rf.Dim(50, name="in"), rf.Dim(70, name="out"), rf.Dim(40, name="vocab")
    rf.set_random_seed(4)
    lin = rf.Linear(i, o)
    w = lin.weight.numpy()
    assert isinstance(lin.weight.initial, rf.init.Glorot)
    limit = math.sqrt(6.0 / 120)
    assert limit * 0.95 < np.abs(w).max() <= limit
    assert not lin.bias.numpy().any()
    assert rf.Linear(i, o, with_bias=False).bias is None
    emb = rf.Embedding(v, o)
    assert np.abs(emb.weight.numpy()).max() <= math.sqrt(6.0 / 110)
    norm = rf.LayerNorm(o)
    np.testing.assert_array_equal(norm.scale.numpy(), np.ones(70))
    assert not norm.bias.numpy().any()
    x = rf.convert_to_tensor(np.ones((2, 70)), dims=[rf.batch_dim, o])
    with pytest.raises(ValueError, match="does not have in_dim in"):
        lin(x)
    ids = rf.convert_to_tensor([1, 2], dims=[rf.batch_dim], sparse_dim=o)
    with pytest.raises(ValueError, match="expected in_dim vocab"):
        emb(ids)
    # A square map (in_dim == out_dim, as RETURNN allows): the output is over o again.
    square = rf.Linear(o, o)
    xs = np.random.default_rng(0).standard_normal((2, 70)).astype(np.float32)
    ys = square(rf.convert_to_tensor(xs, dims=[rf.batch_dim, o]))
    assert ys.dims == (rf.batch_dim, o)
    np.testing.assert_allclose(ys.numpy(), xs @ square.weight.numpy(), rtol=1e-5, atol=1e-5)
