"""``verjus.Network``: a built network, its parameters and inference.

A thin handle over the Rust ``Network`` (``verjus._verjus.Network``): the
definition is checked and every shape inferred once, when the network is
built; ``forward`` runs in Rust with the GIL released. A network saved with
``save(folder)`` is a folder holding ``network.json`` (the definition),
``weights.safetensors`` (the parameters, named by layer path) and
``checkpoint.json`` (the seed, and the size and CRC-32 of each file); Rust
writes the folder and replaces it atomically as a whole.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from verjus import _verjus
from verjus._config import dumps_finite
from verjus._sequences import check_lengths, is_ragged, pad
from verjus._verjus import DEFINITION_FILE, MAX_JSON_BYTES, WEIGHTS_FILE
from verjus.nn import Graph, Sequential

__all__ = ["DEFINITION_FILE", "WEIGHTS_FILE", "Network", "Stepper"]

WHOLE_DEFINITION = "network definition"  # names a setting outside any layer

Definition = Mapping[str, Any] | str | os.PathLike[str] | Sequential | Graph


def _definition_json(definition: Definition) -> tuple[str, Path | None]:
    """JSON text of a definition given as a dict, builder, JSON file path or JSON
    text, and the file it was read from (for messages)."""
    if isinstance(definition, Sequential | Graph):
        return dumps_finite(definition.to_def(), WHOLE_DEFINITION, part="layer"), None
    if isinstance(definition, Mapping):
        return dumps_finite(definition, WHOLE_DEFINITION, part="layer"), None
    if isinstance(definition, os.PathLike) or (
        isinstance(definition, str) and not definition.lstrip().startswith(("{", "["))
    ):
        path = Path(definition)
        if path.is_dir():
            path = path / DEFINITION_FILE
        try:
            is_file, size = path.is_file(), path.stat().st_size
            if is_file and size <= MAX_JSON_BYTES:
                # utf-8-sig: editors on Windows start UTF-8 files with a byte-order mark.
                return path.read_text(encoding="utf-8-sig"), path
        except OSError as e:
            raise OSError(f"{path}: cannot read the network definition: {e.strerror}") from e
        except UnicodeDecodeError as e:
            raise ValueError(
                f"{path}: not a network definition: byte {e.start} is not UTF-8 text"
            ) from e
        if not is_file:  # /dev/zero, a FIFO: no end to read to
            raise OSError(f"{path}: cannot read the network definition: not a regular file")
        raise ValueError(
            f"{path}: {size} bytes, more than a network definition may hold "
            f"({MAX_JSON_BYTES >> 20} MiB)"
        )
    if isinstance(definition, str):
        return definition, None
    raise TypeError(
        "a network definition is a dict, a JSON path, JSON text, nn.Sequential or nn.Graph; "
        f"got {type(definition).__name__}"
    )


class Network:
    """A network built from a definition, with its parameters on one device.

    Build one with ``Network.from_def(...)``; run it with ``net(x)`` /
    ``net.forward(x)``; train it with ``verjus.Trainer``, which trains this very
    network (``forward`` and ``state_dict`` then see the trained weights).

    Devices are named ``"cpu"``, ``"cuda"`` (device 0) or ``"cuda:N"``. The
    parameters live on ``net.device`` and ``forward`` computes there: numpy inputs
    are uploaded and the outputs come back as numpy arrays. ``net.to(device)``
    moves the network (PyTorch-like; it returns ``net``). A CUDA device that
    cannot be used here (no GPU, a CUDA library missing) raises ``RuntimeError``
    naming what is missing; a malformed name raises ``ValueError``.
    """

    def __init__(self, native: _verjus.Network) -> None:
        self._native = native

    @classmethod
    def from_def(cls, definition: Definition, *, seed: int = 0, device: str = "cpu") -> Network:
        """Builds a definition: a ``NetworkDef`` dict, a path to its JSON file (or a
        folder holding ``network.json``), JSON text, or an ``nn.Sequential`` /
        ``nn.Graph``. Parameters are drawn from ``seed`` directly on ``device``
        (the same values on every device). A definition mistake is a
        ``ValueError`` naming the layer and the shapes."""
        text, path = _definition_json(definition)
        try:
            return cls(_verjus.Network.from_json(text, seed, device))
        except ValueError as e:
            if path is None:
                raise
            raise ValueError(f"{path}: {e}") from e

    @classmethod
    def load(cls, folder: str | os.PathLike[str], *, device: str = "cpu") -> Network:
        """The network saved in ``folder`` by ``save`` (or the network of a training
        checkpoint), loaded onto ``device``: definition, seed and weights, all
        checked before it is built. A broken folder raises ``OSError`` or
        ``ValueError`` naming the file."""
        return cls(_verjus.Network.load(os.fspath(folder), device))

    # -- the device ----------------------------------------------------------------

    @property
    def device(self) -> str:
        """The device the parameters live on and ``forward`` computes on
        (``"cpu"``, ``"cuda:0"``...)."""
        return self._native.device

    def to(self, device: str) -> Network:
        """Moves the parameters to ``device`` (bit-identical copies) and returns
        this network. If a ``Trainer`` trains it, the trainer moves along with its
        optimizer state. On an error nothing has moved."""
        self._native.to(device)
        return self

    def save(self, folder: str | os.PathLike[str]) -> Path:
        """Saves the network as the folder ``folder`` (``network.json``,
        ``weights.safetensors``, ``checkpoint.json``), replacing it atomically;
        other files in it are kept. Returns the folder."""
        self._native.save(os.fspath(folder))
        return Path(folder)

    # -- the definition --------------------------------------------------------

    def to_def(self) -> dict[str, Any]:
        """The definition as a dict (``from_def`` builds it again)."""
        return json.loads(self._native.to_json())

    def to_json(self) -> str:
        """The definition as JSON text."""
        return self._native.to_json()

    @property
    def inputs(self) -> list[tuple[str, tuple[int, ...]]]:
        """``(name, unit shape)`` per input."""
        return [(name, tuple(shape)) for name, shape in self._native.inputs()]

    @property
    def outputs(self) -> list[tuple[str, tuple[int, ...]]]:
        """``(name, unit shape)`` per output."""
        return [(name, tuple(shape)) for name, shape in self._native.outputs()]

    def parameter_count(self) -> int:
        """Number of learnable scalars (shared parameters counted once)."""
        return self._native.parameter_count()

    def layers(self) -> list[dict[str, Any]]:
        """One dict per leaf layer, in execution order: ``path``, ``kind``,
        ``inputs``, ``input_shapes``, ``output_shape``, ``params`` (``(name, shape)``
        pairs), ``shares``, ``live`` and ``sequence`` (a time axis after the batch)."""
        return self._native.descriptors()

    def summary(self, *, print_fn: Any = print) -> str:
        """A table of the layers, their output shapes and parameter counts; printed
        with ``print_fn`` (``None`` to only return it). Shapes are
        ``(batch, ...)``, and ``(batch, time, ...)`` for a sequence; the inputs
        line gives each input's dtype (``int32`` token ids, or ``float32``)."""
        sequences = self._layer_sequences()
        rows = [("layer", "type", "output shape", "params")]
        for d in self.layers():
            count = 0 if d["shares"] else sum(int(np.prod(shape)) for _, shape in d["params"])
            params = f"shared with {d['shares']}" if d["shares"] else f"{count:,}"
            shape = _shape_text(("batch",), sequences[d["path"]], d["output_shape"])
            rows.append((str(d["path"]), str(d["kind"]), shape, params))
        widths = [max(len(row[i]) for row in rows) for i in range(4)]
        rule = "-" * (sum(widths) + 6)

        def line(row: tuple[str, ...]) -> str:
            cells = [row[i].ljust(widths[i]) for i in range(3)] + [row[3].rjust(widths[3])]
            return "  ".join(cells)

        inputs = ", ".join(
            f"{name} {_shape_text(('batch',), seq, unit)} {dtype}"
            for (name, seq, dtype), (_, unit) in zip(self._input_kinds(), self.inputs, strict=True)
        )
        text = "\n".join(
            [f"inputs: {inputs}", rule, line(rows[0]), rule]
            + [line(r) for r in rows[1:]]
            + [rule, f"parameters: {self.parameter_count():,}"]
        )
        if print_fn is not None:
            print_fn(text)
        return text

    def _layer_sequences(self) -> dict[str, bool]:
        """Whether each input and each layer's output (by path) has a time axis."""
        sequences = {name: seq for name, seq, _ in self._input_kinds()}
        sequences.update((d["path"], d["sequence"]) for d in self.layers())
        return sequences

    # -- inference ---------------------------------------------------------------

    def forward(
        self, *inputs: npt.ArrayLike, lengths: npt.ArrayLike | None = None, **named: npt.ArrayLike
    ) -> Any:
        """Inference (no dropout) on one batch: one array ``[batch, *unit_shape]``
        per input, positionally or by input name. Returns one float32 array, or a
        tuple of them when the network has several outputs.

        A C-contiguous float32 array is read without a copy; other float arrays
        are converted.

        A sequence input (a definition input with a leading ``null`` time axis)
        takes a padded batch-major array, token ids ``[batch, T]`` for an int32
        input or frames ``[batch, T, ...]``, with each example's ``lengths``
        (``[batch]``, each in ``0..=T``; default all ``T``), or a list of
        per-example arrays of any lengths, which is padded (and gives the
        lengths). Sequence outputs come back batch-major ``[batch, T, ...]``,
        0 past each example's length. A length past ``T`` or a token id
        outside the vocabulary is a ``ValueError`` naming the example."""
        arrays = self._order_inputs(inputs, named)
        if not self.takes_sequences:
            if lengths is not None:
                raise ValueError(
                    "forward: lengths were given, but the network has no sequence input"
                )
            outputs = self._native.forward(arrays)
        else:
            arrays, lengths = self._sequence_batch(arrays, lengths, "forward")
            outputs = self._native.forward_sequences(arrays, lengths)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    @property
    def takes_sequences(self) -> bool:
        """Whether an input has a time axis (a sequence network)."""
        return any(seq for _, seq, _ in self._input_kinds())

    def _input_kinds(self) -> list[tuple[str, bool, str]]:
        kinds = getattr(self, "_kinds", None)
        if kinds is None:
            kinds = self._kinds = self._native.input_kinds()
        return kinds

    def _sequence_batch(
        self, arrays: list[Any], lengths: npt.ArrayLike | None, what: str
    ) -> tuple[list[Any], npt.NDArray[np.int32] | None]:
        """The inputs of a sequence network with lists padded, and the lengths
        (given, from the padding, or None for all frames), checked."""
        out = []
        for array, (name, seq, dtype) in zip(arrays, self._input_kinds(), strict=True):
            if seq and is_ragged(array):
                array, found = pad(array, f"{what}: input {name!r}", ids=dtype == "int32")
                if lengths is None:
                    lengths = found
            out.append(array)
        if lengths is not None:
            first = next(
                np.asarray(a)
                for a, (_, seq, _) in zip(out, self._input_kinds(), strict=True)
                if seq
            )
            if first.ndim < 2:
                raise ValueError(
                    f"{what}: a sequence input is [batch, T, ...], got shape {list(first.shape)}"
                )
            lengths = check_lengths(lengths, first.shape[0], first.shape[1], what)
        return out, lengths

    def stepper(self, batch: int = 1) -> Stepper:
        """A ``Stepper`` that feeds this network ``batch`` sequences a few frames
        at a time, each call's LSTMs starting from the state the last one ended
        in (for sampling without recomputing the prefix). It computes with
        this network's current weights."""
        return Stepper(self, batch)

    __call__ = forward

    def _order_inputs(
        self, inputs: tuple[npt.ArrayLike, ...], named: Mapping[str, npt.ArrayLike]
    ) -> list[npt.ArrayLike]:
        names = [name for name, _ in self.inputs]
        if inputs and named:
            raise TypeError("forward takes inputs either by position or by name, not both")
        if named:
            unknown = sorted(set(named) - set(names))
            missing = [n for n in names if n not in named]
            if unknown or missing:
                raise ValueError(
                    f"forward: the network's inputs are {names}; "
                    f"unknown {unknown}, missing {missing}"
                )
            return [named[n] for n in names]
        if len(inputs) != len(names):
            raise ValueError(
                f"forward: the network has {len(names)} input(s) {names}, "
                f"got {len(inputs)} array(s)"
            )
        return list(inputs)

    # -- parameters --------------------------------------------------------------

    def state_dict(self) -> dict[str, npt.NDArray[np.float32]]:
        """Every parameter by name (``fc1.weight``...), as copies, in parameter order."""
        return dict(self._native.state_dict())

    def parameters(self) -> dict[str, npt.NDArray[np.float32]]:
        """The same as ``state_dict()``: named copies of the parameters."""
        return self.state_dict()

    def load_state_dict(self, values: Mapping[str, npt.ArrayLike], *, strict: bool = True) -> None:
        """Replaces parameters by name. Names and shapes are all checked first, so
        on a ``ValueError`` nothing has changed; with ``strict`` every parameter
        must be given."""
        if not isinstance(values, Mapping):
            raise TypeError(
                "load_state_dict takes a mapping of parameter names to arrays, "
                f"got a {type(values).__name__}"
            )
        self._native.load_state_dict(dict(values), strict)

    def save_weights(self, path: str | os.PathLike[str]) -> None:
        """Writes the parameters as a safetensors file, atomically."""
        self._native.save_weights(os.fspath(path))

    def load_weights(self, path: str | os.PathLike[str], *, strict: bool = True) -> None:
        """Loads a safetensors file written by ``save_weights`` (or by PyTorch with the
        same names); nothing changes unless the whole file fits."""
        self._native.load_weights(os.fspath(path), strict)

    def __repr__(self) -> str:
        ins = ", ".join(
            name + _shape_text((), seq, unit) + ("" if dtype == "float32" else f" {dtype}")
            for (name, seq, dtype), (_, unit) in zip(self._input_kinds(), self.inputs, strict=True)
        )
        outs = ", ".join(
            name + _shape_text((), seq, unit)
            for (name, unit), seq in zip(self.outputs, self._native.sequence_outputs(), strict=True)
        )
        return (
            f"Network(inputs=[{ins}], outputs=[{outs}], "
            f"parameters={self.parameter_count():,}, device={self.device!r})"
        )


def _shape_text(lead: tuple[str, ...], sequence: bool, unit: Any) -> str:
    """A shape as ``(batch, time, 256)``: the ``lead`` axes, ``time`` for a
    sequence, then the unit shape (a tuple's own look when one item is left:
    ``(4,)``)."""
    items = [*lead, *(("time",) if sequence else ()), *(str(n) for n in unit)]
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


class Stepper:
    """Steps a sequence network through ``batch`` sequences a few frames per
    call, carrying each LSTM's state (``h``, ``c``) from call to call on the
    network's device: a sampling loop feeds one token per call without
    recomputing the prefix::

        stepper = net.stepper()            # batch 1
        logits = stepper.step([eot])       # [1, vocab]: the first frame
        logits = stepper.step([next_id])   # continues from the state
        stepper.reset_state()              # a new sequence

    ``step`` takes token ids ``[batch]`` (one frame each; the sequence outputs
    come back ``[batch, ...]``) or ``[batch, T]`` (outputs ``[batch, T, ...]``),
    with optional ``lengths`` (a shorter sequence's state stays at its last
    real frame). ``state()`` returns the state as ``{"rnn.h_l0": [batch,
    hidden], ...}`` copies; ``set_state`` writes it back (to continue a saved
    prefix); ``reset_state`` zeros it. The weights are the network's current
    ones: a stepper made before training samples from the trained network."""

    def __init__(self, network: Network, batch: int = 1) -> None:
        if not isinstance(network, Network):
            raise TypeError(f"network must be a verjus.Network, got {type(network).__name__}")
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise ValueError(f"Stepper: batch must be a positive int, got {batch!r}")
        self.network = network
        self._native = _verjus.Stepper(network._native, batch)

    @property
    def batch(self) -> int:
        """The number of sequences stepped side by side."""
        return self._native.batch

    def step(self, *inputs: npt.ArrayLike, lengths: npt.ArrayLike | None = None) -> Any:
        """The outputs for the next frame(s) of each sequence (see the class);
        one array, or a tuple for several outputs."""
        kinds = self.network._input_kinds()
        if len(inputs) != len(kinds):
            raise ValueError(
                f"step: the network has {len(kinds)} input(s) "
                f"{[n for n, _, _ in kinds]}, got {len(inputs)} array(s)"
            )
        arrays = [np.asarray(a) for a in inputs]
        single = all(
            a.ndim == 1 + len(shape)
            for a, (_, seq, _), (_, shape) in zip(arrays, kinds, self.network.inputs, strict=True)
            if seq
        )
        if single:  # one frame per sequence: add the time axis, and drop it after
            arrays = [
                a[:, None] if seq else a for a, (_, seq, _) in zip(arrays, kinds, strict=True)
            ]
        arrays, lengths = self.network._sequence_batch(arrays, lengths, "step")
        outputs = self._native.step(arrays, lengths)
        if single:
            flags = self.network._native.sequence_outputs()
            outputs = [o[:, 0] if f else o for o, f in zip(outputs, flags, strict=True)]
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def state(self) -> dict[str, npt.NDArray[np.float32]]:
        """The carried state by name (copies), zeros before the first step."""
        return dict(self._native.state())

    def set_state(self, values: Mapping[str, npt.ArrayLike]) -> None:
        """Sets the carried state by name (``state()``'s names and shapes); names
        not given keep their values. On a ``ValueError`` nothing changed."""
        if not isinstance(values, Mapping):
            raise TypeError(
                f"set_state takes a mapping of state names to arrays, got {type(values).__name__}"
            )
        self._native.set_state(dict(values))

    def reset_state(self) -> None:
        """Zeros the carried state: the next step starts new sequences."""
        self._native.reset_state()

    def __repr__(self) -> str:
        return f"Stepper(batch={self.batch})"
