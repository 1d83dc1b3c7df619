"""The native ops of verjus.rf name themselves (``rf.softmax``, not the builtin's
``rf_softmax``) and what they take in a TypeError, and say that an axis is a Dim
(issue "Gaps found trying verjus as a new user would", item 11;
``verjus.rf._public_ops``)."""

from __future__ import annotations

import inspect
import pickle
import pydoc
import re
import types

import numpy as np
import pytest

from verjus import _verjus, rf

SOFTMAX = "rf.softmax(x: Tensor, *, axis: Dim, use_mask: bool = True)"


@pytest.fixture
def x() -> rf.Tensor:
    b, f = rf.Dim(2, name="b"), rf.Dim(3, name="f")
    return rf.random_normal([b, f])


def test_pytorchs_dim_keyword_names_rf_softmax_its_signature_and_axis(x: rf.Tensor) -> None:
    with pytest.raises(TypeError) as info:
        rf.softmax(x, dim=-1)
    message = str(info.value)
    assert message.startswith(f"{SOFTMAX}: got an unexpected keyword argument 'dim'"), message
    assert "rf_softmax" not in message
    assert "An axis is a Dim, not an int index" in message
    assert "give axis=x.dims[-1] (x's dims: [b, f]), not dim=-1" in message
    assert isinstance(info.value.__cause__, TypeError)  # the builtin's own error, chained
    assert "rf_softmax()" in str(info.value.__cause__)


def test_an_int_axis_names_rf_softmax_and_says_axes_are_dims(x: rf.Tensor) -> None:
    with pytest.raises(TypeError) as info:
        rf.softmax(x, axis=-1)
    message = str(info.value)
    assert message.startswith(f"{SOFTMAX}: 'int' object is not an instance of 'Dim'"), message
    assert "(axis=-1). An axis is a Dim, not an int index or a name" in message
    assert "RETURNN addresses axes by Dim" in message
    assert message.endswith("give axis=x.dims[-1] (x's dims: [b, f])"), message
    # What the hint says to give works.
    np.testing.assert_allclose(rf.softmax(x, axis=x.dims[-1]).numpy().sum(axis=-1), [1, 1], 1e-6)


def test_a_dim_name_for_an_axis_points_at_the_dim(x: rf.Tensor) -> None:
    with pytest.raises(TypeError, match=r"\(axis='f'\)\. An axis is a Dim.*give axis=x\.dims\[1\]"):
        rf.softmax(x, axis="f")


def test_too_many_positional_arguments_name_the_op_and_its_signature(x: rf.Tensor) -> None:
    with pytest.raises(TypeError) as info:
        rf.softmax(x, x.dims[-1])
    assert str(info.value) == f"{SOFTMAX}: takes 1 positional arguments but 2 were given"
    with pytest.raises(TypeError, match=r"^rf\.relu\(x: Tensor\): takes 1 positional"):
        rf.relu(x, x)
    with pytest.raises(TypeError, match=r"^rf\.where\(cond: Tensor, .*missing 1 required"):
        rf.where(x > 0, x)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda x: rf.reduce_sum(x, axis=[-1]),
            r"^rf\.reduce_sum\(source: Tensor, \*, axis: Dim \| Sequence\[Dim\], .*"
            r"\(axis=\[-1\]\)\. An axis is a Dim.*give axis=\[source\.dims\[-1\]\]",
        ),
        (
            lambda x: rf.matmul(x, x, reduce=1),
            r"^rf\.matmul\(a: Tensor, .*\(reduce=1\)\. .*give reduce=a\.dims\[1\]",
        ),
        (
            lambda x: rf.expand_dim(x, 4),  # a new dim: its size
            r"^rf\.expand_dim\(.*\(dim=4\)\. .*give dim=rf\.Dim\(4, name='dim'\)",
        ),
        (
            lambda x: rf.full(dims=[2, 3], fill_value=0.0),
            r"^rf\.full\(.*give dims=\[rf\.Dim\(2, name=\.\.\.\), rf\.Dim\(3, name=\.\.\.\)\]$",
        ),
        (lambda x: rf.reduce_max(x, dim=1), r"give axis=source\.dims\[1\] .*, not dim=1$"),
    ],
)
def test_other_native_ops_name_themselves_and_the_dims_to_give(x: rf.Tensor, call, message):
    with pytest.raises(TypeError, match=message):
        call(x)


def test_a_type_error_not_about_dims_gets_no_axis_hint(x: rf.Tensor) -> None:
    with pytest.raises(TypeError) as info:
        rf.relu(np.zeros(3))
    assert str(info.value) == "rf.relu(x: Tensor): 'ndarray' object is not an instance of 'Tensor'"


def test_other_errors_pass_unchanged(x: rf.Tensor) -> None:
    other = rf.Dim(4, name="g")
    with pytest.raises(
        ValueError, match=r"^log_softmax: .*dim g is not in the tensor's dims"
    ) as info:
        rf.log_softmax(x, axis=other)
    assert info.value.__cause__ is None


def test_the_wrapper_keeps_the_name_docs_and_signature() -> None:
    assert rf.softmax.__name__ == "softmax"
    assert rf.softmax.__qualname__ == "softmax"
    assert rf.softmax.__module__ == "verjus.rf"
    assert rf.softmax.__wrapped__ is _verjus.rf_softmax
    assert rf.softmax.__doc__ == _verjus.rf_softmax.__doc__
    assert str(inspect.signature(rf.softmax)) == "(x, *, axis, use_mask=True)"
    text = pydoc.render_doc(rf.softmax, renderer=pydoc.plaintext)
    assert "softmax(x, *, axis, use_mask=True)" in text
    assert "Softmax over ``axis``" in text
    assert ":param Dim axis: the dim to normalize over" in text
    assert pickle.loads(pickle.dumps(rf.softmax)) is rf.softmax


def test_aliases_and_defaults_are_the_public_ops() -> None:
    assert rf.swish is rf.silu
    assert rf.dot is rf.matmul
    assert inspect.signature(rf.gating).parameters["gate_func"].default is rf.sigmoid
    assert rf.build_dict(rf.relu) == {"class": "rf.relu"}


def test_no_public_name_is_a_bare_native_op() -> None:
    """Every native op reachable as ``rf.<name>`` names itself in its errors: wrapped,
    or (``combine``, ``compare``: RETURNN's code requires builtins) named so natively."""
    bare = {name for name in rf.__all__ if isinstance(getattr(rf, name), types.BuiltinFunctionType)}
    assert bare == {"combine", "compare"}
    assert all(getattr(rf, name).__name__ == name for name in bare)
    with pytest.raises(TypeError, match=r"^combine\(\)"):
        rf.combine(1.0, "+", 2.0, axis=None)


def test_every_native_op_shows_types_in_its_errors() -> None:
    """Each wrapped op's error starts with ``rf.<name>(...)``, every parameter typed (from
    its docs)."""
    checked = 0
    for name, op in _verjus.rf_exports.items():
        public = getattr(rf, name)
        # Python functions with RETURNN's dtype rules that explain their errors alike
        # (``verjus.rf._public_ops.replaces_native``).
        replaced = name in ("where", "full") and public.extends_native is op
        if getattr(public, "__wrapped__", None) is not op and not replaced:
            continue  # a Dim, or a Python function of RETURNN's fuller signature
        checked += 1
        with pytest.raises(TypeError) as info:
            public(no_such_argument=1)
        head, _, rest = str(info.value).partition("): ")
        assert head.startswith(f"rf.{name}("), head
        assert rest in (
            "got an unexpected keyword argument 'no_such_argument'",
            "takes no keyword arguments",
        ), rest
        for parameter in inspect.signature(op).parameters:
            assert re.search(rf"\b{parameter}: \w", head), f"{name}: {parameter} untyped: {head}"
    assert checked >= 40, checked
