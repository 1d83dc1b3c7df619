"""Saving and loading the parameters of an ``rf.Module``: ``state_dict``,
``load_state_dict``, and ``save_state`` / ``load_state`` for safetensors files.

Names are RETURNN's: the dotted names of ``Module.named_parameters``
(``"layers.0.ff.linear_ff.weight"``), each array in its parameter's dim order,
which is what RETURNN's frontend on PyTorch keeps in its state dict, so a file
reads with ``safetensors.numpy.load_file`` (or ``safetensors.torch``) under the
names RETURNN uses. The file is written atomically (a temporary file renamed
over the target), tensors in name order, so the same values give the same bytes.

Parametrizations are code, not state: a parametrized parameter is saved as its
original ``rf.Parameter`` (what ``named_parameters`` lists), so a module with
``rf.weight_dropout`` or ``rf.weight_noise`` saves the same file as the plain
module, and loading assigns the originals while the parametrizations stay
those the code registered (``rf.weight_norm`` replaces the parameter by its own
``g`` and ``v``, which are saved under ``<name>.g`` and ``<name>.v``).
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Mapping

import numpy as np

from verjus._files import write_bytes_atomic
from verjus.rf.module import Module

__all__ = ["load_state", "load_state_dict", "read_state", "save_state", "state_dict"]

_HEADER_LIMIT = 100_000_000


def state_dict(module: Module) -> dict[str, np.ndarray]:
    """The parameters of ``module`` by dotted name, as float32 arrays (copies).

    :param module: the module
    :return: ``{name: array}`` in ``named_parameters`` order
    """
    if not isinstance(module, Module):
        raise TypeError(f"state_dict: expected an rf.Module, got {type(module).__name__}")
    return {name: np.array(p.numpy(), np.float32) for name, p in module.named_parameters()}


def load_state_dict(
    module: Module, state: Mapping[str, np.ndarray], *, strict: bool = True
) -> None:
    """Assigns the arrays of ``state`` to the parameters of ``module`` by name.

    Every shape is checked before anything is assigned, so a failed load
    leaves the module as it was.

    :param module: the module
    :param state: ``{dotted name: array}``, as ``state_dict`` gives
    :param strict: whether a parameter missing from ``state`` or a name in
        ``state`` that is no parameter is an error (otherwise they are skipped)
    """
    if not isinstance(module, Module):
        raise TypeError(f"load_state_dict: expected an rf.Module, got {type(module).__name__}")
    params = dict(module.named_parameters())
    if strict:
        missing = [n for n in params if n not in state]
        unexpected = [n for n in state if n not in params]
        if missing or unexpected:
            raise KeyError(
                f"load_state_dict: {type(module).__name__}: missing {missing}, "
                f"unexpected {unexpected}"
            )
    arrays = {}
    for name, param in params.items():
        if name not in state:
            continue
        array = np.asarray(state[name])
        if array.shape != tuple(param.shape):
            raise ValueError(
                f"load_state_dict: {name}: expected shape {tuple(param.shape)}, got {array.shape}"
            )
        arrays[name] = array
    for name, array in arrays.items():
        params[name].assign(array)


def save_state(module: Module, path: str | os.PathLike[str]) -> None:
    """Writes the parameters of ``module`` as a safetensors file, atomically.

    :param module: the module
    :param path: the file (replaced if it exists)
    """
    write_bytes_atomic(path, _encode(state_dict(module)))


def load_state(module: Module, path: str | os.PathLike[str], *, strict: bool = True) -> None:
    """Loads a safetensors file (``save_state``'s, or any with float32, bfloat16
    or float16 tensors under the module's names) into the parameters of
    ``module`` (float32: reduced-precision values widen exactly).

    :param module: the module
    :param path: the file
    :param strict: as for ``load_state_dict``
    """
    load_state_dict(module, read_state(path), strict=strict)


def read_state(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """The tensors of a safetensors file (``save_state``'s, or F32, BF16 or F16
    ones) by name, as float32 arrays.

    :param path: the file
    """
    with open(path, "rb") as f:
        data = f.read()
    return _decode(data, os.fspath(path))


def _encode(arrays: Mapping[str, np.ndarray]) -> bytes:
    """The safetensors bytes of float32 ``arrays`` (in name order)."""
    header: dict[str, object] = {}
    chunks = []
    offset = 0
    for name in sorted(arrays):
        raw = np.ascontiguousarray(arrays[name], dtype="<f4").tobytes()
        shape = list(arrays[name].shape)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(chunks)


def _decode(data: bytes, path: str) -> dict[str, np.ndarray]:
    """The float32 tensors of the safetensors bytes ``data`` (read from ``path``)."""
    if len(data) < 8:
        raise ValueError(f"load_state: {path}: not a safetensors file ({len(data)} bytes)")
    (size,) = struct.unpack("<Q", data[:8])
    if size > min(_HEADER_LIMIT, len(data) - 8):
        raise ValueError(f"load_state: {path}: header of {size} bytes in a {len(data)}-byte file")
    try:
        header = json.loads(data[8 : 8 + size])
    except ValueError as e:
        raise ValueError(f"load_state: {path}: the header is not JSON: {e}") from None
    if not isinstance(header, dict):
        raise ValueError(f"load_state: {path}: the header is not a JSON object")
    body = memoryview(data)[8 + size :]
    arrays = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
        if dtype not in _FILE_DTYPES:
            raise ValueError(f"load_state: {path}: {name} is {dtype}, expected F32, BF16 or F16")
        begin, end = offsets
        count = int(np.prod(shape, dtype=np.int64))
        if not 0 <= begin <= end <= len(body) or end - begin != _FILE_DTYPES[dtype] * count:
            raise ValueError(
                f"load_state: {path}: {name} of shape {shape} has data offsets "
                f"{offsets} in a body of {len(body)} bytes"
            )
        arrays[name] = _widened(body[begin:end], dtype).reshape(shape)
    return arrays


# The safetensors float types a file may hold, by their bytes per element;
# parameters are float32, so the others widen (exactly) when read.
_FILE_DTYPES = {"F32": 4, "BF16": 2, "F16": 2}


def _widened(raw: memoryview, dtype: str) -> np.ndarray:
    """The little-endian ``dtype`` elements of ``raw`` as float32 (a copy)."""
    if dtype == "F16":
        return np.frombuffer(raw, "<f2").astype(np.float32)
    if dtype == "BF16":  # bfloat16 is the upper half of a float32
        return (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)
    return np.frombuffer(raw, "<f4").astype(np.float32)
