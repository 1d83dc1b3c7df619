"""The layer classes of ``verjus.nn`` state the core's layer vocabulary: every
kind round-trips through the core (``Network.from_def(d).to_def() == d``) with
its defaults and with every setting changed, and each Python default is the
core's default (stated explicitly, the core leaves it out again).

The kinds, their settings and their defaults are read from the classes
themselves (``kind``, the ``__init__`` signatures, the field ``settings()``
writes for a changed setting), so a new class or a new setting without a case
here fails ``test_every_kind_and_setting_has_a_case``."""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field
from typing import Any

import pytest

import verjus
from verjus import nn

# Arguments that are not settings of the layer type: the LayerDef's own fields,
# and what a Sequential takes only as a whole network (its input and output).
NOT_SETTINGS = frozenset({"name", "share"})
NETWORK_ARGUMENTS = {
    "Sequential": frozenset({"input_shape", "input_name", "input_dtype", "output_name"}),
}

# Kinds of the core without a Python layer class, and why.
NO_PYTHON_CLASS = {
    # nn.Graph writes whole networks; a nested Graph scope is written as a dict.
    "Graph",
}


@dataclass(frozen=True)
class Case:
    """How to build one kind: its required arguments, a value other than the
    default for each setting that has one, and the input it reads."""

    args: tuple[Any, ...] = ()
    changed: dict[str, Any] = field(default_factory=dict)
    shape: tuple[int | None, ...] = (3,)
    dtype: str = "float32"
    arity: int = 1  # how many times the input is passed (Add, Concat)


SEQUENCE = (None, 3)
CASES: dict[str, Case] = {
    "Linear": Case((4,), {"bias": False, "in_features": 3}),
    "Conv2d": Case(
        (4, (3, 2)),
        {"stride": (2, 1), "padding": (1, 2), "dilation": 2, "bias": False},
        shape=(2, 9, 9),
    ),
    "MaxPool2d": Case((3,), {"stride": (1, 2), "padding": 1}, shape=(2, 8, 8)),
    "AvgPool2d": Case(((3, 2),), {"stride": 2, "padding": (1, 0)}, shape=(2, 8, 8)),
    "ReLU": Case(),
    "Sigmoid": Case(),
    "Tanh": Case(),
    "GELU": Case(),
    "Softmax": Case((), {"axis": 0}, shape=(3, 4)),
    "LogSoftmax": Case((), {"axis": 0}, shape=(3, 4)),
    "Dropout": Case((), {"p": 0.25}),
    "Flatten": Case(shape=(2, 3)),
    "Reshape": Case(((3, 2),), shape=(2, 3)),
    "Add": Case(arity=2),
    "Concat": Case((-1,), arity=2),
    "Embedding": Case((10, 4), shape=(None,), dtype="int32"),
    "LSTM": Case(
        (5,),
        {"num_layers": 2, "dropout": 0.25, "bidirectional": True, "bias": False},
        shape=SEQUENCE,
    ),
    "LastFrame": Case(shape=SEQUENCE),
    "MeanOverTime": Case(shape=SEQUENCE),
    "MaxOverTime": Case(shape=SEQUENCE),
    "Sequential": Case((nn.Linear(4), nn.ReLU(), nn.Linear(2))),
}


def layer_classes() -> dict[str, type[nn.Layer]]:
    """Every layer class of verjus.nn with a kind, by kind."""
    found: dict[str, type[nn.Layer]] = {}
    stack = list(nn.Layer.__subclasses__())
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if cls.__module__ != nn.__name__ or not cls.kind:
            continue
        assert cls.kind not in found, f"{cls.__name__} and {found[cls.kind].__name__}: one kind"
        found[cls.kind] = cls
    return found


CLASSES = layer_classes()


def defaults(cls: type[nn.Layer]) -> dict[str, Any]:
    """The settings of ``cls`` that have a default, with it (from ``__init__``)."""
    skip = NOT_SETTINGS | NETWORK_ARGUMENTS.get(cls.kind, frozenset())
    return {
        p.name: p.default
        for p in inspect.signature(cls.__init__).parameters.values()
        if p.default is not inspect.Parameter.empty and p.name not in skip
    }


def network(layer: nn.Layer, case: Case) -> dict[str, Any]:
    """A network of ``layer`` reading one input, as Python writes it."""
    x = nn.Input("x", case.shape, case.dtype)
    return nn.Graph(inputs=[x], outputs=[layer(*[x] * case.arity)]).to_def()


def build(kind: str, **changed: Any) -> dict[str, Any]:
    case = CASES[kind]
    return network(CLASSES[kind](*case.args, **changed), case)


def through_core(definition: dict[str, Any]) -> dict[str, Any]:
    """The definition as the core writes it back."""
    return verjus.Network.from_def(definition).to_def()


_OUT = object()  # a field left out


def field_of(kind: str, setting: str) -> str:
    """The field ``settings()`` writes for ``setting``: the one that differs
    when only that setting is changed."""
    case = CASES[kind]
    base = CLASSES[kind](*case.args).settings()
    changed = CLASSES[kind](*case.args, **{setting: case.changed[setting]}).settings()
    fields = [k for k in base.keys() | changed.keys() if base.get(k, _OUT) != changed.get(k, _OUT)]
    assert len(fields) == 1, f"{kind}({setting}=...) changed the fields {sorted(fields)}"
    return fields[0]


def as_json(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


KINDS = sorted(CLASSES)
SETTINGS = [(kind, setting) for kind in KINDS for setting in sorted(defaults(CLASSES[kind]))]


def test_every_kind_and_setting_has_a_case():
    assert sorted(CASES) == KINDS, "a layer class of verjus.nn without a case here (or the reverse)"
    for kind in KINDS:
        assert sorted(CASES[kind].changed) == sorted(defaults(CLASSES[kind])), (
            f"{kind}: CASES must change every setting that has a default"
        )


def test_the_classes_state_the_cores_vocabulary():
    """The kinds the core knows (read from its error for an unknown one) are
    the Python classes' kinds."""
    broken = {"inputs": [{"name": "x", "shape": [3]}], "layers": [{"name": "a", "type": "?"}]}
    with pytest.raises(ValueError, match="unknown variant") as error:
        verjus.Network.from_def(broken)
    core_kinds = re.findall(r"`(\w+)`", str(error.value).split("expected one of", 1)[1])
    assert len(core_kinds) > 10, str(error.value)
    assert sorted(set(core_kinds) - NO_PYTHON_CLASS) == KINDS


@pytest.mark.parametrize("kind", KINDS)
def test_a_layer_with_its_defaults_round_trips(kind):
    definition = build(kind)
    assert through_core(definition)["layers"] == definition["layers"]
    assert through_core(definition) == definition


@pytest.mark.parametrize("kind", KINDS)
def test_a_layer_with_every_setting_changed_round_trips(kind):
    changed = CASES[kind].changed
    definition = build(kind, **changed)
    entry = definition["layers"][0]
    for setting, value in changed.items():
        # Each changed setting is written, in the field only it changes.
        assert entry[field_of(kind, setting)] != as_json(defaults(CLASSES[kind])[setting])
        assert value != defaults(CLASSES[kind])[setting]
    assert through_core(definition)["layers"] == definition["layers"]
    assert through_core(definition) == definition


@pytest.mark.parametrize(("kind", "setting"), SETTINGS)
def test_each_python_default_is_the_cores(kind, setting):
    """A setting changed alone round-trips; and its Python default is the
    core's: stated explicitly, the core leaves it out again, as ``settings()``
    does. A field the core requires (no default there) is always written."""
    name = field_of(kind, setting)
    alone = build(kind, **{setting: CASES[kind].changed[setting]})
    assert through_core(alone)["layers"] == alone["layers"]

    plain = build(kind)
    explicit = build(kind)
    explicit["layers"][0][name] = as_json(defaults(CLASSES[kind])[setting])
    if name in plain["layers"][0]:
        # Written at its default too: the core must have no default of its own
        # (else the two could differ, and settings() would write a default).
        missing = build(kind)
        del missing["layers"][0][name]
        with pytest.raises(ValueError, match=f"missing field `{name}`"):
            verjus.Network.from_def(missing)
        assert explicit == plain
    got = through_core(explicit)["layers"]
    assert got == plain["layers"], (
        f"{kind}: the Python default {setting}={defaults(CLASSES[kind])[setting]!r} is not "
        f"the core's: written explicitly it comes back as {got[0].get(name, '(left out)')!r}"
    )


@pytest.mark.parametrize("maker", ["Input", "Sequential"])
def test_the_input_dtype_default_is_the_cores(maker):
    """An input's dtype (``Input(dtype=)``, ``Sequential(input_dtype=)``)
    defaults to the core's: stated explicitly, the core leaves it out again."""
    if maker == "Input":
        default = inspect.signature(nn.Input.__init__).parameters["dtype"].default
        x = nn.Input("x", (3,))
        plain = nn.Graph(inputs=[x], outputs=[nn.ReLU()(x)]).to_def()
    else:
        default = inspect.signature(nn.Sequential.__init__).parameters["input_dtype"].default
        plain = nn.Sequential(nn.ReLU(), input_shape=(3,)).to_def()
    assert through_core(plain) == plain
    explicit = {**plain, "inputs": [{**plain["inputs"][0], "dtype": default}]}
    assert through_core(explicit) == plain
