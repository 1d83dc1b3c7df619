"""Small RETURNN-compatibility features: ``Parameter.assign_add``,
``ModuleList`` slice assignment and ``del``, ``scan`` whose state replaces a dim
each step (a new beam dim), ``Tensor.control_flow_ctx``, ``device`` on
``zeros`` / ``ones`` / ``sequence_mask``, and ``TensorDict.fill_random_`` with
dims whose lengths are over other dims and a max size below the default min."""

from __future__ import annotations

import numpy as np
import pytest
from test_rf_grad import check_gradient

from verjus import rf


def test_parameter_assign_add() -> None:
    f = rf.Dim(3, name="f")
    p = rf.Parameter([f], dtype="int32")
    p.initial = 2
    p.assign_add(3)
    assert p.numpy().tolist() == [5, 5, 5]
    q = rf.Parameter([rf.Dim(2, name="a"), f])
    q.assign_add(rf.convert_to_tensor(np.array([1.0, 2.0, 3.0], np.float32), dims=[f]))
    np.testing.assert_allclose(q.numpy(), [[1, 2, 3], [1, 2, 3]])


def test_module_list_slice_assign_and_del() -> None:
    f = rf.Dim(2, name="f")
    layers = rf.ModuleList([rf.Linear(f, f) for _ in range(4)])
    orig = layers[:]
    del layers[2:]
    assert [k for k, _ in layers.items()] == ["0", "1"]
    del layers[0]
    assert [k for k, _ in layers.items()] == ["0"]
    assert layers[0] is orig[1]
    layers[:] = orig
    assert [k for k, _ in layers.items()] == ["0", "1", "2", "3"]
    assert layers[3] is orig[3]


def test_scan_state_with_new_dim_each_step() -> None:
    t, f = rf.Dim(3, name="time"), rf.Dim(2, name="f")
    x = rf.convert_to_tensor(np.ones((3, 2), np.float32), dims=[t, f])
    beam0 = rf.Dim(1, name="beam0")

    def body(frame: rf.Tensor, state: dict) -> tuple[rf.Tensor, dict]:
        beam = rf.Dim(2, name="beam")
        y = rf.reduce_mean(state["s"] + frame, axis=state["beam"])
        y = rf.expand_dim(y, beam)
        return y, {"s": y, "beam": beam}

    ys, last, _ = rf.scan(
        spatial_dim=t,
        body=body,
        initial={"s": rf.zeros([beam0, f]), "beam": beam0},
        xs=x,
        ys=rf.Tensor("y", [beam0, f], "float32"),
        return_tensor_arrays=True,
    )
    assert set(ys[-1].dims) == {last["beam"], f}
    np.testing.assert_allclose(ys[-1].numpy(), 3.0)
    assert ys[-1].control_flow_ctx is None


def test_device_keywords() -> None:
    t = rf.Dim(rf.convert_to_tensor(np.array([2, 1], np.int32), dims=[rf.batch_dim]), name="t")
    assert rf.sequence_mask([rf.batch_dim, t], device="cpu").numpy().tolist() == [
        [True, True],
        [True, False],
    ]
    assert rf.zeros([t], dtype="int32", device="cpu").device == "cpu"
    assert rf.ones([], device="cpu").numpy() == 1.0


def test_fill_random_lengths_dims_first_and_small_max() -> None:
    batch = rf.Dim(None, name="batch")
    time = rf.Dim(rf.Tensor("time", [batch], "int32"))
    data = rf.TensorDict({"x": rf.Tensor("x", [time], "float32")})  # batch only via time's lengths
    data.fill_random_(dyn_dim_max_sizes={time: 1})
    assert batch.get_dim_value() == 3
    assert time.dyn_size_ext.numpy().max() == 1


def test_sin_cos_values_and_gradients() -> None:
    f = rf.Dim(5, name="f")
    v = np.linspace(-3.0, 3.0, 5).astype(np.float32)
    x = rf.convert_to_tensor(v, dims=[f])
    np.testing.assert_allclose(rf.sin(x).numpy(), np.sin(v), atol=1e-6)
    np.testing.assert_allclose(rf.cos(x).numpy(), np.cos(v), atol=1e-6)
    check_gradient(rf.sin, v, [f])
    check_gradient(rf.cos, v, [f])


def test_fill_and_conv_out_lengths() -> None:
    f = rf.Dim(3, name="f")
    assert rf.fill(dims=[f], fill_value=2, dtype="int32").numpy().tolist() == [2, 2, 2]
    assert rf.calc_conv_out_length(10, filter_size=3, stride=2, padding="valid") == 4
    assert rf.calc_conv_out_length(10, filter_size=3, stride=3, padding="same") == 4
    assert rf.calc_conv_out_length(1, filter_size=3, stride=1, padding="valid") == 0
    lengths = rf.convert_to_tensor(np.array([10, 5, 1], np.int32), dims=[rf.batch_dim])
    out = rf.calc_conv_out_length(lengths, filter_size=3, stride=2, padding="valid")
    assert out.numpy().tolist() == [4, 2, 0]
    time = rf.Dim(lengths, name="time")
    out_dim = rf.calc_conv_out_length(time, filter_size=3, stride=2, padding="valid", name="o")
    assert (out_dim.name, out_dim.dyn_size_ext.numpy().tolist()) == ("o", [4, 2, 0])
    with pytest.raises(ValueError, match="calc_conv_out_length: padding"):
        rf.calc_conv_out_length(4, filter_size=2, stride=1, padding="full")
