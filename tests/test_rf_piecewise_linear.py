"""``rf.PiecewiseLinear``, ``rf.PiecewiseLinearStepwiseScheduler`` and
``rf.RunningMean``: against ``np.interp`` / a numpy moving average (masked over
a dynamic dim), finite-difference gradients, against RETURNN's own on its
torch backend, parameter names, and bad input.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_rf_grad import check_gradient

from verjus import rf

POINTS = {0: 1.0, 10: 0.5, 4: 3.0, 20: -1.0}


def test_piecewise_linear_against_np_interp() -> None:
    f = rf.PiecewiseLinear(POINTS)
    xs = np.array([-5, 0, 2, 4, 7.5, 10, 15, 20, 30], np.float32)
    d = rf.Dim(len(xs), name="x")
    y = f(rf.convert_to_tensor(xs, dims=[d]))
    keys = sorted(POINTS)
    want = np.interp(xs, keys, [POINTS[k] for k in keys])
    assert y.dims == (d,)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-6, atol=1e-6)
    assert sorted(n for n, _ in f.named_parameters()) == ["_keys", "_values"]
    assert float(rf.PiecewiseLinear({3: 2.5})(7.0).numpy()) == 2.5


def test_piecewise_linear_tensor_values_and_gradient() -> None:
    feat = rf.Dim(2, name="f")
    vals = {0: rf.convert_to_tensor(np.array([0.0, 1.0]), dims=[feat])}
    vals[5] = rf.convert_to_tensor(np.array([10.0, -1.0]), dims=[feat])
    f = rf.PiecewiseLinear(vals)
    y = f(rf.convert_to_tensor(2.0))
    np.testing.assert_allclose(y.numpy(), [4.0, 0.2], rtol=1e-6)
    xs = np.array([0.5, 1.5, 3.2, 4.4], np.float32)  # away from the kinks
    check_gradient(f, xs, [rf.Dim(4, name="x")])


def test_stepwise_scheduler_reads_the_run_ctx_step() -> None:
    sched = rf.PiecewiseLinearStepwiseScheduler({0: 1.0, 100: 0.0})
    rf.init_train_step_run_ctx(step=25)
    try:
        assert float(sched("ignored", x=1).numpy()) == pytest.approx(0.75)
        rf.init_train_step_run_ctx(step=150)
        assert float(sched().numpy()) == 0.0
    finally:
        rf.init_forward_step_run_ctx()
    assert float(sched().numpy()) == 1.0  # step 0


def test_piecewise_linear_against_returnn_on_its_torch_backend() -> None:
    torch = pytest.importorskip("torch", reason="RETURNN's rf runs on its torch backend")
    pytest.importorskip("returnn", reason="RETURNN's own PiecewiseLinear is the reference")
    import returnn.frontend as rrf
    from returnn.tensor import Dim, Tensor

    rrf.select_backend_torch()
    xs = np.array([-5, 0, 2, 4, 7.5, 10, 15, 20, 30], np.float32)
    td = Dim(len(xs), name="x")
    theirs = rrf.PiecewiseLinear(POINTS)(
        Tensor("x", [td], "float32", raw_tensor=torch.from_numpy(xs))
    )
    mine = rf.PiecewiseLinear(POINTS)(rf.convert_to_tensor(xs, dims=[rf.Dim(len(xs), name="x")]))
    np.testing.assert_allclose(mine.numpy(), theirs.raw_tensor.numpy(), rtol=1e-6, atol=1e-6)


def test_running_mean_masked_and_only_in_training() -> None:
    lens = [3, 1]
    time = rf.Dim(rf.convert_to_tensor(np.array(lens, np.int32), dims=[rf.batch_dim]), name="t")
    feat = rf.Dim(2, name="f")
    xv = np.random.default_rng(0).standard_normal((2, 3, 2)).astype(np.float32)
    xv[1, 1:] = 1e4  # padding must not reach the mean
    x = rf.convert_to_tensor(xv, dims=[rf.batch_dim, time, feat])
    rm = rf.RunningMean(feat, alpha=0.25)
    assert [n for n, _ in rm.named_parameters()] == ["mean"]
    rf.init_forward_step_run_ctx()
    np.testing.assert_array_equal(rm(x).numpy(), [0.0, 0.0])
    rf.init_train_step_run_ctx()
    try:
        frames = np.concatenate([xv[0, :3], xv[1, :1]])
        want = 0.25 * frames.mean(axis=0)
        np.testing.assert_allclose(rm(x).numpy(), want, rtol=1e-5)
        want = want + 0.25 * (frames.mean(axis=0) - want)
        np.testing.assert_allclose(rm(x).numpy(), want, rtol=1e-5)
    finally:
        rf.init_forward_step_run_ctx()
    prob = rf.RunningMean(rf.Dim(4, name="v"), alpha=0.1, is_prob_distribution=True)
    np.testing.assert_allclose(prob.mean.numpy(), [0.25] * 4)
    always = rf.RunningMean(feat, alpha=1.0, update_only_in_train=False)
    np.testing.assert_allclose(always(x).numpy(), frames.mean(axis=0), rtol=1e-5)


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="PiecewiseLinear: points must not be empty"):
        rf.PiecewiseLinear({})
    with pytest.raises(ValueError, match="PiecewiseLinear: the values must all have the same dims"):
        rf.PiecewiseLinear(
            {0: 1.0, 1: rf.convert_to_tensor(np.zeros(2), dims=[rf.Dim(2, name="f")])}
        )
    rm = rf.RunningMean(rf.Dim(2, name="f"), alpha=0.1)
    x = rf.convert_to_tensor(np.zeros(3, np.float32), dims=[rf.Dim(3, name="g")])
    with pytest.raises(ValueError, match=r"RunningMean: \['f'\] not among"):
        rm(x)
