"""``rf.dot_attention`` and the attention modules: against torch's
``scaled_dot_product_attention`` (values and gradients, key padding as a mask,
causal), against RETURNN's own ``rf.SelfAttention`` / ``CausalSelfAttention`` /
``CrossAttention`` on its torch backend with the same weights loaded by
parameter name, batched against each entry alone over a dynamic dim, causal
step-wise decoding against full causal self-attention, and bad input.
"""

from __future__ import annotations

import numpy as np
import pytest

from verjus import rf

VALUE_TOL = {"rtol": 1e-5, "atol": 1e-5}
GRAD_TOL = {"rtol": 1e-4, "atol": 1e-5}

B, H, T, S, D, DV = 3, 2, 5, 6, 4, 3
LENS = [S, 1, S - 2]


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def leaf(value: np.ndarray, dims: list[rf.Dim]) -> rf.Tensor:
    return rf.convert_to_tensor(value.astype(np.float32), dims=dims, requires_grad=True)


class Qkv:
    """``q [B, H, T, D]``, ``k [B, H, S, D]``, ``v [B, H, S, DV]`` with a
    dynamic key dim of ``LENS``."""

    def __init__(self, lens: list[int] = LENS, t: int = T) -> None:
        self.heads, self.d, self.dv = (
            rf.Dim(H, name="h"),
            rf.Dim(D, name="d"),
            rf.Dim(DV, name="dv"),
        )
        self.time = rf.Dim(t, name="t")
        lengths = rf.convert_to_tensor(np.array(lens, np.int32), dims=[rf.batch_dim])
        self.keys = rf.Dim(lengths, name="s")
        n, s = len(lens), max(lens)
        self.qv = rng(1).standard_normal((n, H, t, D)).astype(np.float32)
        self.kv = rng(2).standard_normal((n, H, s, D)).astype(np.float32)
        self.vv = rng(3).standard_normal((n, H, s, DV)).astype(np.float32)
        self.r = rng(4).standard_normal((n, H, t, DV)).astype(np.float32)
        self.lens = lens

    def run(self, **kw: object) -> tuple[np.ndarray, list[np.ndarray]]:
        bd = [rf.batch_dim, self.heads]
        q = leaf(self.qv, [*bd, self.time, self.d])
        k = leaf(self.kv, [*bd, self.keys, self.d])
        v = leaf(self.vv, [*bd, self.keys, self.dv])
        out = rf.dot_attention(q, k, v, key_dim=self.d, axis=self.keys, **kw)
        order = [*bd, self.time, self.dv]
        loss = rf.reduce_sum(out * rf.convert_to_tensor(self.r, dims=order), axis=order)
        loss.backward()
        return out.copy_transpose(order).numpy(), [t.grad.numpy() for t in (q, k, v)]


def test_against_torch_sdpa_with_key_padding() -> None:
    torch = pytest.importorskip(
        "torch", reason="torch's scaled_dot_product_attention is the reference"
    )
    s = Qkv()
    out, grads = s.run()
    q, k, v = (torch.tensor(a, requires_grad=True) for a in (s.qv, s.kv, s.vv))
    mask = torch.arange(max(s.lens))[None, :] < torch.tensor(s.lens)[:, None]
    ref = torch.nn.functional.scaled_dot_product_attention(
        q, k, v, attn_mask=mask[:, None, None, :]
    )
    (ref * torch.from_numpy(s.r)).sum().backward()
    np.testing.assert_allclose(out, ref.detach().numpy(), **VALUE_TOL)
    for mine, theirs, name in zip(grads, (q, k, v), "qkv", strict=True):
        g = theirs.grad.numpy()
        if name != "q":  # padded keys get no gradient (their values never get weight)
            for b, n in enumerate(s.lens):
                g[b, :, n:] = 0.0
        np.testing.assert_allclose(mine, g, **GRAD_TOL, err_msg=name)


def test_padded_keys_get_no_weight() -> None:
    s = Qkv()
    out, _ = s.run()
    s.vv[:, :, :, :] = np.where(
        np.arange(max(s.lens))[None, None, :, None] >= np.array(s.lens)[:, None, None, None],
        1e6,
        s.vv,
    )
    out2, _ = s.run()
    np.testing.assert_array_equal(out, out2)


def test_causal_against_torch() -> None:
    torch = pytest.importorskip(
        "torch", reason="torch's scaled_dot_product_attention is the reference"
    )
    s = Qkv(lens=[T, T, T])
    time = s.keys = rf.Dim(T, name="t")
    s.time = time
    out, grads = s.run(causal_query_spatial_dim=time)
    q, k, v = (torch.tensor(a, requires_grad=True) for a in (s.qv, s.kv, s.vv))
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    (ref * torch.from_numpy(s.r)).sum().backward()
    np.testing.assert_allclose(out, ref.detach().numpy(), **VALUE_TOL)
    for mine, theirs in zip(grads, (q, k, v), strict=True):
        np.testing.assert_allclose(mine, theirs.grad.numpy(), **GRAD_TOL)


def test_batched_equals_each_entry_alone() -> None:
    s = Qkv()
    out, grads = s.run()
    for b, n in enumerate(s.lens):
        alone = Qkv(lens=[n])
        alone.qv, alone.kv, alone.vv, alone.r = (
            s.qv[b : b + 1],
            s.kv[b : b + 1, :, :n],
            s.vv[b : b + 1, :, :n],
            s.r[b : b + 1],
        )
        out1, grads1 = alone.run()
        np.testing.assert_allclose(out[b : b + 1], out1, **VALUE_TOL)
        np.testing.assert_allclose(grads[0][b : b + 1], grads1[0], **GRAD_TOL)
        np.testing.assert_allclose(grads[1][b : b + 1, :, :n], grads1[1], **GRAD_TOL)


def _self_att(cls: type, in_dim: rf.Dim) -> rf.Module:
    return cls(
        in_dim,
        rf.Dim(7, name="proj"),
        key_dim_total=rf.Dim(8, name="k"),
        value_dim_total=rf.Dim(6, name="v"),
        num_heads=2,
        att_dropout=0.0,
    )


def test_causal_steps_equal_full_causal_self_attention() -> None:
    in_dim = rf.Dim(5, name="in")
    time = rf.Dim(4, name="time")
    rf.set_random_seed(3)
    att = _self_att(rf.CausalSelfAttention, in_dim)
    xv = rng(5).standard_normal((2, 4, 5)).astype(np.float32)
    batch = rf.Dim(2, name="b")
    x = rf.convert_to_tensor(xv, dims=[batch, time, in_dim])
    full, _ = att(x, axis=time)
    full = full.copy_transpose([batch, time, att.out_dim]).numpy()
    state = att.default_initial_state(batch_dims=[batch])
    for t in range(4):
        xt = rf.convert_to_tensor(xv[:, t], dims=[batch, in_dim])
        y, state = att(xt, axis=rf.single_step_dim, state=state)
        np.testing.assert_allclose(
            y.copy_transpose([batch, att.out_dim]).numpy(), full[:, t], **VALUE_TOL
        )


def test_parameter_names_are_returnns() -> None:
    att = _self_att(rf.SelfAttention, rf.Dim(5, name="in"))
    assert sorted(n for n, _ in att.named_parameters()) == [
        "proj.bias",
        "proj.weight",
        "qkv.bias",
        "qkv.weight",
    ]


@pytest.mark.parametrize("kind", ["SelfAttention", "CausalSelfAttention", "CrossAttention"])
def test_against_returnn_on_its_torch_backend(kind: str) -> None:
    torch = pytest.importorskip("torch", reason="RETURNN's rf runs on its torch backend")
    pytest.importorskip("returnn", reason="RETURNN's own attention modules are the reference")
    import returnn.frontend as rrf
    from returnn.tensor import Dim, Tensor

    rrf.select_backend_torch()
    lens = [4, 2, 3]
    xv = rng(6).standard_normal((3, 4, 5)).astype(np.float32)
    ev = rng(7).standard_normal((3, 4, 5)).astype(np.float32)
    rv = rng(8).standard_normal((3, 4, 7)).astype(np.float32)
    valid = np.arange(4)[None, :] < np.array(lens)[:, None]
    rv[~valid] = 0.0  # the loss reads valid frames only (padded outputs are unspecified)

    def build(m: object, dim_cls: type, as_int: bool) -> object:
        in_dim, proj = dim_cls(5, name="in"), dim_cls(7, name="proj")
        kw = {"key_dim_total": dim_cls(8, name="k"), "value_dim_total": dim_cls(6, name="v")}
        kw.update(num_heads=2, att_dropout=0.0)
        if kind == "CrossAttention":
            return getattr(m, kind)(in_dim, in_dim, proj, **kw)
        return getattr(m, kind)(in_dim, proj, **kw)

    theirs = build(rrf, Dim, True)
    mine = build(rf, rf.Dim, False)
    for name, p in theirs.named_parameters():
        dict(mine.named_parameters())[name].assign(p.raw_tensor.detach().numpy())

    def run(m: object, mod: object, dims: tuple, to_tensor: object, out_np: object) -> np.ndarray:
        bdim, time, in_dim = dims
        x, enc = to_tensor(xv, [bdim, time, in_dim]), to_tensor(ev, [bdim, time, in_dim])
        if kind == "SelfAttention":
            y = m(x, axis=time)
        elif kind == "CausalSelfAttention":
            y, _ = m(x, axis=time)
        else:
            y = m(x, m.transform_encoder(enc, axis=time))
        return out_np(y, [bdim, time, m.out_dim]), x

    # theirs
    tb = Dim(3, name="b")
    tt = Dim(
        Tensor("l", [tb], dtype="int32", raw_tensor=torch.tensor(lens, dtype=torch.int32)), name="t"
    )
    t_in = theirs.in_dim if kind != "CrossAttention" else theirs.query_in_dim

    def t_tensor(a: np.ndarray, dims: list) -> Tensor:
        return Tensor("x", dims, dtype="float32", raw_tensor=torch.tensor(a, requires_grad=True))

    ty, tx = run(theirs, rrf, (tb, tt, t_in), t_tensor, lambda y, o: y.copy_transpose(o).raw_tensor)
    (ty * torch.from_numpy(rv)).sum().backward()
    # mine
    m_in = mine.in_dim if kind != "CrossAttention" else mine.query_in_dim
    mt = rf.Dim(rf.convert_to_tensor(np.array(lens, np.int32), dims=[rf.batch_dim]), name="t")
    my, mx = run(
        mine,
        rf,
        (rf.batch_dim, mt, m_in),
        lambda a, d: rf.convert_to_tensor(a, dims=d, requires_grad=True),
        lambda y, o: y.copy_transpose(o),
    )
    order = [rf.batch_dim, mt, mine.out_dim]
    rf.reduce_sum(my * rf.convert_to_tensor(rv, dims=order), axis=order).backward()
    np.testing.assert_allclose(my.numpy()[valid], ty.detach().numpy()[valid], **VALUE_TOL)
    for name, p in theirs.named_parameters():
        ours = dict(mine.named_parameters())[name].grad.numpy()
        np.testing.assert_allclose(ours, p.raw_tensor.grad.numpy(), **GRAD_TOL, err_msg=name)
    np.testing.assert_allclose(
        mx.grad.numpy()[valid], tx.raw_tensor.grad.numpy()[valid], **GRAD_TOL
    )


def test_bad_input() -> None:
    s = Qkv()
    bd = [rf.batch_dim, s.heads]
    q = leaf(s.qv, [*bd, s.time, s.d])
    k = leaf(s.kv, [*bd, s.keys, s.d])
    v_no_axis = leaf(s.vv[:, :, 0], [*bd, s.dv])
    with pytest.raises(Exception, match=r"values .* must have the attention axis"):
        rf.dot_attention(q, k, v_no_axis, key_dim=s.d, axis=s.keys)
    other_d = rf.Dim(D, name="other")
    q2 = leaf(s.qv, [*bd, s.time, other_d])
    with pytest.raises(Exception, match="dot_attention"):
        rf.dot_attention(q2, k, leaf(s.vv, [*bd, s.keys, s.dv]), key_dim=s.d, axis=s.keys)
    v_two = leaf(s.vv[..., None].repeat(2, -1), [*bd, s.keys, s.dv, rf.Dim(2, name="x")])
    with pytest.raises(Exception, match="cannot infer the value feature dim"):
        rf.dot_attention(q, k, v_two, key_dim=s.d, axis=s.keys)


# Attention dropout (``att_dropout`` in training): the unfused path.


def _no_dropout(source: rf.Tensor, drop_prob: float, **_kw: object) -> rf.Tensor:
    return source


@pytest.mark.parametrize("case", ["cross", "self", "causal"])
def test_unfused_training_path_equals_fused(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the dropout itself made the identity, the unfused path (scores,
    mask, softmax, sum by separate ops) gives the fused op's values and
    gradients."""
    s = Qkv(lens=[S, S, S]) if case == "causal" else Qkv()
    kw: dict = {}
    if case == "self":  # the query over the key axis: each frame attends over all
        s.time = s.keys
        s.qv, s.r = s.qv[:, :, :1].repeat(S, 2), s.r[:, :, :1].repeat(S, 2)
        s.qv = rng(11).standard_normal(s.qv.shape).astype(np.float32)
    if case == "causal":
        s.keys = s.time = rf.Dim(S, name="t")
        s.qv = rng(12).standard_normal((len(s.lens), H, S, D)).astype(np.float32)
        s.r = rng(13).standard_normal((len(s.lens), H, S, DV)).astype(np.float32)
        kw["causal_query_spatial_dim"] = s.time
    fused, fused_grads = s.run(**kw)
    monkeypatch.setattr(rf, "dropout", _no_dropout)
    with rf.get_run_ctx().train_flag_ctx(True):
        out, grads = s.run(att_dropout=0.5, **kw)
    np.testing.assert_allclose(out, fused, **VALUE_TOL)
    for mine, theirs, name in zip(grads, fused_grads, "qkv", strict=True):
        np.testing.assert_allclose(mine, theirs, **GRAD_TOL, err_msg=name)


@pytest.mark.parametrize("broadcast", [False, True])
def test_dropout_on_the_weights_by_hand(broadcast: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The weights dropped in training are the masked softmax (checked against
    numpy), dropped by a 0/1 mask scaled by 1 / (1 - p) (shared over all but the
    key axis with ``att_dropout_broadcast``), and the output is their sum over
    the values, for a fixed seed."""
    real, seen = rf.dropout, []

    def spy(source: rf.Tensor, drop_prob: float, **kw: object) -> rf.Tensor:
        out = real(source, drop_prob, **kw)
        seen.append((source, out))
        return out

    monkeypatch.setattr(rf, "dropout", spy)
    s, p = Qkv(), 0.5
    rf.set_random_seed(7)
    with rf.get_run_ctx().train_flag_ctx(True):
        out, grads = s.run(att_dropout=p, att_dropout_broadcast=broadcast)
    (w_in, w_out), order = seen[0], [rf.batch_dim, s.heads, s.time, s.keys]
    w_in, w_out = (t.copy_transpose(order).numpy() for t in (w_in, w_out))
    valid = np.arange(max(s.lens))[None, :] < np.array(s.lens)[:, None]  # [B, S]
    energy = np.einsum("bhtd,bhsd->bhts", s.qv, s.kv) / np.sqrt(D)
    energy = np.where(valid[:, None, None, :], energy, -np.inf)
    ref = np.exp(energy - energy.max(-1, keepdims=True))
    ref /= ref.sum(-1, keepdims=True)
    np.testing.assert_allclose(w_in, ref, **VALUE_TOL)
    with np.errstate(invalid="ignore"):  # 0 / 0 at padded keys, left out below
        kept = w_out / (w_in / (1 - p))
    kept_valid = kept[np.broadcast_to(valid[:, None, None, :], kept.shape)]
    np.testing.assert_allclose(kept_valid, np.round(kept_valid), atol=1e-5)
    assert 0.3 < kept_valid.mean() < 0.7
    if broadcast:  # one mask over the keys, shared by all batch entries, heads and queries
        for b, n in enumerate(s.lens):
            shared = np.broadcast_to(kept[0, 0, 0, :n], kept[b, :, :, :n].shape)
            np.testing.assert_allclose(kept[b, :, :, :n], shared, atol=1e-5)
    else:
        assert not np.allclose(kept[:, :, :1], kept)
    np.testing.assert_allclose(out, np.einsum("bhts,bhsv->bhtv", w_out, s.vv), **VALUE_TOL)
    np.testing.assert_allclose(grads[2], np.einsum("bhts,bhtv->bhsv", w_out, s.r), **GRAD_TOL)


def test_dropout_is_unbiased_and_off_outside_training() -> None:
    """The mean over many training runs approaches the output without dropout;
    outside training ``att_dropout`` changes nothing."""
    rf.set_random_seed(8)
    att = _self_att(rf.SelfAttention, rf.Dim(5, name="in"))
    att.att_dropout = 0.3
    time = rf.Dim(4, name="time")
    x = rf.convert_to_tensor(
        rng(9).standard_normal((2, 4, 5)).astype(np.float32), dims=[rf.batch_dim, time, att.in_dim]
    )
    order = [rf.batch_dim, time, att.out_dim]
    plain = att(x, axis=time).copy_transpose(order).numpy()
    att.att_dropout = 0.0
    np.testing.assert_array_equal(att(x, axis=time).copy_transpose(order).numpy(), plain)
    att.att_dropout = 0.3
    with rf.get_run_ctx().train_flag_ctx(True):
        runs = [att(x, axis=time).copy_transpose(order).numpy() for _ in range(400)]
    assert not np.allclose(runs[0], plain)
    np.testing.assert_allclose(np.mean(runs, axis=0), plain, atol=0.08)
