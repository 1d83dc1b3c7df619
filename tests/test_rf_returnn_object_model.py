"""RETURNN's object model on verjus: templates, TensorDict, Dims bound per batch,
the run context's losses and outputs, and the ``returnn.*`` import redirection."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import verjus.rf as rf
from verjus.rf import Dim, Tensor, TensorDict, batch_dim


def time_template() -> Dim:
    return Dim(Tensor("time", [batch_dim], "int32"))


def test_template_has_dims_but_no_values() -> None:
    feat = Dim(3, name="feat")
    x = Tensor("data", [batch_dim, feat], "float32")
    assert (x.name, x.dims, x.dtype, x.raw_tensor, x.is_template()) == (
        "data",
        (batch_dim, feat),
        "float32",
        None,
        True,
    )
    with pytest.raises(ValueError, match=r'"data" \[batch, feat\] is a template without values'):
        rf.reduce_sum(x, axis=feat)
    with pytest.raises(ValueError, match="sparse_dim needs an integer dtype"):
        Tensor("labels", [batch_dim], "float32", sparse_dim=feat)
    x.raw_tensor = np.ones((2, 3), np.float32)
    assert not x.is_template()
    np.testing.assert_array_equal(rf.reduce_sum(x, axis=feat).numpy(), [3.0, 3.0])
    template = x.copy_template(name="copy")
    assert (template.name, template.dims, template.is_template()) == ("copy", x.dims, True)


def test_dim_bound_per_batch_stays_the_same_object() -> None:
    time = time_template()
    assert time.dyn_size_ext.is_template()
    assert time.dyn_size_ext.dims == (batch_dim,)
    assert not time.is_dynamic()
    assert time.axis_size is None
    x = Tensor("x", [batch_dim, time], "float32")
    for lengths in ([3, 1], [2, 4, 1]):
        time.dyn_size_ext.raw_tensor = np.array(lengths, np.int32)
        assert time.is_dynamic()
        assert time.size == max(lengths)
        values = np.arange(len(lengths) * max(lengths), dtype=np.float32).reshape(len(lengths), -1)
        x.raw_tensor = values
        mean = rf.reduce_mean(x, axis=time).numpy()
        want = [values[b, :n].mean() for b, n in enumerate(lengths)]
        np.testing.assert_allclose(mean, want)
        assert (time + 1).dyn_size_ext.raw_tensor.tolist() == [n + 1 for n in lengths]
    time.dyn_size_ext = None
    assert not time.is_dynamic()
    assert time.dyn_size_ext.is_template()  # the template stays


def test_static_dim_sizes_cannot_be_set() -> None:
    feat = Dim(3, name="feat")
    with pytest.raises(ValueError, match=r'dim "feat" is static \(3\)'):
        feat.dyn_size_ext = rf.convert_to_tensor(np.array([1, 2], np.int32), dims=[batch_dim])


def test_dim_methods_from_tensor_api() -> None:
    time = time_template()
    time.dyn_size_ext.raw_tensor = np.array([2, 5, 3], np.int32)
    assert time.get_dim_value() == 5
    assert time.capacity == 5
    assert batch_dim.is_batch_dim()
    assert not time.is_batch_dim()
    assert time.dyn_size.tolist() == [2, 5, 3]
    np.testing.assert_array_equal(
        time.get_mask(dim_order=[batch_dim, time]).numpy(),
        np.arange(5)[None, :] < np.array([2, 5, 3])[:, None],
    )
    with pytest.raises(AttributeError, match='no attribute "no_such_method"'):
        time.no_such_method()


def test_tensor_dict_round_trip() -> None:
    time, feat = time_template(), Dim(4, name="feat")
    data = TensorDict(
        {
            "data": Tensor("data", [batch_dim, time, feat], "float32"),
            "classes": Tensor("classes", [batch_dim, time], "int32", sparse_dim=feat),
        }
    )
    data.fill_random_(rnd=3, batch_size=2)
    assert data.all_dims() == [batch_dim, time, feat]
    raw = data.as_raw_tensor_dict()
    assert sorted(raw) == [
        "classes",
        "classes:size0",
        "classes:size1",
        "data",
        "data:size0",
        "data:size1",
    ]
    assert int(raw["data:size0"]) == 2
    assert raw["data:size1"].shape == (2,)
    assert raw["classes"].max() < 4
    data.reset_content()
    assert data["data"].is_template()
    assert not time.is_dynamic()
    data.assign_from_raw_tensor_dict_(raw)
    np.testing.assert_array_equal(data["data"].raw_tensor, raw["data"])
    np.testing.assert_array_equal(time.dyn_size_ext.raw_tensor, raw["data:size1"])


def test_mark_as_output_orders_dims() -> None:
    time, feat = time_template(), Dim(2, name="feat")
    time.dyn_size_ext.raw_tensor = np.array([3, 1], np.int32)
    x = rf.convert_to_tensor(np.ones((3, 2, 2), np.float32), dims=[time, batch_dim, feat])
    rf.init_forward_step_run_ctx()
    x.mark_as_default_output()  # RETURNN's default: batch, the dynamic dim, the rest
    x.mark_as_output("f_first", shape=[feat, time, batch_dim])
    outputs = rf.get_run_ctx().outputs
    assert outputs["output"].dims == (batch_dim, time, feat)
    assert outputs["f_first"].raw_tensor.shape == (2, 3, 2)
    with pytest.raises(ValueError, match="already marked"):
        x.mark_as_default_output()
    with pytest.raises(RuntimeError, match="only in a training step"):
        x.mark_as_loss("ce")


def test_loss_arithmetic() -> None:
    time = time_template()
    lengths = np.array([3, 1], np.int32)
    time.dyn_size_ext.raw_tensor = lengths
    values = np.array([[1.0, 2.0, 3.0], [4.0, 100.0, 100.0]], np.float32)
    frames = rf.convert_to_tensor(values, dims=[batch_dim, time])
    rf.init_train_step_run_ctx(train_flag=True, step=5, epoch=2)
    ctx = rf.get_run_ctx()
    assert (ctx.step, ctx.epoch, ctx.is_train_flag_enabled()) == (5, 2, True)
    frames.mark_as_loss("ce", scale=0.5)
    (frames * 2.0).mark_as_loss("normalized", use_normalized_loss=True)
    frames.mark_as_loss("fer", as_error=True)
    ce = ctx.losses["ce"]
    assert float(ce.get_summed_loss().numpy()) == pytest.approx(10.0)
    assert float(ce.get_mean_loss().numpy()) == pytest.approx(2.5)
    assert int(np.asarray(ce.get_inv_norm_factor().numpy())) == 4
    # 0.5 * 10 + mean(2 * frames) = 5 + 5; the error is not optimized.
    assert float(ctx.total_loss().numpy()) == pytest.approx(10.0)
    rf.reset_run_ctx()


def test_operators_from_the_functional_forms() -> None:
    f = Dim(4, name="f")
    a = rf.convert_to_tensor(np.array([True, False, True, False]), dims=[f])
    b = rf.convert_to_tensor(np.array([True, True, False, False]), dims=[f])
    assert (a | b).numpy().tolist() == [True, True, True, False]
    assert (a & b).numpy().tolist() == [True, False, False, False]
    assert (~a).numpy().tolist() == [False, True, False, True]
    x = rf.convert_to_tensor(np.array([-7, -2, 5, 9], np.int32), dims=[f])
    assert (x % 3).numpy().tolist() == [2, 1, 2, 0]
    assert (x // 2).numpy().tolist() == [-4, -1, 2, 4]
    assert abs(x).numpy().tolist() == [7, 2, 5, 9]


def test_parameter_raw_tensor_keeps_the_leaf() -> None:
    f = Dim(3, name="f")
    p = rf.Parameter([f])
    p.raw_tensor = np.array([1.0, 2.0, 3.0], np.float32)
    rf.reduce_sum(p * p, axis=f).backward()
    np.testing.assert_allclose(p.grad.numpy(), [2.0, 4.0, 6.0])


def test_set_requires_gradient() -> None:
    f = Dim(3, name="f")
    x = rf.convert_to_tensor(np.array([1.0, 2.0, 3.0], np.float32), dims=[f])
    rf.set_requires_gradient(x)
    y = rf.reduce_sum(x * x, axis=f)
    np.testing.assert_allclose(rf.gradient(y, x).numpy(), [2.0, 4.0, 6.0])


def test_returnn_imports_resolve_to_verjus() -> None:
    from verjus.rf import returnn_compat

    returnn_compat.install()
    try:
        import returnn.frontend as returnn_rf
        import returnn.frontend.encoder.conformer as conformer
        from returnn.tensor import Dim as ReturnnDim
        from returnn.tensor import TensorDict as ReturnnTensorDict

        assert returnn_rf is rf
        assert ReturnnDim is Dim
        assert ReturnnTensorDict is TensorDict
        assert conformer is sys.modules["verjus.rf.encoder.conformer"]
        assert rf.__spec__.name == "verjus.rf"
    finally:
        returnn_compat.uninstall()
    assert sys.modules.get("returnn.frontend") is not rf  # RETURNN's own again, if imported
    assert not returnn_compat.is_installed()


def test_run_ctx_against_returnn() -> None:
    torch = pytest.importorskip("torch", reason="RETURNN's run context runs on its torch backend")
    pytest.importorskip("returnn", reason="RETURNN's own run context is the reference")
    import returnn.frontend as rrf
    from returnn.tensor import Dim as RDim
    from returnn.tensor import Tensor as RTensor
    from returnn.tensor import batch_dim as rbatch

    lengths = np.array([3, 1, 2], np.int32)
    values = np.random.default_rng(0).normal(size=(3, 3)).astype(np.float32)
    rrf.select_backend_torch()
    rtime = RDim(RTensor("t", [rbatch], "int32", raw_tensor=torch.tensor(lengths)), name="t")
    rbatch.dyn_size_ext = RTensor("b", [], "int32", raw_tensor=torch.tensor(3, dtype=torch.int32))
    theirs = RTensor("x", [rbatch, rtime], "float32", raw_tensor=torch.tensor(values))
    rrf.init_train_step_run_ctx(train_flag=True)
    rrf.get_run_ctx().mark_as_loss(theirs, "a", scale=0.3)
    rrf.get_run_ctx().mark_as_loss(theirs, "b", use_normalized_loss=True)
    want = float(rrf.get_run_ctx().total_loss().raw_tensor)
    rbatch.reset_eager()
    # Back to RETURNN's default (forward, no train flag), so that later tests
    # that run RETURNN's modules do not run them in train mode.
    rrf.init_forward_step_run_ctx()

    time = time_template()
    time.dyn_size_ext.raw_tensor = lengths
    mine = rf.convert_to_tensor(values, dims=[batch_dim, time])
    rf.init_train_step_run_ctx(train_flag=True)
    mine.mark_as_loss("a", scale=0.3)
    mine.mark_as_loss("b", use_normalized_loss=True)
    assert float(rf.get_run_ctx().total_loss().numpy()) == pytest.approx(want, rel=1e-5)
    rf.reset_run_ctx()


def test_one_value_as_a_python_number() -> None:
    f = Dim(2, name="f")
    loss = rf.reduce_sum(rf.convert_to_tensor(np.array([1.5, 2.0], np.float32), dims=[f]), axis=f)
    assert (loss.item(), float(loss), int(loss)) == (3.5, 3.5, 3)
    with pytest.raises(ValueError, match="2 values, not one"):
        rf.convert_to_tensor(np.zeros(2, np.float32), dims=[f]).item()


def test_unknown_tensor_options_are_refused() -> None:
    with pytest.raises(TypeError, match=r'unsupported options \["batch_dim_axis"\]'):
        Tensor("x", [batch_dim], "float32", batch_dim_axis=0)
    assert Tensor("x", [batch_dim], "float32", version=2).is_template()
