"""``rf.moments`` / ``rf.BatchNorm`` with RETURNN's ``distributed`` and
``compute_dtype`` options: one worker, so the local statistics."""

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


def test_distributed_moments_are_the_local_ones() -> None:
    batch, feat = Dim(2, name="batch"), Dim(3, name="feat")
    time = Dim(rf.convert_to_tensor(np.array([5, 3], np.int32), dims=[batch]), name="time")
    rng = np.random.default_rng(0)
    x = rf.convert_to_tensor(
        1e3 + 0.1 * rng.standard_normal((2, 5, 3)).astype(np.float32), dims=[batch, time, feat]
    )
    got = rf.moments(x, axis=[batch, time], distributed=True, compute_dtype="float32")
    want = rf.moments(x, axis=[batch, time])
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    rows = np.concatenate([x.numpy()[0], x.numpy()[1, :3]])
    np.testing.assert_allclose(got[0].numpy(), rows.mean(0), rtol=1e-6)
    np.testing.assert_allclose(got[1].numpy(), rows.var(0), rtol=1e-2)


def test_moments_rejects_other_compute_dtypes() -> None:
    feat = Dim(3, name="feat")
    with pytest.raises(ValueError, match=r"moments: compute_dtype must be None or 'float32'"):
        rf.moments(rf.ones([feat]), axis=feat, compute_dtype="bfloat16")


def test_distributed_batch_norm_is_the_local_one() -> None:
    feat, n = Dim(2, name="feat"), Dim(4, name="n")
    x = rf.convert_to_tensor(np.arange(8, dtype=np.float32).reshape(4, 2), dims=[n, feat])
    rf.init_train_step_run_ctx(train_flag=True)
    a = rf.BatchNorm(feat, distributed=True)(x).numpy()
    b = rf.BatchNorm(feat)(x).numpy()
    np.testing.assert_array_equal(a, b)
