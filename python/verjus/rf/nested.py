"""``rf.nested``: ``where`` / ``gather`` / ``masked_select`` / ``masked_scatter``
over nested structures of Tensors and Dims, after RETURNN's
``returnn.frontend.nested``.

Beam search and loops keep their state as nested structures (tuples, lists,
dicts) whose leaves are Tensors and the Dims those tensors use, e.g. a
history ``(hist, hist_dim)`` with per-hypothesis lengths. Selecting or merging
such a state must treat the dims too: when the lengths of a dynamic dim depend
on the selected or merged dims, a new dim with the new lengths is made, and
every tensor over the old dim is moved onto the new one (``replace_dim_v2``).
So each function works in two passes over the leaves: first the dims (making
the ``dim_map`` from old to new dims), then the tensors.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from verjus._verjus import Dim, Tensor
from verjus._verjus import rf_cast as _cast
from verjus._verjus import rf_where as _where
from verjus.rf.array_ import gather
from verjus.rf.loop.functional import _assert_same_structure, _flatten, _unflatten
from verjus.rf.packing import masked_scatter, masked_select
from verjus.rf.shape_ops import expand_dims, replace_dim_v2, scalar

__all__ = [
    "gather_nested",
    "mask_nested",
    "masked_scatter_nested",
    "masked_select_nested",
    "where_nested",
]


def _map(fn: Callable[..., Any], first: Any, *others: Any) -> Any:
    """``first``'s structure with ``fn`` applied to each leaf (and the leaves of
    ``others``, of the same structure, at the same places)."""
    leaves = [_flatten(s) for s in (first, *others)]
    return _unflatten(first, [fn(*group) for group in zip(*leaves, strict=True)])


def _next_name(name: str) -> str:
    """``name`` with a counter suffix added or increased: ``hist`` -> ``hist_1`` -> ``hist_2``."""
    match = re.fullmatch(r"(.*)_(\d+)", name)
    return f"{match[1]}_{int(match[2]) + 1}" if match else f"{name}_1"


def _moved(x: Tensor, dim_map: dict[Dim, Dim], **kwargs: bool) -> Tensor:
    """``x`` with each of its dims that ``dim_map`` maps moved onto the new dim."""
    for d in list(x.dims):
        if d in dim_map:
            x = replace_dim_v2(x, in_dim=d, out_dim=dim_map[d], **kwargs)
    return x


def _sizes(d: Dim) -> Tensor:
    """``d``'s lengths (or static size) as int32 (lengths may come as int64)."""
    sizes = d.get_size_tensor()
    return sizes if sizes.dtype == "int32" else _cast(sizes, "int32")


def _size_dims(d: Dim) -> set[Dim]:
    return set(d.dyn_size_ext.dims) if d.dyn_size_ext is not None else set()


def mask_nested(
    s: Any,
    *,
    mask: Tensor,
    mask_cpu: Tensor | None = None,
    mask_value: Any,
    dim_map: dict[Dim, Dim] | None = None,
    allow_dim_extension: bool = True,
) -> Any:
    """``where(mask, s, mask_value)`` for each leaf of the nested structure ``s``.

    ``mask_value`` is a structure like ``s`` (its leaves taken at the same
    places) or one value for every leaf (None: 0). Where the Dim leaves of
    ``s`` and ``mask_value`` differ, a merged dim is made with the lengths of
    ``s``'s dim where ``mask`` holds, else those of ``mask_value``'s; the tensors
    are moved onto it. With ``allow_dim_extension=False``, nothing gets dims it
    did not have: a leaf that would is taken from ``s`` unmasked.
    ``dim_map`` (if given) receives the merged dims. ``mask_cpu`` is accepted
    for RETURNN's signature (one device here).
    """
    del mask_cpu
    dim_map = {} if dim_map is None else dim_map
    paired = type(mask_value) is type(s) and isinstance(s, (tuple, list, dict))
    if paired:
        _assert_same_structure("mask_nested: mask_value", s, mask_value)
    values = mask_value if paired else _map(lambda _: mask_value, s)
    mask_dims = set(mask.dims)

    def merge_dims(x: Any, v: Any) -> None:
        if not isinstance(x, Dim) or not isinstance(v, Dim) or x == v or x in dim_map:
            return
        if not allow_dim_extension and not mask_dims <= _size_dims(x) | _size_dims(v):
            return
        sizes = _where(mask, _sizes(x), _sizes(v), allow_broadcast_all_sources=True)
        dim_map[x] = dim_map[v] = Dim(sizes, name=_next_name(x.name))

    def apply(x: Any, v: Any) -> Any:
        if isinstance(x, Dim):
            return x if not isinstance(v, Dim) or x == v else dim_map.get(x, x)
        if not isinstance(x, Tensor):
            return x
        x = _moved(x, dim_map)
        if isinstance(v, Tensor):
            v = _moved(v, dim_map)
            if not allow_dim_extension and not set(v.dims) <= set(x.dims):
                return x
        fill = v if isinstance(v, Tensor) else scalar(0 if v is None else v, x.dtype)
        if allow_dim_extension and (isinstance(v, Tensor) or v):
            out = _where(mask, x, fill, allow_broadcast_all_sources=True)
            return out.copy_transpose(_order(x, out))
        if not mask_dims <= set(x.dims):
            return x  # the mask's dims would be new to x
        return _where(mask, x, fill, allow_broadcast_all_sources=True).copy_transpose(list(x.dims))

    _map(merge_dims, s, values)
    return _map(apply, s, values)


def _order(x: Tensor, *others: Tensor) -> list[Dim]:
    """``x``'s dims, then the new ones of ``others`` in order."""
    order = list(x.dims)
    for other in others:
        order += [d for d in other.dims if d not in order]
    return order


def gather_nested(s: Any, *, indices: Tensor, dim_map: dict[Dim, Dim] | None = None) -> Any:
    """``gather(x, indices=indices)`` (along ``indices.sparse_dim``) for each
    Tensor leaf of ``s`` that has that dim, e.g. a state gathered by the beam
    search's back-pointers. A dynamic Dim whose lengths are over the gathered
    dim gets a new dim with the gathered lengths (added to ``dim_map``, if
    given); the gathered dim itself becomes the indices' dim."""
    axis = indices.sparse_dim
    if axis is None:
        raise ValueError("gather_nested: indices must have a sparse_dim (the dim to gather from)")
    dim_map = {} if dim_map is None else dim_map

    def new_dims(x: Any) -> None:
        if isinstance(x, Dim) and x not in dim_map and axis in _size_dims(x):
            sizes = gather(x.dyn_size_ext, indices=indices, axis=axis)
            dim_map[x] = Dim(sizes, name=_next_name(x.name))

    def apply(x: Any) -> Any:
        if isinstance(x, Tensor):
            if axis in x.dims:
                x = gather(x, indices=indices, axis=axis)
            return _moved(x, dim_map)
        if isinstance(x, Dim) and x.dimension is None:
            if x in dim_map:
                return dim_map[x]
            if x == axis:
                if len(indices.dims) != 1:
                    raise ValueError(
                        f"gather_nested: the gathered dim {axis!r} is a leaf, so the indices "
                        f"need exactly one dim, got {list(indices.dims)}"
                    )
                return indices.dims[0]
        return x

    _map(new_dims, s)
    return _map(apply, s)


def masked_select_nested(
    s: Any,
    *,
    mask: Tensor,
    mask_cpu: Tensor | None = None,
    dims: Sequence[Dim],
    out_dim: Dim | None = None,
    dim_map: dict[Dim, Dim] | None = None,
) -> tuple[Any, Dim, dict[Dim, Dim]]:
    """``masked_select`` of each Tensor leaf of ``s`` that has any of ``dims``
    (missing ones of ``dims`` are broadcast), all packed into one dim. A dynamic
    Dim whose lengths are over ``dims`` gets a new dim with the selected lengths
    (the tensors over it are cut to its longest one).

    :return: ``(s selected, the packed dim, dim_map)``, ``dim_map`` mapping each
        old dim to its new one (``masked_scatter_nested`` needs it)
    """
    del mask_cpu
    dims = list(dims)
    dim_map = {} if dim_map is None else dim_map
    packed = [out_dim if out_dim is not None else Dim(None, name="packed_new_label")]

    def select(x: Tensor) -> Tensor:
        missing = [d for d in dims if d not in x.dims]
        if missing:
            x = expand_dims(x, missing)
        x, packed[0] = masked_select(x, mask=mask, dims=dims, out_dim=packed[0])
        return x

    def new_dims(x: Any) -> None:
        if isinstance(x, Dim) and x not in dim_map and _size_dims(x) & set(dims):
            dim_map[x] = Dim(select(x.dyn_size_ext), name=_next_name(x.name))

    def apply(x: Any) -> Any:
        if isinstance(x, Tensor):
            if not set(dims) & set(x.dims):
                return x
            return _moved(select(x), dim_map)
        if isinstance(x, Dim):
            return dim_map.get(x, x)
        return x

    _map(new_dims, s)
    return _map(apply, s), packed[0], dim_map


def masked_scatter_nested(
    s: Any,
    backup: Any,
    *,
    mask: Tensor,
    mask_cpu: Tensor | None = None,
    dims: Sequence[Dim],
    in_dim: Dim,
    masked_select_dim_map: dict[Dim, Dim],
    masked_scatter_dim_map: dict[Dim, Dim] | None = None,
) -> Any:
    """The inverse of ``masked_select_nested``: each Tensor leaf of ``s``
    (packed along ``in_dim``) put back where ``mask`` holds, the leaf of
    ``backup`` (same structure, over ``dims``) elsewhere.

    A Dim leaf of ``s`` (mapped back by ``masked_select_dim_map``) that differs
    from ``backup``'s gets a merged dim, its lengths scattered the same way
    (added to ``masked_scatter_dim_map``, if given); the tensors are moved onto
    it.
    """
    del mask_cpu
    _assert_same_structure("masked_scatter_nested: backup", s, backup)
    back = {new: old for old, new in masked_select_dim_map.items()}
    merged = {} if masked_scatter_dim_map is None else masked_scatter_dim_map

    def scatter(x: Tensor, b: Tensor) -> Tensor:
        if in_dim not in x.dims:
            x = expand_dims(x, [in_dim])
        for d in list(x.dims):
            if d in merged:
                x = replace_dim_v2(x, in_dim=d, out_dim=merged[d])
            elif d in back:
                x = replace_dim_v2(x, in_dim=d, out_dim=back[d], allow_shrink=False)
        return masked_scatter(x, _moved(b, merged), mask=mask, dims=dims, in_dim=in_dim)

    def merge_dims(x: Any, b: Any) -> None:
        if not isinstance(x, Dim):
            return
        if not isinstance(b, Dim):
            raise TypeError(f"masked_scatter_nested: backup has {b!r} where s has the dim {x!r}")
        unpacked = back.get(x, x)
        if unpacked == b:
            return
        if (unpacked in merged) != (b in merged):
            raise ValueError(
                f"masked_scatter_nested: the dim {unpacked!r} of s and {b!r} of backup "
                "are paired differently elsewhere in the structure"
            )
        if unpacked in merged:
            return
        sizes = scatter(_sizes(x), _sizes(b))
        merged[unpacked] = merged[x] = merged[b] = Dim(sizes, name=b.name)

    def apply(x: Any, b: Any) -> Any:
        if isinstance(x, Tensor):
            if not isinstance(b, Tensor):
                raise TypeError(f"masked_scatter_nested: backup has {b!r} where s has a Tensor")
            return scatter(x, b)
        if isinstance(x, Dim):
            unpacked = back.get(x, x)
            return merged.get(unpacked, unpacked)
        return x

    _map(merge_dims, s, backup)
    return _map(apply, s, backup)


def where_nested(x: Any, y: Any, *, condition: Tensor, condition_cpu: Tensor | None = None) -> Any:
    """``where(condition, x, y)`` leaf by leaf for two structures of the same
    shape; Dim leaves that differ get a merged dim (lengths of ``x``'s where
    ``condition`` holds, else ``y``'s), and the tensors are moved onto it."""
    del condition_cpu
    _assert_same_structure("where_nested: y", x, y)
    merged: dict[Dim, Dim] = {}

    def merge_dims(a: Any, b: Any) -> None:
        if isinstance(a, Dim) and isinstance(b, Dim) and a != b and a not in merged:
            sizes = _where(
                condition,
                _sizes(a),
                _sizes(b),
                allow_broadcast_all_sources=True,
            )
            merged[a] = merged[b] = Dim(sizes, name=b.name)

    def apply(a: Any, b: Any) -> Any:
        if isinstance(a, Tensor):
            return _where(condition, _moved(a, merged), _moved(b, merged))
        if isinstance(a, Dim):
            return merged.get(a, a)
        return a

    _map(merge_dims, x, y)
    return _map(apply, x, y)
