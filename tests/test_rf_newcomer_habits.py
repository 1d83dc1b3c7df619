"""verjus.rf used with habits from PyTorch and numpy (issue 39): printing a tensor or a
model, ``float(loss)``, sizes and axis positions where verjus.rf takes Dims, saving
into a folder that is not there. Each gives the right result or says what is wrong."""

from __future__ import annotations

import inspect
import types

import numpy as np
import pytest

from verjus import rf
from verjus.rf._dim_args import _dim_params
from verjus.rf.encoder.conformer import ConformerPositionwiseFeedForward


@pytest.fixture
def x() -> rf.Tensor:
    b, f = rf.Dim(2, name="b"), rf.Dim(3, name="f")
    return rf.convert_to_tensor(np.arange(6, dtype=np.float32).reshape(2, 3), dims=[b, f])


# -- item 9: values in print, float(), item() ---------------------------------------------


def test_print_shows_the_values(x: rf.Tensor) -> None:
    loss = rf.reduce_sum(x, axis=x.dims)
    assert str(loss) == "Tensor([], float32, 15.)"
    assert f"loss {loss}" == "loss Tensor([], float32, 15.)"
    assert str(x) == (
        "Tensor([b, f], float32, [[0., 1., 2.],\n                         [3., 4., 5.]])"
    )
    assert repr(x) == "Tensor([b, f], float32)"  # error messages: no values, no device read


def test_print_of_a_big_tensor_shows_a_few_values() -> None:
    big = rf.convert_to_tensor(np.zeros((40, 50), np.float32), dims=[rf.Dim(40), rf.Dim(50)])
    text = str(big)
    assert "..." in text
    assert len(text.splitlines()) == 7  # 3 rows, "...", 3 rows


def test_print_of_a_template_has_no_values() -> None:
    template = rf.Tensor("t", [rf.Dim(3, name="f")], "float32")
    assert str(template) == repr(template) == 'Tensor("t", [f], float32, template)'


def test_a_scalar_is_a_python_number(x: rf.Tensor) -> None:
    loss = rf.reduce_sum(x, axis=x.dims)
    assert float(loss) == loss.item() == 15.0
    assert int(loss) == 15
    with pytest.raises(ValueError, match=r"float\(\): Tensor\(\[b, f\], float32\) has 6 values"):
        float(x)
    with pytest.raises(ValueError, match=r"item\(\): .* has 6 values, not one; reduce it first"):
        x.item()


# -- item 10: modules print with their dims and children ----------------------------------


def test_a_module_prints_its_dims_and_options() -> None:
    i, o = rf.Dim(4, name="in"), rf.Dim(6, name="out")
    assert repr(rf.LSTM(i, o)) == 'LSTM(in_dim=Dim("in", 4), out_dim=Dim("out", 6))'
    assert repr(rf.Dropout(0.1)) == "Dropout(drop_prob=0.1, on_forward=False)"


def test_a_model_prints_its_children_indented() -> None:
    i, o = rf.Dim(4, name="in"), rf.Dim(6, name="out")
    model = rf.Sequential(rf.Linear(i, o), rf.Sequential(rf.LayerNorm(o)))
    assert repr(model) == (
        "Sequential(\n"
        '  (0): Linear(in_dim=Dim("in", 4), out_dim=Dim("out", 6), with_bias=True)\n'
        "  (1): Sequential(\n"
        '    (0): LayerNorm(in_dim=Dim("out", 6), eps=1e-06)\n'
        "  )\n"
        ")"
    )
    params = rf.ParameterList(rf.Parameter([i]), rf.Parameter([o]))
    assert repr(params) == "ParameterList(Parameter([in(4)]), Parameter([out(6)]))"


# -- item 11: a size or an axis position where a Dim belongs ------------------------------


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: rf.LSTM(4, 6), r"rf.LSTM: in_dim must be a Dim \(e.g. rf.Dim\(4, name='in_dim'"),
        (lambda: rf.Conv1d(4, 6, 3, padding="same"), r"rf.Conv1d: in_dim must be a Dim"),
        (lambda: rf.LayerNorm(512), r"rf.LayerNorm: in_dim must be a Dim .*got int 512"),
        (lambda: rf.Embedding(rf.Dim(5, name="v"), 8), r"rf.Embedding: out_dim must be a Dim"),
        (lambda: rf.BatchNorm([4]), r"rf.BatchNorm: in_dim must be a Dim .*got list \[4\]"),
        (
            lambda: rf.Dropout(0.1, axis=-1),
            r"rf.Dropout: axis must be a Dim or Dims \(verjus.rf names",
        ),
    ],
)
def test_a_module_names_a_size_given_for_a_dim(make, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        make()


def test_a_module_of_ones_own_is_checked_by_its_annotations() -> None:
    class Model(rf.Module):
        def __init__(self, in_dim: rf.Dim, hidden: int) -> None:
            self.in_dim, self.hidden = in_dim, hidden

    assert repr(Model(rf.Dim(3, name="f"), 5)) == 'Model(in_dim=Dim("f", 3), hidden=5)'
    with pytest.raises(TypeError, match=r"Model: in_dim must be a Dim .*got int 3"):
        Model(3, 5)


def test_a_module_taking_a_size_or_a_dim_takes_a_size() -> None:
    ff = ConformerPositionwiseFeedForward(
        rf.Dim(4, name="model"), ff_dim=8, dropout=0.0, activation=rf.relu
    )
    assert ff.linear_ff.out_dim.dimension == 8


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda x: rf.squeeze(x, axis=-1), r"rf.squeeze: axis must be a Dim .*got int -1"),
        (lambda x: rf.gather(x, indices=0, axis=1), r"rf.gather: axis must be a Dim"),
        (lambda x: rf.cumsum(x, spatial_dim="f"), r"rf.cumsum: spatial_dim .*got str 'f'"),
        (lambda x: rf.layer_norm(x, axis=-1, eps=1e-6), r"rf.layer_norm: axis must be a Dim"),
        (lambda x: rf.split(x, axis=x.dims[1], out_dims=[1, 2]), r"rf.split: out_dims must"),
    ],
)
def test_an_op_names_an_axis_position_given_for_a_dim(x: rf.Tensor, call, message) -> None:
    with pytest.raises(TypeError, match=message) as info:
        call(x)
    assert "names axes by Dim, not by position or name; the tensor's dims: [b, f]" in str(
        info.value
    )


def test_an_op_names_pytorchs_dim_keyword(x: rf.Tensor) -> None:
    with pytest.raises(TypeError, match=r"rf.squeeze takes axis= \(a Dim\), not dim="):
        rf.squeeze(x, dim=x.dims[1])
    with pytest.raises(TypeError, match=r"rf.zeros: dims must be Dims .*got list \[2, 3\]"):
        rf.zeros([2, 3])


def test_an_op_failing_for_another_reason_keeps_its_error(x: rf.Tensor) -> None:
    with pytest.raises(ZeroDivisionError):
        rf.scan(spatial_dim=x.dims[0], initial=None, body=lambda _x, _s: 1 / 0)


def test_every_public_op_taking_dims_names_a_size_or_position() -> None:
    """Each Python function of ``verjus.rf`` with a parameter that takes only Dims is
    ``@takes_dims`` (``verjus.rf._dim_args``)."""
    undecorated = {
        name
        for name in rf.__all__
        if isinstance(op := getattr(rf, name), types.FunctionType)
        and not hasattr(op, "__wrapped__")
        and _dim_params(op)[1]
    }
    assert not undecorated


@pytest.fixture
def time_signal() -> tuple[rf.Tensor, rf.Dim, rf.Dim]:
    """``[b, t, f]`` and its time and feature dims."""
    b, t, f = rf.Dim(2, name="b"), rf.Dim(5, name="t"), rf.Dim(3, name="f")
    x = rf.convert_to_tensor(np.ones((2, 5, 3), np.float32), dims=[b, t, f])
    return x, t, f


def _conv(x: rf.Tensor, t: rf.Dim, f: rf.Dim, **given) -> None:
    """``rf.conv`` of ``x`` over ``t`` (``f`` -> 4 channels, a filter of 3), with
    ``given`` in place of the right arguments."""
    out, k = rf.Dim(4, name="out"), rf.Dim(3, name="k")
    kwargs = {"in_dim": f, "out_dim": out, "in_spatial_dims": [t], "filter_size": [k]}
    filt = rf.convert_to_tensor(np.ones((4, 3, 3), np.float32), dims=[out, f, k])
    rf.conv(x, filter=filt, padding="same", **{**kwargs, **given})


@pytest.mark.parametrize(
    ("call", "message"),
    [
        # PyTorch's Conv1d(3, 4, 3): sizes for the channels
        (lambda x, t, f: _conv(x, t, f, in_dim=3), r"rf.conv: in_dim must be a Dim .*got int 3"),
        (lambda x, t, f: _conv(x, t, f, out_dim=4), r"rf.conv: out_dim must be a Dim"),
        (
            lambda x, t, f: _conv(x, t, f, in_spatial_dims=[1]),
            r"rf.conv: in_spatial_dims must be Dims .*got list \[1\]",
        ),
        (lambda x, t, f: _conv(x, t, f, filter_size=[3]), r"rf.conv: filter_size must be Dims"),
        # numpy's np.pad(x, [(0, 0), (1, 1), (0, 0)]): axis positions
        (
            lambda x, t, f: rf.pad(x, axes=[1], padding=[(1, 1)]),
            r"rf.pad: axes must be Dims .*got list \[1\]",
        ),
        (
            lambda x, t, f: rf.max_pool1d(x, pool_size=2, in_spatial_dim=1),
            r"rf.max_pool1d: in_spatial_dim must be a Dim .*got int 1",
        ),
        (
            lambda x, t, f: rf.stft(x, in_spatial_dim=-2, frame_step=1, frame_length=2),
            r"rf.stft: in_spatial_dim must be a Dim .*got int -2",
        ),
        (
            lambda x, t, f: rf.dot_attention(x, x, x, key_dim=f, axis=1),
            r"rf.dot_attention: axis must be a Dim .*got int 1",
        ),
    ],
)
def test_a_conv_or_pad_names_a_size_or_position_given_for_a_dim(
    time_signal: tuple, call, message: str
) -> None:
    x, t, f = time_signal
    with pytest.raises(TypeError, match=message) as info:
        call(x, t, f)
    assert "the tensor's dims: [b, t, f]" in str(info.value)


def test_a_conv_given_dims_still_runs(time_signal: tuple) -> None:
    x, t, f = time_signal
    _conv(x, t, f)
    padded, (t_padded,) = rf.pad(x, axes=[t], padding=[(1, 1)])
    assert t_padded.dimension == 7
    assert padded.numpy().sum() == x.numpy().sum()


def test_a_decorated_op_keeps_its_signature_and_docs() -> None:
    assert list(inspect.signature(rf.squeeze).parameters) == ["source", "axis"]
    assert rf.squeeze.__doc__.startswith("``source`` without")
    assert rf.squeeze.__module__ == "verjus.rf.shape_ops"


# The native ops' own argument errors name ``rf.<op>``, its signature and the axis (their
# wrappers, verjus.rf._public_ops; more in tests/test_rf_public_errors.py).


def test_a_native_op_names_itself_and_its_axis(x: rf.Tensor) -> None:
    with pytest.raises(TypeError, match=r"^rf\.softmax\(.*\(axis=-1\)\. An axis is a Dim"):
        rf.softmax(x, axis=-1)


def test_a_native_op_names_pytorchs_dim_keyword(x: rf.Tensor) -> None:
    with pytest.raises(TypeError, match=r"^rf\.softmax\(.*: got an unexpected keyword arg.* 'dim'"):
        rf.softmax(x, dim=-1)


# -- item 13: what is wrong, not a hidden temporary file ----------------------------------


def test_saving_into_a_missing_folder_names_the_folder(tmp_path) -> None:
    model = rf.Linear(rf.Dim(2, name="in"), rf.Dim(3, name="out"))
    target = tmp_path / "missing" / "model.safetensors"
    # An OSError naming the file, as every file problem of the native writer.
    with pytest.raises(OSError, match=r"the folder .*missing does not exist") as info:
        rf.save_state(model, target)
    assert ".tmp" not in str(info.value)
    assert str(target) in str(info.value)
