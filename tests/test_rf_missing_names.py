"""RETURNN ``rf.*`` names that verjus.rf gained by composing its own ops, and the
list of those it still lacks.

Each name is checked for its behaviour on verjus; those with numbers as results
(the transposed-conv lengths, ``expand_make_non_empty``, ``limit_repeats``,
``scaled_gradient_ext``'s values and gradients, BatchNorm's distributed default,
the backend query, the control flow context) also against RETURNN's own on its
torch backend: the same case code runs on both (RETURNN's in the reference
interpreter, see ``test_rf_conv_behavior_version``). ``test_missing_names_are_the_known_ones``
lists RETURNN's public names verjus.rf lacks, with the reason per group, so that a
regression or a new name shows.
"""

from __future__ import annotations

import copy
import importlib
import threading
from typing import Any

import numpy as np
import pytest
from test_rf_behavior_versions import stand_in_settings
from test_rf_conv_behavior_version import (
    LATEST,
    REFERENCE_HEADER,
    returnn_settings,
    run_reference,
)

import verjus.rf as rf
from verjus.rf import Dim

# RETURNN's public names verjus.rf does not have, by reason.
EXPECTED_MISSING = {
    # Typing names that leak from RETURNN's rf.cond, which has no __all__.
    "Callable",
    "T",
    "TypeVar",
    "Union",
    # Automatic mixed precision: verjus has float32 only (a separate issue adds dtypes).
    "AmpPolicy",
    "amp",
    "amp_cast_compute",
    "amp_cast_float32",
    "get_amp_policy",
    "set_amp_policy",
    "set_amp_policy_ctx",
    # Packed tensors (RETURNN's private packed backend).
    "is_packed",
    "pack",
    "pack_import",
    "packed",
    "packed_flat_content",
    "packed_regap",
    "unpack",
    # Complex numbers: verjus has no complex dtype.
    "complex_as_real",
    "make_complex",
    "real_as_complex",
    # Static tracing: verjus runs eagerly only.
    "is_static_traceable",
    "set_static_traceable",
    "set_static_traceable_ctx",
    "static_traceable",
    "static_traceable_generation",
    # TensorFlow backends.
    "select_backend_returnn_layers_tf",
    "select_backend_tf",
    # 3-D convolution and pooling: no native 3-D op.
    "Conv3d",
    "TransposedConv3d",
    "pool3d",
    # The graph walks: verjus's tape keeps neither a tensor's inputs nor its consumers
    # for Python (RETURNN's torch backend raises NotImplementedError for them too).
    "get_tensor_consumers",
    "get_tensor_dependencies",
    "graph",
    "walk_tensor_consumers",
    # A copy of a dim with a higher match priority: verjus's dims have no match
    # priorities (a tensor cannot hold a dim twice; dims compare by identity).
    "dim_match_priority_when_needed",
}


def test_missing_names_are_the_known_ones() -> None:
    returnn_rf = pytest.importorskip("returnn.frontend", reason="compares with RETURNN's names")
    public = [name for name in dir(returnn_rf) if not name.startswith("_")]
    missing = {name for name in public if not hasattr(rf, name)}
    assert missing == EXPECTED_MISSING, (
        f"newly missing: {sorted(missing - EXPECTED_MISSING)}; "
        f"now present: {sorted(EXPECTED_MISSING - missing)}"
    )


# -- the same cases on RETURNN and on verjus ------------------------------------------

LENS = [7, 4, 1]
REPEAT_LENS = [6, 3, 5]

# Each case gives named arrays; the same code runs on RETURNN's rf and on verjus.rf.
CASE_CODE = """
import itertools
import numpy as np


def size_of(dim, to_numpy):
    if dim.dimension is not None:
        return np.array(dim.dimension)
    return to_numpy(dim.dyn_size_ext)


def case_calc_transposed_conv_out_length(rf, Dim, data, to_numpy):
    batch = Dim(len(data["lens"]), name="batch")
    lens = rf.convert_to_tensor(data["lens"], dims=[batch])
    time = Dim(lens, name="time")
    static = Dim(5, name="static")
    out = {}
    options = itertools.product(
        [1, 2, 3, 5], [None, 1, 2, 3], ["valid", "same", "full", 1], [None, 0, 1], [1, 2]
    )
    for k, stride, padding, out_pad, dil in options:
        if padding == 1 and out_pad is None:
            continue  # an int padding needs output_padding
        kwargs = dict(
            filter_size=k, padding=padding, output_padding=out_pad, stride=stride,
            dilation_rate=dil,
        )
        key = f"k{k}-s{stride}-{padding}-op{out_pad}-d{dil}"
        out[key + "/int"] = np.array(rf.calc_transposed_conv_out_length(6, **kwargs))
        if rf.calc_transposed_conv_out_length(5, **kwargs) >= 0:  # RETURNN keeps < 0
            dim = rf.calc_transposed_conv_out_length(static, **kwargs)
            out[key + "/static"] = size_of(dim, to_numpy)
        dim = rf.calc_transposed_conv_out_length(time, **kwargs)
        out[key + "/dynamic"] = size_of(dim, to_numpy)
        out[key + "/tensor"] = to_numpy(rf.calc_transposed_conv_out_length(lens, **kwargs))
    # A filter size per sequence.
    filt = rf.convert_to_tensor(data["filter_sizes"], dims=[batch])
    for padding, out_pad in [("valid", None), ("full", None), ("same", 1), ("valid", 0)]:
        kwargs = dict(filter_size=filt, padding=padding, output_padding=out_pad, stride=2)
        key = f"filter-tensor-{padding}-op{out_pad}"
        out[key + "/int"] = to_numpy(rf.calc_transposed_conv_out_length(6, **kwargs))
        out[key + "/tensor"] = to_numpy(rf.calc_transposed_conv_out_length(lens, **kwargs))
    return out


def case_make_transposed_conv_out_spatial_dims(rf, Dim, data, to_numpy):
    batch = Dim(len(data["lens"]), name="batch")
    time = Dim(rf.convert_to_tensor(data["lens"], dims=[batch]), name="time")
    static = Dim(5, name="static")
    out = {}
    for padding in ["valid", "same", "full"]:
        for strides in [None, 2, [2, 3]]:
            dims = rf.make_transposed_conv_out_spatial_dims(
                [time, static], filter_size=[3, Dim(2, name="k")], padding=padding,
                strides=strides,
            )
            for i, dim in enumerate(dims):
                out[f"{padding}-s{strides}/{i}"] = size_of(dim, to_numpy)
    return out


def case_expand_make_non_empty(rf, Dim, data, to_numpy):
    batch = Dim(3, name="batch")
    feat = Dim(2, name="feat")
    out = {}
    empty = Dim(rf.convert_to_tensor(np.zeros(3, np.int32), dims=[batch]), name="empty")
    x = rf.convert_to_tensor(np.zeros((3, 0, 2), np.float32), dims=[batch, empty, feat])
    y, dim = rf.expand_make_non_empty(x, axis=empty)
    out["dynamic"] = to_numpy(y.copy_transpose([batch, dim, feat]))
    out["dynamic:lens"] = size_of(dim, to_numpy)
    zero = Dim(0, name="zero")
    x = rf.convert_to_tensor(np.zeros((3, 0), np.int32), dims=[batch, zero])
    y, dim = rf.expand_make_non_empty(x, axis=zero)
    out["static"] = to_numpy(y.copy_transpose([batch, dim]))
    out["static:size"] = size_of(dim, to_numpy)
    time = Dim(rf.convert_to_tensor(data["lens_with_0"], dims=[batch]), name="time")
    x = rf.convert_to_tensor(data["x_with_0"], dims=[batch, time, feat])
    y, dim = rf.expand_make_non_empty(x, axis=time)
    out["non_empty"] = to_numpy(y.copy_transpose([batch, dim, feat]))
    out["non_empty:same_dim"] = np.array(dim is time)
    return out


def case_limit_repeats(rf, Dim, data, to_numpy):
    batch = Dim(len(data["repeat_lens"]), name="batch")
    time = Dim(rf.convert_to_tensor(data["repeat_lens"], dims=[batch]), name="time")
    static = Dim(data["repeats"].shape[1], name="static")
    out = {}
    for factor in [1.0, 1.5, 2.0, 3.0, 10.0]:
        for name, dim in [("dynamic", time), ("static", static)]:
            repeats = rf.convert_to_tensor(data["repeats"], dims=[batch, dim])
            y = rf.limit_repeats(repeats, in_spatial_dim=dim, max_len_factor=factor)
            out[f"{name}-{factor}"] = to_numpy(y.copy_transpose([batch, dim]))
    return out


def case_scaled_gradient_ext(rf, Dim, data, to_numpy):
    batch = Dim(len(data["lens"]), name="batch")
    time = Dim(rf.convert_to_tensor(data["lens"], dims=[batch]), name="time")
    feat = Dim(data["x"].shape[2], name="feat")
    out = {}
    scales = [
        ("float", {"scale": -0.5}),
        ("tensor", {"scale": rf.convert_to_tensor(data["scale"], dims=[feat])}),
        ("shift-0", {"scale": 2.0, "shift": 0.0}),
    ]
    for name, kwargs in scales:
        x = rf.convert_to_tensor(data["x"], dims=[batch, time, feat])
        rf.set_requires_gradient(x)
        w = rf.convert_to_tensor(data["w"], dims=[batch, time, feat])
        y = rf.scaled_gradient_ext(x, **kwargs)
        loss = rf.reduce_sum(rf.square(y) * w, axis=[batch, time, feat])
        out[name] = to_numpy(y.copy_transpose([batch, time, feat]))
        out[name + ":grad"] = to_numpy(rf.gradient(loss, x).copy_transpose([batch, time, feat]))
    return out


def case_batch_norm_distributed_default(rf, Dim, data, to_numpy):
    return {"default": np.array(rf.batch_norm_distributed_default())}


def case_queries(rf, Dim, data, to_numpy):
    out = {
        "dim_tag_independent": np.array(rf.is_backend_raw_tensor_dim_tag_independent()),
        "ctx_outside": np.array(rf.get_current_control_flow_ctx() is None),
    }
    with rf.control_flow_ctx(None) as ctx:
        out["ctx_none"] = np.array(ctx is None and rf.get_current_control_flow_ctx() is None)
    return out
"""

REFERENCE_SCRIPT = (
    REFERENCE_HEADER
    + """


def to_numpy(t):
    return t.raw_tensor.detach().cpu().numpy()


results = {}
"""
    + CASE_CODE
    + f"""
for case in request["cases"]:
    BehaviorVersion._reset(({LATEST}, 0))
    with global_config_ctx(Config(case["options"])):
        out = globals()["case_" + case["item"]](rf, Dim, data, to_numpy)
    results.update({{f"{{case['id']}}/{{k}}": v for k, v in out.items()}})
np.savez(request["outputs"], **results)
"""
)

_namespace: dict[str, Any] = {}
exec(CASE_CODE, _namespace)  # the shared case code above

# (item, setting name, RETURNN config options)
CASES = [
    ("calc_transposed_conv_out_length", "default", {}),
    ("make_transposed_conv_out_spatial_dims", "default", {}),
    ("expand_make_non_empty", "default", {}),
    ("limit_repeats", "default", {}),
    ("scaled_gradient_ext", "default", {}),
    ("batch_norm_distributed_default", "default", {}),
    ("batch_norm_distributed_default", "distributed", {"rf_batch_norm_distributed": True}),
    ("queries", "default", {}),
]


def inputs() -> dict[str, np.ndarray]:
    """Inputs with random values in their padding frames."""
    g = np.random.default_rng(0)
    repeats = g.integers(0, 6, (len(REPEAT_LENS), max(REPEAT_LENS))).astype(np.int32)
    for b, n in enumerate(REPEAT_LENS):
        repeats[b, n:] = 99  # padding: must not count
    return {
        "lens": np.array(LENS, np.int32),
        "filter_sizes": np.array([2, 3, 5], np.int32),
        "lens_with_0": np.array([2, 0, 1], np.int32),
        "x_with_0": g.standard_normal((3, 2, 2)).astype(np.float32),
        "repeat_lens": np.array(REPEAT_LENS, np.int32),
        "repeats": repeats,
        "x": g.standard_normal((len(LENS), max(LENS), 3)).astype(np.float32),
        "w": g.standard_normal((len(LENS), max(LENS), 3)).astype(np.float32),
        "scale": np.array([0.5, -1.0, 3.0], np.float32),
    }


@pytest.fixture(scope="module")
def returnn_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, np.ndarray]:
    """RETURNN's results of every case, by ``<item>/<setting>/<name>``."""
    cases = [
        {"id": f"{item}/{name}", "item": item, "options": options} for item, name, options in CASES
    ]
    return run_reference(tmp_path_factory, REFERENCE_SCRIPT, cases, inputs())


@pytest.mark.parametrize(("item", "name", "options"), CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_equals_returnn(returnn_results: dict, item: str, name: str, options: dict) -> None:
    with returnn_settings(LATEST, options):
        got = _namespace[f"case_{item}"](rf, Dim, inputs(), lambda t: t.numpy())
    prefix = f"{item}/{name}/"
    want = {k[len(prefix) :]: v for k, v in returnn_results.items() if k.startswith(prefix)}
    assert sorted(got) == sorted(want)
    for key, value in got.items():
        assert np.shape(value) == np.shape(want[key]), key
        np.testing.assert_allclose(value, want[key], rtol=1e-6, atol=1e-6, err_msg=key)


# -- on verjus alone -----------------------------------------------------------------


def lengths(dim: Dim) -> np.ndarray:
    return np.array(dim.dimension) if dim.dimension is not None else dim.dyn_size_ext.numpy()


def batch_and_time(lens: list[int]) -> tuple[Dim, Dim]:
    batch = Dim(len(lens), name="batch")
    return batch, Dim(rf.convert_to_tensor(np.array(lens, np.int32), dims=[batch]), name="time")


def test_calc_transposed_conv_out_length() -> None:
    calc = rf.calc_transposed_conv_out_length
    assert calc(6, filter_size=3, padding="valid", stride=2) == 13  # 6 * 2 + (3 - 2)
    assert calc(6, filter_size=2, padding="valid") == 12  # stride = filter size
    assert calc(6, filter_size=3, padding="full", stride=2) == 9  # 12 - (2 + 3 - 2)
    assert calc(6, filter_size=3, padding="same", stride=2) == 12
    assert calc(6, filter_size=3, padding="valid", stride=2, output_padding=1) == 14
    assert calc(6, filter_size=3, padding=1, stride=2, output_padding=0) == 11  # 12 + 3 - 2 - 2
    # The dilation enters with output_padding only (as in RETURNN).
    dilated = {"filter_size": 3, "padding": "valid", "stride": 1, "dilation_rate": 2}
    assert calc(6, **dilated) == 8
    assert calc(6, **dilated, output_padding=0) == 10
    _, time = batch_and_time([4, 2])
    assert calc(time, filter_size=3, padding="same", stride=1) is time
    out = calc(time, filter_size=3, padding="valid", stride=2, name="up")
    assert out.name == "up"
    np.testing.assert_array_equal(lengths(out), [9, 5])
    with pytest.raises(ValueError, match="padding must be"):
        calc(6, filter_size=3, padding="causal", stride=1)
    with pytest.raises(ValueError, match="needs output_padding"):
        calc(6, filter_size=3, padding=1, stride=1)


@pytest.mark.parametrize("output_padding", [None, 1])
def test_make_transposed_conv_out_spatial_dims_are_transposed_convs(output_padding) -> None:
    """The dims fit ``rf.transposed_conv``'s output (with ``output_padding`` too, which
    RETURNN's function leaves out)."""
    batch, time = batch_and_time([5, 3])
    static, c_in, c_out = Dim(4, name="static"), Dim(2, name="in"), Dim(3, name="out")
    sizes = [Dim(3, name="k0"), Dim(2, name="k1")]
    x = rf.random_normal([batch, time, static, c_in])
    filt = rf.random_normal([c_in, c_out, *sizes])
    y, out_dims = rf.transposed_conv(
        x,
        in_dim=c_in,
        out_dim=c_out,
        in_spatial_dims=[time, static],
        filter=filt,
        filter_size=sizes,
        padding="valid",
        strides=[2, 1],
        output_padding=output_padding,
    )
    want = rf.make_transposed_conv_out_spatial_dims(
        [time, static],
        filter_size=sizes,
        padding="valid",
        strides=[2, 1],
        output_padding=output_padding,
        description_prefix="tconv",
    )
    assert [d.name for d in want] == ["tconv:spatial0", "tconv:spatial1"]
    for got, expected in zip(out_dims, want, strict=True):
        np.testing.assert_array_equal(lengths(got), lengths(expected))
    assert y.shape[list(y.dims).index(out_dims[1])] == want[1].dimension
    with pytest.raises(ValueError, match="one entry per spatial dim"):
        rf.make_transposed_conv_out_spatial_dims([time], filter_size=[3, 3], padding="valid")


def test_expand_make_non_empty() -> None:
    batch, time = batch_and_time([2, 1])
    x = rf.random_normal([batch, time])
    assert rf.expand_make_non_empty(x, axis=time) == (x, time)  # not empty: as it is
    _, empty = batch_and_time([0, 0])
    x = rf.convert_to_tensor(np.zeros((2, 0), np.float32), dims=[batch, empty])
    mine = Dim(rf.convert_to_tensor(np.ones(2, np.int32), dims=[batch]), name="mine")
    y, dim = rf.expand_make_non_empty(x, axis=empty, out_dim=mine)
    assert dim is mine
    assert y.dims == (batch, mine)
    np.testing.assert_array_equal(y.numpy(), [[0.0], [0.0]])
    with pytest.raises(ValueError, match="is not a dim of source"):
        rf.expand_make_non_empty(x, axis=time)


def test_limit_repeats_bounds_each_sequence() -> None:
    g = np.random.default_rng(1)
    lens = [8, 5, 2, 6]
    batch, time = batch_and_time(lens)
    counts = g.integers(0, 9, (len(lens), max(lens))).astype(np.int32)
    repeats = rf.convert_to_tensor(counts, dims=[batch, time])
    for factor in [1.0, 1.7, 4.0]:
        out = rf.limit_repeats(repeats, in_spatial_dim=time, max_len_factor=factor)
        assert out.dtype == "int32"
        assert out.dims == repeats.dims
        values = out.numpy()
        for b, n in enumerate(lens):
            given, got = counts[b, :n], values[b, :n]
            assert got.sum() <= factor * n
            assert (values[b, n:] == 0).all()  # padding
            assert ((given > 0) == (got > 0)).all()  # no element dropped
            assert (got <= given).all()
            if given.sum() <= factor * n:
                np.testing.assert_array_equal(got, given)
        again = rf.limit_repeats(out, in_spatial_dim=time, max_len_factor=factor)
        np.testing.assert_array_equal(again.numpy(), values)  # idempotent
        _, out_time = rf.repeat(out, in_spatial_dim=time, repeats=out)
        assert (lengths(out_time) <= np.floor(factor * np.array(lens))).all()
        # rf.repeat's own max_len_factor (on the host) limits the same way.
        _, bounded = rf.repeat(repeats, in_spatial_dim=time, repeats=repeats, max_len_factor=factor)
        np.testing.assert_array_equal(lengths(bounded), lengths(out_time))
    with pytest.raises(ValueError, match="at least 1"):
        rf.limit_repeats(repeats, in_spatial_dim=time, max_len_factor=0.5)


def test_random_state_restores_the_draws() -> None:
    dim = Dim(5, name="d")
    rf.set_random_seed(3)
    state = rf.get_random_state()
    assert set(state) == {"verjus_rf"}
    assert isinstance(state["verjus_rf"], bytes)
    first = rf.random_uniform([dim]).numpy(), rf.random_normal([dim]).numpy()
    rf.random_uniform([Dim(7, name="other")])  # more draws in between
    rf.set_random_state(state)
    again = rf.random_uniform([dim]).numpy(), rf.random_normal([dim]).numpy()
    np.testing.assert_array_equal(first[0], again[0])
    np.testing.assert_array_equal(first[1], again[1])
    rf.set_random_seed(3)
    assert rf.get_random_state() == state  # reading the state draws nothing
    rf.random_uniform([dim])
    assert rf.get_random_state() != state
    rf.set_random_seed(3)
    plain = rf.random_uniform([dim]).numpy()  # as if the state had not been read
    np.testing.assert_array_equal(plain, first[0])
    rf.set_random_state({"cpu": b"torch's"})  # another backend's: ignored, as RETURNN
    with pytest.raises(ValueError, match="16 bytes"):
        rf.set_random_state({"verjus_rf": b"x"})


def test_stop_gradient_scope_records_nothing_inside() -> None:
    dim = Dim(3, name="d")
    x = rf.convert_to_tensor(np.array([1.0, 2.0, 3.0], np.float32), dims=[dim])
    x.requires_grad = True
    with rf.stop_gradient_scope():
        held = x * 2.0
    kept = x * 3.0
    loss = rf.reduce_sum(held * kept, axis=dim)
    grad = rf.gradient(loss, x)
    # d/dx sum(held * 3x) with held constant: 3 * held = 6x.
    np.testing.assert_allclose(grad.numpy(), 6.0 * np.array([1.0, 2.0, 3.0]), rtol=1e-6)
    scope = rf.stop_gradient_scope()
    with scope, pytest.raises(RuntimeError, match="entered already"):
        scope.__enter__()


def test_default_dim_size_device_leaves_the_lengths() -> None:
    assert rf.get_default_dim_size_device() is None
    lens = rf.convert_to_tensor(np.array([3, 2], np.int32), dims=[Dim(2, name="b")])
    assert rf.copy_to_device(lens, rf.get_default_dim_size_device()) is lens


def test_scaled_gradient_ext() -> None:
    f = Dim(3, name="f")
    x = rf.convert_to_tensor(np.array([1.0, 2.0, 3.0], np.float32), dims=[f])
    rf.set_requires_gradient(x)
    y = rf.scaled_gradient_ext(x, scale=-2.0, shift=0)
    np.testing.assert_array_equal(y.numpy(), [1.0, 2.0, 3.0])
    np.testing.assert_allclose(rf.gradient(rf.reduce_sum(y, axis=f), x).numpy(), [-2.0] * 3)
    with pytest.raises(NotImplementedError, match="gradient shift"):
        rf.scaled_gradient_ext(x, scale=1.0, shift=0.1)
    with pytest.raises(NotImplementedError, match="gradient shift"):
        rf.scaled_gradient_ext(x, scale=1.0, shift=1.0, scale_shift_by_sum_over_axis=f)


def test_parameter_copy_behavior() -> None:
    a, b = Dim(4, name="a"), Dim(5, name="b")
    lin = rf.Linear(a, b)
    for copy_fn in (copy.copy, copy.deepcopy):
        new = copy_fn(lin.weight)
        assert new is not lin.weight
        assert new.dims == lin.weight.dims
        assert not np.array_equal(new.numpy(), lin.weight.numpy())  # drawn anew
    with rf.set_parameter_copy_behavior_ctx("share"):
        assert copy.copy(lin.weight) is lin.weight
        shared = copy.deepcopy(lin)
    assert shared is not lin
    assert shared.weight is lin.weight
    assert shared.bias is lin.bias
    assert copy.deepcopy(lin).weight is not lin.weight  # the default again
    with (
        pytest.raises(ValueError, match="mode must be one of"),
        rf.set_parameter_copy_behavior_ctx("copy"),
    ):
        pass


def test_control_flow_ctx() -> None:
    assert rf.get_current_control_flow_ctx() is None
    outer, inner = object(), object()
    with rf.control_flow_ctx(outer) as got:
        assert got is outer
        assert rf.get_current_control_flow_ctx() is outer
        with rf.control_flow_ctx(inner):
            assert rf.get_current_control_flow_ctx() is inner
            seen = []
            thread = threading.Thread(target=lambda: seen.append(rf.get_current_control_flow_ctx()))
            thread.start()
            thread.join()
            assert seen == [None]  # per thread
        assert rf.get_current_control_flow_ctx() is outer
    assert rf.get_current_control_flow_ctx() is None
    # verjus's loops run eagerly and set none (as RETURNN's torch backend).
    time = Dim(3, name="time")
    inside = []
    with rf.Loop(axis=time) as loop:
        for _ in loop:
            inside.append(rf.get_current_control_flow_ctx())
    assert inside == [None] * 3


def test_backend_queries() -> None:
    x = rf.convert_to_tensor(np.ones(2, np.float32), dims=[Dim(2, name="d")])
    assert isinstance(x.raw_tensor, rf.get_raw_tensor_type())
    assert rf.is_backend_raw_tensor_dim_tag_independent() is True
    assert rf.types.get_raw_tensor_type is rf.get_raw_tensor_type


def test_batch_norm_distributed_default() -> None:
    assert rf.batch_norm_distributed_default() is False
    feat = Dim(3, name="feat")
    with stand_in_settings(LATEST, {"rf_batch_norm_distributed": True}):
        assert rf.batch_norm_distributed_default() is True
        assert rf.BatchNorm(feat).distributed is True
    with stand_in_settings(LATEST, {}):
        assert rf.batch_norm_distributed_default() is False
        assert rf.BatchNorm(feat, distributed=True).distributed is True


def test_tensor_layout() -> None:
    d = Dim(2, name="d")
    x, y = rf.ones([d]), rf.zeros([d], dtype="int32")
    layout = rf.get_tensor_layout(x)
    assert layout == rf.get_tensor_layout(y)  # not the dtype
    assert hash(layout) == hash(rf.get_tensor_layout(y))
    assert layout.device == x.device
    assert layout.storage is None
    template = rf.Tensor("t", dims=[d], dtype="float32")
    assert rf.get_tensor_layout(template).device is None
    other = rf.TensorLayout(backend=layout.backend, device="cuda:7")
    assert other != layout
    assert "device='cuda:7'" in repr(other)


class Doubler(rf.Module):
    """``x * 2``; ``offset(x)`` is ``x + 1``."""

    def __call__(self, x: Any) -> Any:
        return x * 2

    def offset(self, x: Any) -> Any:
        return x + 1


class SubDoubler(Doubler):
    """Inherits ``__call__``."""


def test_forward_hooks() -> None:
    a, b, sub = Doubler(), Doubler(), SubDoubler()
    calls = []

    def record(module: Any, args: tuple, kwargs: dict, result: Any) -> Any:
        calls.append((module, args, kwargs, result))
        return result + 100

    handle = a.register_forward_hook(record)
    first = a.register_forward_hook(lambda m, args, kwargs, r: r * 10, prepend=True)
    assert a(3, **{}) == 3 * 2 * 10 + 100  # the prepended hook first
    assert calls == [(a, (3,), {}, 60)]
    assert b(3) == 6  # hooks belong to one object
    sub_handle = sub.register_forward_hook(lambda m, args, kwargs, r: None)
    assert sub(3) is None  # a hook's result replaces the result, None too (RETURNN's)
    first.remove()
    assert a(3) == 106
    handle.remove()
    handle.remove()  # again: nothing
    assert a(3) == 6
    assert "__call__" not in vars(a)
    assert "__call__" in vars(Doubler)  # the subclass's object still has a hook
    sub_handle.remove()
    assert sub(3) == 6
    assert Doubler.__dict__["__call__"].__name__ == "__call__"  # the class's own again
    assert "__call__" not in vars(SubDoubler)
    method_handle = rf.hooks.setup_post_hook_on_method(b, "offset", lambda m, a_, k, r: -r)
    assert b.offset(1) == -2
    method_handle.remove()
    assert b.offset(1) == 2
    with pytest.raises(TypeError, match="is no method"):
        rf.hooks.setup_post_hook_on_method(b, "missing", lambda *_: None)


# RETURNN's modules that verjus.rf has as attributes, and the names RETURNN's have
# that verjus's lack (see EXPECTED_MISSING).
MODULE_NAMES_MISSING = {"dims": {"dim_match_priority_when_needed"}}
MODULES = [
    "const",
    "dims",
    "dtype",
    "hooks",
    "linear",
    "loss",
    "rand",
    "signal",
    "stepwise_scheduler",
    "tensor_layout",
    "types",
]


@pytest.mark.parametrize("name", MODULES)
def test_returnn_modules_resolve(name: str) -> None:
    module = getattr(rf, name)
    assert module is importlib.import_module(f"verjus.rf.{name}")
    for key in module.__all__:
        value = getattr(module, key)
        if hasattr(rf, key):  # the same object as rf.<key> (hooks' are rf.hooks' own)
            assert value is getattr(rf, key), key
    returnn_module = pytest.importorskip(f"returnn.frontend.{name}")
    want = set(returnn_module.__all__) - MODULE_NAMES_MISSING.get(name, set())
    assert set(module.__all__) == want


def test_returnn_module_imports_through_returnn_compat() -> None:
    from verjus.rf import returnn_compat

    returnn_compat.install()
    try:
        from returnn.frontend.loss import ctc_loss
        from returnn.frontend.rand import get_random_state

        assert ctc_loss is rf.ctc_loss
        assert get_random_state is rf.get_random_state
    finally:
        returnn_compat.uninstall()
