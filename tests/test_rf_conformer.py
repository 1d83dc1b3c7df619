"""``rf.encoder.conformer``: ``ConformerEncoder`` against RETURNN's own on its
torch backend (the same weights loaded by parameter name, every parameter and
running statistic randomized first; values and gradients of a loss over the
valid output frames; a dynamic time dim with different lengths, shortened by a
``ConformerConvSubsample`` frontend), in evaluation and in training without
dropout (BatchNorm's masked batch statistics), batched against each sequence
alone, parameter names, deep-copied layers, and bad input.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from verjus import rf
from verjus.rf.encoder.conformer import ConformerConvSubsample, ConformerEncoder

VALUE_TOL = {"rtol": 1e-4, "atol": 1e-4}
GRAD_TOL = {"rtol": 1e-3, "atol": 1e-4}

F, MODEL, LENS = 6, 8, [11, 7, 9]
NotSet = object()


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def build(
    m: object, dim_cls: type, *, train: bool = False, conv_norm_opts: Any = NotSet
) -> tuple[object, object]:
    """The same small encoder in ``m`` (verjus.rf or returnn.frontend); the conv
    block's norm with ``conv_norm_opts`` (default: ``use_mask=True``)."""
    if conv_norm_opts is NotSet:
        conv_norm_opts = {"use_mask": True}
    in_dim = dim_cls(F, name="feat")
    frontend = m.encoder.conformer.ConformerConvSubsample(
        in_dim,
        out_dims=[dim_cls(4, name="c1"), dim_cls(3, name="c2")],
        filter_sizes=[3, (3, 2)],
        strides=[(2, 1), 1],
        pool_sizes=[(1, 2)],
    )
    drop = 0.0 if train else 0.1
    enc = m.encoder.conformer.ConformerEncoder(
        in_dim,
        dim_cls(MODEL, name="model"),
        num_layers=2,
        input_layer=frontend,
        ff_dim=dim_cls(12, name="ff"),
        conv_kernel_size=4,
        num_heads=2,
        dropout=drop,
        att_dropout=drop,
        input_dropout=drop,
        encoder_layer_opts={"conv_norm_opts": conv_norm_opts},
    )
    return enc, in_dim


def randomize(named: list[tuple[str, np.ndarray]], seed: int) -> dict[str, np.ndarray]:
    """Random values for every parameter (positive ones for variances)."""
    g, out = rng(seed), {}
    for name, value in named:
        v = g.uniform(-0.5, 0.5, value.shape).astype(np.float32)
        out[name] = np.abs(v) + 0.5 if "variance" in name else v
    return out


def run_mine(
    enc: ConformerEncoder, in_dim: rf.Dim, xv: np.ndarray, lens: list[int], rv_of: object
) -> tuple[np.ndarray, np.ndarray, rf.Tensor, list[int]]:
    time = rf.Dim(rf.convert_to_tensor(np.array(lens, np.int32), dims=[rf.batch_dim]), name="t")
    x = rf.convert_to_tensor(xv, dims=[rf.batch_dim, time, in_dim], requires_grad=True)
    y, out_time = enc(x, in_spatial_dim=time)
    out_lens = [int(n) for n in out_time.dyn_size_ext.numpy()]
    order = [rf.batch_dim, out_time, enc.out_dim]
    rv = rv_of(y.copy_transpose(order).shape, out_lens)
    rf.reduce_sum(y * rf.convert_to_tensor(rv, dims=order), axis=order).backward()
    return y.copy_transpose(order).numpy(), rv, x, out_lens


def valid_mask(shape: tuple[int, ...], lens: list[int]) -> np.ndarray:
    return np.arange(shape[1])[None, :] < np.array(lens)[:, None]


def make_rv(shape: tuple[int, ...], lens: list[int]) -> np.ndarray:
    rv = rng(9).standard_normal(shape).astype(np.float32)
    rv[~valid_mask(shape, lens)] = 0.0  # padded output frames are unspecified
    return rv


@pytest.mark.parametrize("train", [False, True], ids=["eval", "train-no-dropout"])
@pytest.mark.parametrize("behavior", ["latest", "v0"])
def test_against_returnn_on_its_torch_backend(train: bool, behavior: str) -> None:
    """``latest``: RETURNN's newest behavior version (masked convolution input,
    consistent "same" padding: what verjus does by itself). ``v0``: behavior
    version 0, a RETURNN config's without one (RETURNN's demo-rf-pt-benchmark.py):
    the convolutions and the pooling take the padding frames as they are, the
    strided "same" padding depends on the padded size and the conv block's
    BatchNorm (its default ``use_mask``) takes statistics over the padding too;
    verjus follows RETURNN's behavior version where it is set."""
    torch = pytest.importorskip("torch", reason="RETURNN's rf runs on its torch backend")
    pytest.importorskip("returnn", reason="RETURNN's own ConformerEncoder is the reference")
    import returnn.frontend as rrf
    import returnn.frontend.encoder.conformer  # noqa: F401 (rrf.encoder.conformer)
    from returnn.tensor import Dim, Tensor

    rrf.select_backend_torch()
    if behavior == "latest":
        with returnn_latest_behavior():
            _compare_with_returnn(torch, rrf, Dim, Tensor, train)
    else:
        with returnn_behavior_version(0):
            _compare_with_returnn(torch, rrf, Dim, Tensor, train, conv_norm_opts=None)


@contextlib.contextmanager
def returnn_latest_behavior() -> Iterator[None]:
    """RETURNN's newest behavior version for the block (masked convolution
    input, consistent "same" padding: what verjus does), then the old state."""
    from returnn.util.basic import BehaviorVersion

    with returnn_behavior_version(BehaviorVersion._latest_behavior_version):
        yield


@contextlib.contextmanager
def returnn_behavior_version(version: int) -> Iterator[None]:
    """RETURNN's behavior ``version`` set for the block, then the old state."""
    from returnn.util.basic import BehaviorVersion

    state = BehaviorVersion._get_state()
    BehaviorVersion._reset((version, 0))
    try:
        yield
    finally:
        BehaviorVersion._reset(state)


def _compare_with_returnn(
    torch: Any,
    rrf: Any,
    Dim: Any,  # noqa: N803
    Tensor: Any,  # noqa: N803
    train: bool,
    conv_norm_opts: Any = NotSet,
) -> None:
    theirs, t_in = build(rrf, Dim, train=train, conv_norm_opts=conv_norm_opts)
    mine, m_in = build(rf, rf.Dim, train=train, conv_norm_opts=conv_norm_opts)
    t_params = dict(theirs.named_parameters())
    m_params = dict(mine.named_parameters())
    assert sorted(t_params) == sorted(m_params)
    values = randomize([(n, p.raw_tensor.detach().numpy()) for n, p in t_params.items()], 1)
    with torch.no_grad():
        for name, v in values.items():
            t_params[name].raw_tensor.copy_(torch.from_numpy(v))
            m_params[name].assign(v)
    xv = rng(2).standard_normal((len(LENS), max(LENS), F)).astype(np.float32)

    if train:
        rf.init_train_step_run_ctx(train_flag=True)
        rrf.init_train_step_run_ctx(train_flag=True)
    try:
        my, rv, mx, out_lens = run_mine(mine, m_in, xv, LENS, make_rv)
        tb = Dim(len(LENS), name="b")
        lens_t = torch.tensor(LENS, dtype=torch.int32)
        tt = Dim(Tensor("l", [tb], dtype="int32", raw_tensor=lens_t), name="t")
        tx = Tensor("x", [tb, tt, t_in], "float32", raw_tensor=torch.tensor(xv, requires_grad=True))
        ty, t_out = theirs(tx, in_spatial_dim=tt)
        ty = ty.copy_transpose([tb, t_out, theirs.out_dim]).raw_tensor
        (ty * torch.from_numpy(rv)).sum().backward()
    finally:
        rf.init_forward_step_run_ctx()
        rrf.init_forward_step_run_ctx()
    assert out_lens == t_out.dyn_size_ext.raw_tensor.tolist()
    valid = valid_mask(my.shape, out_lens)
    np.testing.assert_allclose(my[valid], ty.detach().numpy()[valid], **VALUE_TOL)
    for name, p in t_params.items():
        if p.raw_tensor.grad is None:  # running statistics
            continue
        ours = m_params[name].grad.numpy()
        np.testing.assert_allclose(ours, p.raw_tensor.grad.numpy(), **GRAD_TOL, err_msg=name)
    x_valid = valid_mask(xv.shape, LENS)
    np.testing.assert_allclose(
        mx.grad.numpy()[x_valid], tx.raw_tensor.grad.numpy()[x_valid], **GRAD_TOL
    )


def test_batched_equals_each_sequence_alone() -> None:
    rf.set_random_seed(4)
    enc, in_dim = build(rf, rf.Dim)
    xv = rng(3).standard_normal((len(LENS), max(LENS), F)).astype(np.float32)
    out, _, _x, out_lens = run_mine(enc, in_dim, xv, LENS, make_rv)
    for b, n in enumerate(LENS):
        out1, _, _x1, lens1 = run_mine(enc, in_dim, xv[b : b + 1, :n], [n], make_rv)
        assert lens1 == [out_lens[b]]
        np.testing.assert_allclose(out1[0], out[b, : out_lens[b]], **VALUE_TOL)


def test_subsampling_out_spatial_dim() -> None:
    in_dim = rf.Dim(F, name="feat")
    sub = ConformerConvSubsample(
        in_dim, out_dims=[4, 3], filter_sizes=[3, 3], strides=[2, 3], padding="same"
    )
    assert sub.downsample_factor == 6
    time = rf.Dim(rf.convert_to_tensor(np.array(LENS, np.int32), dims=[rf.batch_dim]), name="t")
    x = rf.convert_to_tensor(
        rng(1).standard_normal((3, max(LENS), F)).astype(np.float32),
        dims=[rf.batch_dim, time, in_dim],
    )
    _, out_time = sub(x, in_spatial_dim=time)
    expected = [math.ceil(math.ceil(n / 2) / 3) for n in LENS]
    assert list(out_time.dyn_size_ext.numpy()) == expected
    assert list(sub.get_out_spatial_dim(time).dyn_size_ext.numpy()) == expected


def test_layers_are_copies_with_their_own_parameters() -> None:
    rf.set_random_seed(5)
    enc, _ = build(rf, rf.Dim)
    names = [n for n, _ in enc.named_parameters()]
    assert "layers.0.self_att.pos_bias_u" in names
    assert "layers.1.conv_block.depthwise_conv.filter" in names
    assert "input_layer.conv_layers.0.filter" in names
    assert "input_projection.weight" in names
    w0 = enc.layers[0].self_att.qkv.weight
    w1 = enc.layers[1].self_att.qkv.weight
    assert w0 is not w1
    assert w0.dims == w1.dims
    assert not np.array_equal(w0.numpy(), w1.numpy())  # drawn anew, as RETURNN's copy_init


def test_bad_input_names_the_module_and_dim() -> None:
    enc, in_dim = build(rf, rf.Dim)
    time = rf.Dim(rf.convert_to_tensor(np.array(LENS, np.int32), dims=[rf.batch_dim]), name="t")
    other = rf.Dim(F + 1, name="wrong_feat")
    x = rf.convert_to_tensor(
        np.zeros((3, max(LENS), F + 1), np.float32), dims=[rf.batch_dim, time, other]
    )
    with pytest.raises(ValueError, match=r"ConformerEncoder: .*in_dim feat \(6\)"):
        enc(x, in_spatial_dim=time)
    x_ok = rf.convert_to_tensor(
        np.zeros((3, max(LENS), F), np.float32), dims=[rf.batch_dim, time, in_dim]
    )
    with pytest.raises(ValueError, match="ConformerEncoder: in_spatial_dim"):
        enc(x_ok, in_spatial_dim=rf.Dim(4, name="other_time"))
    with pytest.raises(ValueError, match="ConformerConvSubsample: in_dim feat"):
        enc.input_layer(x, in_spatial_dim=time)
    layer = enc.layers[0]
    with pytest.raises(ValueError, match="ConformerEncoderLayer: out_dim model"):
        layer(x_ok, spatial_dim=time)
    with pytest.raises(ValueError, match="ConformerConvSubsample: out_dims"):
        ConformerConvSubsample(in_dim, out_dims=[4], filter_sizes=[3, 3])
    with pytest.raises(TypeError, match="ConformerEncoder: in_dim"):
        ConformerEncoder(6, num_layers=1, input_layer=None)
