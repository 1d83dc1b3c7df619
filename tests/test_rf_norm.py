"""rf.LayerNorm / RMSNorm / BatchNorm / layer_norm / rms_norm / moments: against RETURNN's
rf on its torch backend (values and gradients, weights loaded by parameter name),
against numpy, each entry alone against its slice of a batch, finite differences,
and bad input."""

from __future__ import annotations

import numpy as np
import pytest
from test_rf_grad import check_gradient

from verjus import rf

LENS = [5, 2, 4, 1]
B, T, F = len(LENS), max(LENS), 6
TOL = {"rtol": 1e-4, "atol": 1e-5}


def values(seed: int, shape: tuple[int, ...], scale: float = 1.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * scale + 0.5).astype(np.float32)


def time_dim(lens: list[int]) -> rf.Dim:
    return rf.Dim(rf.convert_to_tensor(np.array(lens, np.int32), dims=[rf.batch_dim]), name="time")


def valid(lens: list[int]) -> np.ndarray:
    return np.arange(max(lens))[None, :] < np.array(lens)[:, None]


def test_layer_norm_and_rms_norm_against_numpy() -> None:
    feat = rf.Dim(F, name="feat")
    x = values(1, (3, F), 2.0)
    scale, bias = values(2, (F,)), values(3, (F,))
    xt = rf.convert_to_tensor(x, dims=[rf.batch_dim, feat])
    st, bt = rf.convert_to_tensor(scale, dims=[feat]), rf.convert_to_tensor(bias, dims=[feat])
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    want = (x - mean) / np.sqrt(var + 1e-6) * scale + bias
    got = rf.layer_norm(xt, axis=feat, scale=st, bias=bt)
    np.testing.assert_allclose(got.numpy(), want, **TOL)
    want = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-3) * scale
    np.testing.assert_allclose(rf.rms_norm(xt, axis=feat, eps=1e-3, scale=st).numpy(), want, **TOL)
    m, v = rf.moments(xt, axis=feat, correction=1)
    np.testing.assert_allclose(m.numpy(), x.mean(-1), **TOL)
    np.testing.assert_allclose(v.numpy(), x.var(-1, ddof=1), **TOL)


def composite_layer_norm(x, axis, scale, bias, eps):
    """RETURNN's formula written out: what rf.layer_norm computes without the fused op."""
    mean, variance = rf.moments(x, axis=axis)
    return (x - mean) * rf.rsqrt(variance + eps) * scale + bias


@pytest.mark.parametrize("last", [True, False])
def test_fused_layer_norm_matches_the_composite_form(last: bool) -> None:
    """The fused op (over two static dims, last or not, scale over them in
    another order) gives the composite form's values and gradients."""
    a, c = rf.Dim(3, name="a"), rf.Dim(5, name="c")
    time = time_dim(LENS)
    dims = [rf.batch_dim, time, a, c] if last else [a, rf.batch_dim, c, time]
    shape = tuple(d.dimension or T for d in dims)
    shape = tuple(B if d == rf.batch_dim else n for d, n in zip(dims, shape, strict=True))
    x = rf.convert_to_tensor(values(20, shape, 3.0), dims=dims, requires_grad=True)
    scale = rf.convert_to_tensor(values(21, (5, 3)), dims=[c, a], requires_grad=True)
    bias = rf.convert_to_tensor(values(22, (3, 5)), dims=[a, c], requires_grad=True)
    r = rf.convert_to_tensor(values(23, shape), dims=dims)
    grads = []
    for f in (rf.layer_norm, composite_layer_norm):
        y = f(x, axis=[a, c], scale=scale, bias=bias, eps=1e-3)
        assert set(y.dims) == set(dims)
        y = y.copy_transpose(dims)
        total = rf.reduce_sum(y * r, axis=dims, use_mask=False)
        grads.append([y.numpy(), *(rf.gradient(total, t).numpy() for t in (x, scale, bias))])
    for fused, composite in zip(*grads, strict=True):
        np.testing.assert_allclose(fused, composite, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", ["layer_norm", "rms_norm"])
def test_finite_differences(name: str) -> None:
    feat = rf.Dim(4, name="feat")
    op = getattr(rf, name)
    check_gradient(lambda x: op(x, axis=feat), values(4, (2, 4)), [rf.batch_dim, feat])


def test_module_parameters_are_returnns() -> None:
    feat = rf.Dim(F, name="feat")
    assert [n for n, _ in rf.LayerNorm(feat).named_parameters()] == ["scale", "bias"]
    assert [n for n, _ in rf.LayerNorm(feat, with_bias=False).named_parameters()] == ["scale"]
    assert [n for n, _ in rf.RMSNorm(feat).named_parameters()] == ["scale"]
    bn = rf.BatchNorm(feat)
    names = [n for n, _ in bn.named_parameters()]
    assert names == ["running_mean", "running_variance", "gamma", "beta"]
    assert bn.running_mean.auxiliary
    assert bn.running_mean.trainable is False
    assert [n for n, _ in rf.BatchNorm(feat, affine=False).named_parameters()] == [
        "running_mean",
        "running_variance",
    ]


def run_batch_norm(bn: rf.BatchNorm, x: np.ndarray, time: rf.Dim, feat: rf.Dim) -> np.ndarray:
    xt = rf.convert_to_tensor(x, dims=[rf.batch_dim, time, feat])
    return bn(xt).copy_transpose([rf.batch_dim, time, feat]).numpy()


def test_batch_norm_masks_padding_and_each_entry_alone_matches() -> None:
    """Padding never enters the statistics: garbage there changes nothing, and the
    statistics are those of the valid frames (numpy); one entry alone in a batch
    gives what normalising with its own frames gives."""
    feat = rf.Dim(F, name="feat")
    x = values(5, (B, T, F), 3.0)
    ok = valid(LENS)
    frames = x[ok]
    rf.init_train_step_run_ctx(train_flag=True)
    try:
        bn = rf.BatchNorm(feat, momentum=0.25, affine=False)
        time = time_dim(LENS)
        got = run_batch_norm(bn, x, time, feat)
        want = (x - frames.mean(0)) / np.sqrt(frames.var(0) + 1e-3)
        np.testing.assert_allclose(got[ok], want[ok], **TOL)
        np.testing.assert_allclose(bn.running_mean.numpy(), 0.25 * frames.mean(0), **TOL)
        np.testing.assert_allclose(bn.running_variance.numpy(), 0.75 + 0.25 * frames.var(0), **TOL)
        garbage = np.where(ok[..., None], x, 1e3).astype(np.float32)
        again = run_batch_norm(rf.BatchNorm(feat, affine=False), garbage, time, feat)
        np.testing.assert_allclose(again[ok], got[ok], **TOL)
        for b, n in enumerate(LENS):
            alone = run_batch_norm(rf.BatchNorm(feat), x[b : b + 1, :n], time_dim([n]), feat)
            own = x[b, :n]
            want = (own - own.mean(0)) / np.sqrt(own.var(0) + 1e-3)
            np.testing.assert_allclose(alone[0], want, **TOL)
    finally:
        rf.init_forward_step_run_ctx()


def test_batch_norm_eval_uses_running_statistics() -> None:
    feat = rf.Dim(F, name="feat")
    bn = rf.BatchNorm(feat)
    bn.running_mean.assign(values(6, (F,)))
    bn.running_variance.assign(np.abs(values(7, (F,))) + 0.5)
    bn.gamma.assign(values(8, (F,)))
    bn.beta.assign(values(9, (F,)))
    x = values(10, (3, F))
    got = bn(rf.convert_to_tensor(x, dims=[rf.batch_dim, feat])).numpy()
    rm, rv = bn.running_mean.numpy(), bn.running_variance.numpy()
    want = (x - rm) / np.sqrt(rv + 1e-3) * bn.gamma.numpy() + bn.beta.numpy()
    np.testing.assert_allclose(got, want, **TOL)
    np.testing.assert_allclose(bn.running_mean.numpy(), rm)  # no update outside training


def test_layer_norm_each_entry_alone_matches_its_slice() -> None:
    feat = rf.Dim(F, name="feat")
    norm = rf.LayerNorm(feat)
    norm.scale.assign(values(11, (F,)))
    x = values(12, (B, T, F), 2.0)
    time = time_dim(LENS)
    full = norm(rf.convert_to_tensor(x, dims=[rf.batch_dim, time, feat]))
    full = full.copy_transpose([rf.batch_dim, time, feat]).numpy()
    for b, n in enumerate(LENS):
        t = time_dim([n])
        alone = norm(rf.convert_to_tensor(x[b : b + 1, :n], dims=[rf.batch_dim, t, feat]))
        np.testing.assert_allclose(alone.numpy()[0], full[b, :n], **TOL)


def test_bad_input_is_a_clear_error() -> None:
    feat, other = rf.Dim(F, name="feat"), rf.Dim(3, name="other")
    x = rf.convert_to_tensor(values(13, (2, F)), dims=[rf.batch_dim, feat])
    with pytest.raises(ValueError, match=r"layer_norm: axis.*other"):
        rf.layer_norm(x, axis=other)
    with pytest.raises(ValueError, match="BatchNorm: in_dim other"):
        rf.BatchNorm(other)(x)
    with pytest.raises(TypeError, match="BatchNorm: in_dim must be a Dim"):
        rf.BatchNorm([feat])
    with pytest.raises(ValueError, match="layer_norm: axis"):
        rf.layer_norm(x, axis=[])


# --- against RETURNN's rf on its torch backend -------------------------------------


@pytest.fixture
def returnn_rf():
    torch = pytest.importorskip("torch", reason="RETURNN's rf runs on its torch backend here")
    pytest.importorskip("returnn", reason="RETURNN's own rf is the reference here")
    import returnn.frontend as rrf
    from returnn.tensor import Dim, Tensor

    rrf.select_backend_torch()
    batch = Dim(B, name="batch")
    lens = torch.tensor(LENS, dtype=torch.int32)
    time = Dim(Tensor("lengths", [batch], dtype="int32", raw_tensor=lens), name="time")
    return torch, rrf, Tensor, batch, time, Dim(F, name="feat")


def compare_module(returnn_rf, make_theirs, make_mine, *, train: bool) -> None:
    """Their module's parameters into ours by name; the same input and output
    weights; outputs, input gradients and parameter gradients must agree (and
    BatchNorm's running statistics after the step)."""
    torch, rrf, tensor_cls, batch, time, feat = returnn_rf
    theirs = make_theirs(rrf, feat)
    gen = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for _, p in theirs.named_parameters():
            p.raw_tensor.uniform_(0.5, 1.5, generator=gen)
    my_time, my_feat = time_dim(LENS), rf.Dim(F, name="feat")
    mine = make_mine(my_feat)
    for name, p in theirs.named_parameters():
        getattr(mine, name).assign(p.raw_tensor.detach().numpy())
    xv, rv = values(20, (B, T, F), 2.0), values(21, (B, T, F))
    mask = valid(LENS)[..., None].astype(np.float32)
    rv = rv * mask  # the padding's outputs are not compared
    x = tensor_cls(
        "x", [batch, time, feat], "float32", raw_tensor=torch.tensor(xv, requires_grad=True)
    )
    rrf.init_train_step_run_ctx(train_flag=train)
    rf.init_train_step_run_ctx(train_flag=train)
    try:
        y = theirs(x).copy_transpose([batch, time, feat]).raw_tensor
        (y * torch.from_numpy(rv)).sum().backward()
        xt = rf.convert_to_tensor(xv, dims=[rf.batch_dim, my_time, my_feat], requires_grad=True)
        mine_y = mine(xt)
        loss = rf.reduce_sum(
            mine_y * rf.convert_to_tensor(rv, dims=[rf.batch_dim, my_time, my_feat]),
            axis=[rf.batch_dim, my_time, my_feat],
            use_mask=False,
        )
        loss.backward()
    finally:
        rf.init_forward_step_run_ctx()
    got = mine_y.copy_transpose([rf.batch_dim, my_time, my_feat]).numpy()
    np.testing.assert_allclose(got * mask, y.detach().numpy() * mask, **TOL)
    np.testing.assert_allclose(xt.grad.numpy() * mask, x.raw_tensor.grad.numpy() * mask, **TOL)
    for name, p in theirs.named_parameters():
        if p.raw_tensor.requires_grad:
            mg = getattr(mine, name).grad.numpy()
            np.testing.assert_allclose(mg, p.raw_tensor.grad.numpy(), **TOL, err_msg=name)
        else:
            np.testing.assert_allclose(
                getattr(mine, name).numpy(), p.raw_tensor.numpy(), **TOL, err_msg=name
            )


def test_layer_norm_against_returnn(returnn_rf) -> None:
    compare_module(
        returnn_rf, lambda rrf, f: rrf.LayerNorm(f), lambda f: rf.LayerNorm(f), train=False
    )


def test_rms_norm_against_returnn(returnn_rf) -> None:
    compare_module(
        returnn_rf,
        lambda rrf, f: rrf.RMSNorm(f, with_bias=True),
        lambda f: rf.RMSNorm(f, with_bias=True),
        train=False,
    )


@pytest.mark.parametrize("use_mask", [True, False])
def test_batch_norm_training_against_returnn(returnn_rf, use_mask: bool) -> None:
    compare_module(
        returnn_rf,
        lambda rrf, f: rrf.BatchNorm(f, use_mask=use_mask),
        lambda f: rf.BatchNorm(f, use_mask=use_mask),
        train=True,
    )


def test_batch_norm_eval_against_returnn(returnn_rf) -> None:
    compare_module(
        returnn_rf,
        lambda rrf, f: rrf.BatchNorm(f, use_mask=True),
        lambda f: rf.BatchNorm(f, use_mask=True),
        train=False,
    )
