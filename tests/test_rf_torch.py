"""verjus.rf against PyTorch: the same small models from the same weights give
the same values and the same gradients.

Each test builds a model in rf, copies its weights into the equivalent PyTorch
computation (masks over a dynamic dim written out explicitly, as a PyTorch user
would), and compares the outputs and the gradients of ``sum(output * r)`` (``r``
random, so every output element matters). Tolerances: float32 on both sides,
different summation orders: values ``rtol=1e-5, atol=1e-6``, gradients
``rtol=1e-4, atol=1e-6`` (``atol=1e-5`` where a value is a sum over >100 terms).
"""

from __future__ import annotations

import numpy as np
import pytest

from verjus import rf

torch = pytest.importorskip(
    "torch", reason="PyTorch is the reference these tests compare verjus.rf with"
)

VALUE_TOL = {"rtol": 1e-5, "atol": 1e-6}
GRAD_TOL = {"rtol": 1e-4, "atol": 1e-6}


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def t(array: np.ndarray, grad: bool = False):
    return torch.tensor(np.asarray(array), requires_grad=grad)


def test_mlp_cross_entropy_values_and_gradients() -> None:
    feat, hidden, hidden2, classes = (
        rf.Dim(6, name="feat"),
        rf.Dim(16, name="hidden"),
        rf.Dim(12, name="hidden2"),
        rf.Dim(5, name="classes"),
    )
    rf.set_random_seed(11)
    model = rf.Sequential(
        rf.Linear(feat, hidden),
        rf.relu,
        rf.Linear(hidden, hidden2),
        rf.relu,
        rf.Linear(hidden2, classes),
    )
    for p in model.parameters():  # non-zero biases too
        p.assign(p.numpy() + rng(1).uniform(-0.1, 0.1, p.shape).astype(np.float32))
    xv = rng(2).standard_normal((10, 6)).astype(np.float32)
    labels = rng(3).integers(0, 5, 10)
    x = rf.convert_to_tensor(xv, dims=[rf.batch_dim, feat])
    y = rf.convert_to_tensor(labels, dims=[rf.batch_dim], sparse_dim=classes)
    ce = rf.cross_entropy(estimated=model(x), target=y, axis=classes, estimated_type="logits")
    loss = rf.reduce_mean(ce, axis=rf.batch_dim)
    loss.backward()

    # PyTorch keeps Linear weights as [out, in]; rf as [in, out].
    tw = {n: t(p.numpy(), grad=True) for n, p in model.named_parameters()}
    h = torch.relu(t(xv) @ tw["0.weight"] + tw["0.bias"])
    h = torch.relu(h @ tw["2.weight"] + tw["2.bias"])
    logits = h @ tw["4.weight"] + tw["4.bias"]
    torch_ce = torch.nn.functional.cross_entropy(logits, t(labels), reduction="none")
    torch_ce.mean().backward()

    np.testing.assert_allclose(ce.numpy(), torch_ce.detach().numpy(), **VALUE_TOL)
    np.testing.assert_allclose(loss.numpy(), torch_ce.mean().item(), **VALUE_TOL)
    for name, p in model.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), tw[name].grad.numpy(), **GRAD_TOL)
    # The gradient by the input as well.
    xg = rf.convert_to_tensor(xv, dims=[rf.batch_dim, feat], requires_grad=True)
    ce2 = rf.cross_entropy(estimated=model(xg), target=y, axis=classes, estimated_type="logits")
    dx = rf.gradient(rf.reduce_sum(ce2, axis=rf.batch_dim), xg)
    tx = t(xv, grad=True)
    h = torch.relu(torch.relu(tx @ tw["0.weight"] + tw["0.bias"]) @ tw["2.weight"] + tw["2.bias"])
    torch.nn.functional.cross_entropy(
        h @ tw["4.weight"] + tw["4.bias"], t(labels), reduction="sum"
    ).backward()
    np.testing.assert_allclose(dx.numpy(), tx.grad.numpy(), **GRAD_TOL)


def test_layer_norm() -> None:
    feat = rf.Dim(24, name="feat")
    norm = rf.LayerNorm(feat, eps=1e-6)
    norm.scale.assign(rng(4).uniform(0.5, 1.5, 24))
    norm.bias.assign(rng(5).uniform(-0.5, 0.5, 24))
    xv = (rng(6).standard_normal((7, 24)) * 3 + 1).astype(np.float32)
    r = rng(7).uniform(-1, 1, (7, 24)).astype(np.float32)
    x = rf.convert_to_tensor(xv, dims=[rf.batch_dim, feat], requires_grad=True)
    y = norm(x)
    total = rf.reduce_sum(
        y * rf.convert_to_tensor(r, dims=[rf.batch_dim, feat]), axis=[rf.batch_dim, feat]
    )
    dx = rf.gradient(total, x)
    total.backward()

    tx, ts, tb = t(xv, True), t(norm.scale.numpy(), True), t(norm.bias.numpy(), True)
    ty = torch.nn.functional.layer_norm(tx, (24,), ts, tb, eps=1e-6)
    (ty * t(r)).sum().backward()
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dx.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(norm.scale.grad.numpy(), ts.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(norm.bias.grad.numpy(), tb.grad.numpy(), **GRAD_TOL)


def test_embedding_with_repeated_indices() -> None:
    vocab, emb = rf.Dim(9, name="vocab"), rf.Dim(4, name="emb")
    rf.set_random_seed(12)
    embed = rf.Embedding(vocab, emb)
    ids = np.array([[1, 4, 4], [8, 1, 0]], np.int64)
    time = rf.Dim(3, name="time")
    x = rf.convert_to_tensor(ids, dims=[rf.batch_dim, time], sparse_dim=vocab)
    r = rng(8).uniform(-1, 1, (2, 3, 4)).astype(np.float32)
    y = embed(x)
    assert y.dims == (rf.batch_dim, time, emb)
    rf.reduce_sum(
        y * rf.convert_to_tensor(r, dims=[rf.batch_dim, time, emb]), axis=[rf.batch_dim, time, emb]
    ).backward()

    tw = t(embed.weight.numpy(), True)
    ty = torch.nn.functional.embedding(t(ids), tw)
    (ty * t(r)).sum().backward()
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), **VALUE_TOL)
    np.testing.assert_allclose(embed.weight.grad.numpy(), tw.grad.numpy(), **GRAD_TOL)


def dynamic_input(lengths: list[int], feat: int, seed: int):
    """x [batch, time, feat] in rf (time dynamic) and the numpy values and mask."""
    lens = rf.convert_to_tensor(np.array(lengths, np.int32), dims=[rf.batch_dim])
    time, f = rf.Dim(lens, name="time"), rf.Dim(feat, name="feat")
    xv = rng(seed).standard_normal((len(lengths), max(lengths), feat)).astype(np.float32)
    mask = np.arange(max(lengths))[None, :] < np.array(lengths)[:, None]  # [batch, time]
    x = rf.convert_to_tensor(xv, dims=[rf.batch_dim, time, f], requires_grad=True)
    return x, time, xv, mask


@pytest.mark.parametrize("op", ["reduce_mean", "softmax"])
def test_masked_mean_and_softmax_over_a_dynamic_dim(op: str) -> None:
    x, time, xv, mask = dynamic_input([5, 2, 1, 4], 3, seed=9)
    y = getattr(rf, op)(x, axis=time)
    r = rng(10).uniform(-1, 1, y.shape).astype(np.float32)
    total = rf.reduce_sum(
        y * rf.convert_to_tensor(r, dims=list(y.dims)), axis=list(y.dims), use_mask=False
    )
    dx = rf.gradient(total, x)

    tx, tm = t(xv, True), t(mask)[:, :, None]  # mask [batch, time, 1]
    if op == "reduce_mean":
        ty = (tx * tm).sum(dim=1) / tm.sum(dim=1)
    else:
        ty = torch.softmax(tx.masked_fill(~tm, float("-inf")), dim=1)
    (ty * t(r)).sum().backward()
    want = ty.detach().numpy()
    np.testing.assert_allclose(y.numpy(), want, **VALUE_TOL)
    if op == "softmax":
        assert not y.numpy()[~mask].any()  # padding frames get exactly 0
    np.testing.assert_allclose(dx.numpy(), tx.grad.numpy(), **GRAD_TOL)
    assert not dx.numpy()[~mask].any()


def test_log_softmax_cross_entropy_over_a_dynamic_dim() -> None:
    classes = rf.Dim(6, name="classes")
    lens = rf.convert_to_tensor(np.array([4, 1, 3], np.int32), dims=[rf.batch_dim])
    time = rf.Dim(lens, name="time")
    mask = np.arange(4)[None, :] < np.array([4, 1, 3])[:, None]
    xv = rng(11).standard_normal((3, 4, 6)).astype(np.float32) * 2
    labels = rng(12).integers(0, 6, (3, 4))
    x = rf.convert_to_tensor(xv, dims=[rf.batch_dim, time, classes], requires_grad=True)
    target = rf.convert_to_tensor(labels, dims=[rf.batch_dim, time], sparse_dim=classes)
    log_probs = rf.log_softmax(x, axis=classes)
    ce = rf.cross_entropy(
        estimated=log_probs, target=target, axis=classes, estimated_type="log-probs"
    )
    total = rf.reduce_sum(ce, axis=[rf.batch_dim, time])  # masks the padding frames
    dx = rf.gradient(total, x)
    ce_logits = rf.cross_entropy(estimated=x, target=target, axis=classes, estimated_type="logits")

    tx = t(xv, True)
    tce = torch.nn.functional.cross_entropy(
        tx.reshape(-1, 6), t(labels).reshape(-1), reduction="none"
    ).reshape(3, 4)
    (tce * t(mask)).sum().backward()
    np.testing.assert_allclose(
        log_probs.numpy(), torch.log_softmax(tx, -1).detach().numpy(), **VALUE_TOL
    )
    np.testing.assert_allclose(ce.numpy()[mask], tce.detach().numpy()[mask], **VALUE_TOL)
    np.testing.assert_allclose(ce_logits.numpy()[mask], tce.detach().numpy()[mask], **VALUE_TOL)
    np.testing.assert_allclose(total.numpy(), (tce * t(mask)).sum().item(), **VALUE_TOL)
    np.testing.assert_allclose(dx.numpy(), tx.grad.numpy(), **GRAD_TOL)


@pytest.mark.parametrize(
    ("name", "reference"),
    [
        ("softplus", lambda x: torch.nn.functional.softplus(x)),
        ("log_sigmoid", lambda x: torch.nn.functional.logsigmoid(x)),
        ("gelu", lambda x: torch.nn.functional.gelu(x)),
        ("sigmoid", torch.sigmoid),
    ],
)
def test_elementwise_activation_values_and_gradients(name: str, reference) -> None:
    """Over a wide range (where naive softplus overflows and naive log-sigmoid
    loses everything): values and gradients as PyTorch's."""
    feat = rf.Dim(64, name="feat")
    xv = np.concatenate([np.linspace(-40, 40, 32), rng(8).standard_normal(32) * 3]).astype(
        np.float32
    )
    r = rng(9).uniform(-1, 1, 64).astype(np.float32)
    x = rf.convert_to_tensor(xv, dims=[feat], requires_grad=True)
    y = getattr(rf, name)(x)
    total = rf.reduce_sum(y * rf.convert_to_tensor(r, dims=[feat]), axis=feat)
    dx = rf.gradient(total, x)

    tx = t(xv, True)
    ty = reference(tx)
    (ty * t(r)).sum().backward()
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), **VALUE_TOL)
    np.testing.assert_allclose(dx.numpy(), tx.grad.numpy(), **GRAD_TOL)
