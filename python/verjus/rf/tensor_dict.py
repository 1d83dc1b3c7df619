"""``TensorDict``: named tensors, as RETURNN's ``extern_data`` and step outputs.

A RETURNN config declares its inputs once as templates,
``TensorDict({"data": Tensor("data", [batch_dim, time_dim, feat_dim], "float32")})``,
and the engine fills them for every batch: ``reset_content()`` makes them
templates again, and ``assign_from_raw_tensor_dict_`` gives them the batch's
arrays — the values under each key, the sizes of each dim under
``"key:sizeN"`` (N the axis). The dims stay the same objects, so model code
that holds ``time_dim`` sees each batch's lengths. ``as_raw_tensor_dict`` is
the inverse. ``fill_random_`` fills the templates with random data, for tests.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterator, KeysView, Mapping, Sequence, ValuesView
from typing import Any

import numpy as np

from verjus._verjus import Dim, Tensor


class TensorDict:
    """Named ``Tensor`` s (values or templates); ``data`` is the plain dict."""

    def __init__(self, data: Mapping[str, Tensor] | Sequence[Tensor] | None = None) -> None:
        self.data: dict[str, Tensor] = {}
        if data is not None:
            self.update(data)

    def __repr__(self) -> str:
        return f"TensorDict({self.data!r})"

    def __getitem__(self, key: str) -> Tensor:
        return self.data[key]

    def __contains__(self, key: object) -> bool:
        return key in self.data

    def __iter__(self) -> Iterator[str]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)

    def keys(self) -> KeysView[str]:
        """The names."""
        return self.data.keys()

    def values(self) -> ValuesView[Tensor]:
        """The tensors."""
        return self.data.values()

    def items(self) -> ItemsView[str, Tensor]:
        """(name, tensor) pairs."""
        return self.data.items()

    def update(
        self, data: Mapping[str, Any] | Sequence[Tensor] | TensorDict, *, auto_convert: bool = False
    ) -> None:
        """Adds tensors: a mapping (or TensorDict) by key, or a sequence by each
        tensor's name. A mapping's value may also be RETURNN's template dict
        (``{"dims": [...], "dtype": ..., "sparse_dim": ...}``) with ``auto_convert``."""
        items = (
            data.items() if isinstance(data, (Mapping, TensorDict)) else [(t.name, t) for t in data]
        )
        for key, value in items:
            if not isinstance(value, Tensor):
                if not (auto_convert and isinstance(value, Mapping)):
                    raise TypeError(
                        f"TensorDict: {key!r} must be a Tensor, got {type(value).__name__}"
                    )
                value = Tensor(key, **value)
            self.data[key] = value

    def copy_template(self) -> TensorDict:
        """Templates of every tensor, over the same dims."""
        return TensorDict({k: v.copy_template() for k, v in self.data.items()})

    def all_dims(self) -> list[Dim]:
        """Every dim of the tensors and of their dims' lengths, each once, in order."""
        dims: list[Dim] = []

        def visit(d: Dim) -> None:
            if d in dims:
                return
            dims.append(d)
            ext = d.dyn_size_ext
            if ext is not None:
                for inner in ext.dims:
                    visit(inner)

        for value in self.data.values():
            for d in value.dims:
                visit(d)
        return dims

    def reset_content(self) -> None:
        """Makes every tensor and every dim size (not static) a template again."""
        for value in self.data.values():
            value.raw_tensor = None
        for d in self.all_dims():
            if d.dimension is None:
                d.reset_eager()

    def as_raw_tensor_dict(
        self,
        *,
        include_const_sizes: bool = False,
        include_scalar_dyn_sizes: bool = True,
        exclude_duplicate_dims: bool = False,
        expected_value_type: type | tuple[type, ...] = object,
    ) -> dict[str, Any]:
        """The values as arrays under their keys, and each dim's sizes under
        ``"key:sizeN"``: the lengths of a dynamic dim, the size of a dim of
        unknown size (the batch's, as a scalar; with ``include_scalar_dyn_sizes``),
        a static size (with ``include_const_sizes``)."""
        seen: set[Dim] = set()
        out: dict[str, Any] = {}
        for key, value in self.data.items():
            raw = value.raw_tensor
            if not isinstance(raw, expected_value_type):
                raise TypeError(f"as_raw_tensor_dict: {key!r} holds {type(raw).__name__}")
            out[key] = raw
            for i, d in enumerate(value.dims):
                if exclude_duplicate_dims and d in seen:
                    continue
                seen.add(d)
                size_key = f"{key}:size{i}"
                if d.dimension is not None:
                    if include_const_sizes and include_scalar_dyn_sizes:
                        out[size_key] = d.dimension
                elif d.is_dynamic():
                    out[size_key] = d.dyn_size_ext.raw_tensor
                elif include_scalar_dyn_sizes and d.axis_size is not None:
                    out[size_key] = np.int32(d.axis_size)
        return out

    def assign_from_raw_tensor_dict_(
        self,
        raw_tensor_dict: Mapping[str, Any],
        *,
        with_scalar_dyn_sizes: bool = True,
        duplicate_dims_are_excluded: bool = False,
    ) -> None:
        """Gives the tensors the arrays of ``raw_tensor_dict`` (as made by
        ``as_raw_tensor_dict``): first each dim its sizes, then each tensor its
        values, which must fit them."""
        del with_scalar_dyn_sizes  # a missing scalar size is taken from the values
        seen: set[Dim] = set()
        for key, value in self.data.items():
            if key not in raw_tensor_dict:
                raise KeyError(
                    f"assign_from_raw_tensor_dict_: {key!r} is not in {sorted(raw_tensor_dict)}"
                )
            for i, d in enumerate(value.dims):
                if d.dimension is not None or (duplicate_dims_are_excluded and d in seen):
                    continue
                seen.add(d)
                size_key = f"{key}:size{i}"
                if size_key not in raw_tensor_dict:
                    continue
                sizes = np.asarray(raw_tensor_dict[size_key])
                template = d.dyn_size_ext
                if sizes.ndim == 0 or template is None:
                    d.dyn_size_ext = Tensor(
                        f"{d.name}:size", [], "int32", raw_tensor=sizes.astype(np.int32)
                    )
                else:
                    template.raw_tensor = sizes
        for key, value in self.data.items():
            value.raw_tensor = raw_tensor_dict[key]

    def fill_random_(
        self,
        *,
        dyn_dim_max_sizes: Mapping[Dim, int] | None = None,
        dyn_dim_min_sizes: Mapping[Dim, int] | None = None,
        rnd: int | np.random.RandomState = 42,
        batch_size: int = 3,
    ) -> None:
        """Fills every template with random values, RETURNN's test data: each dim
        of unknown size gets ``batch_size`` (a batch dim; its max size if given)
        or random lengths over its lengths' dims (between the min and max sizes
        given, default 2-7, the min at most the max, the longest one always
        reached), floats are normal, ints index their sparse dim (else 0-9),
        bools are random."""
        rng = rnd if isinstance(rnd, np.random.RandomState) else np.random.RandomState(rnd)
        max_sizes = dict(dyn_dim_max_sizes or {})
        min_sizes = dict(dyn_dim_min_sizes or {})
        for d in _lengths_dims_first(self.all_dims()):
            if d.dimension is not None:
                continue
            template = d.dyn_size_ext
            if template is None or not template.dims:
                size = max_sizes.get(d, batch_size)
                d.dyn_size_ext = Tensor(f"{d.name}:size", [], "int32", raw_tensor=np.int32(size))
                continue
            shape = [inner.get_dim_value() for inner in template.dims]
            hi = max_sizes.get(d, 7)
            lo = min_sizes.get(d, min(2, hi))
            lengths = rng.randint(lo, hi + 1, size=shape)
            if lengths.size:
                lengths.flat[0] = hi
            template.raw_tensor = lengths.astype(template.dtype)
        for value in self.data.values():
            shape = [d.get_dim_value() for d in value.dims]
            if value.dtype == "float32":
                raw = rng.normal(size=shape).astype(np.float32)
            elif value.dtype == "bool":
                raw = rng.randint(0, 2, size=shape).astype(bool)
            else:
                high = value.sparse_dim.dimension if value.sparse_dim is not None else 10
                raw = rng.randint(0, high, size=shape).astype(value.dtype)
            value.raw_tensor = raw


def _lengths_dims_first(dims: list[Dim]) -> list[Dim]:
    """``dims`` reordered so that the dims of each one's lengths come before it
    (their sizes are needed to make its lengths)."""
    out: list[Dim] = []

    def visit(d: Dim) -> None:
        if d in out:
            return
        ext = d.dyn_size_ext
        for inner in ext.dims if ext is not None else ():
            visit(inner)
        out.append(d)

    for d in dims:
        visit(d)
    return out
