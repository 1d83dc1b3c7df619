"""Building network definitions in Python.

A network in verjus is data: a ``NetworkDef`` (JSON) that the Rust core builds,
checks and runs. This module writes those definitions from Python in two forms:

- ``Sequential`` chains layers, PyTorch-style. The input's unit shape (one
  example, no batch axis) is given once and every other shape is inferred by
  the core::

      net = verjus.Network.from_def(
          nn.Sequential(nn.Conv2d(32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Flatten(), nn.Linear(10), input_shape=(1, 28, 28))
      )

  Unnamed layers are named by type and index (``"conv2d_1"``, ``"relu_1"``,
  ``"conv2d_2"``, ...), as Keras names them, so ``summary()`` and parameter
  names (``"conv2d_1.weight"``) say what each layer is. (The names are part of
  a saved definition: networks saved with other names load as they were.)

- The functional graph form writes any DAG: call layers on ``Input`` nodes and
  on each other's outputs, then collect them in a ``Graph``::

      x = nn.Input("x", (16,))
      h = nn.Linear(16, name="fc")(x)
      y = nn.Add(name="residual")(nn.ReLU(name="act")(h), x)
      definition = nn.Graph(inputs=[x], outputs=[y])

Outputs are named after their layers unless given names of their own
(``Sequential(..., output_name="logits")``, ``Graph(..., outputs={"logits": y})``):
a named output is part of the network's interface, which a hot swap
(``Runner.swap``) matches, so a network with other layers can replace one
with the same interface.

Both produce the same ``NetworkDef`` dict as ``examples/nets/*.json``
(``to_def()``); nothing here checks shapes, which the core does once, with
errors that name the layer.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = [
    "GELU",
    "LSTM",
    "Add",
    "AvgPool2d",
    "Concat",
    "Conv2d",
    "Dropout",
    "Embedding",
    "Flatten",
    "Graph",
    "Input",
    "LastFrame",
    "Layer",
    "Linear",
    "LogSoftmax",
    "MaxOverTime",
    "MaxPool2d",
    "MeanOverTime",
    "Node",
    "ReLU",
    "Reshape",
    "Sequential",
    "Sigmoid",
    "Softmax",
    "Tanh",
]

# The definition format written: 3 with a sequence input or layer, 2 where an
# output is named apart from its layer (the core reads all), else 1, which
# older readers understand too.
FORMAT_VERSION = 2
SEQUENCE_FORMAT_VERSION = 3

# Layer types with parameters (the ones a repeated call shares).
_PARAMETRIC = frozenset({"Linear", "Conv2d", "Embedding", "LSTM"})

# Layer types that need format version 3.
_SEQUENCE_LAYERS = frozenset({"Embedding", "LSTM", "LastFrame", "MeanOverTime", "MaxOverTime"})


def _pair(value: int | Sequence[int], what: str) -> int | list[int]:
    """A size for both spatial axes (``3``) or per axis (``(3, 5)``), as the JSON wants it."""
    if isinstance(value, bool):
        raise TypeError(f"{what} must be an int or a pair of ints, got {value!r}")
    if isinstance(value, int):
        return value
    items = list(value)
    if len(items) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) for v in items):
        raise TypeError(f"{what} must be an int or a pair of ints, got {value!r}")
    return items[0] if items[0] == items[1] else items


class Layer:
    """A layer's definition: its ``"type"``, its settings, an optional name and
    an optional ``share`` (the path of a layer whose parameters it uses)."""

    kind: str = ""

    def __init__(self, *, name: str | None = None, share: str | None = None) -> None:
        if name is not None and (not isinstance(name, str) or not name or "." in name):
            raise ValueError(f"a layer name must be a non-empty string without '.', got {name!r}")
        self.name = name
        self.share = share

    def settings(self) -> dict[str, Any]:
        """The fields of this layer type, with defaults left out (as the core writes them)."""
        return {}

    def to_def(self, name: str, inputs: list[str] | None = None) -> dict[str, Any]:
        """This layer as a ``LayerDef`` dict named ``name`` reading ``inputs``."""
        entry: dict[str, Any] = {"name": name}
        if inputs is not None:
            entry["inputs"] = inputs
        if self.share is not None:
            entry["share"] = self.share
        entry["type"] = self.kind
        entry.update(self.settings())
        return entry

    def __call__(self, *inputs: Node) -> Node:
        """The functional form: this layer applied to ``inputs`` (for ``Graph``)."""
        if not inputs:
            raise ValueError(f"{self.kind} needs at least one input node")
        for node in inputs:
            if not isinstance(node, Node):
                raise TypeError(f"{self.kind} takes graph nodes, got {type(node).__name__}")
        return Node(self, list(inputs))

    def __repr__(self) -> str:
        args = [f"{k}={v!r}" for k, v in self.settings().items()]
        if self.name is not None:
            args.append(f"name={self.name!r}")
        return f"{type(self).__name__}({', '.join(args)})"


class Linear(Layer):
    """``y = x W^T + b`` over the last axis; the input size is inferred
    (``in_features``, when given, is checked)."""

    kind = "Linear"

    def __init__(
        self,
        out_features: int,
        *,
        bias: bool = True,
        in_features: int | None = None,
        name: str | None = None,
        share: str | None = None,
    ) -> None:
        super().__init__(name=name, share=share)
        self.out_features = out_features
        self.bias = bias
        self.in_features = in_features

    def settings(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.in_features is not None:
            out["in_features"] = self.in_features
        out["out_features"] = self.out_features
        if not self.bias:
            out["bias"] = False
        return out


class Conv2d(Layer):
    """2-D convolution over ``[C, H, W]`` units: ``Conv2d(out_channels, kernel_size, ...)``;
    the input channels are inferred."""

    kind = "Conv2d"

    def __init__(
        self,
        out_channels: int,
        kernel_size: int | Sequence[int],
        *,
        stride: int | Sequence[int] = 1,
        padding: int | Sequence[int] = 0,
        dilation: int | Sequence[int] = 1,
        bias: bool = True,
        name: str | None = None,
        share: str | None = None,
    ) -> None:
        super().__init__(name=name, share=share)
        self.out_channels = out_channels
        self.kernel = _pair(kernel_size, "kernel_size")
        self.stride = _pair(stride, "stride")
        self.padding = _pair(padding, "padding")
        self.dilation = _pair(dilation, "dilation")
        self.bias = bias

    def settings(self) -> dict[str, Any]:
        out: dict[str, Any] = {"out_channels": self.out_channels, "kernel": self.kernel}
        if self.stride != 1:
            out["stride"] = self.stride
        if self.padding != 0:
            out["padding"] = self.padding
        if self.dilation != 1:
            out["dilation"] = self.dilation
        if not self.bias:
            out["bias"] = False
        return out


class _Pool2d(Layer):
    def __init__(
        self,
        kernel_size: int | Sequence[int],
        stride: int | Sequence[int] | None = None,
        padding: int | Sequence[int] = 0,
        *,
        name: str | None = None,
    ) -> None:
        super().__init__(name=name)
        self.kernel = _pair(kernel_size, "kernel_size")
        self.stride = None if stride is None else _pair(stride, "stride")
        self.padding = _pair(padding, "padding")

    def settings(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kernel": self.kernel}
        if self.stride is not None:
            out["stride"] = self.stride
        if self.padding != 0:
            out["padding"] = self.padding
        return out


class MaxPool2d(_Pool2d):
    """Max pooling over ``[C, H, W]`` units; the stride defaults to the kernel size."""

    kind = "MaxPool2d"


class AvgPool2d(_Pool2d):
    """Average pooling (padding counts in the divisor); the stride defaults to the kernel size."""

    kind = "AvgPool2d"


class ReLU(Layer):
    """``max(x, 0)``."""

    kind = "ReLU"


class Sigmoid(Layer):
    """``1 / (1 + exp(-x))``."""

    kind = "Sigmoid"


class Tanh(Layer):
    """``tanh(x)``."""

    kind = "Tanh"


class GELU(Layer):
    """The Gaussian error linear unit."""

    kind = "GELU"


class _AxisLayer(Layer):
    def __init__(self, axis: int = -1, *, name: str | None = None) -> None:
        super().__init__(name=name)
        self.axis = axis

    def settings(self) -> dict[str, Any]:
        return {} if self.axis == -1 else {"axis": self.axis}


class Softmax(_AxisLayer):
    """Softmax over a unit axis (default the last)."""

    kind = "Softmax"


class LogSoftmax(_AxisLayer):
    """Log-softmax over a unit axis (default the last)."""

    kind = "LogSoftmax"


class Dropout(Layer):
    """Inverted dropout with drop probability ``p``; active in training only."""

    kind = "Dropout"

    def __init__(self, p: float = 0.5, *, name: str | None = None) -> None:
        super().__init__(name=name)
        self.p = p

    def settings(self) -> dict[str, Any]:
        return {"p": self.p}


class Flatten(Layer):
    """Flattens the unit shape to one axis."""

    kind = "Flatten"


class Reshape(Layer):
    """Reshapes the unit shape (same element count)."""

    kind = "Reshape"

    def __init__(self, shape: Sequence[int], *, name: str | None = None) -> None:
        super().__init__(name=name)
        self.shape = list(shape)

    def settings(self) -> dict[str, Any]:
        return {"shape": self.shape}


class Add(Layer):
    """The sum of two or more inputs of the same shape (residual connections)."""

    kind = "Add"


class Concat(Layer):
    """Concatenation of the inputs along a unit axis."""

    kind = "Concat"

    def __init__(self, axis: int, *, name: str | None = None) -> None:
        super().__init__(name=name)
        self.axis = axis

    def settings(self) -> dict[str, Any]:
        return {"axis": self.axis}


class Embedding(Layer):
    """A table of ``vocab`` learned vectors of size ``dim``, looked up by int32
    token ids (per frame of a sequence): ``[..] -> [.., dim]``. An id outside
    ``0..vocab`` is an error naming the example and the frame."""

    kind = "Embedding"

    def __init__(
        self, vocab: int, dim: int, *, name: str | None = None, share: str | None = None
    ) -> None:
        super().__init__(name=name, share=share)
        self.vocab = vocab
        self.dim = dim

    def settings(self) -> dict[str, Any]:
        return {"vocab": self.vocab, "dim": self.dim}


class LSTM(Layer):
    """A (stacked, optionally bidirectional) LSTM over a sequence of frames:
    sequence ``[F]`` -> sequence ``[hidden]`` (``[2 * hidden]`` bidirectional),
    0 past each example's length. ``dropout`` applies between layers in
    training. Parameters are named as PyTorch's ``nn.LSTM`` (``weight_ih_l0``...)."""

    kind = "LSTM"

    def __init__(
        self,
        hidden: int,
        *,
        num_layers: int = 1,
        dropout: float = 0.0,
        bidirectional: bool = False,
        bias: bool = True,
        name: str | None = None,
        share: str | None = None,
    ) -> None:
        super().__init__(name=name, share=share)
        self.hidden = hidden
        self.num_layers = num_layers
        self.dropout = dropout
        self.bidirectional = bidirectional
        self.bias = bias

    def settings(self) -> dict[str, Any]:
        out: dict[str, Any] = {"hidden": self.hidden}
        if self.num_layers != 1:
            out["num_layers"] = self.num_layers
        if self.dropout:
            out["dropout"] = self.dropout
        if self.bidirectional:
            out["bidirectional"] = True
        if not self.bias:
            out["bias"] = False
        return out


class LastFrame(Layer):
    """Each example's frame at ``length - 1``: sequence -> one value per example
    (an empty sequence is an error)."""

    kind = "LastFrame"


class MeanOverTime(Layer):
    """The mean over each example's frames (0 for an empty sequence)."""

    kind = "MeanOverTime"


class MaxOverTime(Layer):
    """The maximum over each example's frames (an empty sequence is an error)."""

    kind = "MaxOverTime"


def _network_def(
    inputs: list[dict[str, Any]],
    layers: list[dict[str, Any]],
    outputs: list[str | dict[str, str]],
) -> dict[str, Any]:
    renamed = any(isinstance(o, dict) for o in outputs)
    version = FORMAT_VERSION if renamed else 1
    if _uses_sequences(inputs, layers):
        version = SEQUENCE_FORMAT_VERSION
    definition: dict[str, Any] = {
        "format_version": version,
        "inputs": inputs,
        "layers": layers,
    }
    if outputs:
        definition["outputs"] = outputs
    return definition


def _uses_sequences(inputs: list[dict[str, Any]], layers: list[dict[str, Any]]) -> bool:
    """Whether the definition needs format version 3: a sequence or int32
    input, or a sequence layer (at any depth)."""
    if any(i["shape"][:1] == [None] or i.get("dtype", "float32") != "float32" for i in inputs):
        return True
    stack = list(layers)
    while stack:
        layer = stack.pop()
        if layer.get("type") in _SEQUENCE_LAYERS:
            return True
        stack.extend(layer.get("layers", []))
    return False


def _input(name: str, shape: list[int | None], dtype: str) -> dict[str, Any]:
    """An input object; ``dtype`` only when it is not the default."""
    if dtype not in ("float32", "int32"):
        raise ValueError(f"input {name!r}: dtype must be 'float32' or 'int32', got {dtype!r}")
    entry: dict[str, Any] = {"name": name, "shape": shape}
    if dtype != "float32":
        entry["dtype"] = dtype
    return entry


def _output(name: str | None, layer: str) -> str | dict[str, str]:
    """A network output from ``layer``: the bare layer name, or named ``name``."""
    if name is None or name == layer:
        return layer
    if not isinstance(name, str) or not name:
        raise ValueError(f"an output name must be a non-empty string, got {name!r}")
    return {"name": name, "from": layer}


def _unit_shape(shape: Iterable[int | None], what: str) -> list[int | None]:
    """A unit shape; a leading ``None`` is a sequence's time axis."""
    dims = list(shape)
    frame = dims[1:] if dims[:1] == [None] else dims
    if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in frame):
        raise ValueError(
            f"{what} must be a sequence of non-negative ints (a leading None for a "
            f"sequence's time axis), got {shape!r}"
        )
    return dims


class Sequential(Layer):
    """Layers applied one after another.

    With ``input_shape`` it is a whole network (``to_def()`` gives the
    ``NetworkDef``); without, it is a container layer inside another network.
    Unnamed layers are named ``<type>_<n>`` (``conv2d_1``, ``relu_1``, ``relu_2``).
    The network's input is named ``input_name``, and its output is named
    ``output_name`` (default: after the last layer).

    A sequence network's ``input_shape`` starts with ``None``, the time axis
    (``(None,)`` with ``input_dtype="int32"`` for token ids, ``(None, 28)``
    for frames of 28 features)::

        nn.Sequential(nn.Embedding(114, 64), nn.LSTM(256), nn.Linear(114),
                      input_shape=(None,), input_dtype="int32")
    """

    kind = "Sequential"

    def __init__(
        self,
        *layers: Layer,
        input_shape: Sequence[int | None] | None = None,
        input_name: str = "input",
        input_dtype: str = "float32",
        output_name: str | None = None,
        name: str | None = None,
    ) -> None:
        super().__init__(name=name)
        self.input_dtype = input_dtype
        for layer in layers:
            if not isinstance(layer, Layer):
                raise TypeError(f"Sequential takes layers, got {type(layer).__name__}")
        self.layers = list(layers)
        self.input_shape = None if input_shape is None else _unit_shape(input_shape, "input_shape")
        self.input_name = input_name
        self.output_name = output_name

    def _names(self) -> list[str]:
        """Each layer's name: its own, else ``<type>_<n>`` counted per type."""
        given = [layer.name for layer in self.layers if layer.name is not None]
        for n in given:
            if given.count(n) > 1:
                raise ValueError(f"Sequential: two layers are named {n!r}")
        used = set(given)
        counts: dict[str, int] = {}
        names = []
        for layer in self.layers:
            name = layer.name
            while name is None or (layer.name is None and name in used):
                counts[layer.kind] = counts.get(layer.kind, 0) + 1
                name = f"{layer.kind.lower()}_{counts[layer.kind]}"
            used.add(name)
            names.append(name)
        return names

    def _layer_defs(self) -> list[dict[str, Any]]:
        names = self._names()
        return [layer.to_def(n) for n, layer in zip(names, self.layers, strict=True)]

    def settings(self) -> dict[str, Any]:
        return {"layers": self._layer_defs()}

    def to_def(self, name: str | None = None, inputs: list[str] | None = None) -> dict[str, Any]:
        """As a container layer when ``name`` is given, else the whole ``NetworkDef``."""
        if name is not None:
            return super().to_def(name, inputs)
        if self.input_shape is None:
            raise ValueError(
                "Sequential(..., input_shape=...) is needed for a whole network: "
                "the input's unit shape (without the batch axis) must be given once"
            )
        outputs = []
        if self.output_name is not None:
            if not self.layers:
                raise ValueError("Sequential: output_name needs at least one layer")
            outputs = [_output(self.output_name, self._names()[-1])]
        return _network_def(
            [_input(self.input_name, self.input_shape, self.input_dtype)],
            self._layer_defs(),
            outputs,
        )

    def to_json(self) -> str:
        """The ``NetworkDef`` as JSON text."""
        return json.dumps(self.to_def(), indent=2)

    def __repr__(self) -> str:
        inner = ", ".join(repr(layer) for layer in self.layers)
        return f"Sequential({inner}, input_shape={self.input_shape!r})"


class Node:
    """A value in the functional graph form: a network input or a layer's output."""

    def __init__(self, layer: Layer | None, inputs: list[Node], input_name: str | None = None):
        self.layer = layer
        self.inputs = inputs
        self.input_name = input_name


class Input(Node):
    """A named network input with its unit shape (no batch axis); a leading
    ``None`` is a sequence's time axis, and ``dtype="int32"`` takes token ids."""

    def __init__(self, name: str, shape: Sequence[int | None], dtype: str = "float32") -> None:
        super().__init__(None, [], input_name=name)
        self.shape = _unit_shape(shape, f"input {name!r} shape")
        self.dtype = dtype


class Graph:
    """A network whose layers name their inputs: any DAG (skip connections,
    several inputs and outputs), from ``Input`` nodes and layer calls.

    Layers without a name get ``<type><n>`` (``linear1``, ``relu2``, ...). The
    layers are listed in a topological order of the nodes reachable from
    ``outputs``. Calling one layer object on several inputs applies it several
    times with one set of parameters: the later calls ``share`` the first's.
    ``outputs`` is a list (each output named after its layer) or a mapping
    from output names to nodes (``{"logits": y}``).
    """

    def __init__(
        self, inputs: Sequence[Input], outputs: Sequence[Node] | Mapping[str, Node]
    ) -> None:
        if not inputs or not outputs:
            raise ValueError("Graph needs at least one input and one output")
        self.inputs = list(inputs)
        if isinstance(outputs, Mapping):
            self.output_names: list[str | None] = list(outputs.keys())
            self.outputs = list(outputs.values())
        else:
            self.outputs = list(outputs)
            self.output_names = [None] * len(self.outputs)

    def to_def(self) -> dict[str, Any]:
        """The ``NetworkDef`` dict."""
        input_names = {id(node): node.input_name for node in self.inputs}
        order = self._layer_order(input_names)
        names = self._names(order, set(input_names.values()))
        first_use: dict[int, str] = {}
        layers = []
        for node in order:
            assert node.layer is not None  # inputs are not in `order`
            sources = [
                names[id(s)] if s.layer is not None else str(s.input_name) for s in node.inputs
            ]
            entry = node.layer.to_def(names[id(node)], sources)
            owner = first_use.setdefault(id(node.layer), names[id(node)])
            if owner != names[id(node)] and node.layer.kind in _PARAMETRIC:
                entry["share"] = owner
            layers.append(entry)
        inputs = [_input(str(n.input_name), n.shape, n.dtype) for n in self.inputs]
        outputs = [
            _output(name, names[id(o)] if o.layer is not None else str(o.input_name))
            for name, o in zip(self.output_names, self.outputs, strict=True)
        ]
        return _network_def(inputs, layers, outputs)

    def _layer_order(self, input_names: dict[int, str | None]) -> list[Node]:
        """The layer nodes reachable from the outputs, each after its inputs."""
        order: list[Node] = []
        state: dict[int, str] = {}  # "open" while visiting, "done" after

        for out in self.outputs:
            # Depth-first post-order with an explicit stack: a deep chain of
            # layers must not hit Python's recursion limit. An entry is a node
            # and the index of its next input to visit.
            stack: list[tuple[Node, int]] = [(out, 0)]
            while stack:
                node, next_input = stack.pop()
                key = id(node)
                if next_input == 0:
                    if state.get(key) == "done":
                        continue
                    if state.get(key) == "open":
                        raise ValueError("Graph: the layers form a cycle")
                    if node.layer is None:
                        if key not in input_names:
                            raise ValueError(
                                f"Graph: input {node.input_name!r} is used "
                                "but not listed in inputs="
                            )
                        state[key] = "done"
                        continue
                    state[key] = "open"
                if next_input < len(node.inputs):
                    stack.append((node, next_input + 1))
                    stack.append((node.inputs[next_input], 0))
                else:
                    state[key] = "done"
                    order.append(node)
        return order

    @staticmethod
    def _names(order: list[Node], taken: set[str]) -> dict[int, str]:
        """A unique name per layer node: its layer's name, else ``<type><n>``."""
        names: dict[int, str] = {}
        counters: dict[str, itertools.count[int]] = {}
        calls: dict[int, int] = {}
        used = set(taken)
        for node in order:
            layer = node.layer
            assert layer is not None
            call = calls[id(layer)] = calls.get(id(layer), 0) + 1
            if layer.name is not None:
                name = layer.name if call == 1 else f"{layer.name}_{call}"
                if name in used:
                    raise ValueError(f"Graph: two layers or inputs are named {name!r}")
            else:
                counter = counters.setdefault(layer.kind, itertools.count(1))
                name = f"{layer.kind.lower()}{next(counter)}"
                while name in used:
                    name = f"{layer.kind.lower()}{next(counter)}"
            used.add(name)
            names[id(node)] = name
        return names

    def to_json(self) -> str:
        """The ``NetworkDef`` as JSON text."""
        return json.dumps(self.to_def(), indent=2)
