"""Convolution and pooling after RETURNN's ``returnn.frontend.conv``: ``conv``,
``pool`` (``max_pool``, ``max_pool1d``, ``pool1d``, ``pool2d``), the modules
``Conv1d`` / ``Conv2d`` and ``make_conv_out_spatial_dims``.

The work happens in Rust (``crates/verjus-rf``: ``conv.rs``, ``pool.rs``,
``window.rs``); this only turns RETURNN's int-or-sequence arguments into one
entry per spatial dim. ``padding="same"`` is RETURNN's consistent same padding
(independent of the longest sequence), and the padding frames of dynamic dims
never enter a result, so a sequence gives the same output in a batch as alone.
"""

from __future__ import annotations

from collections.abc import Sequence

from verjus._verjus import Dim, Tensor
from verjus._verjus import rf_conv as _conv
from verjus._verjus import rf_merge_dims as _merge_dims
from verjus._verjus import rf_pool as _pool
from verjus.rf import init
from verjus.rf.module import Module, Parameter

_Padding = str | int | Sequence[int]


def _per_dim(name: str, value: int | Sequence[int] | None, nd: int, default: int) -> list[int]:
    if value is None:
        return [default] * nd
    if isinstance(value, int):
        return [value] * nd
    values = list(value)
    if len(values) != nd:
        raise ValueError(f"{name} {values} needs one entry per spatial dim ({nd})")
    return values


def _padding(padding: _Padding, nd: int) -> str | list[int]:
    if isinstance(padding, str):
        return padding
    return _per_dim("padding", padding, nd, 0)


def _dims(dims: Dim | Sequence[Dim] | None) -> list[Dim] | None:
    if dims is None:
        return None
    return [dims] if isinstance(dims, Dim) else list(dims)


def conv(
    source: Tensor,
    *,
    in_dim: Dim,
    out_dim: Dim,
    in_spatial_dims: Sequence[Dim],
    out_spatial_dims: Sequence[Dim] | None = None,
    filter: Tensor,
    filter_size: Sequence[Dim],
    padding: _Padding,
    strides: int | Sequence[int] | None = None,
    dilation_rate: int | Sequence[int] | None = None,
    groups: int | None = None,
    bias: Tensor | None = None,
) -> tuple[Tensor, list[Dim]]:
    """1-D or 2-D convolution over ``in_spatial_dims``, ``in_dim`` -> ``out_dim``
    channels; ``filter`` is over ``[out_dim, in_dim (/ groups), *filter_size]``.
    Returns the output (its feature dim ``out_dim``) and the out spatial dims."""
    spatial = list(in_spatial_dims)
    nd = len(spatial)
    return _conv(
        source,
        in_dim=in_dim,
        out_dim=out_dim,
        in_spatial_dims=spatial,
        out_spatial_dims=_dims(out_spatial_dims),
        filter=filter,
        filter_size=list(filter_size),
        padding=_padding(padding, nd),
        strides=_per_dim("strides", strides, nd, 1),
        dilation_rate=_per_dim("dilation_rate", dilation_rate, nd, 1),
        groups=groups or 1,
        bias=bias,
    )


def pool(
    source: Tensor,
    *,
    nd: int | None = None,
    mode: str,
    pool_size: int | Sequence[int],
    padding: _Padding = "valid",
    dilation_rate: int | Sequence[int] = 1,
    strides: int | Sequence[int] | None = None,
    in_spatial_dims: Dim | Sequence[Dim],
    out_spatial_dims: Dim | Sequence[Dim] | None = None,
) -> tuple[Tensor, list[Dim]]:
    """Max (``mode="max"``) or average (``"avg"``) pooling over 1 or 2 spatial
    dims; ``strides`` default to ``pool_size``. Padding frames never win a max
    nor count in an average. Returns the output and the out spatial dims."""
    spatial = _dims(in_spatial_dims) or []
    if nd is not None and nd != len(spatial):
        raise ValueError(f"pool: nd={nd} but {len(spatial)} in_spatial_dims")
    size = _per_dim("pool_size", pool_size, len(spatial), 1)
    return _pool(
        source,
        mode=mode,
        pool_size=size,
        padding=_padding(padding, len(spatial)),
        dilation_rate=_per_dim("dilation_rate", dilation_rate, len(spatial), 1),
        strides=_per_dim("strides", strides or size, len(spatial), 1),
        in_spatial_dims=spatial,
        out_spatial_dims=_dims(out_spatial_dims),
    )


def max_pool(
    source: Tensor,
    *,
    pool_size: int | Sequence[int],
    padding: _Padding = "valid",
    dilation_rate: int | Sequence[int] = 1,
    strides: int | Sequence[int] | None = None,
    in_spatial_dims: Dim | Sequence[Dim],
    out_spatial_dims: Dim | Sequence[Dim] | None = None,
) -> tuple[Tensor, list[Dim]]:
    """``pool(mode="max")``."""
    return pool(
        source,
        mode="max",
        pool_size=pool_size,
        padding=padding,
        dilation_rate=dilation_rate,
        strides=strides,
        in_spatial_dims=in_spatial_dims,
        out_spatial_dims=out_spatial_dims,
    )


def pool1d(
    source: Tensor,
    *,
    mode: str,
    pool_size: int,
    padding: _Padding = "valid",
    dilation_rate: int = 1,
    strides: int | None = None,
    in_spatial_dim: Dim,
    out_spatial_dim: Dim | None = None,
) -> tuple[Tensor, Dim]:
    """1-D ``pool``; returns the output and the out spatial dim."""
    out, (dim,) = pool(
        source,
        mode=mode,
        pool_size=pool_size,
        padding=padding,
        dilation_rate=dilation_rate,
        strides=strides,
        in_spatial_dims=[in_spatial_dim],
        out_spatial_dims=None if out_spatial_dim is None else [out_spatial_dim],
    )
    return out, dim


def max_pool1d(
    source: Tensor,
    *,
    pool_size: int,
    padding: _Padding = "valid",
    dilation_rate: int = 1,
    strides: int | None = None,
    in_spatial_dim: Dim,
    out_spatial_dim: Dim | None = None,
) -> tuple[Tensor, Dim]:
    """``pool1d(mode="max")``."""
    return pool1d(
        source,
        mode="max",
        pool_size=pool_size,
        padding=padding,
        dilation_rate=dilation_rate,
        strides=strides,
        in_spatial_dim=in_spatial_dim,
        out_spatial_dim=out_spatial_dim,
    )


def pool2d(
    source: Tensor,
    *,
    mode: str,
    pool_size: int | Sequence[int],
    padding: _Padding = "valid",
    dilation_rate: int | Sequence[int] = 1,
    strides: int | Sequence[int] | None = None,
    in_spatial_dims: Sequence[Dim],
    out_spatial_dims: Sequence[Dim] | None = None,
) -> tuple[Tensor, list[Dim]]:
    """2-D ``pool``."""
    if len(in_spatial_dims) != 2:
        raise ValueError(f"pool2d needs 2 in_spatial_dims, got {len(in_spatial_dims)}")
    return pool(
        source,
        mode=mode,
        pool_size=pool_size,
        padding=padding,
        dilation_rate=dilation_rate,
        strides=strides,
        in_spatial_dims=in_spatial_dims,
        out_spatial_dims=out_spatial_dims,
    )


def calc_conv_out_length(
    in_length: int | Dim | Tensor,
    *,
    filter_size: int,
    stride: int,
    padding: str,
    dilation_rate: int = 1,
    name: str | None = None,
) -> int | Dim | Tensor:
    """The length a convolution (or pooling) gives for ``in_length`` (an int, a Dim,
    or a Tensor of lengths): ``"same"`` ``ceil(n / stride)``, ``"valid"`` ``ceil((n -
    dilation * (filter - 1)) / stride)``, at least 0 (RETURNN's formula).

    :param in_length: the input length(s)
    :param filter_size: the filter's size along the axis
    :param stride: the stride
    :param padding: ``"same"`` or ``"valid"``
    :param dilation_rate: the dilation
    :param name: the name of a new dim (a Dim ``in_length`` only)
    :return: the output length(s), of ``in_length``'s kind
    """
    if padding not in ("same", "valid"):
        raise ValueError(
            f"calc_conv_out_length: padding must be 'same' or 'valid', got {padding!r}"
        )
    if isinstance(in_length, Dim):
        (out,) = make_conv_out_spatial_dims(
            [in_length],
            filter_size=filter_size,
            padding=padding,
            strides=stride,
            dilation_rate=dilation_rate,
        )
        if name is not None and out is not in_length:
            size = out.dimension if out.dimension is not None else out.dyn_size_ext
            out = Dim(size, name=name)
        return out
    cut = 0 if padding == "same" else dilation_rate * (filter_size - 1)
    if isinstance(in_length, Tensor):
        import verjus.rf as rf

        n = rf.maximum(in_length - cut, 0)
        return rf.ceil_divide(n, stride)
    return max(-(-(in_length - cut) // stride), 0)


def make_conv_out_spatial_dims(
    in_spatial_dims: Sequence[Dim],
    *,
    filter_size: int | Dim | Sequence[int | Dim],
    padding: str,
    strides: int | Sequence[int] = 1,
    dilation_rate: int | Sequence[int] = 1,
) -> list[Dim]:
    """The out spatial dims a convolution (or pooling) with these options gives
    for ``in_spatial_dims``, as RETURNN's ``rf.make_conv_out_spatial_dims``:
    ``"same"`` ``ceil(n / stride)``, ``"valid"`` ``ceil((n - dilation * (filter
    - 1)) / stride)``; a dynamic dim gives a dynamic dim of those lengths.

    :param in_spatial_dims: the input's spatial dims
    :param filter_size: per spatial dim (or one for all)
    :param padding: ``"same"`` or ``"valid"``
    :param strides: per spatial dim (or one for all)
    :param dilation_rate: per spatial dim (or one for all)
    :return: one out dim per input dim (an input dim itself where nothing changes)
    """
    nd = len(in_spatial_dims)
    sizes = [filter_size] * nd if isinstance(filter_size, int | Dim) else list(filter_size)
    sizes = [f.dimension if isinstance(f, Dim) else f for f in sizes]
    strides_ = _per_dim("strides", strides, nd, 1)
    dilations = _per_dim("dilation_rate", dilation_rate, nd, 1)
    if len(sizes) != nd:
        raise ValueError(f"filter_size {sizes} needs one entry per spatial dim ({nd})")
    if padding not in ("same", "valid"):
        raise ValueError(
            f"make_conv_out_spatial_dims: padding must be 'same' or 'valid', got {padding!r}"
        )
    out = []
    for dim, f, stride, dil in zip(in_spatial_dims, sizes, strides_, dilations, strict=True):
        cut = 0 if padding == "same" else dil * (f - 1)
        if dim.dimension is not None:
            n = max(dim.dimension - cut, 0)
            out.append(
                dim if cut == 0 and stride == 1 else Dim(-(-n // stride), name=f"{dim.name}:conv")
            )
            continue
        reduced = dim - cut if cut else dim
        out.append(reduced.ceildiv_right(stride) if stride != 1 else reduced)
    return out


class _Conv(Module):
    """The convolution module: ``filter`` over ``[out_dim, in_dim (/ groups),
    *filter_size]`` starting Glorot-uniform (RETURNN's fan rule for filters:
    fan-in ``in * window``, fan-out ``out * window``; drawn from the rf random
    stream, see ``rf.set_random_seed``), ``bias`` over ``[out_dim]`` at 0."""

    nd = 0

    def __init__(
        self,
        in_dim: Dim,
        out_dim: Dim,
        filter_size: int | Dim | Sequence[int | Dim],
        *,
        padding: _Padding,
        strides: int | Sequence[int] | None = None,
        dilation_rate: int | Sequence[int] | None = None,
        groups: int | None = None,
        with_bias: bool = True,
    ):
        sizes = [filter_size] * self.nd if isinstance(filter_size, int | Dim) else list(filter_size)
        if len(sizes) != self.nd:
            raise ValueError(f"{type(self).__name__}: filter_size needs {self.nd} entries")
        self.in_dim, self.out_dim = in_dim, out_dim
        self.filter_size = [
            s if isinstance(s, Dim) else Dim(s, name=f"filter-dim{i}") for i, s in enumerate(sizes)
        ]
        self.padding, self.strides, self.dilation_rate = padding, strides, dilation_rate
        self.groups = groups
        filter_in = in_dim
        if groups is not None and groups > 1:
            if in_dim.dimension is None or in_dim.dimension % groups:
                name = type(self).__name__
                raise ValueError(f"{name}: in_dim {in_dim.name} not divisible by groups {groups}")
            filter_in = Dim(in_dim.dimension // groups, name=f"{in_dim.name}/groups")
        elif in_dim == out_dim:
            # A tensor cannot have a dim twice: the filter's input side is a copy of
            # in_dim (RETURNN's copy with another match priority), and the source's
            # in_dim is put on it before the convolution.
            filter_in = Dim(in_dim.dimension, name=f"{in_dim.name}:in")
        self.filter_in_dim = filter_in
        self.filter = Parameter([out_dim, filter_in, *self.filter_size], initial=init.Glorot())
        self.with_bias = with_bias
        self.bias = Parameter([out_dim], initial=0.0) if with_bias else None

    def _conv(
        self, source: Tensor, in_spatial_dims: Sequence[Dim], out_spatial_dims: Sequence[Dim] | None
    ) -> tuple[Tensor, list[Dim]]:
        in_dim = self.in_dim
        if self.in_dim == self.out_dim and (self.groups or 1) == 1:
            if in_dim not in source.dims:
                raise ValueError(
                    f"{type(self).__name__}: source {list(source.dims)} lacks in_dim {in_dim}"
                )
            source, _ = _merge_dims(source, dims=[in_dim], out_dim=self.filter_in_dim)
            in_dim = self.filter_in_dim
        return conv(
            source,
            in_dim=in_dim,
            out_dim=self.out_dim,
            in_spatial_dims=in_spatial_dims,
            out_spatial_dims=out_spatial_dims,
            filter=self.filter,
            filter_size=self.filter_size,
            padding=self.padding,
            strides=self.strides,
            dilation_rate=self.dilation_rate,
            groups=self.groups,
            bias=self.bias,
        )


class Conv1d(_Conv):
    """1-D convolution: ``conv1d(x, in_spatial_dim=time) -> (out, out_time)``."""

    nd = 1

    def __call__(
        self, source: Tensor, *, in_spatial_dim: Dim, out_spatial_dim: Dim | None = None
    ) -> tuple[Tensor, Dim]:
        """The convolution of ``source`` over ``in_spatial_dim``, and the out spatial dim."""
        out_dims = None if out_spatial_dim is None else [out_spatial_dim]
        out, (dim,) = self._conv(source, [in_spatial_dim], out_dims)
        return out, dim


class Conv2d(_Conv):
    """2-D convolution: ``conv2d(x, in_spatial_dims=[h, w]) -> (out, [oh, ow])``."""

    nd = 2

    def __call__(
        self,
        source: Tensor,
        *,
        in_spatial_dims: Sequence[Dim],
        out_spatial_dims: Sequence[Dim] | None = None,
    ) -> tuple[Tensor, list[Dim]]:
        """The convolution of ``source`` over ``in_spatial_dims``, and the out spatial dims."""
        return self._conv(source, in_spatial_dims, out_spatial_dims)
