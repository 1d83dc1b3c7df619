"""Train flags per function (``RunCtx.train_flag_ctx(flag, func=...)``, RETURNN's
``is_train_flag_enabled(func=...)``) and what dropout and BatchNorm read."""

from __future__ import annotations

import numpy as np
import pytest

import verjus.rf as rf
from verjus.rf import Dim


@pytest.fixture(autouse=True)
def _fresh_run_ctx():
    """These tests set the global run context; later tests expect none."""
    yield
    rf.reset_run_ctx()


def test_func_flag_overrides_only_that_function() -> None:
    rf.init_train_step_run_ctx(train_flag=False)
    ctx = rf.get_run_ctx()
    with ctx.train_flag_ctx(True, func=rf.dropout):
        assert ctx.train_flag is False
        assert ctx.is_train_flag_enabled(func=rf.dropout) is True
        assert ctx.is_train_flag_enabled(func=rf.BatchNorm.__call__) is False
        with ctx.train_flag_ctx(False, func=[rf.dropout, rf.BatchNorm.__call__]):
            assert ctx.is_train_flag_enabled(func=rf.dropout) is False
        assert ctx.is_train_flag_enabled(func=rf.dropout) is True
    assert ctx.is_train_flag_enabled(func=rf.dropout) is False
    with (
        pytest.raises(TypeError, match=r"train_flag_ctx: func must be a function"),
        ctx.train_flag_ctx(True, func=3),
    ):
        pass


def test_dropout_follows_its_own_flag() -> None:
    feat = Dim(1000, name="feat")
    x = rf.ones([feat])
    rf.init_train_step_run_ctx(train_flag=True)
    with rf.get_run_ctx().train_flag_ctx(False, func=rf.dropout):
        assert rf.dropout(x, 0.5) is x  # not training: the source itself
    rf.init_train_step_run_ctx(train_flag=False)
    with rf.get_run_ctx().train_flag_ctx(True, func=rf.dropout):
        y = rf.dropout(x, 0.5).numpy()
        assert (y == 0).any()
        assert np.allclose(y[y != 0], 2.0)
        z = rf.Dropout(0.5)(x).numpy()
        assert (z == 0).any()


def test_batch_norm_follows_its_own_flag() -> None:
    feat, n = Dim(2, name="feat"), Dim(4, name="n")
    x = rf.convert_to_tensor(np.arange(8, dtype=np.float32).reshape(4, 2), dims=[n, feat])
    norm = rf.BatchNorm(feat, use_mask=False)
    rf.init_train_step_run_ctx(train_flag=True)
    with rf.get_run_ctx().train_flag_ctx(False, func=rf.BatchNorm.__call__):
        out = norm(x).copy_transpose([n, feat]).numpy()  # the running statistics: 0 and 1
    np.testing.assert_allclose(out, x.numpy() / np.sqrt(1 + 1e-3), rtol=1e-5)
    np.testing.assert_allclose(norm.running_mean.numpy(), [0.0, 0.0])
