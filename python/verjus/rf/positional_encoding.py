"""``sinusoidal_positional_encoding``, ``sinusoidal_encoding`` and
``relative_positional_encoding`` (Transformer-XL style), after RETURNN's
``returnn/frontend/attention.py``, with its formulas, dims and caching.

The encodings depend only on dim sizes (and an offset), never on data or
parameters, so they are computed once on the host in float32 with RETURNN's
operation order and put on the default device; as in RETURNN they are cached
(up to 128 entries), which also makes ``relative_positional_encoding`` give the
same out dim for the same dims. ``make_pos_enc`` is RETURNN's handling of the
Transformer decoder's and the Conformer encoder's ``pos_enc`` option.
"""

from __future__ import annotations

import functools
import math
from collections import OrderedDict
from types import FunctionType
from typing import Any

import numpy as np

from verjus._verjus import Dim, Tensor
from verjus._verjus import rf_from_numpy as _from_numpy
from verjus._verjus import rf_get_default_device as _default_device
from verjus._verjus import rf_single_step_dim as _single_step_dim
from verjus.rf._dim_args import takes_dims

__all__ = [
    "make_pos_enc",
    "relative_positional_encoding",
    "sinusoidal_encoding",
    "sinusoidal_positional_encoding",
]

_CACHE_SIZE = 128
_cache: OrderedDict[tuple[Any, ...], Any] = OrderedDict()


def _cached(key: tuple[Any, ...], make: Any) -> Any:
    if key in _cache:
        _cache.move_to_end(key)
        return _cache[key]
    value = make()
    _cache[key] = value
    if len(_cache) > _CACHE_SIZE:
        _cache.popitem(last=False)
    return value


def _check(who: str, feat_dim: Dim, dtype: str | None, device: str | None) -> None:
    if dtype not in (None, "float32"):
        raise ValueError(f"{who}: only float32 is supported, got dtype={dtype!r}")
    if device is not None and device != _default_device():
        raise ValueError(
            f"{who}: made on the default device ({_default_device()}), got device={device!r}"
        )
    if feat_dim.dimension is None or feat_dim.dimension % 2 != 0:
        raise ValueError(f"{who}: feat_dim must be static and even, got {feat_dim!r}")


def _sin_cos(indices: np.ndarray, div_term: np.ndarray) -> np.ndarray:
    """``[sin(i * d), sin(i * d + pi/2)]`` over a last axis, in float32."""
    arg_sin = indices.astype(np.float32)[..., None] * div_term
    arg_cos = arg_sin + np.float32(math.pi / 2.0)
    return np.sin(np.concatenate([arg_sin, arg_cos], axis=-1)).astype(np.float32)


def _range(n: int) -> np.ndarray:
    return np.arange(n, dtype=np.float32)


def _tensor(array: np.ndarray, dims: list[Dim], feat_dim: Dim) -> Tensor:
    return _from_numpy(np.ascontiguousarray(array), dims, "float32", False, None, feat_dim)


@takes_dims
def sinusoidal_positional_encoding(
    *,
    spatial_dim: Dim,
    feat_dim: Dim,
    offset: int | Tensor | None = None,
    base: float = 1e4,
    dtype: str | None = None,
    device: str | None = None,
) -> Tensor:
    """Absolute sinusoidal positional encoding: position ``p`` gets
    ``sin(p * d_i)`` in the first half of ``feat_dim`` and ``cos(p * d_i)`` in
    the second, ``d_i = base ** (-i / (F/2 - 1))``.

    :param spatial_dim: the positions ``0 .. size - 1`` (the longest sequence of a
        dynamic dim), or ``single_step_dim`` with ``offset`` the one position
    :param feat_dim: static, even
    :param offset: added to the positions (an int, or an int Tensor, e.g. over
        ``[batch]``)
    :param base: the base of the angles
    :param dtype: float32 (None)
    :param device: the default device (None)
    :return: ``[spatial_dim, feat_dim]`` (plus the offset's dims; without
        ``spatial_dim`` for ``single_step_dim``), ``feature_dim`` = ``feat_dim``
    """
    who = "sinusoidal_positional_encoding"
    _check(who, feat_dim, dtype, device)
    single = spatial_dim == _single_step_dim
    if single and offset is None:
        raise ValueError(f"{who}: spatial_dim=single_step_dim needs an offset")
    if spatial_dim.size is None and not single:
        raise ValueError(f"{who}: spatial_dim {spatial_dim.name} has no known size")

    def make() -> Tensor:
        dims: list[Dim] = [] if single else [spatial_dim]
        indices = np.zeros((), np.int64) if single else np.arange(spatial_dim.size)
        if isinstance(offset, Tensor):
            if offset.dtype not in ("int32", "int64"):
                raise ValueError(f"{who}: offset must be an int Tensor, got {offset.dtype}")
            off = offset.numpy()
            indices = indices.reshape(indices.shape + (1,) * off.ndim) + off
            dims += list(offset.dims)
        elif offset is not None:
            indices = indices + int(offset)
        half = feat_dim.dimension // 2
        div_term = np.exp(_range(half) * np.float32(-(math.log(base) / (half - 1))))
        return _tensor(_sin_cos(indices, div_term), [*dims, feat_dim], feat_dim)

    if isinstance(offset, Tensor):
        return make()
    # The size is in the key: a dynamic dim is bound to new lengths in each step.
    size = None if single else spatial_dim.size
    key = ("abs", spatial_dim, size, feat_dim, offset, base, _default_device())
    return _cached(key, make)


@takes_dims
def sinusoidal_encoding(
    indices: Tensor,
    *,
    feat_dim: Dim,
    base: float = 1e4,
    dtype: str | None = None,
) -> Tensor:
    """The sinusoidal encoding of given positions (what
    ``sinusoidal_positional_encoding`` computes for ``0 .. size - 1``):
    ``sin(p * d_i)`` in the first half of ``feat_dim``, ``cos(p * d_i)`` in the
    second, ``d_i = base ** (-i / (F/2 - 1))``.

    The positions are data without a gradient (as in RETURNN, where they are
    cast from ints), so the encoding is computed on the host; a float
    ``indices`` tensor gets no gradient through it.

    :param indices: the positions, over any dims (int or float)
    :param feat_dim: static, even
    :param base: the base of the angles
    :param dtype: float32 (None)
    :return: over ``[*indices.dims, feat_dim]``, ``feature_dim`` = ``feat_dim``
    """
    who = "sinusoidal_encoding"
    if not isinstance(indices, Tensor):
        raise TypeError(f"{who}: indices must be a Tensor, got {type(indices).__name__}")
    _check(who, feat_dim, dtype, None)
    if feat_dim in indices.dims:
        raise ValueError(f"{who}: feat_dim {feat_dim.name} is already a dim of the indices")
    half = feat_dim.dimension // 2
    div_term = np.exp(_range(half) * np.float32(-(math.log(base) / (half - 1))))
    return _tensor(_sin_cos(indices.numpy(), div_term), [*indices.dims, feat_dim], feat_dim)


@takes_dims
def relative_positional_encoding(
    *,
    query_spatial_dim: Dim,
    key_value_spatial_dim: Dim,
    feat_dim: Dim,
    query_offset: int = 0,
    dtype: str | None = None,
    device: str | None = None,
) -> tuple[Tensor, Dim]:
    """Relative positional encoding, Transformer-XL style (as RETURNN's
    ``RelPosSelfAttention`` uses it): for every distance ``key - query`` from
    ``-(Tq - 1)`` to ``Tk - 1`` (``T`` the axis sizes), ``sin`` / ``cos`` with
    ``d_i = 10000 ** (-2 i / F)``.

    :param query_spatial_dim: the queries' dim, or ``single_step_dim`` (one query,
        the last frame of the keys: distances ``-(len - 1) .. 0`` per sequence)
    :param key_value_spatial_dim: the keys' dim
    :param feat_dim: static, even
    :param query_offset: subtracted from the distances (0 for ``single_step_dim``)
    :param dtype: float32 (None)
    :param device: the default device (None)
    :return: the encoding over ``[out_spatial_dim, feat_dim]`` and
        ``out_spatial_dim`` (a static dim of ``Tq - 1 + Tk`` entries, center at
        distance 0; for ``single_step_dim`` the keys' dim, plus their lengths'
        dims in the encoding)
    """
    who = "relative_positional_encoding"
    _check(who, feat_dim, dtype, device)
    q, kv = query_spatial_dim, key_value_spatial_dim
    if kv.size is None or (q != _single_step_dim and q.size is None):
        raise ValueError(f"{who}: the spatial dims need known sizes, got {q!r}, {kv!r}")

    def make() -> tuple[Tensor, Dim]:
        half = feat_dim.dimension // 2
        div_term = np.exp(_range(half) * np.float32(-(2.0 * math.log(1e4) / feat_dim.dimension)))
        kv_pos = np.arange(kv.size)
        if q == _single_step_dim:
            if query_offset != 0:
                raise ValueError(f"{who}: query_offset must be 0 for single_step_dim")
            lengths = kv.dyn_size_ext
            if lengths is None:
                indices, dims = kv_pos - (kv.size - 1), [kv]
            else:
                last = lengths.numpy().astype(np.int64) - 1
                indices = kv_pos.reshape((-1,) + (1,) * last.ndim) - last
                dims = [kv, *lengths.dims]
            return _tensor(_sin_cos(indices, div_term), [*dims, feat_dim], feat_dim), kv
        name = f"2*{q.name}-1" if q == kv else f"{q.name}+{kv.name}-1"
        out_dim = Dim(q.size - 1 + kv.size, name=name)
        indices = np.arange(-(q.size - 1), kv.size) - query_offset
        return _tensor(_sin_cos(indices, div_term), [out_dim, feat_dim], feat_dim), out_dim

    # The sizes (and, for one query step, the keys' lengths) are in the key: a
    # dynamic dim is bound to new lengths in each step.
    sizes: tuple[Any, ...] = (kv.size,)
    if q == _single_step_dim:
        if kv.dyn_size_ext is not None:
            sizes += (kv.dyn_size_ext.numpy().tobytes(),)
    else:
        sizes += (q.size,)
    return _cached(("rel", q, kv, sizes, feat_dim, query_offset, _default_device()), make)


def make_pos_enc(who: str, pos_enc: Any, feat_dim: Dim) -> Any:
    """A module's positional encoding from its ``pos_enc`` option, as RETURNN's
    encoders and decoders take it: None or a module as it is, a build dict
    built with ``feat_dim``, a function with ``feat_dim`` bound.

    :param who: the module, for errors
    :param pos_enc: the option
    :param feat_dim: the dim of the encoding
    :return: the encoding module or function, or None
    """
    from verjus.rf.build_from_dict import build_from_dict
    from verjus.rf.module import Module

    if pos_enc is None or isinstance(pos_enc, Module):
        return pos_enc
    if isinstance(pos_enc, dict):
        return build_from_dict(pos_enc, feat_dim=feat_dim)
    if isinstance(pos_enc, FunctionType):
        return functools.partial(pos_enc, feat_dim=feat_dim)
    raise TypeError(f"{who}: unexpected pos_enc {pos_enc!r}")
