"""``rf.decoder.transformer``: against RETURNN's own ``TransformerDecoder`` on
its torch backend (weights copied by parameter name, eval mode; logits and
gradients over dynamic target and encoder lengths), step-wise decoding against
the full-sequence run, each batch entry alone against the batch, the
feed-forward variants and bad input.
"""

from __future__ import annotations

import numpy as np
import pytest

from verjus import rf
from verjus.rf.decoder.transformer import (
    FeedForwardGated,
    TransformerDecoder,
    TransformerDecoderLayer,
)

VALUE_TOL = {"rtol": 1e-4, "atol": 1e-5}
GRAD_TOL = {"rtol": 1e-3, "atol": 1e-5}
N, T, S, V, E, M = 3, 5, 6, 11, 6, 8
T_LENS, S_LENS = [5, 2, 4], [6, 3, 5]
OPTS = {
    "num_layers": 2,
    "num_heads": 2,
    "ff_dim": 12,
    "dropout": 0.0,
    "att_dropout": 0.0,
    "share_embedding": True,
    "input_embedding_scale": M**0.5,
    "input_dropout": 0.0,
}


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


LABELS = rng(1).integers(0, V, (N, T)).astype(np.int32)
ENC = rng(2).standard_normal((N, S, E)).astype(np.float32)
R = rng(3).standard_normal((N, T, V)).astype(np.float32)


def valid(lens: list[int], t: int) -> np.ndarray:
    return np.arange(t)[None, :] < np.array(lens)[:, None]


class Setup:
    """A decoder (encoder dim ``E``, vocab ``V``, model dim ``M``) and its
    inputs over ``len(t_lens)`` entries with dynamic target and encoder dims."""

    def __init__(self, seed: int = 4, **opts: object) -> None:
        rf.set_random_seed(seed)
        self.vocab, self.enc_dim = rf.Dim(V, name="vocab"), rf.Dim(E, name="enc")
        self.dec = TransformerDecoder(self.enc_dim, self.vocab, M, **{**OPTS, **opts})

    def inputs(self, t_lens: list[int], s_lens: list[int], labels: np.ndarray, enc: np.ndarray):
        b = rf.Dim(len(t_lens), name="b")
        time = rf.Dim(rf.convert_to_tensor(np.array(t_lens, np.int32), dims=[b]), name="t")
        etime = rf.Dim(rf.convert_to_tensor(np.array(s_lens, np.int32), dims=[b]), name="s")
        y = rf.convert_to_tensor(labels, dims=[b, time], sparse_dim=self.vocab)
        e = rf.convert_to_tensor(enc, dims=[b, etime, self.enc_dim], requires_grad=True)
        return b, time, etime, y, e

    def full(self, t_lens=T_LENS, s_lens=S_LENS, labels=LABELS, enc=ENC, r=R):
        """Logits ``[b, t, vocab]``, and the gradients of ``sum(logits * r)``
        (valid frames) for the encoder input and each parameter."""
        b, time, etime, y, e = self.inputs(t_lens, s_lens, labels, enc)
        for p in self.dec.parameters():
            p.zero_grad()
        state = self.dec.default_initial_state(batch_dims=[b])
        logits, _ = self.dec(
            y, spatial_dim=time, state=state, encoder=self.dec.transform_encoder(e, axis=etime)
        )
        order = [b, time, self.vocab]
        r = np.where(valid(t_lens, r.shape[1])[:, :, None], r, 0.0).astype(np.float32)
        rf.reduce_sum(logits * rf.convert_to_tensor(r, dims=order), axis=order).backward()
        grads = {n: p.grad.numpy() for n, p in self.dec.named_parameters()}
        return logits.copy_transpose(order).numpy(), e.grad.numpy(), grads


def test_parameter_names_are_returnns() -> None:
    names = {n for n, _ in Setup().dec.named_parameters()}
    for layer in ("layers.0", "layers.1"):
        for sub in ("self_att.qkv", "self_att.proj", "cross_att.q", "cross_att.kv"):
            assert {f"{layer}.{sub}.weight", f"{layer}.{sub}.bias"} <= names
        for sub in ("ff.linear_ff", "ff.linear_out"):
            assert f"{layer}.{sub}.weight" in names
        for norm in ("self_att_layer_norm", "cross_att_layer_norm", "ff_layer_norm"):
            assert f"{layer}.{norm}.scale" in names
    assert {"input_embedding.weight", "final_layer_norm.scale"} <= names
    assert "logits.weight" not in names  # shared with the input embedding, listed once


def _returnn_decoder(torch: object, opts: dict):
    import returnn.frontend as rrf
    from returnn.frontend.decoder.transformer import TransformerDecoder as TheirDecoder
    from returnn.tensor import Dim

    rrf.select_backend_torch()
    vocab, enc_dim = Dim(V, name="vocab"), Dim(E, name="enc")
    return TheirDecoder(enc_dim, vocab, Dim(M, name="model"), **opts), vocab, enc_dim


@pytest.mark.parametrize(
    "opts",
    [
        {},
        {"share_embedding": False, "logits_with_bias": True, "ff": FeedForwardGated},
        {"pos_enc": None, "norm": rf.RMSNorm},
    ],
    ids=["default", "gated_ff_unshared", "no_pos_enc_rmsnorm"],
)
def test_against_returnn_on_its_torch_backend(opts: dict) -> None:
    torch = pytest.importorskip("torch", reason="RETURNN's rf runs on its torch backend")
    pytest.importorskip("returnn", reason="RETURNN's own TransformerDecoder is the reference")
    import returnn.frontend as rrf
    from returnn.frontend.decoder import transformer as their_mod
    from returnn.tensor import Dim, Tensor

    their_opts = dict(OPTS, **opts)
    if "ff" in opts:
        their_opts["ff"] = their_mod.FeedForwardGated
    if "norm" in opts:
        their_opts["norm"] = rrf.RMSNorm
    theirs, tv, te = _returnn_decoder(torch, their_opts)
    mine = Setup(**opts)
    ours = dict(mine.dec.named_parameters())
    their_params = dict(theirs.named_parameters())
    assert set(ours) <= set(their_params)
    for name, p in their_params.items():
        if name in ours:
            ours[name].assign(p.raw_tensor.detach().numpy())
    logits, enc_grad, grads = mine.full()

    tb = Dim(N, name="b")
    tt = Dim(Tensor("tl", [tb], "int32", raw_tensor=torch.tensor(T_LENS, dtype=torch.int32)))
    ts = Dim(Tensor("sl", [tb], "int32", raw_tensor=torch.tensor(S_LENS, dtype=torch.int32)))
    y = Tensor("y", [tb, tt], "int32", sparse_dim=tv, raw_tensor=torch.tensor(LABELS))
    e = Tensor("e", [tb, ts, te], "float32", raw_tensor=torch.tensor(ENC, requires_grad=True))
    enc = theirs.transform_encoder(e, axis=ts)
    out, _ = theirs(
        y, spatial_dim=tt, state=theirs.default_initial_state(batch_dims=[tb]), encoder=enc
    )
    their_logits = out.copy_transpose([tb, tt, tv]).raw_tensor
    mask = torch.tensor(valid(T_LENS, T))[:, :, None]
    (their_logits * torch.tensor(R) * mask).sum().backward()

    ok = valid(T_LENS, T)
    np.testing.assert_allclose(logits[ok], their_logits.detach().numpy()[ok], **VALUE_TOL)
    e_ok = valid(S_LENS, S)
    np.testing.assert_allclose(
        enc_grad[e_ok], e.raw_tensor.grad.numpy()[e_ok], **GRAD_TOL, err_msg="encoder"
    )
    for name, g in grads.items():
        np.testing.assert_allclose(
            g, their_params[name].raw_tensor.grad.numpy(), **GRAD_TOL, err_msg=name
        )


def test_steps_equal_the_full_sequence() -> None:
    s = Setup()
    full, _, _ = s.full()
    b, _, etime, _, e = s.inputs(T_LENS, S_LENS, LABELS, ENC)
    enc = s.dec.transform_encoder(e, axis=etime)
    state = s.dec.default_initial_state(batch_dims=[b])
    for t in range(T):
        y = rf.convert_to_tensor(LABELS[:, t], dims=[b], sparse_dim=s.vocab)
        logits, state = s.dec(y, spatial_dim=rf.single_step_dim, state=state, encoder=enc)
        step = logits.copy_transpose([b, s.vocab]).numpy()
        ok = valid(T_LENS, T)[:, t]
        np.testing.assert_allclose(step[ok], full[ok, t], **VALUE_TOL, err_msg=f"step {t}")
    assert state.pos.numpy() == T


def test_batched_equals_each_entry_alone() -> None:
    s = Setup()
    logits, enc_grad, _ = s.full()
    for i, (tl, sl) in enumerate(zip(T_LENS, S_LENS, strict=True)):
        one, one_grad, _ = s.full(
            [tl], [sl], LABELS[i : i + 1, :tl], ENC[i : i + 1, :sl], R[i : i + 1, :tl]
        )
        np.testing.assert_allclose(logits[i, :tl], one[0], **VALUE_TOL, err_msg=f"entry {i}")
        np.testing.assert_allclose(enc_grad[i, :sl], one_grad[0], **GRAD_TOL, err_msg=f"entry {i}")


def test_output_only_last_frame_and_collected_outputs() -> None:
    s = Setup()
    full, _, _ = s.full()
    b, time, etime, y, e = s.inputs(T_LENS, S_LENS, LABELS, ENC)
    collected: dict = {}
    last, _ = s.dec(
        y,
        spatial_dim=time,
        state=s.dec.default_initial_state(batch_dims=[b]),
        encoder=s.dec.transform_encoder(e, axis=etime),
        collected_outputs=collected,
        output_only_last_frame=True,
    )
    expected = full[np.arange(N), np.array(T_LENS) - 1]
    np.testing.assert_allclose(last.copy_transpose([b, s.vocab]).numpy(), expected, **VALUE_TOL)
    assert sorted(collected) == ["0", "1"]


def test_decoder_without_encoder_and_layer_options() -> None:
    rf.set_random_seed(5)
    vocab = rf.Dim(V, name="vocab")
    layer = TransformerDecoderLayer(None, rf.Dim(M, name="m"), num_heads=2, dropout=0.0)
    dec = TransformerDecoder(None, vocab, layer.out_dim, num_layers=2, decoder_layer=layer)
    assert dec.layers[0].cross_att is None
    w0 = dec.layers[0].ff.linear_ff.weight
    w1 = dec.layers[1].ff.linear_ff.weight
    template = layer.ff.linear_ff.weight
    assert len({id(w0), id(w1), id(template)}) == 3  # deep copies of the given layer
    assert w0.dims == template.dims
    # RETURNN's copy_init: each copy draws its own initial values
    assert not np.allclose(w0.numpy(), w1.numpy())
    assert not np.allclose(w0.numpy(), template.numpy())
    b = rf.Dim(2, name="b")
    time = rf.Dim(3, name="t")
    y = rf.convert_to_tensor(LABELS[:2, :3], dims=[b, time], sparse_dim=vocab)
    logits, state = dec(y, spatial_dim=time, state=dec.default_initial_state(batch_dims=[b]))
    assert set(logits.dims) == {b, time, vocab}
    assert state.pos.numpy() == 3
    gated = TransformerDecoder(
        None,
        vocab,
        8,
        num_layers=1,
        ff={"class": "returnn.frontend.decoder.transformer.FeedForwardGated"},
    )
    assert isinstance(gated.layers[0].ff, FeedForwardGated)
    assert gated.layers[0].ff.linear_out.in_dim.dimension == 256  # RETURNN's rounding


def test_bad_input() -> None:
    s = Setup()
    b, time, etime, y, e = s.inputs(T_LENS, S_LENS, LABELS, ENC)
    state = s.dec.default_initial_state(batch_dims=[b])
    enc = s.dec.transform_encoder(e, axis=etime)
    with pytest.raises(ValueError, match=r"TransformerDecoder: spatial_dim other"):
        s.dec(y, spatial_dim=rf.Dim(5, name="other"), state=state, encoder=enc)
    other_vocab = rf.Dim(V, name="other_vocab")
    y_other = rf.convert_to_tensor(LABELS, dims=[b, time], sparse_dim=other_vocab)
    with pytest.raises(ValueError, match=r"TransformerDecoder: source .* vocab_dim vocab"):
        s.dec(y_other, spatial_dim=time, state=state, encoder=enc)
    with pytest.raises(ValueError, match=r"TransformerDecoder: has cross attention .* encoder="):
        s.dec(y, spatial_dim=time, state=state)
    with pytest.raises(ValueError, match=r"state lacks \['pos'\]"):
        s.dec(y, spatial_dim=time, state=rf.State({k: v for k, v in state.items() if k != "pos"}))
    with pytest.raises(ValueError, match=r"transform_encoder: encoder_dim enc is not a dim"):
        s.dec.transform_encoder(rf.zeros([b, etime, rf.Dim(E, name="x")]), axis=etime)
    with pytest.raises(TypeError, match=r"TransformerDecoder: unexpected arguments \['bogus'\]"):
        TransformerDecoder(None, s.vocab, 8, num_layers=1, bogus=1)
    with pytest.raises(ValueError, match="share_embedding needs logits_with_bias=False"):
        TransformerDecoder(
            None, s.vocab, 8, num_layers=1, share_embedding=True, logits_with_bias=True
        )


def test_dropout_only_while_training() -> None:
    s = Setup(dropout=0.3, input_dropout=0.3)
    eval_logits, _, _ = s.full()
    np.testing.assert_allclose(eval_logits, Setup().full()[0], **VALUE_TOL)  # same init, no dropout
    with rf.get_run_ctx().train_flag_ctx(True):
        train_logits, enc_grad, _ = s.full()
    ok = valid(T_LENS, T)
    assert not np.allclose(train_logits[ok], eval_logits[ok])
    assert np.isfinite(enc_grad).all()
    assert np.abs(enc_grad).sum() > 0


def test_attention_dropout_while_training() -> None:
    s = Setup(att_dropout=0.3)
    eval_logits, _, _ = s.full()
    with rf.get_run_ctx().train_flag_ctx(True):
        train_logits, enc_grad, grads = s.full()
    ok = valid(T_LENS, T)
    assert not np.allclose(train_logits[ok], eval_logits[ok])  # only att_dropout is on
    assert np.isfinite(enc_grad).all()
    assert np.abs(enc_grad).sum() > 0
    assert np.abs(grads["layers.0.self_att.qkv.weight"]).sum() > 0
    s = Setup()  # every dropout 0: training equals eval
    eval_logits, eval_grad, _ = s.full()
    with rf.get_run_ctx().train_flag_ctx(True):
        train_logits, train_grad, _ = s.full()
    np.testing.assert_allclose(train_logits, eval_logits, **VALUE_TOL)
    np.testing.assert_allclose(train_grad, eval_grad, **GRAD_TOL)


def test_steps_after_a_ragged_prefix_continue_each_sequence() -> None:
    s = Setup()
    full, _, _ = s.full([T] * N)
    b, _, etime, _, e = s.inputs(T_LENS, S_LENS, LABELS, ENC)
    enc = s.dec.transform_encoder(e, axis=etime)
    pre_lens = np.array([3, 1, 2])
    pre = rf.Dim(rf.convert_to_tensor(pre_lens.astype(np.int32), dims=[b]), name="pre")
    y = rf.convert_to_tensor(LABELS[:, :3], dims=[b, pre], sparse_dim=s.vocab)
    state = s.dec.default_initial_state(batch_dims=[b])
    _, state = s.dec(y, spatial_dim=pre, state=state, encoder=enc)
    np.testing.assert_array_equal(state.pos.copy_transpose([b]).numpy(), pre_lens)
    for k in range(2):  # each entry's own next labels
        pos = pre_lens + k
        yt = rf.convert_to_tensor(LABELS[np.arange(N), pos], dims=[b], sparse_dim=s.vocab)
        logits, state = s.dec(yt, spatial_dim=rf.single_step_dim, state=state, encoder=enc)
        step = logits.copy_transpose([b, s.vocab]).numpy()
        np.testing.assert_allclose(step, full[np.arange(N), pos], **VALUE_TOL, err_msg=f"step {k}")
