"""What RETURNN code imports from ``returnn.frontend._cache``: ``Cache``, a small
LRU cache for values computed from dims (RETURNN's positional encodings use one).

As in RETURNN, a Dim in a key matches by its sizes where it has them (a static
size, or a dynamic dim's lengths), so another dim of the same sizes hits the
entry, and the value comes back over the queried dims: each dim of the stored
key is replaced in the value by the queried one, and only those (a dim derived
from a key dim, e.g. ``batch_dim + 1``, stays itself). A dim with neither (the
batch dim) matches only itself.

Unlike RETURNN's, an entry holds its dims and tensors (verjus's native dims and
tensors cannot be weakly referenced) until the LRU drops it, and a Tensor in a
key matches only the same Tensor object: verjus makes a new numpy array on each
``raw_tensor`` access, so RETURNN's match by raw tensor has nothing to go by.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from verjus._verjus import Dim, Tensor
from verjus.rf.loop.functional import _flatten, _unflatten

_PLAIN = (type(None), str, bool, int, float)


class _DimKey:
    """A key's dim: equal to another by sizes where known, else only to itself."""

    __slots__ = ("dim", "sizes")

    def __init__(self, dim: Dim) -> None:
        self.dim = dim
        self.sizes: tuple[Any, ...] | None = None
        if dim.dimension is not None:
            self.sizes = ("static", dim.dimension)
        elif dim.is_dynamic():
            lengths = dim.dyn_size_ext.numpy()
            self.sizes = ("lengths", lengths.shape, lengths.astype("int64").tobytes())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _DimKey):
            return False
        if self.sizes is None or other.sizes is None:
            return self.dim == other.dim
        return self.sizes == other.sizes

    def __hash__(self) -> int:
        return hash(self.sizes) if self.sizes is not None else hash(self.dim)


class _TensorKey:
    """A key's tensor: equal only to the same Tensor object."""

    __slots__ = ("tensor",)

    def __init__(self, tensor: Tensor) -> None:
        self.tensor = tensor

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _TensorKey) and self.tensor is other.tensor

    def __hash__(self) -> int:
        return id(self.tensor)


def _transform(key: Any) -> tuple[Any, ...]:
    """The hashable form of ``key``, one item per leaf of its nested structure."""
    items = []
    for leaf in _flatten(key):
        if isinstance(leaf, Dim):
            items.append(_DimKey(leaf))
        elif isinstance(leaf, Tensor):
            items.append(_TensorKey(leaf))
        elif isinstance(leaf, _PLAIN):
            items.append(leaf)
        else:
            raise TypeError(f"Cache: unexpected key item {leaf!r} of type {type(leaf).__name__}")
    return tuple(items)


def _map_dims(leaf: Any, dim_map: dict[Dim, Dim]) -> Any:
    """``leaf`` with the stored key's dims replaced by the queried ones."""
    from verjus.rf.replace_dim import replace_dim

    if isinstance(leaf, Dim):
        return dim_map.get(leaf, leaf)
    if isinstance(leaf, Tensor):
        for d in list(leaf.dims):
            if d in dim_map:
                leaf, _ = replace_dim(leaf, in_dim=d, out_dim=dim_map[d])
    return leaf


class Cache:
    """An LRU cache of at most ``max_size`` entries, keyed by nested structures of
    Dims, Tensors and plain values (see the module docs)."""

    def __init__(self, max_size: int) -> None:
        self.max_size = max_size
        self._entries: OrderedDict[tuple[Any, ...], tuple[tuple[Any, ...], Any]] = OrderedDict()

    def __repr__(self) -> str:
        return f"<Cache {len(self._entries)} of {self.max_size} entries>"

    def get(self, key: Any, default: Any = None) -> Any:
        """The value stored under a key equal to ``key``, over ``key``'s dims, or
        ``default``."""
        query = _transform(key)
        entry = self._entries.get(query)
        if entry is None:
            return default
        self._entries.move_to_end(query)
        stored, value = entry
        dim_map = {
            a.dim: b.dim
            for a, b in zip(stored, query, strict=True)
            if isinstance(a, _DimKey) and a.dim != b.dim
        }
        if not dim_map:
            return value
        return _unflatten(value, [_map_dims(leaf, dim_map) for leaf in _flatten(value)])

    def set(self, key: Any, value: Any) -> None:
        """Stores ``value`` under ``key`` (the least recently used entry goes when full)."""
        stored = _transform(key)
        self._entries[stored] = (stored, value)
        self._entries.move_to_end(stored)
        while len(self._entries) > self.max_size:
            self._entries.popitem(last=False)
