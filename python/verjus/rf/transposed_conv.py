"""Transposed convolution ("deconvolution"), after RETURNN's ``rf.transposed_conv``
and its modules ``TransposedConv1d`` / ``TransposedConv2d``.

Composed of rf ops, so it is differentiable and works per sequence on dynamic
dims: each spatial dim is upsampled by ``stride`` (every input frame followed
by ``stride - 1`` zeros, a one-hot product merged into the time dim), padded
by ``filter_size - 1`` on the left and by what the output length needs on the
right (after each sequence's own end), and correlated (``rf.conv``, padding
``"valid"``) with the filter reversed along its spatial dims. The output length
per sequence is PyTorch's and TensorFlow's for ``padding="valid"``:
``in * stride + max(filter_size - stride, 0)``, or with ``output_padding``
``in * stride + filter_size - stride + output_padding``; ``remove_padding``
drops that many frames at the end.

``calc_transposed_conv_out_length`` and ``make_transposed_conv_out_spatial_dims``
give those lengths (and RETURNN's for its other paddings) for an int, a Dim or a
Tensor of lengths, as RETURNN's functions of these names.

``use_mask`` defaults as in RETURNN (``rf.use_mask_default``): False with a
RETURNN behavior version up to 22. Unmasked, the padding frames of the dynamic
dims enter the result as they are, as they do in RETURNN's transposed
convolution of the padded array: the dims are taken as static ones of their
padded size for the computation.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from verjus._verjus import Dim, Tensor
from verjus._verjus import rf_merge_dims as _merge_dims
from verjus.rf import init
from verjus.rf._dim_args import takes_dims
from verjus.rf.conv import _over_padded_frames, _unmasked, _Window
from verjus.rf.module import Module, Parameter

__all__ = [
    "TransposedConv1d",
    "TransposedConv2d",
    "calc_transposed_conv_out_length",
    "make_transposed_conv_out_spatial_dims",
    "transposed_conv",
]


def _per_dim(what: str, value: int | Sequence[int | None] | None, nd: int) -> list[int | None]:
    if value is None or isinstance(value, int):
        return [value] * nd
    values = list(value)
    if len(values) != nd:
        raise ValueError(f"transposed_conv: {what} needs {nd} entries, got {values}")
    return values


def _upsample(x: Tensor, axis: Dim, stride: int) -> tuple[Tensor, Dim]:
    """Every frame of ``axis`` followed by ``stride - 1`` zeros (lengths times ``stride``)."""
    from verjus import rf

    if stride == 1:
        return x, axis
    phase = Dim(stride, name=f"{axis.name}:stride")
    first = np.zeros(stride, dtype=np.float32)
    first[0] = 1.0
    x = rf.combine(
        x, "*", rf.convert_to_tensor(first, dims=[phase]), allow_broadcast_all_sources=True
    )
    return _merge_dims(x, dims=[axis, phase])


def _times_plus(dim: Dim, factor: int, term: int) -> Dim:
    """The dim ``dim * factor + term`` (``dim`` itself for 1 and 0)."""
    dim = dim * factor if factor != 1 else dim
    return dim + term if term else dim


def _plus(length: int | Dim | Tensor, term: int | Tensor) -> int | Dim | Tensor:
    """``length + term`` for an int, a Dim (a new dim unless ``term`` is 0; a
    negative term subtracts) or a Tensor of lengths."""
    if isinstance(length, Dim):
        if isinstance(term, Tensor):
            raise TypeError(
                "calc_transposed_conv_out_length: a Dim length needs an int filter_size"
            )
        if term == 0:
            return length
        return length + term if term > 0 else length - (-term)
    return length + term


def calc_transposed_conv_out_length(
    in_length: int | Dim | Tensor,
    *,
    filter_size: int | Dim | Tensor,
    padding: str | int,
    output_padding: int | None = None,
    stride: int | None = None,
    dilation_rate: int = 1,
    name: str | None = None,
) -> int | Dim | Tensor:
    """The length a transposed convolution gives for ``in_length`` (an int, a Dim
    or a Tensor of lengths), as RETURNN's ``rf.calc_transposed_conv_out_length``
    (Keras's ``deconv_output_length``). With ``n = in_length * stride``:

    - ``output_padding`` None: ``"valid"`` (or 0) ``n + max(filter - stride, 0)``,
      ``"same"`` ``n``, ``"full"`` ``n - (stride + filter - 2)``;
    - else ``n + filter' - stride - 2 * pad + output_padding``, with ``filter'``
      the dilated filter size and ``pad`` ``filter' // 2`` (``"same"``), 0
      (``"valid"``), ``filter' - 1`` (``"full"``) or the int ``padding``.

    As in RETURNN, the dilation enters the second form only.

    :param in_length: the input length(s)
    :param filter_size: an int, a static Dim, or a Tensor (e.g. per sequence)
    :param padding: ``"valid"``, ``"same"``, ``"full"`` or an int
    :param output_padding: extra frames at the end (None: the default length)
    :param stride: the upsampling factor; by default the (int) filter size
    :param dilation_rate: the filter's dilation
    :param name: the name of a new dim (a Dim ``in_length`` only)
    :return: the output length(s), of ``in_length``'s kind (a Dim: the dim
        itself where the length does not change)
    """
    who = "calc_transposed_conv_out_length"
    if isinstance(padding, str):
        padding = padding.lower()
    if padding not in ("same", "valid", "full") and not isinstance(padding, int):
        raise ValueError(
            f"{who}: padding must be 'same', 'valid', 'full' or an int, got {padding!r}"
        )
    if isinstance(filter_size, Dim):
        if filter_size.dimension is None:
            raise ValueError(f"{who}: filter_size {filter_size} has no static size")
        filter_size = filter_size.dimension
    size_int = filter_size if isinstance(filter_size, int) else None
    if stride is None:
        if size_int is None:
            raise ValueError(f"{who}: give stride with a Tensor filter_size")
        stride = size_int
    dilated = filter_size
    if dilation_rate != 1 and size_int != 1:
        dilated = filter_size + (filter_size - 1) * (dilation_rate - 1)
    n = in_length
    if stride != 1:
        n = in_length * stride
    if output_padding is None:
        if padding in ("valid", 0):
            if size_int is not None:
                term = max(size_int - stride, 0)
            else:
                from verjus import rf

                term = rf.relu(filter_size - stride)
            out = _plus(n, term)
        elif padding == "full":
            out = _plus(n, -(stride + filter_size - 2))
        elif padding == "same":
            out = n
        else:
            raise ValueError(f"{who}: an int padding {padding} needs output_padding")
    else:
        pad = {"same": dilated // 2, "valid": 0, "full": dilated - 1}.get(padding, padding)
        out = _plus(n, dilated - stride - 2 * pad + output_padding)
    if isinstance(in_length, Dim) and name is not None and out is not in_length:
        size = out.dimension if out.dimension is not None else out.dyn_size_ext
        out = Dim(size, name=name)
    return out


@takes_dims
def make_transposed_conv_out_spatial_dims(
    in_spatial_dims: Sequence[Dim],
    *,
    filter_size: int | Dim | Sequence[int | Dim],
    padding: str | int | Sequence[str | int],
    output_padding: int | Sequence[int | None] | None = None,
    strides: int | Sequence[int | None] | None = None,
    dilation_rate: int | Sequence[int] = 1,
    description_prefix: str | None = None,
) -> list[Dim]:
    """The out spatial dims a transposed convolution with these options gives for
    ``in_spatial_dims`` (``calc_transposed_conv_out_length`` per dim), as RETURNN's
    ``rf.make_transposed_conv_out_spatial_dims``; each option is one value for all
    dims or one per dim. A dynamic dim gives a dynamic dim.

    Unlike RETURNN's, ``output_padding`` is passed on (RETURNN's ignores it), so the
    dims are those ``rf.transposed_conv`` makes with it.

    :param in_spatial_dims: the input's spatial dims
    :param filter_size: the filter sizes (ints or static Dims)
    :param padding: ``"valid"``, ``"same"``, ``"full"`` or an int
    :param output_padding: extra frames at the end (None: the default lengths)
    :param strides: the upsampling factors (None: the filter sizes)
    :param dilation_rate: the filter's dilation
    :param description_prefix: the new dims are named ``<prefix>:spatial<i>``
    :return: one out dim per input dim (an input dim itself where nothing changes)
    """
    dims = list(in_spatial_dims)
    nd = len(dims)

    def each(what: str, value: object) -> list:
        if value is None or isinstance(value, (int, str, Dim)):
            return [value] * nd
        values = list(value)  # type: ignore[call-overload]
        if len(values) != nd:
            raise ValueError(
                f"make_transposed_conv_out_spatial_dims: {what} {values} needs one entry per"
                f" spatial dim ({nd})"
            )
        return values

    sizes = each("filter_size", filter_size)
    paddings = each("padding", padding)
    out_pads = each("output_padding", output_padding)
    strides_ = each("strides", strides)
    dilations = each("dilation_rate", dilation_rate)
    return [
        calc_transposed_conv_out_length(
            dims[i],
            filter_size=sizes[i],
            padding=paddings[i],
            output_padding=out_pads[i],
            stride=strides_[i],
            dilation_rate=dilations[i],
            name=f"{description_prefix}:spatial{i}" if description_prefix else None,
        )
        for i in range(nd)
    ]


@takes_dims
def transposed_conv(
    source: Tensor,
    *,
    in_dim: Dim,
    out_dim: Dim,
    in_spatial_dims: Sequence[Dim],
    out_spatial_dims: Sequence[Dim] | None = None,
    filter: Tensor,
    filter_size: Sequence[Dim],
    padding: str,
    remove_padding: Sequence[int] | int = 0,
    output_padding: Sequence[int | None] | int | None = None,
    strides: Sequence[int] | None = None,
    bias: Tensor | None = None,
    use_mask: bool | None = None,
) -> tuple[Tensor, list[Dim]]:
    """The transposed convolution of ``source`` over ``in_spatial_dims`` (see the
    module docs), ``in_dim`` -> ``out_dim`` channels.

    :param source: ``{..., in_dim, *in_spatial_dims}``
    :param in_dim: the input channels
    :param out_dim: the output channels
    :param in_spatial_dims: 1 or 2 spatial dims (may be dynamic)
    :param out_spatial_dims: reuse these dims for the output's spatial axes
    :param filter: ``[in_dim, out_dim, *filter_size]`` (a filter whose input
        side is another dim of in_dim's size is given with ``in_dim`` that dim,
        the source's in_dim renamed to it)
    :param filter_size: the filter's spatial dims (static)
    :param padding: only ``"valid"`` (as RETURNN's PyTorch backend)
    :param remove_padding: frames dropped at the end of each output spatial dim
    :param output_padding: None (the default length) or extra frames per dim
    :param strides: the upsampling per dim; by default the filter size
    :param bias: ``[out_dim]`` or None
    :param use_mask: whether the padding frames of dynamic dims are taken as 0
        (None: as RETURNN's ``rf.use_mask_default``, see the module docs); else
        they enter the result as they are
    :return: the output (its channel dim ``out_dim``) and its spatial dims
    """
    from verjus import rf

    who = "transposed_conv"
    if padding != "valid":
        raise NotImplementedError(f"{who}: only padding='valid' is supported, got {padding!r}")
    spatial = list(in_spatial_dims)
    nd = len(spatial)
    sizes = [d.dimension for d in filter_size]
    if len(sizes) != nd or any(k is None for k in sizes):
        raise ValueError(f"{who}: need {nd} static filter_size dims, got {list(filter_size)}")
    given = _per_dim("strides", strides, nd)
    stride_list = [s if s is not None else k for s, k in zip(given, sizes, strict=True)]
    out_pad = _per_dim("output_padding", output_padding, nd)
    remove = _per_dim("remove_padding", remove_padding, nd)
    if not all(isinstance(d, Dim) for d in [in_dim, out_dim, *spatial]):  # @takes_dims names it
        raise TypeError(f"{who}: in_dim, out_dim and in_spatial_dims must be Dims")
    if in_dim not in source.dims or any(d not in source.dims for d in spatial):
        raise ValueError(
            f"{who}: source {list(source.dims)} must have in_dim {in_dim} and {spatial}"
        )
    rights = []
    for i, (k, s, p, r) in enumerate(zip(sizes, stride_list, out_pad, remove, strict=True)):
        rights.append((max(k - s, 0) if p is None else k - s + p) - (r or 0))
        if rights[-1] < 0:
            raise ValueError(
                f"{who}: spatial dim {i}: filter size {k}, stride {s}, output_padding {p} and"
                f" remove_padding {r} give fewer frames than in * stride (not supported)"
            )
    if _unmasked(spatial, use_mask, who):
        if not out_spatial_dims:  # the lengths of the masked form: in * stride + right
            out_spatial_dims = [
                _times_plus(d, s, right)
                for d, s, right in zip(spatial, stride_list, rights, strict=True)
            ]
        return _over_padded_frames(
            lambda x, dims, _padding, _out_dims: transposed_conv(
                x,
                in_dim=in_dim,
                out_dim=out_dim,
                in_spatial_dims=dims,
                filter=filter,
                filter_size=filter_size,
                padding=padding,
                remove_padding=remove,
                output_padding=out_pad,
                strides=stride_list,
                bias=bias,
            ),
            source,
            spatial,
            out_spatial_dims,
            padding="valid",
            window=_Window(sizes, stride_list, [1] * nd),
            mask_value=None,
            torch_pads=None,
        )
    x = source
    for i, (axis, s) in enumerate(zip(spatial, stride_list, strict=True)):
        x, spatial[i] = _upsample(x, axis, s)
    pads = [(k - 1, right) for k, right in zip(sizes, rights, strict=True)]
    x, spatial = rf.pad(x, axes=spatial, padding=pads, handle_dynamic_dims=True)
    # Correlating with the reversed filter is the transposed convolution.
    for fdim, k in zip(filter_size, sizes, strict=True):
        rev = rf.convert_to_tensor(np.arange(k - 1, -1, -1, dtype=np.int32), dims=[fdim])
        filter = rf.gather(filter, indices=rev, axis=fdim)
    return rf.conv(
        x,
        in_dim=in_dim,
        out_dim=out_dim,
        in_spatial_dims=spatial,
        out_spatial_dims=out_spatial_dims,
        filter=filter,
        filter_size=list(filter_size),
        padding="valid",
        bias=bias,
        use_mask=True,
    )


class _TransposedConv(Module):
    """The transposed convolution module: ``filter`` over ``[in_dim, out_dim,
    *filter_size]`` (RETURNN's layout) starting Glorot-uniform, ``bias`` over
    ``[out_dim]`` at 0."""

    nd = 0

    def __init__(
        self,
        in_dim: Dim,
        out_dim: Dim,
        filter_size: int | Dim | Sequence[int | Dim],
        *,
        padding: str,
        remove_padding: Sequence[int] | int = 0,
        output_padding: Sequence[int | None] | int | None = None,
        strides: int | Sequence[int] | None = None,
        with_bias: bool = True,
    ):
        name = type(self).__name__
        sizes = [filter_size] * self.nd if isinstance(filter_size, int | Dim) else list(filter_size)
        if len(sizes) != self.nd:
            raise ValueError(f"{name}: filter_size needs {self.nd} entries, got {sizes}")
        self.in_dim, self.out_dim = in_dim, out_dim
        self.filter_size = [
            s if isinstance(s, Dim) else Dim(s, name=f"filter-dim{i}") for i, s in enumerate(sizes)
        ]
        self.padding, self.remove_padding, self.output_padding = (
            padding,
            remove_padding,
            output_padding,
        )
        self.strides = [strides] * self.nd if isinstance(strides, int) else strides
        # A tensor cannot have a dim twice: with in_dim == out_dim the filter's input
        # side is a copy of in_dim (RETURNN's copy with another match priority).
        self.filter_in_dim = (
            in_dim if in_dim != out_dim else Dim(in_dim.dimension, name=f"{in_dim.name}:in")
        )
        self.filter = Parameter(
            [self.filter_in_dim, out_dim, *self.filter_size], initial=init.Glorot()
        )
        self.with_bias = with_bias
        self.bias = Parameter([out_dim], initial=0.0) if with_bias else None

    def _call(
        self, source: Tensor, in_spatial_dims: Sequence[Dim], out_spatial_dims: Sequence[Dim] | None
    ) -> tuple[Tensor, list[Dim]]:
        if self.filter_in_dim != self.in_dim:
            if self.in_dim not in source.dims:
                raise ValueError(
                    f"{type(self).__name__}: source {list(source.dims)} lacks in_dim {self.in_dim}"
                )
            source, _ = _merge_dims(source, dims=[self.in_dim], out_dim=self.filter_in_dim)
        return transposed_conv(
            source,
            in_dim=self.filter_in_dim,
            out_dim=self.out_dim,
            in_spatial_dims=in_spatial_dims,
            out_spatial_dims=out_spatial_dims,
            filter=self.filter,
            filter_size=self.filter_size,
            padding=self.padding,
            remove_padding=self.remove_padding,
            output_padding=self.output_padding,
            strides=self.strides,
            bias=self.bias,
        )


class TransposedConv1d(_TransposedConv):
    """1-D transposed convolution: ``m(x, in_spatial_dim=time) -> (out, out_time)``."""

    nd = 1

    def __call__(
        self, source: Tensor, *, in_spatial_dim: Dim, out_spatial_dim: Dim | None = None
    ) -> tuple[Tensor, Dim]:
        """The transposed convolution of ``source`` over ``in_spatial_dim``, and the
        out spatial dim."""
        out_dims = None if out_spatial_dim is None else [out_spatial_dim]
        out, (dim,) = self._call(source, [in_spatial_dim], out_dims)
        return out, dim


class TransposedConv2d(_TransposedConv):
    """2-D transposed convolution: ``m(x, in_spatial_dims=[h, w]) -> (out, [oh, ow])``."""

    nd = 2

    def __call__(
        self,
        source: Tensor,
        *,
        in_spatial_dims: Sequence[Dim],
        out_spatial_dims: Sequence[Dim] | None = None,
    ) -> tuple[Tensor, list[Dim]]:
        """The transposed convolution of ``source`` over ``in_spatial_dims``, and the
        out spatial dims."""
        return self._call(source, in_spatial_dims, out_spatial_dims)
