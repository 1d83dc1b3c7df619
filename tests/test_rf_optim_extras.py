"""What the engine needs of the RF optimizers: NAdam (against a numpy
transcription of ``torch.optim.NAdam``, and torch itself where installed), the
learning rate set between steps, clipping by value and by a global norm over
several optimizers, and the state saved and restored."""

from __future__ import annotations

import numpy as np
import pytest

import verjus.rf as rf
from verjus import optim

dim = rf.Dim(5, name="dim")


def nadam_reference(p, grads, *, lr, betas, eps, weight_decay, momentum_decay, decoupled):
    """``torch.optim.NAdam``'s single-tensor update, step by step, in float64."""
    beta1, beta2 = betas
    p = p.astype(np.float64)
    m = np.zeros_like(p)
    v = np.zeros_like(p)
    mu_product = 1.0
    for step, g in enumerate(grads, start=1):
        g = g.astype(np.float64)
        if weight_decay:
            if decoupled:
                p = p * (1 - lr * weight_decay)
            else:
                g = g + weight_decay * p
        mu = beta1 * (1.0 - 0.5 * 0.96 ** (step * momentum_decay))
        mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((step + 1) * momentum_decay))
        mu_product *= mu
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        denom = np.sqrt(v / (1 - beta2**step)) + eps
        p = p - lr * (1 - mu) / (1 - mu_product) * g / denom
        p = p - lr * mu_next / (1 - mu_product * mu_next) * m / denom
    return p


def run_nadam(start, grads, **settings):
    param = rf.Parameter([dim])
    param.assign(start)
    opt = optim.NAdam([param], **settings)
    for g in grads:
        opt.zero_grad()
        loss = rf.reduce_sum(param * rf.convert_to_tensor(g, dims=[dim]), axis=dim)
        loss.backward()
        opt.step()
    return param.numpy()


SETTINGS = [
    {"lr": 2e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.0, "momentum_decay": 0.004},
    {"lr": 1e-2, "betas": (0.8, 0.99), "eps": 1e-6, "weight_decay": 0.1, "momentum_decay": 0.01},
]


@pytest.mark.parametrize("decoupled", [False, True])
@pytest.mark.parametrize("settings", SETTINGS)
def test_nadam_is_torchs_update(settings, decoupled):
    rng = np.random.default_rng(0)
    start = rng.standard_normal(5).astype(np.float32)
    grads = [rng.standard_normal(5).astype(np.float32) for _ in range(30)]
    got = run_nadam(start, grads, decoupled_weight_decay=decoupled, **settings)
    want = nadam_reference(start, grads, decoupled=decoupled, **settings)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_nadam_equals_torch_itself():
    torch = pytest.importorskip("torch", reason="torch is not installed")
    rng = np.random.default_rng(1)
    start = rng.standard_normal(5).astype(np.float32)
    grads = [rng.standard_normal(5).astype(np.float32) for _ in range(20)]
    p = torch.tensor(start, requires_grad=True)
    opt = torch.optim.NAdam([p], lr=5e-3, weight_decay=0.01)
    for g in grads:
        opt.zero_grad()
        (p * torch.tensor(g)).sum().backward()
        opt.step()
    got = run_nadam(start, grads, lr=5e-3, weight_decay=0.01)
    np.testing.assert_allclose(got, p.detach().numpy(), rtol=1e-5, atol=1e-6)


def grad_step(param, values):
    loss = rf.reduce_sum(
        param * rf.convert_to_tensor(np.asarray(values, np.float32), dims=[dim]), axis=dim
    )
    loss.backward()


def test_learning_rate_set_between_steps():
    param = rf.Parameter([dim])
    param.assign(np.zeros(5, np.float32))
    opt = optim.SGD([param], lr=1.0)
    grad_step(param, np.ones(5))
    opt.set_lr(0.25)
    opt.step()
    np.testing.assert_allclose(param.numpy(), -0.25)
    with pytest.raises(ValueError, match="lr"):
        opt.set_lr(-1.0)
    assert opt.lr == 0.25


def test_clip_by_value_then_by_global_norm_over_two_optimizers():
    a, b = rf.Parameter([dim]), rf.Parameter([dim])
    for p in (a, b):
        p.assign(np.zeros(5, np.float32))
    opts = [optim.SGD([a], lr=1.0), optim.SGD([b], lr=1.0)]
    grad_step(a, [3.0, -3.0, 0.5, 0.0, 0.0])
    grad_step(b, [0.0, 0.0, 0.0, 4.0, 0.0])
    opts[0].clip_grad_value_(1.0)
    np.testing.assert_allclose(a.grad.numpy(), [1.0, -1.0, 0.5, 0.0, 0.0])
    norm = optim.clip_grad_norm_(opts, 1.0)
    assert norm == pytest.approx(np.sqrt(1 + 1 + 0.25 + 16))
    scale = 1.0 / (norm + 1e-6)
    np.testing.assert_allclose(b.grad.numpy(), [0, 0, 0, 4 * scale, 0], rtol=1e-6)
    with pytest.raises(ValueError, match="finite and > 0"):
        opts[0].clip_grad_value_(0.0)


def test_state_round_trip_continues_identically():
    rng = np.random.default_rng(2)
    grads = [rng.standard_normal(5) for _ in range(6)]

    def fresh():
        p = rf.Parameter([dim])
        p.assign(np.linspace(-1, 1, 5).astype(np.float32))
        return p, optim.Adam([p], lr=0.1)

    p1, o1 = fresh()
    for g in grads:
        o1.zero_grad(), grad_step(p1, g), o1.step()
    p2, o2 = fresh()
    for g in grads[:3]:
        o2.zero_grad(), grad_step(p2, g), o2.step()
    state = o2.state_dict()
    p3, o3 = fresh()
    p3.assign(p2.numpy())
    o3.load_state_dict(state)
    for g in grads[3:]:
        o3.zero_grad(), grad_step(p3, g), o3.step()
    np.testing.assert_array_equal(p3.numpy(), p1.numpy())
    assert o3.steps == 6


def test_a_bad_state_is_refused_and_changes_nothing():
    p = rf.Parameter([dim])
    opt = optim.Adam([p], lr=0.1)
    state = opt.state_dict()
    bad = dict(state, params=[(1, [np.zeros(4, np.float32), np.zeros(5, np.float32)])])
    with pytest.raises(ValueError, match="buffer m is F32 \\[4\\]"):
        opt.load_state_dict(bad)
    negative = dict(state, params=[(1, [np.zeros(5, np.float32), -np.ones(5, np.float32)])])
    with pytest.raises(ValueError, match="buffer v holds a value it can never hold"):
        opt.load_state_dict(negative)
    with pytest.raises(ValueError, match="this optimizer keeps \\['m', 'v'\\]"):
        opt.load_state_dict(dict(state, slot_names=["velocity"]))
    assert opt.state_dict()["params"][0][0] == 0
