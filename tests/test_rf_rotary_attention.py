"""``rf.RotaryPosSelfAttention``, ``rf.RotaryPosCausalSelfAttention``,
``rf.RelPosCausalSelfAttention`` and ``rf.sinusoidal_encoding``: against
RETURNN's own on its torch backend (the same weights loaded by parameter name;
values and gradients over a dynamic time dim with different lengths), step by
step equal to the whole sequence, padding not leaking, the rotation against a
numpy RoPE, and bad input.
"""

from __future__ import annotations

import numpy as np
import pytest

from verjus import rf

VALUE_TOL = {"rtol": 1e-5, "atol": 1e-5}
GRAD_TOL = {"rtol": 1e-4, "atol": 1e-5}
LENS = [5, 2, 4]
IN = 6

MODULES = {
    "rotary": ("RotaryPosSelfAttention", {}),
    "rotary-causal": ("RotaryPosCausalSelfAttention", {}),
    "rel-pos-causal": ("RelPosCausalSelfAttention", {}),
    "rel-pos-causal-learned": (
        "RelPosCausalSelfAttention",
        {
            "learnable_pos_emb": True,
            "learnable_pos_emb_clipping": 2,
            "separate_pos_emb_per_head": False,
            "with_linear_pos": False,
            "with_pos_bias": False,
        },
    ),
}
CAUSAL = [name for name in MODULES if name != "rotary"]


def build(m: object, dim_cls: type, variant: str) -> object:
    cls, opts = MODULES[variant]
    return getattr(m, cls)(
        dim_cls(IN, name="in"),
        dim_cls(7, name="proj"),
        key_dim_total=dim_cls(8, name="k"),
        value_dim_total=dim_cls(6, name="v"),
        num_heads=2,
        att_dropout=0.0,
        **opts,
    )


def call(att: object, x: object, axis: object, **kwargs: object) -> object:
    out = att(x, axis=axis, **kwargs)
    return out[0] if isinstance(out, tuple) else out


def time_dim(lens: list[int]) -> rf.Dim:
    return rf.Dim(rf.convert_to_tensor(np.array(lens, np.int32), dims=[rf.batch_dim]), name="t")


def run_mine(att: object, xv: np.ndarray, rv: np.ndarray, lens: list[int]) -> tuple:
    time = time_dim(lens)
    x = rf.convert_to_tensor(xv, dims=[rf.batch_dim, time, att.in_dim], requires_grad=True)
    y = call(att, x, time)
    order = [rf.batch_dim, time, att.out_dim]
    rf.reduce_sum(y * rf.convert_to_tensor(rv, dims=order), axis=order).backward()
    return y.copy_transpose(order).numpy(), x


def inputs(lens: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    g = np.random.default_rng(6)
    xv = g.standard_normal((len(lens), max(lens), IN)).astype(np.float32)
    rv = g.standard_normal((len(lens), max(lens), 7)).astype(np.float32)
    valid = np.arange(max(lens))[None, :] < np.array(lens)[:, None]
    rv[~valid] = 0.0  # the loss reads valid frames only (padded outputs are unspecified)
    return xv, rv, valid


@pytest.mark.parametrize("variant", sorted(MODULES))
def test_against_returnn_on_its_torch_backend(variant: str) -> None:
    torch = pytest.importorskip("torch", reason="RETURNN's rf runs on its torch backend")
    pytest.importorskip("returnn", reason="RETURNN's own modules are the reference")
    import returnn.frontend as rrf
    from returnn.tensor import Dim, Tensor

    rrf.select_backend_torch()
    theirs = build(rrf, Dim, variant)
    mine = build(rf, rf.Dim, variant)
    t_params, m_params = dict(theirs.named_parameters()), dict(mine.named_parameters())
    assert sorted(t_params) == sorted(m_params)
    g = np.random.default_rng(1)
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
    raw_x = torch.tensor(xv, requires_grad=True)
    tx = Tensor("x", [tb, tt, theirs.in_dim], "float32", raw_tensor=raw_x)
    ty = call(theirs, tx, tt).copy_transpose([tb, tt, theirs.out_dim]).raw_tensor
    (ty * torch.from_numpy(rv)).sum().backward()

    np.testing.assert_allclose(my[valid], ty.detach().numpy()[valid], **VALUE_TOL)
    for name, p in t_params.items():
        np.testing.assert_allclose(
            m_params[name].grad.numpy(), p.raw_tensor.grad.numpy(), **GRAD_TOL, err_msg=name
        )
    np.testing.assert_allclose(mx.grad.numpy()[valid], raw_x.grad.numpy()[valid], **GRAD_TOL)


@pytest.mark.parametrize("variant", CAUSAL)
def test_steps_equal_the_whole_sequence(variant: str) -> None:
    rf.set_random_seed(3)
    att = build(rf, rf.Dim, variant)
    xv, _, valid = inputs(LENS)
    time = time_dim(LENS)
    x = rf.convert_to_tensor(xv, dims=[rf.batch_dim, time, att.in_dim])
    full = call(att, x, time).copy_transpose([rf.batch_dim, time, att.out_dim]).numpy()
    state = att.default_initial_state(batch_dims=[rf.batch_dim])
    steps = []
    for t in range(max(LENS)):
        frame = rf.convert_to_tensor(xv[:, t], dims=[rf.batch_dim, att.in_dim])
        out, state = att(frame, axis=rf.single_step_dim, state=state)
        steps.append(out.copy_transpose([rf.batch_dim, att.out_dim]).numpy())
    np.testing.assert_allclose(np.stack(steps, 1)[valid], full[valid], **VALUE_TOL)


@pytest.mark.parametrize("variant", sorted(MODULES))
def test_padding_does_not_leak_and_batched_equals_alone(variant: str) -> None:
    rf.set_random_seed(2)
    att = build(rf, rf.Dim, variant)
    xv, rv, valid = inputs(LENS)
    out, x = run_mine(att, xv, rv, LENS)
    noisy = np.where(valid[..., None], xv, 1e3).astype(np.float32)
    out2, x2 = run_mine(att, noisy, rv, LENS)
    np.testing.assert_allclose(out[valid], out2[valid], **VALUE_TOL)
    assert not x2.grad.numpy()[~valid].any()
    for b, n in enumerate(LENS):
        out1, x1 = run_mine(att, xv[b : b + 1, :n], rv[b : b + 1, :n], [n])
        np.testing.assert_allclose(out1[0], out[b, :n], **VALUE_TOL)
        np.testing.assert_allclose(x1.grad.numpy()[0], x.grad.numpy()[b, :n], **GRAD_TOL)


def numpy_rope(x: np.ndarray, base: float = 1e4) -> np.ndarray:
    """RoPE of ``x`` ``[T, D]``: pairs ``(2i, 2i + 1)`` turned by ``t * base ** (-2i / D)``."""
    t, d = x.shape
    angle = np.arange(t)[:, None] * base ** (-2.0 * np.arange(d // 2) / d)[None, :]
    re, im = x[:, 0::2], x[:, 1::2]
    out = np.empty_like(x)
    out[:, 0::2] = re * np.cos(angle) - im * np.sin(angle)
    out[:, 1::2] = re * np.sin(angle) + im * np.cos(angle)
    return out


def test_rope_rotates_pairs_and_has_the_right_gradient() -> None:
    from test_rf_grad import check_gradient

    from verjus.rf.rotary import _apply_rope, _rope_table

    time, feat = rf.Dim(5, name="t"), rf.Dim(8, name="f")
    xv = np.random.default_rng(0).standard_normal((5, 8)).astype(np.float32)
    table = _rope_table(time, feat)

    def f(x: rf.Tensor) -> rf.Tensor:
        return _apply_rope(x, table, feat)

    got = f(rf.convert_to_tensor(xv, dims=[time, feat])).copy_transpose([time, feat]).numpy()
    np.testing.assert_allclose(got, numpy_rope(xv), rtol=1e-5, atol=1e-5)
    check_gradient(f, xv, [time, feat])


def test_sinusoidal_encoding_values_and_against_returnn() -> None:
    feat = rf.Dim(6, name="f")
    b, t = rf.Dim(2, name="b"), rf.Dim(3, name="t")
    pos = np.array([[0, 4, 9], [2, 1, 100]], np.int32)
    enc = rf.sinusoidal_encoding(rf.convert_to_tensor(pos, dims=[b, t]), feat_dim=feat, base=50.0)
    assert enc.dims == (b, t, feat)
    assert enc.feature_dim == feat
    d = 50.0 ** (-np.arange(3) / 2.0)
    angle = pos[..., None] * d
    want = np.concatenate([np.sin(angle), np.cos(angle)], axis=-1)
    np.testing.assert_allclose(enc.numpy(), want, rtol=1e-5, atol=1e-5)
    # what sinusoidal_positional_encoding gives for 0 .. T - 1
    ref = rf.sinusoidal_positional_encoding(spatial_dim=t, feat_dim=feat)
    ramp = rf.sinusoidal_encoding(rf.range_over_dim(t), feat_dim=feat)
    np.testing.assert_allclose(ramp.numpy(), ref.numpy(), rtol=1e-6, atol=1e-6)

    torch = pytest.importorskip("torch", reason="RETURNN's rf runs on its torch backend")
    pytest.importorskip("returnn", reason="RETURNN's sinusoidal_encoding is the reference")
    import returnn.frontend as rrf
    from returnn.tensor import Dim, Tensor

    rrf.select_backend_torch()
    tb, tt, tf = Dim(2, name="b"), Dim(3, name="t"), Dim(6, name="f")
    idx = Tensor("i", [tb, tt], "int32", raw_tensor=torch.from_numpy(pos))
    theirs = rrf.sinusoidal_encoding(idx, feat_dim=tf, base=50.0)
    theirs = theirs.copy_transpose([tb, tt, tf]).raw_tensor.numpy()
    np.testing.assert_allclose(enc.numpy(), theirs, rtol=1e-5, atol=1e-5)


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="sinusoidal_encoding: feat_dim must be static and even"):
        rf.sinusoidal_encoding(rf.range_over_dim(rf.Dim(3, name="t")), feat_dim=rf.Dim(5, name="f"))
    att = build(rf, rf.Dim, "rel-pos-causal")
    time = rf.Dim(3, name="t")
    x = rf.convert_to_tensor(
        np.zeros((2, 3, IN), np.float32), dims=[rf.batch_dim, time, att.in_dim]
    )
    with pytest.raises(ValueError, match="RelPosCausalSelfAttention: axis t2"):
        att(x, axis=rf.Dim(3, name="t2"))
    with pytest.raises(ValueError, match="needs state"):
        att(rf.gather(x, indices=0, axis=time), axis=rf.single_step_dim)
