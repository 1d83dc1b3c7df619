"""``rf.encoder.e_branchformer``: a ``ConformerEncoder`` of ``EBranchformerLayer`` s
against RETURNN's own on its torch backend (the same weights loaded by parameter
name, every parameter randomized first; values and gradients of a loss over the
valid output frames of a dynamic time dim with different lengths), in evaluation
and in training without dropout, the parameter names, a custom feed-forward
block (RETURNN's ``test_e_branchformer_custom_ff``) and bad options.
"""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np
import pytest
from test_rf_conformer import returnn_latest_behavior

from verjus import rf
from verjus.rf.encoder.e_branchformer import EBranchformerLayer, FeedForwardConvGated

VALUE_TOL = {"rtol": 1e-4, "atol": 1e-4}
GRAD_TOL = {"rtol": 1e-3, "atol": 1e-4}

F, MODEL, LENS = 5, 8, [9, 6, 7]


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def build(m: Any, dim_cls: type, *, train: bool = False) -> tuple[Any, Any]:
    """The same small encoder in ``m`` (verjus.rf or returnn.frontend)."""
    from_m = importlib.import_module(f"{m.__name__}.encoder.e_branchformer")
    in_dim = dim_cls(F, name="feat")
    drop = 0.0 if train else 0.1
    layer = m.build_dict(
        from_m.EBranchformerLayer,
        ff_dim=dim_cls(12, name="ff"),
        num_heads=2,
        cgmlp_ff_dim=dim_cls(6, name="cgmlp"),
        cgmlp_conv_kernel=3,
        merge_conv_kernel=3,
        dropout=drop,
        att_dropout=drop,
    )
    enc = m.encoder.conformer.ConformerEncoder(
        in_dim,
        dim_cls(MODEL, name="model"),
        num_layers=2,
        input_layer=None,
        encoder_layer=layer,
        input_dropout=drop,
    )
    return enc, in_dim


def randomize(named: list[tuple[str, np.ndarray]], seed: int) -> dict[str, np.ndarray]:
    g = rng(seed)
    return {n: g.uniform(-0.5, 0.5, v.shape).astype(np.float32) for n, v in named}


def valid_mask(shape: tuple[int, ...], lens: list[int]) -> np.ndarray:
    return np.arange(shape[1])[None, :] < np.array(lens)[:, None]


@pytest.mark.parametrize("train", [False, True], ids=["eval", "train-no-dropout"])
def test_against_returnn_on_its_torch_backend(train: bool) -> None:
    torch = pytest.importorskip("torch", reason="RETURNN's rf runs on its torch backend")
    pytest.importorskip("returnn", reason="RETURNN's own E-Branchformer is the reference")
    import returnn.frontend as rrf
    import returnn.frontend.encoder.conformer  # noqa: F401 (rrf.encoder.conformer)
    from returnn.tensor import Dim, Tensor

    rrf.select_backend_torch()
    with returnn_latest_behavior():
        _compare_with_returnn(torch, rrf, Dim, Tensor, train)


def _compare_with_returnn(torch: Any, rrf: Any, Dim: Any, Tensor: Any, train: bool) -> None:  # noqa: N803
    theirs, t_in = build(rrf, Dim, train=train)
    mine, m_in = build(rf, rf.Dim, train=train)
    t_params = dict(theirs.named_parameters())
    m_params = dict(mine.named_parameters())
    assert sorted(t_params) == sorted(m_params)
    for name, p in t_params.items():
        assert p.raw_tensor.shape == m_params[name].raw_tensor.shape, name
    values = randomize([(n, p.raw_tensor.detach().numpy()) for n, p in t_params.items()], 1)
    with torch.no_grad():
        for name, v in values.items():
            t_params[name].raw_tensor.copy_(torch.from_numpy(v))
            m_params[name].assign(v)
    xv = rng(2).standard_normal((len(LENS), max(LENS), F)).astype(np.float32)
    rv = rng(3).standard_normal((len(LENS), max(LENS), MODEL)).astype(np.float32)
    rv[~valid_mask(rv.shape, LENS)] = 0.0  # padded output frames are unspecified
    if train:
        rf.init_train_step_run_ctx(train_flag=True)
        rrf.init_train_step_run_ctx(train_flag=True)
    try:
        time = rf.Dim(rf.convert_to_tensor(np.array(LENS, np.int32), dims=[rf.batch_dim]))
        x = rf.convert_to_tensor(xv, dims=[rf.batch_dim, time, m_in], requires_grad=True)
        y, _ = mine(x, in_spatial_dim=time)
        order = [rf.batch_dim, time, mine.out_dim]
        rf.reduce_sum(y * rf.convert_to_tensor(rv, dims=order), axis=order).backward()
        my = y.copy_transpose(order).numpy()
        tb = Dim(len(LENS), name="b")
        lens_t = torch.tensor(LENS, dtype=torch.int32)
        tt = Dim(Tensor("l", [tb], dtype="int32", raw_tensor=lens_t), name="t")
        tx = Tensor("x", [tb, tt, t_in], "float32", raw_tensor=torch.tensor(xv, requires_grad=True))
        ty, _ = theirs(tx, in_spatial_dim=tt)
        ty = ty.copy_transpose([tb, tt, theirs.out_dim]).raw_tensor
        (ty * torch.from_numpy(rv)).sum().backward()
    finally:
        rf.init_forward_step_run_ctx()
        rrf.init_forward_step_run_ctx()
    valid = valid_mask(my.shape, LENS)
    np.testing.assert_allclose(my[valid], ty.detach().numpy()[valid], **VALUE_TOL)
    for name, p in t_params.items():
        ours = m_params[name].grad.numpy()
        np.testing.assert_allclose(ours, p.raw_tensor.grad.numpy(), **GRAD_TOL, err_msg=name)
    x_valid = valid_mask(xv.shape, LENS)
    np.testing.assert_allclose(
        x.grad.numpy()[x_valid], tx.raw_tensor.grad.numpy()[x_valid], **GRAD_TOL
    )


def test_parameter_names() -> None:
    enc, _ = build(rf, rf.Dim)
    names = {n for n, _ in enc.named_parameters()}
    for name in [
        "layers.0.cgmlp.linear_ff.weight",
        "layers.0.cgmlp.norm.scale",
        "layers.0.cgmlp.conv.filter",
        "layers.0.merge.depthwise_conv_fusion.filter",
        "layers.1.merge.merge_proj.weight",
        "layers.1.self_att.pos_bias_u",
        "layers.1.final_layer_norm.scale",
    ]:
        assert name in names, name


def test_custom_ff() -> None:
    """RETURNN's ``test_e_branchformer_custom_ff`` (but the dim equality of
    ``2 * (d * 3)`` and ``(2 * d) * 3``): a custom feed-forward block, the cgMLP's
    default gating dim ``3 * out_dim``."""
    rf.set_random_seed(1)
    encoder = rf.encoder.conformer.ConformerEncoder(
        in_dim=rf.Dim(7, name="in"),
        input_layer=None,
        num_layers=2,
        out_dim=16,
        encoder_layer=rf.build_dict(
            EBranchformerLayer,
            ff=rf.build_dict(
                rf.encoder.conformer.ConformerPositionwiseFeedForward,
                activation=rf.build_dict(rf.relu_square),
                with_bias=False,
            ),
            num_heads=8,
        ),
    )
    cgmlp = encoder.layers[0].cgmlp
    assert isinstance(cgmlp, FeedForwardConvGated)
    assert cgmlp.linear_ff.out_dim.dimension == 2 * 16 * 3
    assert encoder.layers[0].ffn1.linear_ff.bias is None
    time_dim = rf.Dim(11, name="time")
    y, _ = encoder(rf.random_normal((time_dim, encoder.in_dim)), in_spatial_dim=time_dim)
    y.verify_out_shape({time_dim, encoder.out_dim})


@pytest.mark.parametrize(
    ("opts", "message"),
    [
        ({"self_att": 3}, "invalid self_att"),
        ({"cgmlp": 3}, "unexpected cgmlp"),
        ({"cgmlp": rf.build_dict(FeedForwardConvGated, activation=3)}, "unexpected activation"),
    ],
)
def test_bad_options(opts: dict[str, Any], message: str) -> None:
    with pytest.raises(TypeError, match=message):
        EBranchformerLayer(rf.Dim(8, name="model"), **opts)
