"""verjus.rf: gather, one_hot, cross_entropy; Parameter, Module, Linear and
loss.backward() filling param.grad."""

from __future__ import annotations

import numpy as np
import pytest

from verjus import optim, rf


def test_gather_one_hot_and_cross_entropy() -> None:
    vocab, emb, classes = rf.Dim(4, name="vocab"), rf.Dim(2, name="emb"), rf.Dim(3, name="classes")
    table = rf.convert_to_tensor(np.arange(8.0).reshape(4, 2), dims=[vocab, emb])
    ids = rf.convert_to_tensor([3, 0], dims=[rf.batch_dim], dtype="int64", sparse_dim=vocab)
    y = rf.gather(table, indices=ids, axis=vocab)
    assert y.dims == (rf.batch_dim, emb)
    np.testing.assert_array_equal(y.numpy(), [[6, 7], [0, 1]])
    target = rf.convert_to_tensor([2, 0], dims=[rf.batch_dim], dtype="int64", sparse_dim=classes)
    np.testing.assert_array_equal(rf.one_hot(target).numpy(), [[0, 0, 1], [1, 0, 0]])
    logits = np.array([[1.0, 2.0, 3.0], [0.5, -1.0, 0.0]], np.float32)
    x = rf.convert_to_tensor(logits, dims=[rf.batch_dim, classes])
    ce = rf.cross_entropy(estimated=x, target=target, axis=classes, estimated_type="logits")
    lse = np.log(np.exp(logits).sum(axis=1))
    np.testing.assert_allclose(ce.numpy(), lse - [3.0, 0.5], rtol=1e-6)
    with pytest.raises(ValueError, match="estimated_type"):
        rf.cross_entropy(estimated=x, target=target, axis=classes, estimated_type="scores")


class Mlp(rf.Module):
    def __init__(self, in_dim: rf.Dim, hidden: rf.Dim, out_dim: rf.Dim) -> None:
        self.first = rf.Linear(in_dim, hidden)
        self.second = rf.Linear(hidden, out_dim)

    def __call__(self, x: rf.Tensor) -> rf.Tensor:
        return self.second(rf.tanh(self.first(x)))


def test_linear_backward_fills_grads_and_sgd_learns() -> None:
    feat, hidden, classes = rf.Dim(4, name="feat"), rf.Dim(8, name="hidden"), rf.Dim(3, name="c")
    rf.set_random_seed(1)
    model = Mlp(feat, hidden, classes)
    names = [n for n, _ in model.named_parameters()]
    assert names == ["first.weight", "first.bias", "second.weight", "second.bias"]
    assert all(isinstance(p, rf.Parameter) and p.requires_grad for p in model.parameters())

    rng = np.random.default_rng(0)
    xv = rng.standard_normal((16, 4)).astype(np.float32)
    labels = (xv[:, 0] > 0).astype(np.int64) + (xv[:, 1] > 0)
    x = rf.convert_to_tensor(xv, dims=[rf.batch_dim, feat])
    target = rf.convert_to_tensor(labels, dims=[rf.batch_dim], sparse_dim=classes)

    def loss() -> rf.Tensor:
        ce = rf.cross_entropy(
            estimated=model(x), target=target, axis=classes, estimated_type="logits"
        )
        return rf.reduce_mean(ce, axis=rf.batch_dim)

    # The Linear's output matches numpy, and its gradient the analytic one.
    w = model.first.weight.numpy()
    np.testing.assert_allclose(model.first(x).numpy(), xv @ w, rtol=1e-5, atol=1e-6)
    first = loss()
    first.backward()
    w2 = model.second.weight
    assert w2.grad is not None
    assert w2.grad.dims == (hidden, classes)
    h = np.tanh(xv @ w)
    logits = h @ w2.numpy()
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    p[np.arange(16), labels] -= 1
    np.testing.assert_allclose(w2.grad.numpy(), h.T @ p / 16, rtol=1e-4, atol=1e-6)

    for _ in range(100):
        for param in model.parameters():
            param.zero_grad()
        loss().backward()
        for param in model.parameters():
            param.assign(param.numpy() - 0.5 * param.grad.numpy())
    assert float(loss().numpy()) < 0.5 * float(first.numpy())
    with pytest.raises(ValueError, match="no static size"):
        rf.Parameter([rf.batch_dim])


def test_concat_and_pad_return_new_dims() -> None:
    f, g = rf.Dim(2, name="f"), rf.Dim(1, name="g")
    x = rf.convert_to_tensor([[1.0, 2.0], [3.0, 4.0]], dims=[rf.batch_dim, f])
    y = rf.convert_to_tensor([[10.0, 20.0]], dims=[g, rf.batch_dim])
    z, d = rf.concat((x, f), (y, g))
    assert (z.dims, d.dimension) == ((rf.batch_dim, d), 3)
    np.testing.assert_array_equal(z.numpy(), [[1, 2, 10], [3, 4, 20]])
    out = rf.Dim(3, name="out")
    assert rf.concat((x, f), (y, g), out_dim=out)[1] == out
    p, (pd,) = rf.pad(x, axes=[f], padding=[(1, 0)], value=-1.0)
    assert (p.dims, pd.dimension) == ((rf.batch_dim, pd), 3)
    np.testing.assert_array_equal(p.numpy(), [[-1, 1, 2], [-1, 3, 4]])
    with pytest.raises(ValueError, match="joined size"):
        rf.concat((x, f), out_dim=out)


def test_full_expand_merge_split() -> None:
    a, b = rf.Dim(2, name="a"), rf.Dim(3, name="b")
    assert rf.ones([a, b]).numpy().tolist() == [[1, 1, 1], [1, 1, 1]]
    z = rf.zeros([a], dtype="int32")
    assert (z.dtype, z.numpy().tolist()) == ("int32", [0, 0])
    x = rf.convert_to_tensor(np.arange(6.0).reshape(2, 3), dims=[a, b])
    np.testing.assert_array_equal(rf.ones_like(x).numpy(), np.ones((2, 3)))
    np.testing.assert_array_equal(rf.zeros_like(x).numpy(), np.zeros((2, 3)))
    c = rf.Dim(4, name="c")
    assert rf.expand_dim(x, c).dims == (a, b, c)
    merged, m = rf.merge_dims(x, dims=[b, a])
    assert (merged.dims, m.dimension) == ((m,), 6)
    np.testing.assert_array_equal(merged.numpy(), np.arange(6.0).reshape(2, 3).T.ravel())
    back = rf.split_dims(merged, axis=m, dims=[b, a])
    np.testing.assert_array_equal(back.copy_transpose([a, b]).numpy(), x.numpy())


def test_random_and_dropout_follow_the_train_flag() -> None:
    f = rf.Dim(1000, name="f")
    rf.set_random_seed(1)
    u = rf.random_uniform([f], minval=-2.0, maxval=2.0).numpy()
    rf.set_random_seed(1)
    np.testing.assert_array_equal(u, rf.random_uniform([f], minval=-2.0, maxval=2.0).numpy())
    assert abs(rf.random_normal([f], mean=1.0).numpy().mean() - 1.0) < 0.15
    x = rf.ones([f])
    rf.init_forward_step_run_ctx()
    np.testing.assert_array_equal(rf.dropout(x, 0.5).numpy(), np.ones(1000))
    rf.init_train_step_run_ctx()
    try:
        y = rf.dropout(x, 0.5).numpy()
    finally:
        rf.init_forward_step_run_ctx()
    assert set(np.unique(y)) == {0.0, 2.0}
    assert 0.4 < (y > 0).mean() < 0.6
    assert (rf.dropout(x, 0.5, on_forward=True).numpy() == 0).any()


@pytest.mark.parametrize(
    "make",
    [
        lambda p: rf.SGD(p, lr=0.5, momentum=0.5),
        lambda p: rf.Adam(p, lr=0.05),
        lambda p: rf.AdamW(p, lr=0.05, weight_decay=1e-3),
    ],
)
def test_optimizers_train_a_model(make) -> None:
    feat, classes = rf.Dim(4, name="feat"), rf.Dim(3, name="c")
    rf.set_random_seed(3)
    model = rf.Linear(feat, classes)
    rng = np.random.default_rng(4)
    xv = rng.standard_normal((32, 4)).astype(np.float32)
    labels = np.argmax(xv[:, :3], axis=1)
    x = rf.convert_to_tensor(xv, dims=[rf.batch_dim, feat])
    target = rf.convert_to_tensor(labels, dims=[rf.batch_dim], sparse_dim=classes)

    def loss() -> rf.Tensor:
        ce = rf.cross_entropy(
            estimated=model(x), target=target, axis=classes, estimated_type="logits"
        )
        return rf.reduce_mean(ce, axis=rf.batch_dim)

    opt = make(model.parameters())
    first = float(loss().numpy())
    for _ in range(60):
        opt.zero_grad()
        loss().backward()
        opt.step()
    assert opt.steps == 60
    assert float(loss().numpy()) < 0.5 * first


def test_rf_optimizers_are_the_trainers_with_schedules_and_clipping() -> None:
    assert (rf.SGD, rf.Adam, rf.AdamW) == (optim.SGD, optim.Adam, optim.AdamW)
    f = rf.Dim(2, name="f")
    w = rf.Parameter([f], initial=0.0)
    w.assign(np.array([3.0, 4.0], np.float32))
    opt = rf.SGD([w], lr=0.1, schedule=optim.StepLR(step_size=1, gamma=0.5), clip_norm=1.0)
    # Step 0: the gradient 2w = [6, 8] (norm 10) clipped to norm 1: w -= 0.1 * 2w / 10.
    opt.zero_grad()
    rf.reduce_sum(w * w, axis=f).backward()
    opt.step()
    w1 = np.array([3.0, 4.0]) * 0.98
    np.testing.assert_allclose(w.numpy(), w1, rtol=1e-5)
    # Step 1 at half the learning rate; the gradient 2 w1 has norm 9.8.
    opt.zero_grad()
    rf.reduce_sum(w * w, axis=f).backward()
    opt.step()
    np.testing.assert_allclose(w.numpy(), w1 * (1 - 0.05 * 2 / 9.8), rtol=1e-5)
    assert opt.steps == 2
    with pytest.raises(ValueError, match="clip_norm must"):
        rf.Adam([w], clip_norm=-1.0)


def test_an_optimizer_without_parameters_only_configures_a_trainer() -> None:
    opt = optim.Adam(lr=1e-3)
    for use in (opt.step, opt.zero_grad, lambda: opt.steps):
        with pytest.raises(TypeError, match=r"has no parameters: give them first"):
            use()


def test_embedding_and_layer_norm() -> None:
    vocab, emb = rf.Dim(5, name="vocab"), rf.Dim(4, name="emb")
    rf.set_random_seed(2)
    embed = rf.Embedding(vocab, emb)
    ids = rf.convert_to_tensor([4, 1, 4], dims=[rf.batch_dim], sparse_dim=vocab)
    e = embed(ids)
    assert e.dims == (rf.batch_dim, emb)
    np.testing.assert_array_equal(e.numpy(), embed.weight.numpy()[[4, 1, 4]])
    norm = rf.LayerNorm(emb)
    y = norm(e).numpy()
    v = e.numpy()
    want = (v - v.mean(1, keepdims=True)) / np.sqrt(v.var(1, keepdims=True) + 1e-6)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5)
    loss = rf.reduce_sum(norm(embed(ids)) * rf.range_over_dim(emb), axis=[rf.batch_dim, emb])
    loss.backward()
    grad = embed.weight.grad.numpy()
    assert np.abs(grad[[1, 4]]).sum() > 0
    assert not grad[[0, 2, 3]].any()
    assert norm.scale.grad is not None
