"""The engine's inputs: ``extern_data`` templates, and each batch bound to them.

A RETURNN config declares its inputs once, as templates (``extern_data``: per
data key its dims, dtype and sparse dim); the dims are objects the model code
also uses (``time_dim``), so each batch binds its sizes to those same dims: the
batch dim takes the number of sequences, each dynamic dim the lengths of its
key, and the templates take the padded arrays. ``bind`` does that for a batch
from ``batching.collate``, checking that the data fits the templates, which is
where a dataset that does not match ``extern_data`` is reported.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from verjus._verjus import Dim, Tensor
from verjus.rf.tensor_dict import TensorDict

__all__ = ["ExternData", "bind"]

# Options of an ``extern_data`` entry that say how the engine uses a key, not what it is.
_USE_OPTIONS = ("available_for_inference",)


class ExternData:
    """``extern_data`` as templates: a ``TensorDict`` of value-less tensors, and per
    key whether it is fed when there are no targets (``available_for_inference``)."""

    def __init__(self, spec: Mapping[str, Any] | TensorDict) -> None:
        """``spec``: ``{key: {"dims": [...], "dtype": ..., "sparse_dim": ...}}`` as
        RETURNN configs write it, or ``{key: Tensor template}``, or a ``TensorDict``."""
        items = spec.data.items() if isinstance(spec, TensorDict) else spec.items()
        self.templates = TensorDict()
        self.for_inference: dict[str, bool] = {}
        for key, entry in items:
            if isinstance(entry, Tensor):
                template = entry
                self.for_inference[key] = True
            elif isinstance(entry, Mapping):
                options = dict(entry)
                self.for_inference[key] = bool(options.pop("available_for_inference", True))
                try:
                    template = Tensor(key, **options)
                except TypeError as e:
                    raise ValueError(f"extern_data[{key!r}]: {e}") from None
            else:
                raise TypeError(
                    f"extern_data[{key!r}]: expected a dict of Tensor options or a Tensor, "
                    f"got {type(entry).__name__}"
                )
            if not template.dims or not template.dims[0].is_batch_dim():
                raise ValueError(
                    f"extern_data[{key!r}]: the first dim must be the batch dim, got dims "
                    f"{[d.name for d in template.dims]}"
                )
            self.templates.data[key] = template

    def keys(self, *, with_targets: bool) -> list[str]:
        """The data keys a batch feeds: all, or without targets only those
        ``available_for_inference``."""
        return [k for k in self.templates.data if with_targets or self.for_inference[k]]


def bind(extern: ExternData, raw: Mapping[str, np.ndarray], *, with_targets: bool) -> TensorDict:
    """The templates of ``extern`` holding the batch ``raw`` (``collate``'s dict:
    padded arrays ``[batch, time, ...]`` and ``"<key>:seq_len"``); the batch and
    dynamic dims are bound to this batch's sizes."""
    keys = extern.keys(with_targets=with_targets)
    extern.templates.reset_content()
    bound: dict[Dim, tuple[str, np.ndarray]] = {}
    out = TensorDict()
    for key in keys:
        template = extern.templates.data[key]
        if key not in raw:
            raise ValueError(f"extern_data[{key!r}]: the dataset gives no such key ({sorted(raw)})")
        array = np.asarray(raw[key])
        dims = template.dims
        if array.ndim != len(dims):
            raise ValueError(
                f"extern_data[{key!r}]: dims {[d.name for d in dims]}, but the dataset gives "
                f"arrays of shape {array.shape[1:]} per batch entry"
            )
        for axis, dim in enumerate(dims):
            if dim.dimension is not None:
                if array.shape[axis] != dim.dimension:
                    raise ValueError(
                        f"extern_data[{key!r}]: dim {dim.name} has size {dim.dimension}, "
                        f"the dataset gives {array.shape[axis]} (array shape {array.shape})"
                    )
                continue
            sizes = _sizes(key, axis, dim, array, raw)
            if dim in bound:
                other, other_sizes = bound[dim]
                if not np.array_equal(sizes, other_sizes):
                    raise ValueError(
                        f"extern_data: {key!r} and {other!r} share dim {dim.name}, but the "
                        f"dataset gives them different lengths ({sizes} and {other_sizes})"
                    )
                continue
            bound[dim] = (key, sizes)
            dims_of_sizes = [] if sizes.ndim == 0 else [dims[0]]
            dim.dyn_size_ext = Tensor(
                f"{dim.name}:size", dims_of_sizes, "int32", raw_tensor=sizes.astype(np.int32)
            )
        value = template.copy_template()
        value.raw_tensor = _as_dtype(key, array, template.dtype)
        out.data[key] = value
    return out


def _sizes(key: str, axis: int, dim: Dim, array: np.ndarray, raw: Mapping[str, Any]) -> np.ndarray:
    """The sizes a dim of unknown size takes: the batch dim its number of
    entries, the time axis the key's lengths."""
    if axis == 0:
        return np.asarray(array.shape[0], np.int32)
    lengths = raw.get(f"{key}:seq_len")
    if axis != 1 or lengths is None:
        raise ValueError(
            f"extern_data[{key!r}]: dim {dim.name} (axis {axis}) has no size in the data; "
            "a dynamic dim must be the time axis, right after the batch dim"
        )
    return np.asarray(lengths, np.int32)


def _as_dtype(key: str, array: np.ndarray, dtype: str) -> np.ndarray:
    """``array`` as ``dtype``: floats as floats and integers as integers; anything
    else does not match the template."""
    target = np.dtype(dtype)
    if array.dtype == target:
        return array
    if array.dtype.kind == target.kind or (array.dtype.kind in "iu" and target.kind in "iu"):
        return array.astype(target)
    raise ValueError(f"extern_data[{key!r}]: dtype {dtype}, the dataset gives {array.dtype}")
