"""Convolution and pooling after RETURNN's ``returnn.frontend.conv``: ``conv``,
``pool`` (``max_pool``, ``max_pool1d``, ``pool1d``, ``pool2d``), the modules
``Conv1d`` / ``Conv2d`` and ``make_conv_out_spatial_dims``.

The work happens in Rust (``crates/verjus-rf``: ``conv.rs``, ``pool.rs``,
``window.rs``); this only turns RETURNN's int-or-sequence arguments into one
entry per spatial dim. ``padding="same"`` is RETURNN's consistent same padding
(independent of the longest sequence), and the padding frames of dynamic dims
never enter a result, so a sequence gives the same output in a batch as alone:
RETURNN's newest behavior.

Where RETURNN's settings are in effect (``verjus.rf.backend.returnn_behavior_version``)
and say otherwise, RETURNN's older behavior: with ``use_mask`` False (RETURNN's
default up to behavior version 22, or ``rf_use_mask``) the padding frames enter
the result as they are, and below version 24 (or with
``rf_use_consistent_same_padding=False``) a strided ``padding="same"`` pads as
RETURNN's torch backend, by an amount that depends on the padded size. Both run
the Rust op over the dynamic dims taken as static ones of their padded size.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from verjus._verjus import Dim, Tensor
from verjus._verjus import rf_conv as _conv
from verjus._verjus import rf_full as _full
from verjus._verjus import rf_merge_dims as _merge_dims
from verjus._verjus import rf_pad as _pad
from verjus._verjus import rf_pool as _pool
from verjus._verjus import rf_where as _where
from verjus.rf import init
from verjus.rf._dim_args import takes_dims
from verjus.rf.backend import behavior_version_at_least, returnn_config_bool, use_mask_default
from verjus.rf.module import Module, Parameter
from verjus.rf.sequence_mask import sequence_mask as _sequence_mask

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


@takes_dims
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
    use_mask: bool | None = None,
) -> tuple[Tensor, list[Dim]]:
    """1-D or 2-D convolution over ``in_spatial_dims``, ``in_dim`` -> ``out_dim``
    channels; ``filter`` is over ``[out_dim, in_dim (/ groups), *filter_size]``.
    Returns the output (its feature dim ``out_dim``) and the out spatial dims.

    ``use_mask``: whether the padding frames of dynamic spatial dims are taken as
    0 (by default, as RETURNN's ``rf.use_mask_default``: yes, but not with a
    RETURNN behavior version up to 22, where they enter the result as they are).
    ``padding="same"`` with strides is consistent (independent of the longest
    sequence) unless RETURNN's settings say otherwise (behavior version < 24 or
    ``rf_use_consistent_same_padding=False``: the padding of RETURNN's torch
    backend, which depends on the padded size)."""
    spatial = list(in_spatial_dims)
    nd = len(spatial)
    strides_ = _per_dim("strides", strides, nd, 1)
    dilations = _per_dim("dilation_rate", dilation_rate, nd, 1)
    kwargs = {
        "in_dim": in_dim,
        "out_dim": out_dim,
        "filter": filter,
        "filter_size": list(filter_size),
        "strides": strides_,
        "dilation_rate": dilations,
        "groups": groups or 1,
        "bias": bias,
    }
    unmasked = _unmasked(spatial, use_mask, "conv")
    if unmasked or _torch_same_padding(padding, strides_):
        sizes = [f.dimension if isinstance(f, Dim) else f for f in filter_size]
        return _over_padded_frames(
            lambda x, dims, pad, out_dims: _conv(
                x, in_spatial_dims=dims, out_spatial_dims=out_dims, padding=pad, **kwargs
            ),
            source,
            spatial,
            out_spatial_dims,
            padding=padding,
            window=_Window(sizes, strides_, dilations),
            mask_value=None if unmasked else 0.0,
            torch_pads=_torch_conv_pads if _torch_same_padding(padding, strides_) else None,
        )
    return _conv(
        source,
        in_spatial_dims=spatial,
        out_spatial_dims=_dims(out_spatial_dims),
        padding=_padding(padding, nd),
        **kwargs,
    )


@takes_dims
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
    use_mask: bool | None = None,
) -> tuple[Tensor, list[Dim]]:
    """Max (``mode="max"``) or average (``"avg"``) pooling over 1 or 2 spatial
    dims; ``strides`` default to ``pool_size``. Padding frames never win a max
    nor count in an average. Returns the output and the out spatial dims.

    ``use_mask`` (by default as RETURNN's ``rf.use_mask_default``) False (as with a
    RETURNN behavior version up to 22): the padding frames of dynamic spatial
    dims enter the result as they are. ``padding="same"`` with strides as in
    ``conv``."""
    spatial = _dims(in_spatial_dims) or []
    if nd is not None and nd != len(spatial):
        raise ValueError(f"pool: nd={nd} but {len(spatial)} in_spatial_dims")
    size = _per_dim("pool_size", pool_size, len(spatial), 1)
    strides_ = _per_dim("strides", strides or size, len(spatial), 1)
    dilations = _per_dim("dilation_rate", dilation_rate, len(spatial), 1)

    def run(
        x: Tensor, dims: list[Dim], pad: str | list[int], out_dims: list[Dim] | None
    ) -> tuple[Tensor, list[Dim]]:
        return _pool(
            x,
            mode=mode,
            pool_size=size,
            padding=pad,
            dilation_rate=dilations,
            strides=strides_,
            in_spatial_dims=dims,
            out_spatial_dims=out_dims,
        )

    unmasked = _unmasked(spatial, use_mask, "pool")
    torch_same = _torch_same_padding(padding, strides_)
    if unmasked or torch_same:
        if mode not in ("max", "avg"):
            raise ValueError(f"pool: mode must be 'max' or 'avg', got {mode!r}")
        # RETURNN's masking: -inf never wins a max, 0 counts in an average.
        mask_value = float("-inf") if mode == "max" else 0.0
        out, out_dims = _over_padded_frames(
            run,
            source,
            spatial,
            _dims(out_spatial_dims),
            padding=padding,
            window=_Window(size, strides_, dilations),
            mask_value=None if unmasked else mask_value,
            torch_pads=_torch_pool_pads if torch_same else None,
            pad_value=mask_value,
            average=mode == "avg",
        )
        if mode == "max" and not unmasked:
            out = _where(_sequence_mask([d for d in out_dims if d.is_dynamic()]), out, 0.0)
        return out, out_dims
    return _pool(
        source,
        mode=mode,
        pool_size=size,
        padding=_padding(padding, len(spatial)),
        dilation_rate=dilations,
        strides=strides_,
        in_spatial_dims=spatial,
        out_spatial_dims=_dims(out_spatial_dims),
    )


@takes_dims
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


@takes_dims
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


@takes_dims
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


@takes_dims
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


@takes_dims
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


# -- RETURNN's unmasked and torch-"same" forms ---------------------------------------------


class _Window:
    """A conv's or pool's window per spatial dim: sizes, strides, dilations."""

    def __init__(self, sizes: list[int], strides: list[int], dilations: list[int]) -> None:
        self.sizes, self.strides, self.dilations = sizes, strides, dilations


def _unmasked(spatial: list[Dim], use_mask: bool | None, func_name: str) -> bool:
    """Whether the padding frames of the dynamic dims among ``spatial`` enter the
    result as they are (``use_mask`` False, by default as RETURNN decides)."""
    if not any(d.is_dynamic() for d in spatial):
        return False
    if use_mask is None:
        use_mask = use_mask_default(
            default=True, default_false_for_behavior_version_up_to=22, func_name=func_name
        )
    return not use_mask


def _torch_same_padding(padding: _Padding, strides: list[int]) -> bool:
    """Whether ``padding="same"`` with strides is the padding of RETURNN's torch
    backend (RETURNN's behavior version < 24, or its config option
    ``rf_use_consistent_same_padding=False``), not the consistent one."""
    if not (isinstance(padding, str) and padding.lower() == "same"):
        return False
    if all(s == 1 for s in strides):
        return False
    value = returnn_config_bool("rf_use_consistent_same_padding")
    return not value if value is not None else not behavior_version_at_least(24)


def _torch_conv_pads(window: _Window, sizes: list[int]) -> list[tuple[int, int]]:
    """RETURNN's torch backend's (left, right) "same" padding of a strided conv
    over padded sizes ``sizes``: ``filter - 1 - (n - 1) % stride`` in total (the
    dilation left out, as there), the smaller half on the left."""
    pads = []
    for n, k, stride in zip(sizes, window.sizes, window.strides, strict=True):
        total = k - 1 - (n - 1) % stride
        pads.append((total // 2, total - total // 2))
    return pads


def _torch_pool_pads(window: _Window, sizes: list[int]) -> list[tuple[int, int]]:
    """RETURNN's torch backend's "same" padding of a strided pool over padded sizes
    ``sizes``: ``(size - 1 - (n - 1) % stride) // 2`` on both sides with torch's
    ``ceil_mode``, as (left, right) entries (the right one what ``ceil_mode`` covers)."""
    pads = []
    for n, k, stride, dil in zip(
        sizes, window.sizes, window.strides, window.dilations, strict=True
    ):
        p = (k - 1 - (n - 1) % stride) // 2
        span = dil * (k - 1) + 1
        out = -(-(n + 2 * p - span) // stride) + 1  # torch's ceil_mode
        if (out - 1) * stride >= n + p:
            out -= 1
        pads.append((p, (out - 1) * stride + span - n - p))
    return pads


def _over_padded_frames(
    run: Callable[..., tuple[Tensor, list[Dim]]],
    source: Tensor,
    spatial: list[Dim],
    out_spatial_dims: Sequence[Dim] | None,
    *,
    padding: _Padding,
    window: _Window,
    mask_value: float | None,
    torch_pads: Callable[[_Window, list[int]], list[tuple[int, int]]] | None,
    pad_value: float = 0.0,
    average: bool = False,
) -> tuple[Tensor, list[Dim]]:
    """``run`` (a conv or pool over static spatial dims) on ``source`` with its
    dynamic ``spatial`` dims taken as static ones of their padded size, so that
    their padding frames enter the result as they are (after setting them to
    ``mask_value`` unless None), as in RETURNN where it does not mask.
    ``torch_pads``: the padding added first (``pad_value``), else ``padding``.
    ``average``: an average pool, whose added padding counts in no average.
    ``run(x, dims, padding, out_dims)`` gives the result and its dims. The
    out dims are ``out_spatial_dims`` or made by ``make_conv_out_spatial_dims``
    (a dynamic dim's lengths from the formula, as RETURNN's)."""
    dynamic = [d for d in spatial if d.is_dynamic()]
    x = source
    if mask_value is not None and dynamic:
        x = _where(_sequence_mask(dynamic), x, mask_value)
    static = []
    for d in spatial:
        if d.is_dynamic():
            s = Dim(int(d.get_dim_value()), name=f"{d.name}:padded")
            x, _ = _merge_dims(x, dims=[d], out_dim=s)
            d = s
        static.append(d)
    pad: str | list[int] = _padding(padding, len(spatial))
    frames = None
    if torch_pads is not None:
        amounts = torch_pads(window, [d.dimension for d in static])
        frames = _full(dims=static, fill_value=1.0) if average else None
        x, padded = _pad_or_cut(x, static, amounts, pad_value)
        if frames is not None:
            frames, _ = _pad_or_cut(frames, static, amounts, 0.0, out_dims=padded)
        static, pad = padded, "valid"
    out, out_static = run(x, static, pad, None)
    if frames is not None:
        counts, _ = run(frames, static, pad, out_static)
        out = out / counts
    want = _dims(out_spatial_dims) or _out_dims(spatial, padding, window, out_static)
    for got, dim in zip(out_static, want, strict=True):
        if got == dim:
            continue
        if dim.get_dim_value() != got.dimension:
            raise ValueError(
                f"conv/pool: out spatial dim {dim.name} does not fit the out size {got.dimension}"
            )
        out, _ = _merge_dims(out, dims=[got], out_dim=dim)
    return out, want


def _pad_or_cut(
    x: Tensor,
    dims: list[Dim],
    amounts: list[tuple[int, int]],
    value: float,
    out_dims: list[Dim] | None = None,
) -> tuple[Tensor, list[Dim]]:
    """``x`` padded with ``value`` by ``(left, right)`` per static dim of ``dims``,
    a negative amount cutting frames off (as torch's ``pad``)."""
    from verjus.rf.slicing import slice as _slice

    new_dims = []
    for i, (d, (left, right)) in enumerate(zip(dims, amounts, strict=True)):
        if left < 0 or right < 0:
            x, d = _slice(x, axis=d, start=max(-left, 0), end=d.dimension - max(-right, 0))
            left, right = max(left, 0), max(right, 0)
        if left or right:
            given = [out_dims[i]] if out_dims is not None else None
            x, (d,) = _pad(x, axes=[d], padding=[(left, right)], out_dims=given, value=value)
        elif out_dims is not None and out_dims[i] != d:
            x, _ = _merge_dims(x, dims=[d], out_dim=out_dims[i])
            d = out_dims[i]
        new_dims.append(d)
    return x, new_dims


def _out_dims(
    spatial: list[Dim], padding: _Padding, window: _Window, out_static: list[Dim]
) -> list[Dim]:
    """The out dims of ``spatial``: RETURNN's ``make_conv_out_spatial_dims`` for a
    dynamic dim or one kept; else the static ``out_static`` the op made."""
    out = []
    pads = _padding(padding, len(spatial))
    for i, (d, got) in enumerate(zip(spatial, out_static, strict=True)):
        k, stride, dil = window.sizes[i], window.strides[i], window.dilations[i]
        if isinstance(pads, str):
            (dim,) = make_conv_out_spatial_dims(
                [d], filter_size=k, padding=pads.lower(), strides=stride, dilation_rate=dil
            )
        elif d.is_dynamic():
            change = 2 * pads[i] - dil * (k - 1)
            dim = d + change if change > 0 else d - (-change) if change < 0 else d
            dim = dim.ceildiv_right(stride) if stride != 1 else dim
        else:
            dim = got
        out.append(dim if dim is d or d.is_dynamic() else got)
    return out
