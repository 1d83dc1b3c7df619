"""``rf.RelPosSelfAttention``: against RETURNN's own on its torch backend (the
same weights loaded by parameter name, values and gradients over a dynamic
time dim with different lengths, for its main option sets), padded keys
getting no weight, batched against each sequence alone, and bad input.
"""

from __future__ import annotations

import numpy as np
import pytest

from verjus import rf

VALUE_TOL = {"rtol": 1e-5, "atol": 1e-5}
GRAD_TOL = {"rtol": 1e-4, "atol": 1e-5}
LENS = [5, 2, 4]
IN = 6

VARIANTS = {
    "transformer-xl": {},
    "learned-shared": {
        "learnable_pos_emb": True,
        "learnable_pos_emb_clipping": 2,
        "separate_pos_emb_per_head": False,
        "with_linear_pos": False,
        "with_pos_bias": False,
        "with_bias": False,
    },
    "no-linear-pos": {"with_linear_pos": False},
}


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def build(m: object, dim_cls: type, opts: dict) -> object:
    return m.RelPosSelfAttention(
        dim_cls(IN, name="in"),
        dim_cls(7, name="proj"),
        key_dim_total=dim_cls(8, name="k"),
        value_dim_total=dim_cls(6, name="v"),
        num_heads=2,
        att_dropout=0.0,
        **opts,
    )


def run_mine(att: object, xv: np.ndarray, rv: np.ndarray, lens: list[int]) -> tuple:
    time = rf.Dim(rf.convert_to_tensor(np.array(lens, np.int32), dims=[rf.batch_dim]), name="t")
    x = rf.convert_to_tensor(xv, dims=[rf.batch_dim, time, att.in_dim], requires_grad=True)
    y = att(x, axis=time)
    order = [rf.batch_dim, time, att.out_dim]
    rf.reduce_sum(y * rf.convert_to_tensor(rv, dims=order), axis=order).backward()
    return y.copy_transpose(order).numpy(), x


def inputs(lens: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    xv = rng(6).standard_normal((len(lens), max(lens), IN)).astype(np.float32)
    rv = rng(8).standard_normal((len(lens), max(lens), 7)).astype(np.float32)
    valid = np.arange(max(lens))[None, :] < np.array(lens)[:, None]
    rv[~valid] = 0.0  # the loss reads valid frames only (padded outputs are unspecified)
    return xv, rv, valid


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_against_returnn_on_its_torch_backend(variant: str) -> None:
    torch = pytest.importorskip("torch", reason="RETURNN's rf runs on its torch backend")
    pytest.importorskip("returnn", reason="RETURNN's own RelPosSelfAttention is the reference")
    import returnn.frontend as rrf
    from returnn.tensor import Dim, Tensor

    rrf.select_backend_torch()
    theirs = build(rrf, Dim, VARIANTS[variant])
    mine = build(rf, rf.Dim, VARIANTS[variant])
    t_params, m_params = dict(theirs.named_parameters()), dict(mine.named_parameters())
    assert sorted(t_params) == sorted(m_params)
    g = rng(1)
    with torch.no_grad():
        for name, p in t_params.items():
            v = g.uniform(-0.5, 0.5, tuple(p.raw_tensor.shape)).astype(np.float32)
            p.raw_tensor.copy_(torch.from_numpy(v))
            m_params[name].assign(v)
    xv, rv, valid = inputs(LENS)
    my, mx = run_mine(mine, xv, rv, LENS)

    tb = Dim(len(LENS), name="b")
    lens_t = torch.tensor(LENS, dtype=torch.int32)
    tt = Dim(Tensor("l", [tb], dtype="int32", raw_tensor=lens_t), name="t")
    tx = Tensor(
        "x", [tb, tt, theirs.in_dim], "float32", raw_tensor=torch.tensor(xv, requires_grad=True)
    )
    ty = theirs(tx, axis=tt).copy_transpose([tb, tt, theirs.out_dim]).raw_tensor
    (ty * torch.from_numpy(rv)).sum().backward()

    np.testing.assert_allclose(my[valid], ty.detach().numpy()[valid], **VALUE_TOL)
    for name, p in t_params.items():
        np.testing.assert_allclose(
            m_params[name].grad.numpy(), p.raw_tensor.grad.numpy(), **GRAD_TOL, err_msg=name
        )
    np.testing.assert_allclose(
        mx.grad.numpy()[valid], tx.raw_tensor.grad.numpy()[valid], **GRAD_TOL
    )


def test_padded_keys_get_no_weight_and_batched_equals_alone() -> None:
    rf.set_random_seed(2)
    att = build(rf, rf.Dim, {})
    xv, rv, valid = inputs(LENS)
    out, x = run_mine(att, xv, rv, LENS)
    grads = x.grad.numpy()
    noisy = np.where(valid[..., None], xv, 1e3).astype(np.float32)
    out2, x2 = run_mine(att, noisy, rv, LENS)
    np.testing.assert_array_equal(out[valid], out2[valid])
    assert not x2.grad.numpy()[~valid].any()  # padded frames get no gradient
    for b, n in enumerate(LENS):
        out1, x1 = run_mine(att, xv[b : b + 1, :n], rv[b : b + 1, :n], [n])
        np.testing.assert_allclose(out1[0], out[b, :n], **VALUE_TOL)
        np.testing.assert_allclose(x1.grad.numpy()[0], grads[b, :n], **GRAD_TOL)


def test_rel_shift_picks_the_distance() -> None:
    from verjus.rf.rel_pos_attention import _rel_pos_enc_shift

    t = rf.Dim(4, name="t")
    hist = rf.Dim(4, name="hist")
    pos = rf.Dim(7, name="pos")
    scores = np.tile(np.arange(7, dtype=np.float32) - 3, (4, 1))  # entry = its distance
    x = rf.convert_to_tensor(scores, dims=[t, pos])
    shifted = _rel_pos_enc_shift(x, t, pos, hist).copy_transpose([t, hist]).numpy()
    i, j = np.meshgrid(np.arange(4), np.arange(4), indexing="ij")
    np.testing.assert_array_equal(shifted, (j - i).astype(np.float32))


def test_bad_input() -> None:
    att = build(rf, rf.Dim, {})
    time = rf.Dim(3, name="t")
    other = rf.Dim(IN, name="other")
    x = rf.convert_to_tensor(np.zeros((2, 3, IN), np.float32), dims=[rf.batch_dim, time, other])
    with pytest.raises(ValueError, match="RelPosSelfAttention: in_dim in"):
        att(x, axis=time)
    x = rf.convert_to_tensor(
        np.zeros((2, 3, IN), np.float32), dims=[rf.batch_dim, time, att.in_dim]
    )
    with pytest.raises(ValueError, match="RelPosSelfAttention: axis t2"):
        att(x, axis=rf.Dim(3, name="t2"))
