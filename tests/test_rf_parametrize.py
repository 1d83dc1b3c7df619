"""rf parametrizations: register/remove/is_parametrized, weight_dropout,
weight_noise, weight_norm (RETURNN's and PyTorch's semantics), finite
differences through them, bitwise-equal gradients with and without the
gradient checkpoint scope, and saving a parametrized module."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pytest

from verjus import rf


@pytest.fixture(autouse=True)
def _eval_mode() -> Iterator[None]:
    rf.init_forward_step_run_ctx()
    yield
    rf.init_forward_step_run_ctx()


def _linear(seed: int = 1, n_in: int = 6, n_out: int = 5) -> tuple[rf.Linear, rf.Dim, rf.Dim]:
    rf.set_random_seed(seed)
    i, o = rf.Dim(n_in, name="in"), rf.Dim(n_out, name="out")
    return rf.Linear(i, o), i, o


def _input(dim: rf.Dim, seed: int = 0) -> rf.Tensor:
    x = np.random.default_rng(seed).standard_normal((3, dim.dimension)).astype(np.float32)
    return rf.convert_to_tensor(x, dims=[rf.batch_dim, dim])


def test_register_keeps_the_parameters_and_remove_restores_the_class() -> None:
    lin, _, _ = _linear()
    weight = lin.weight
    before = list(lin.named_parameters())
    rf.weight_noise(lin, "weight", std=0.1)
    assert rf.is_parametrized(lin)
    assert rf.is_parametrized(lin, "weight")
    assert not rf.is_parametrized(lin, "bias")
    assert isinstance(lin, rf.Linear)
    assert type(lin) is not rf.Linear
    assert [(n, id(p)) for n, p in lin.named_parameters()] == [(n, id(p)) for n, p in before]
    # Inference: the parameter itself.
    assert lin.weight is weight
    other, _, _ = _linear()
    assert type(other) is rf.Linear
    assert not rf.is_parametrized(other)
    rf.remove_parametrization(lin, "weight")
    assert type(lin) is rf.Linear
    assert lin.weight is weight
    with pytest.raises(ValueError, match="not parametrized"):
        rf.remove_parametrization(lin, "weight")
    with pytest.raises(TypeError, match=r"not an rf\.Parameter"):
        rf.weight_noise(lin, "in_dim", std=0.1)


def test_parametrizations_compose_in_order_and_assign_sets_the_original() -> None:
    lin, _, _ = _linear()
    w = lin.weight.numpy()
    rf.register_parametrization(lin, "weight", lambda x: x * 2.0)
    rf.register_parametrization(lin, "weight", lambda x: x + 1.0)
    np.testing.assert_allclose(lin.weight.numpy(), w * 2.0 + 1.0, rtol=1e-6)
    original = vars(lin)["weight"]
    lin.weight = np.zeros(w.shape, np.float32)
    np.testing.assert_array_equal(original.numpy(), 0.0)
    np.testing.assert_array_equal(lin.weight.numpy(), 1.0)


def test_weight_dropout_statistics_in_training_only() -> None:
    rf.set_random_seed(3)
    a, b = rf.Dim(200, name="a"), rf.Dim(300, name="b")

    class Holder(rf.Module):
        def __init__(self) -> None:
            self.w = rf.Parameter([a, b], initial=1.0)

    m = rf.weight_dropout(Holder(), "w", drop_prob=0.3)
    np.testing.assert_array_equal(m.w.numpy(), 1.0)
    with rf.get_run_ctx().train_flag_ctx(True):
        first, second = m.w.numpy(), m.w.numpy()
    assert not rf.get_run_ctx().train_flag
    assert abs((first == 0).mean() - 0.3) < 0.01
    np.testing.assert_allclose(first[first != 0], 1 / 0.7, rtol=1e-6)
    assert (first != second).any(), "each access draws a new mask"
    with pytest.raises(ValueError, match="drop_prob"):
        rf.weight_dropout(Holder(), "w", drop_prob=1.0)


def test_weight_noise_statistics_in_training_only() -> None:
    rf.set_random_seed(4)
    a, b = rf.Dim(300, name="a"), rf.Dim(300, name="b")

    class Holder(rf.Module):
        def __init__(self) -> None:
            self.w = rf.Parameter([a, b], initial=2.0)

    m = rf.weight_noise(Holder(), "w", std=0.25)
    np.testing.assert_array_equal(m.w.numpy(), 2.0)
    rf.init_train_step_run_ctx()
    noise = m.w.numpy() - 2.0
    assert abs(noise.mean()) < 0.005
    assert abs(noise.std() - 0.25) < 0.005


def _fd_check(loss: Callable[[], rf.Tensor], param: rf.Parameter, seed: int) -> None:
    """``param.grad`` of ``loss`` against central differences (the random
    stream restarted at ``seed`` before each evaluation)."""
    param.zero_grad()
    rf.set_random_seed(seed)
    loss().backward()
    analytic = param.grad.numpy()
    values = param.numpy().astype(np.float64)
    eps = 1e-2
    numeric = np.zeros_like(values)
    for idx in np.ndindex(values.shape):
        out = []
        for sign in (1, -1):
            v = values.copy()
            v[idx] += sign * eps
            param.assign(v.astype(np.float32))
            rf.set_random_seed(seed)
            out.append(float(loss().numpy()))
        numeric[idx] = (out[0] - out[1]) / (2 * eps)
    param.assign(values.astype(np.float32))
    np.testing.assert_allclose(analytic, numeric, rtol=2e-2, atol=2e-3)


@pytest.mark.parametrize("kind", ["dropout", "noise", "norm"])
def test_finite_differences_through_the_parametrization(kind: str) -> None:
    lin, i, o = _linear(n_in=3, n_out=4)
    x = _input(i)
    if kind == "dropout":
        rf.weight_dropout(lin, "weight", drop_prob=0.4)
    elif kind == "noise":
        rf.weight_noise(lin, "weight", std=0.3)
    else:
        rf.weight_norm(lin, "weight", dim=o)
    rf.init_train_step_run_ctx()
    target = vars(lin)["weight"]
    param = target.v if kind == "norm" else target

    def loss() -> rf.Tensor:
        return rf.reduce_sum(rf.tanh(lin(x)), axis=[rf.batch_dim, o])

    _fd_check(loss, param, seed=11)
    if kind == "norm":
        _fd_check(loss, target.g, seed=11)


def test_gradients_are_bitwise_equal_with_and_without_the_scope() -> None:
    def grads(scoped: bool) -> list[np.ndarray]:
        lin, i, o = _linear(seed=5)
        x = _input(i, seed=2)
        rf.set_random_seed(9)
        w = lin.weight
        if scoped:
            with rf.gradient_checkpoint_scope():
                w = w + rf.random_normal(list(w.dims), stddev=0.2)
                w = rf.dropout(w, 0.3, on_forward=True)
        else:
            w = rf.dropout(w + rf.random_normal(list(w.dims), stddev=0.2), 0.3, on_forward=True)
        y = rf.matmul(x, w, reduce=i) + lin.bias
        rf.reduce_sum(rf.exp(rf.tanh(y)), axis=[rf.batch_dim, o]).backward()
        return [p.grad.numpy() for p in lin.parameters()]

    for a, b in zip(grads(False), grads(True), strict=False):
        np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))


def test_weight_norm_starts_at_the_weight_and_has_g_and_v() -> None:
    lin, _i, o = _linear()
    w = lin.weight.numpy()
    rf.weight_norm(lin, "weight", dim=o)
    assert [n for n, _ in lin.named_parameters()] == ["bias", "weight.v", "weight.g"]
    assert vars(lin)["weight"].g.dims == (o,)
    np.testing.assert_allclose(lin.weight.numpy(), w, rtol=1e-5)
    np.testing.assert_allclose(vars(lin)["weight"].g.numpy(), np.linalg.norm(w, axis=0), rtol=1e-5)
    rf.remove_parametrization(lin, "weight")
    assert isinstance(lin.weight, rf.Parameter)
    np.testing.assert_allclose(lin.weight.numpy(), w, rtol=1e-5)
    with pytest.raises(ValueError, match="not one of"):
        rf.weight_norm(lin, "weight", dim=rf.Dim(5, name="other"))


def test_weight_norm_against_torch() -> None:
    torch = pytest.importorskip("torch")
    lin, i, o = _linear(n_in=4, n_out=3)
    x = _input(i, seed=4)
    ref = torch.nn.Linear(4, 3, bias=False)
    with torch.no_grad():
        ref.weight.copy_(torch.from_numpy(lin.weight.numpy().T))
    ref = torch.nn.utils.parametrizations.weight_norm(ref, "weight", dim=0)
    rf.weight_norm(lin, "weight", dim=o)
    norm = vars(lin)["weight"]
    with torch.no_grad():
        ref.parametrizations.weight.original0.mul_(1.5)
    norm.g.assign(norm.g.numpy() * 1.5)
    y = rf.matmul(x, lin.weight, reduce=i)
    ry = ref(torch.from_numpy(x.numpy()))
    np.testing.assert_allclose(y.numpy(), ry.detach().numpy(), rtol=1e-5, atol=1e-6)
    rf.reduce_sum(rf.tanh(y), axis=[rf.batch_dim, o]).backward()
    torch.tanh(ry).sum().backward()
    p = ref.parametrizations.weight
    np.testing.assert_allclose(norm.g.grad.numpy(), p.original0.grad.numpy()[:, 0], rtol=1e-4)
    np.testing.assert_allclose(
        norm.v.grad.numpy(), p.original1.grad.numpy().T, rtol=1e-4, atol=1e-6
    )


def test_saved_file_equals_the_plain_modules_and_loading_keeps_the_parametrization(
    tmp_path: object,
) -> None:
    plain, _, _ = _linear(seed=7)
    noisy, _, _ = _linear(seed=7)
    rf.weight_noise(noisy, "weight", std=0.5)
    rf.weight_dropout(noisy, "bias", drop_prob=0.5)
    rf.init_train_step_run_ctx()
    rf.save_state(plain, f"{tmp_path}/plain.safetensors")
    rf.save_state(noisy, f"{tmp_path}/noisy.safetensors")
    with (
        open(f"{tmp_path}/plain.safetensors", "rb") as a,
        open(f"{tmp_path}/noisy.safetensors", "rb") as b,
    ):
        assert a.read() == b.read()
    loaded, _, _ = _linear(seed=8)
    rf.weight_noise(loaded, "weight", std=0.5)
    rf.load_state(loaded, f"{tmp_path}/noisy.safetensors")
    assert rf.is_parametrized(loaded, "weight")
    assert not rf.is_parametrized(loaded, "bias")
    np.testing.assert_array_equal(vars(loaded)["weight"].numpy(), plain.weight.numpy())
    np.testing.assert_array_equal(loaded.bias.numpy(), plain.bias.numpy())
    assert not np.array_equal(loaded.weight.numpy(), plain.weight.numpy())
    with rf.get_run_ctx().train_flag_ctx(False):
        np.testing.assert_array_equal(loaded.weight.numpy(), plain.weight.numpy())


def test_against_returnn_semantics() -> None:
    """RETURNN's weight_dropout/weight_noise on its torch backend: in inference
    the module's weight is the parameter and its parameter list is unchanged;
    in training the statistics are the same as ours."""
    pytest.importorskip("torch")
    rrf = pytest.importorskip("returnn.frontend")
    from returnn.tensor import Dim as RDim

    rrf.select_backend_torch()
    a, b = RDim(200, name="a"), RDim(300, name="b")
    ref = rrf.Linear(a, b)
    names = [n for n, _ in ref.named_parameters()]
    rrf.weight_dropout(ref, "weight", drop_prob=0.3)
    assert [n for n, _ in ref.named_parameters()] == names
    rrf.init_forward_step_run_ctx()
    assert isinstance(ref.weight, rrf.Parameter)
    rrf.init_train_step_run_ctx(train_flag=True)
    ref_w = ref.weight.raw_tensor.detach().numpy()
    orig = vars(ref)["weight"].raw_tensor.detach().numpy()
    ref_zero = (ref_w == 0).mean()

    ours, _, _ = _linear(n_in=200, n_out=300)
    rf.weight_dropout(ours, "weight", drop_prob=0.3)
    rf.init_train_step_run_ctx()
    our_w, our_orig = ours.weight.numpy(), vars(ours)["weight"].numpy()
    assert abs((our_w == 0).mean() - ref_zero) < 0.02
    kept = our_w != 0
    np.testing.assert_allclose(our_w[kept], our_orig[kept] / 0.7, rtol=1e-5)
    ref_kept = ref_w != 0
    np.testing.assert_allclose(ref_w[ref_kept], orig[ref_kept] / 0.7, rtol=1e-5)
