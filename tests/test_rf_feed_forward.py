"""``verjus.rf.feed_forward`` and ``rf.build_from_dict``: the one
``FeedForward``/``FeedForwardGated``/``make_norm`` the Conformer and the
Transformer decoder share, against RETURNN's own blocks on its torch backend
(weights copied by name), their option handling (``NotSpecified``, build dicts,
deep-copied modules), and build dicts naming classes by RETURNN's paths.
"""

from __future__ import annotations

import numpy as np
import pytest

from verjus import rf
from verjus.rf.build_from_dict import NotSpecified
from verjus.rf.decoder import transformer as dec_mod
from verjus.rf.encoder import conformer
from verjus.rf.feed_forward import FeedForward, FeedForwardGated, make_ff, make_norm

N, T, F = 2, 3, 8
X = np.random.default_rng(0).standard_normal((N, T, F)).astype(np.float32)


def test_one_implementation_for_decoder_and_encoder() -> None:
    assert dec_mod.FeedForward is FeedForward
    assert dec_mod.FeedForwardGated is FeedForwardGated
    assert dec_mod.make_norm is make_norm
    assert issubclass(conformer.ConformerPositionwiseFeedForward, FeedForward)


@pytest.mark.parametrize(
    ("ours", "theirs", "opts"),
    [
        ("FeedForward", "FeedForward", {"ff_dim": 12, "activation": {"class": "rf.sigmoid"}}),
        ("FeedForwardGated", "FeedForwardGated", {}),
        ("FeedForwardGated", "FeedForwardGated", {"ff_dim": 6, "with_bias": True}),
    ],
    ids=["ff_sigmoid", "gated_default", "gated_bias"],
)
def test_against_returnn_on_its_torch_backend(ours: str, theirs: str, opts: dict) -> None:
    torch = pytest.importorskip("torch", reason="RETURNN's rf runs on its torch backend")
    pytest.importorskip("returnn", reason="RETURNN's own blocks are the reference")
    import returnn.frontend as rrf
    from returnn.frontend.decoder import transformer as their_mod
    from returnn.tensor import Dim, Tensor

    rrf.select_backend_torch()
    their_feat = Dim(F, name="f")
    their_block = getattr(their_mod, theirs)(their_feat, dropout=0.0, **opts)
    rf.set_random_seed(1)
    feat = rf.Dim(F, name="f")
    block = getattr(dec_mod, ours)(feat, dropout=0.0, **opts)
    their_params = dict(their_block.named_parameters())
    our_params = dict(block.named_parameters())
    assert set(our_params) == set(their_params)
    for name, p in their_params.items():
        assert tuple(our_params[name].shape) == tuple(p.raw_tensor.shape), name
        our_params[name].assign(p.raw_tensor.detach().numpy())

    b, t = rf.Dim(N, name="b"), rf.Dim(T, name="t")
    out = block(rf.convert_to_tensor(X, dims=[b, t, feat]))
    tb, tt = Dim(N, name="b"), Dim(T, name="t")
    their_x = Tensor("x", [tb, tt, their_feat], "float32", raw_tensor=torch.tensor(X))
    their_out = their_block(their_x)
    np.testing.assert_allclose(
        out.copy_transpose([b, t, feat]).numpy(),
        their_out.copy_transpose([tb, tt, their_feat]).raw_tensor.detach().numpy(),
        rtol=1e-5,
        atol=1e-6,
    )


def test_feed_forward_options() -> None:
    feat = rf.Dim(F, name="f")
    assert FeedForward(feat).linear_ff.out_dim.dimension == 4 * F
    assert FeedForward(feat, ff_dim=None).linear_ff.out_dim.dimension == 4 * F
    assert FeedForwardGated(rf.Dim(512, name="m")).linear_out.in_dim.dimension == 1536
    assert FeedForwardGated(feat).gate_activation is rf.identity
    assert FeedForwardGated(feat, activation=NotSpecified).activation is rf.swish
    with pytest.raises(TypeError, match="FeedForward: ff_dim must be an int or Dim, got 'x'"):
        FeedForward(feat, ff_dim="x")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="FeedForwardGated: unexpected gate_activation 3"):
        FeedForwardGated(feat, gate_activation=3)


def test_make_ff_and_make_norm() -> None:
    rf.set_random_seed(2)
    feat = rf.Dim(F, name="f")
    opts = {"out_dim": feat, "ff_dim": NotSpecified, "ff_activation": NotSpecified, "dropout": 0.2}
    ff = make_ff(ff=NotSpecified, **opts)
    assert type(ff) is FeedForward
    assert ff.dropout == 0.2
    assert ff.activation is rf.relu
    gated = make_ff(ff={"class": "rf.decoder.transformer.FeedForwardGated"}, **opts)
    assert isinstance(gated, FeedForwardGated)
    assert gated.activation is rf.swish
    copied = make_ff(ff=ff, **opts)
    assert copied is not ff
    assert copied.linear_ff.weight is not ff.linear_ff.weight
    assert copied.linear_ff.weight.dims == ff.linear_ff.weight.dims
    with pytest.raises(TypeError, match="make_ff: unexpected ff 5"):
        make_ff(ff=5, **opts)

    assert isinstance(make_norm(rf.RMSNorm, feat), rf.RMSNorm)
    built = make_norm({"class": "returnn.frontend.LayerNorm", "eps": 1e-3}, feat)
    assert isinstance(built, rf.LayerNorm)
    assert built.eps == 1e-3
    norm = rf.LayerNorm(feat)
    assert make_norm(norm, feat) is not norm
    assert make_norm(rf.identity, feat) is rf.identity
    with pytest.raises(TypeError, match="make_norm: unexpected norm None"):
        make_norm(None, feat)


def test_build_from_dict_class_paths() -> None:
    feat = rf.Dim(F, name="f")
    for name in (
        "rf.decoder.transformer.FeedForward",
        "returnn.frontend.decoder.transformer.FeedForward",
        "verjus.rf.feed_forward.FeedForward",
    ):
        assert type(rf.build_from_dict({"class": name}, feat)) is FeedForward, name
    assert rf.build_from_dict({"class": "rf.relu"}) is rf.relu
    bound = rf.build_from_dict({"class": "returnn.frontend.gating"}, out_dim=feat)
    assert bound.func is rf.gating
    assert bound.keywords == {"out_dim": feat}
    with pytest.raises(ValueError, match="missing 'class' key"):
        rf.build_from_dict({"eps": 1.0})
    with pytest.raises(ValueError, match="expected a dotted class name, got 'LayerNorm'"):
        rf.build_from_dict({"class": "LayerNorm"})
    with pytest.raises(ValueError, match=r"cannot import verjus.rf.nowhere .*'rf.nowhere.X'"):
        rf.build_from_dict({"class": "rf.nowhere.X"})
    with pytest.raises(ValueError, match=r"verjus.rf.decoder.transformer has no 'Nope'"):
        rf.build_from_dict({"class": "returnn.frontend.decoder.transformer.Nope"})
