"""Saving and loading the parameters of an ``rf.Module``: ``state_dict``,
``load_state_dict``, and ``save_state`` / ``load_state`` for safetensors files.

Names are RETURNN's: the dotted names of ``Module.named_parameters``
(``"layers.0.ff.linear_ff.weight"``), each array in its parameter's dim order,
which is what RETURNN's frontend on PyTorch keeps in its state dict, so a file
reads with ``safetensors.numpy.load_file`` (or ``safetensors.torch``) under the
names RETURNN uses. The file is written atomically (a temporary file renamed
over the target), tensors in name order, so the same values give the same bytes.
Reading and writing are the static graph's (``verjus.nn``'s safetensors code,
through ``verjus._verjus``): a broken file is an ``OSError`` naming it, and
BF16 and F16 tensors widen to float32.

Parametrizations are code, not state: a parametrized parameter is saved as its
original ``rf.Parameter`` (what ``named_parameters`` lists), so a module with
``rf.weight_dropout`` or ``rf.weight_noise`` saves the same file as the plain
module, and loading assigns the originals while the parametrizations stay
those the code registered (``rf.weight_norm`` replaces the parameter by its own
``g`` and ``v``, which are saved under ``<name>.g`` and ``<name>.v``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import numpy as np

from verjus._verjus import safetensors_load, safetensors_save
from verjus.rf.module import Module

__all__ = ["load_state", "load_state_dict", "read_state", "save_state", "state_dict"]


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
    state = state_dict(module)
    names = sorted(state)
    safetensors_save(os.fspath(path), names, [state[n] for n in names])


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
    return {name: np.asarray(a, np.float32) for name, a in safetensors_load(os.fspath(path))}
