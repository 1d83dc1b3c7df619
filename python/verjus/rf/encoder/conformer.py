"""The Conformer encoder (Gulati et al. 2020, https://arxiv.org/abs/2005.08100),
after RETURNN's ``returnn/frontend/encoder/conformer.py``: the same classes,
constructor options, defaults and parameter names, so RETURNN model code runs
with only the import changed and a RETURNN state dict loads by name.

A layer is: half-step feed-forward, relative-position self-attention
(``rf.RelPosSelfAttention``), a convolution block (pointwise, GLU, depthwise
convolution, BatchNorm, swish, pointwise) and a second half-step feed-forward,
each pre-normalized with a residual connection, then a final LayerNorm. The
encoder optionally runs a downsampling frontend (``ConformerConvSubsample``),
a projection to the model dim, input dropout, then its layers.

Unlike RETURNN (whose default depends on its behavior version), the conv
block's BatchNorm masks the padding out of its statistics by default
(``use_mask=None``, RETURNN's behavior version >= 29).
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable, Sequence
from typing import Any

from verjus import rf
from verjus._verjus import Dim, Tensor
from verjus.rf.backend import behavior_version_at_least, returnn_config_bool
from verjus.rf.build_from_dict import NotSpecified, build_from_dict
from verjus.rf.encoder.base import ISeqDownsamplingEncoder
from verjus.rf.feed_forward import FeedForward, make_norm
from verjus.rf.feed_forward import make_ff as _make_ff
from verjus.rf.positional_encoding import make_pos_enc

__all__ = [
    "ConformerConvBlock",
    "ConformerConvSubsample",
    "ConformerEncoder",
    "ConformerEncoderLayer",
    "ConformerPositionwiseFeedForward",
    "conv_norm_use_mask_default",
]


def _dims_str(x: Tensor) -> str:
    return "[" + ", ".join(d.name for d in x.dims) + "]"


def _check_dim(who: str, what: str, dim: Dim, x: Tensor) -> None:
    if dim not in x.dims:
        raise ValueError(f"{who}: {what} {dim.name} is not a dim of the input {_dims_str(x)}")


class ConformerPositionwiseFeedForward(FeedForward):
    """The Conformer's feed-forward block, ``FeedForward`` with swish as the
    default activation.

    :param out_dim: input and output feature dim
    :param ff_dim: the inner dim (default ``4 * out_dim``)
    :param dropout: dropout after the activation, while training
    :param activation: swish by default
    :param kwargs: further ``FeedForward`` options (``with_bias``)
    """

    def __init__(
        self,
        out_dim: Dim,
        *,
        ff_dim: Dim | int = NotSpecified,  # type: ignore[assignment]
        dropout: float = 0.1,
        activation: Any = rf.swish,
        **kwargs: Any,
    ) -> None:
        if activation is NotSpecified:
            activation = rf.swish
        super().__init__(
            out_dim=out_dim, ff_dim=ff_dim, dropout=dropout, activation=activation, **kwargs
        )


class ConformerConvBlock(rf.Module):
    """The Conformer's convolution block: pointwise (``positionwise_conv1``, to
    twice the dim), GLU, depthwise convolution (``depthwise_conv``, "same"
    padding), ``norm``, swish, pointwise (``positionwise_conv2``).

    :param out_dim: input and output feature dim
    :param kernel_size: the depthwise convolution's filter size
    :param norm: the normalization (BatchNorm in the paper), a callable
    """

    def __init__(self, out_dim: Dim, *, kernel_size: int, norm: Any) -> None:
        super().__init__()
        self.out_dim = out_dim
        self.positionwise_conv1 = rf.Linear(out_dim, 2 * out_dim)
        self.depthwise_conv = rf.Conv1d(
            out_dim, out_dim, filter_size=kernel_size, groups=out_dim.dimension, padding="same"
        )
        self.positionwise_conv2 = rf.Linear(out_dim, out_dim)
        if not callable(norm):
            raise TypeError(f"{self}: unexpected norm type {norm!r}")
        self.norm = norm
        self._norm_wants_spatial_dim = "spatial_dim" in inspect.signature(norm).parameters

    def __call__(self, inp: Tensor, *, spatial_dim: Dim) -> Tensor:
        """The block over ``spatial_dim`` (padding frames never enter a frame's result)."""
        _check_dim("ConformerConvBlock", "out_dim", self.out_dim, inp)
        _check_dim("ConformerConvBlock", "spatial_dim", spatial_dim, inp)
        x = self.positionwise_conv1(inp)
        x, _ = rf.gating(x, axis=self.positionwise_conv1.out_dim, out_dim=self.out_dim)
        x, _ = self.depthwise_conv(x, in_spatial_dim=spatial_dim)
        kw = {"spatial_dim": spatial_dim} if self._norm_wants_spatial_dim else {}
        x = rf.swish(self.norm(x, **kw))
        return self.positionwise_conv2(x)


def _pair(value: int | Sequence[int]) -> tuple[int, int]:
    if isinstance(value, int):
        return value, value
    first, second = value
    return first, second


class ConformerConvSubsample(ISeqDownsamplingEncoder):
    """The Conformer's convolutional frontend: 2-D convolutions over (time,
    ``in_dim``) with one input channel, each followed by ``activation`` and
    optionally max-pooling; the channels and what is left of ``in_dim`` are
    merged into ``out_dim``.

    :param in_dim: the input feature dim (the second spatial dim of the convs)
    :param out_dims: output channels per conv (ints or Dims)
    :param filter_sizes: per conv, an int or (time, feature)
    :param strides: per conv, an int or (time, feature) (default 1)
    :param pool_sizes: per conv (the first ones), (time, feature) max-pooling
    :param activation: after each conv (relu)
    :param padding: "same" or "valid"
    """

    def __init__(
        self,
        in_dim: Dim,
        *,
        out_dims: list[Dim | int],
        filter_sizes: list[int | tuple[int, int]],
        strides: list[int | tuple[int, int]] | None = None,
        pool_sizes: list[tuple[int, int]] | None = None,
        activation: Callable[[Tensor], Tensor] = rf.relu,
        padding: str = "same",
    ) -> None:
        super().__init__()
        if strides is None:
            strides = [1] * len(out_dims)
        if not len(out_dims) == len(filter_sizes) == len(strides) > 0:
            raise ValueError(
                "ConformerConvSubsample: out_dims, filter_sizes and strides need the same"
                f" number (> 0) of entries, got {len(out_dims)}, {len(filter_sizes)},"
                f" {len(strides)}"
            )
        self.pool_sizes = pool_sizes
        self.activation = activation
        self.padding = padding
        self.conv_layers = rf.ModuleList()
        self._dummy_in_dim = Dim(1, name="conv_dummy_in")
        self.in_dim = in_dim
        prev_out_dim = self._dummy_in_dim
        second_spatial_dim = in_dim
        self._filters: list[tuple[int, int]] = []
        self._strides: list[tuple[int, int]] = []
        for i, (filter_size, stride, out_dim) in enumerate(
            zip(filter_sizes, strides, out_dims, strict=True)
        ):
            if isinstance(out_dim, int):
                out_dim = Dim(out_dim, name=f"conv_out_{i}")
            self._filters.append(_pair(filter_size))
            self._strides.append(_pair(stride))
            conv = rf.Conv2d(
                prev_out_dim, out_dim, filter_size=filter_size, strides=stride, padding=padding
            )
            self.conv_layers.append(conv)
            (second_spatial_dim,) = rf.make_conv_out_spatial_dims(
                [second_spatial_dim],
                filter_size=self._filters[-1][1],
                strides=self._strides[-1][1],
                padding=padding,
            )
            if pool_sizes and i < len(pool_sizes):
                (second_spatial_dim,) = rf.make_conv_out_spatial_dims(
                    [second_spatial_dim],
                    filter_size=pool_sizes[i][1],
                    strides=pool_sizes[i][1],
                    padding="same",
                )
            prev_out_dim = out_dim
        self._final_second_spatial_dim = second_spatial_dim
        self.out_dim = second_spatial_dim * prev_out_dim.dimension
        self.downsample_factor = 1
        for i, (stride, _) in enumerate(self._strides):
            self.downsample_factor *= stride
            if pool_sizes and i < len(pool_sizes):
                self.downsample_factor *= pool_sizes[i][0]

    def __call__(self, source: Tensor, *, in_spatial_dim: Dim) -> tuple[Tensor, Dim]:
        """The frontend over ``in_spatial_dim``: the output over ``out_dim`` and
        the new (shorter) spatial dim."""
        _check_dim("ConformerConvSubsample", "in_dim", self.in_dim, source)
        _check_dim("ConformerConvSubsample", "in_spatial_dim", in_spatial_dim, source)
        in_spatial_dims = [in_spatial_dim, self.in_dim]
        in_dim = self._dummy_in_dim
        x = rf.expand_dim(source, dim=in_dim)
        for i, conv_layer in enumerate(self.conv_layers):
            x, in_spatial_dims = conv_layer(x, in_spatial_dims=in_spatial_dims)
            in_dim = conv_layer.out_dim
            x = self.activation(x)
            if self.pool_sizes and i < len(self.pool_sizes):
                x, in_spatial_dims = rf.pool2d(
                    x,
                    in_spatial_dims=in_spatial_dims,
                    pool_size=self.pool_sizes[i],
                    padding="same",
                    mode="max",
                )
        x, _ = rf.replace_dim(x, in_dim=in_spatial_dims[-1], out_dim=self._final_second_spatial_dim)
        out, _ = rf.merge_dims(
            x, dims=[self._final_second_spatial_dim, in_dim], out_dim=self.out_dim
        )
        return out, in_spatial_dims[0]

    def get_out_spatial_dim(self, in_spatial_dim: Dim) -> Dim:
        """The output's spatial dim for ``in_spatial_dim`` (same lengths as
        ``__call__`` gives)."""
        out = in_spatial_dim
        for i, (filt, stride) in enumerate(zip(self._filters, self._strides, strict=True)):
            (out,) = rf.make_conv_out_spatial_dims(
                [out], filter_size=filt[0], strides=stride[0], padding=self.padding
            )
            if self.pool_sizes and i < len(self.pool_sizes):
                pool = self.pool_sizes[i][0]
                (out,) = rf.make_conv_out_spatial_dims(
                    [out], filter_size=pool, strides=pool, padding="same"
                )
        return out


def conv_norm_use_mask_default() -> bool | None:
    """The default ``use_mask`` of the conv block's ``rf.BatchNorm``, as RETURNN's:
    its config option ``rf_conformer_conv_norm_use_mask``, else None (BatchNorm
    decides, masked by default) but False (statistics over the padding frames
    too) with a RETURNN behavior version up to 28 in effect (see
    ``rf.backend.returnn_behavior_version``)."""
    value = returnn_config_bool("rf_conformer_conv_norm_use_mask")
    if value is not None:
        return value
    return None if behavior_version_at_least(29) else False


def _build_conv_norm(conv_norm: Any, conv_norm_opts: dict[str, Any] | None, out_dim: Dim) -> Any:
    if conv_norm is NotSpecified or conv_norm is rf.BatchNorm:
        opts = dict(conv_norm_opts or {})
        opts.setdefault("use_mask", conv_norm_use_mask_default())
        return rf.BatchNorm(out_dim, **opts)
    if isinstance(conv_norm, type):
        return conv_norm(out_dim, **(conv_norm_opts or {}))
    if isinstance(conv_norm, dict):
        return build_from_dict(conv_norm, out_dim, **(conv_norm_opts or {}))
    return conv_norm


def make_ff(*, out_dim: Dim, ff: Any, ff_dim: Any, ff_activation: Any, dropout: float) -> Any:
    """The feed-forward part of a Conformer layer (RETURNN's ``make_ff``): a
    ``ConformerPositionwiseFeedForward`` by default, a class or dict built with
    the options given, a module deep-copied.

    :return: the module
    """
    return _make_ff(
        out_dim=out_dim,
        ff=ff,
        ff_dim=ff_dim,
        ff_activation=ff_activation,
        dropout=dropout,
        default=ConformerPositionwiseFeedForward,
    )


class ConformerEncoderLayer(rf.Module):
    """One Conformer block (see the module doc), RETURNN's parameter names
    (``ffn1``, ``ffn1_layer_norm``, ``self_att``, ``self_att_layer_norm``,
    ``conv_block``, ``conv_layer_norm``, ``ffn2``, ``ffn2_layer_norm``,
    ``final_layer_norm``).

    :param out_dim: the model dim
    :param ff: the feed-forward module (class, dict or module)
    :param ff_dim: its inner dim (default ``4 * out_dim``)
    :param ff_activation: its activation (swish)
    :param dropout: after each block, while training
    :param conv_kernel_size: the depthwise convolution's filter size
    :param conv_norm: the conv block's norm (BatchNorm; class, dict or callable)
    :param conv_norm_opts: options for it (BatchNorm: ``use_mask`` by default
        ``conv_norm_use_mask_default()``: None, i.e. masked statistics, unless
        RETURNN's settings say otherwise)
    :param num_heads: attention heads
    :param self_att: the self-attention (RelPosSelfAttention; class, dict or module)
    :param self_att_opts: options for it
    :param att_dropout: dropout on the attention weights
    :param norm: the pre-norms and the final norm (LayerNorm)
    """

    def __init__(
        self,
        out_dim: Dim = Dim(512, name="conformer-enc-default-out-dim"),  # noqa: B008
        *,
        ff: Any = NotSpecified,
        ff_dim: Dim | int = NotSpecified,  # type: ignore[assignment]
        ff_activation: Any = NotSpecified,
        dropout: float = 0.1,
        conv_kernel_size: int = 32,
        conv_norm: Any = NotSpecified,
        conv_norm_opts: dict[str, Any] | None = None,
        num_heads: int = 4,
        self_att: Any = None,
        self_att_opts: dict[str, Any] | None = None,
        att_dropout: float = 0.1,
        norm: Any = rf.LayerNorm,
    ) -> None:
        super().__init__()
        self.dropout = dropout
        self.dropout_broadcast = rf.dropout_broadcast_default()
        self.out_dim = out_dim
        ff_opts = {"ff": ff, "out_dim": out_dim, "ff_dim": ff_dim, "dropout": dropout}
        self.ffn1 = make_ff(**ff_opts, ff_activation=ff_activation)
        self.ffn1_layer_norm = make_norm(norm, out_dim)
        self.ffn2 = make_ff(**ff_opts, ff_activation=ff_activation)
        self.ffn2_layer_norm = make_norm(norm, out_dim)
        conv_norm = _build_conv_norm(conv_norm, conv_norm_opts, out_dim)
        if not callable(conv_norm):
            raise TypeError(f"{self}: unexpected conv_norm {conv_norm!r}")
        self.conv_block = ConformerConvBlock(
            out_dim=out_dim, kernel_size=conv_kernel_size, norm=conv_norm
        )
        self.conv_layer_norm = make_norm(norm, out_dim)
        self.self_att = self._make_self_att(
            self_att, self_att_opts, out_dim, num_heads, att_dropout
        )
        self.self_att_layer_norm = make_norm(norm, out_dim)
        self.final_layer_norm = make_norm(norm, out_dim)

    def _make_self_att(
        self,
        self_att: Any,
        self_att_opts: dict[str, Any] | None,
        out_dim: Dim,
        num_heads: int,
        att_dropout: float,
    ) -> Any:
        if self_att is not None and not isinstance(self_att, (dict, type)):
            if not callable(self_att):
                raise TypeError(f"{self}: invalid non-callable self_att {self_att!r}")
            return self_att
        opts: dict[str, Any] = {
            "in_dim": out_dim,
            "proj_dim": out_dim,
            "key_dim_total": out_dim,
            "value_dim_total": out_dim,
            "num_heads": num_heads,
            "att_dropout": att_dropout,
        }
        opts.update(self_att_opts or {})
        if self_att is None:
            return rf.RelPosSelfAttention(**opts)
        if isinstance(self_att, type):
            return self_att(**opts)
        opts = {k: v for k, v in opts.items() if k not in self_att}
        return build_from_dict(self_att, **opts)

    def _drop(self, x: Tensor) -> Tensor:
        return rf.dropout(x, self.dropout, axis=self.out_dim if self.dropout_broadcast else None)

    def __call__(self, inp: Tensor, *, spatial_dim: Dim) -> Tensor:
        """The block over ``spatial_dim``; same dims as ``inp``."""
        _check_dim("ConformerEncoderLayer", "out_dim", self.out_dim, inp)
        _check_dim("ConformerEncoderLayer", "spatial_dim", spatial_dim, inp)
        x_ffn1 = self.ffn1(self.ffn1_layer_norm(inp))
        x_ffn1_out = 0.5 * self._drop(x_ffn1) + inp
        x_mhsa = self.self_att(self.self_att_layer_norm(x_ffn1_out), axis=spatial_dim)
        x_mhsa_out = self._drop(x_mhsa) + x_ffn1_out
        x_conv = self.conv_block(self.conv_layer_norm(x_mhsa_out), spatial_dim=spatial_dim)
        x_conv_out = self._drop(x_conv) + x_mhsa_out
        x_ffn2 = self.ffn2(self.ffn2_layer_norm(x_conv_out))
        x_ffn2_out = 0.5 * self._drop(x_ffn2) + x_conv_out
        return self.final_layer_norm(x_ffn2_out)


class ConformerEncoder(ISeqDownsamplingEncoder):
    """The Conformer encoder (see the module doc): ``input_layer`` (e.g.
    ``ConformerConvSubsample``), ``input_projection`` to ``out_dim`` (no bias;
    only if the dims differ), scale, positional encoding, input dropout, then
    ``layers``.

    :param in_dim: the input feature dim
    :param out_dim: the model dim (int or Dim)
    :param num_layers: the number of layers
    :param input_layer: the frontend ``(x, in_spatial_dim) -> (y, out_spatial_dim)``
        (a module, a dict, or None)
    :param input_embedding_scale: applied after the frontend (default 1.0
        without ``pos_enc``, else ``sqrt(out_dim)``)
    :param pos_enc: absolute positional encoding added after that (None; a
        function such as ``rf.sinusoidal_positional_encoding``, a dict or a module)
    :param input_dropout: after that, while training
    :param ff_dim: the layers' feed-forward inner dim
    :param ff_activation: their activation
    :param dropout: the layers' dropout
    :param conv_kernel_size: the layers' depthwise convolution filter size
    :param conv_norm: the layers' conv norm
    :param num_heads: attention heads
    :param att_dropout: dropout on the attention weights
    :param encoder_layer: a layer to copy, a class or dict (default
        ``ConformerEncoderLayer``)
    :param encoder_layer_opts: further options for the layer
    :param sequential: how the layers are stacked (``rf.Sequential``)
    """

    def __init__(
        self,
        in_dim: Dim,
        out_dim: Dim | int = Dim(512, name="conformer-enc-default-out-dim"),  # noqa: B008
        *,
        num_layers: int,
        input_layer: Any,
        input_embedding_scale: float | None = None,
        pos_enc: Any = None,
        input_dropout: float = 0.1,
        ff_dim: Dim | int = NotSpecified,  # type: ignore[assignment]
        ff_activation: Any = NotSpecified,
        dropout: float = 0.1,
        conv_kernel_size: int = NotSpecified,  # type: ignore[assignment]
        conv_norm: Any = NotSpecified,
        num_heads: int = 4,
        att_dropout: float = 0.1,
        encoder_layer: Any = None,
        encoder_layer_opts: dict[str, Any] | None = None,
        sequential: Any = rf.Sequential,
    ) -> None:
        super().__init__()
        if not isinstance(in_dim, Dim):
            raise TypeError(f"ConformerEncoder: in_dim must be a Dim, got {in_dim!r}")
        if isinstance(out_dim, int):
            out_dim = Dim(out_dim, name="conformer-enc-out-dim")
        if not isinstance(out_dim, Dim):
            raise TypeError(f"ConformerEncoder: out_dim must be an int or Dim, got {out_dim!r}")
        self.in_dim = in_dim
        self.out_dim = out_dim
        self.dropout = dropout
        self.dropout_broadcast = rf.dropout_broadcast_default()
        if isinstance(input_layer, dict):
            input_layer = build_from_dict(input_layer, in_dim)
        elif input_layer is not None and not callable(input_layer):
            raise TypeError(f"ConformerEncoder: unexpected input_layer {input_layer!r}")
        self.input_layer = input_layer
        in_dim = self.input_layer.out_dim if self.input_layer else self.in_dim
        self.input_projection = (
            rf.Linear(in_dim, self.out_dim, with_bias=False) if in_dim != self.out_dim else None
        )
        if input_embedding_scale is None:
            input_embedding_scale = self.out_dim.dimension**0.5 if pos_enc is not None else 1.0
        self.input_embedding_scale = input_embedding_scale
        self.pos_enc = make_pos_enc("ConformerEncoder", pos_enc, self.out_dim)
        self.input_dropout = input_dropout
        layer = self._make_layer(
            encoder_layer,
            encoder_layer_opts,
            {
                "out_dim": out_dim,
                "ff_dim": ff_dim,
                "ff_activation": ff_activation,
                "dropout": dropout,
                "conv_kernel_size": conv_kernel_size,
                "conv_norm": conv_norm,
                "num_heads": num_heads,
                "att_dropout": att_dropout,
            },
        )
        self.layers = sequential(copy.deepcopy(layer) for _ in range(num_layers))

    def _make_layer(
        self, encoder_layer: Any, encoder_layer_opts: dict[str, Any] | None, opts: dict[str, Any]
    ) -> Any:
        if encoder_layer and not isinstance(encoder_layer, (dict, type)):
            if not callable(encoder_layer):
                raise TypeError(f"{self}: invalid non-callable encoder_layer {encoder_layer!r}")
            return encoder_layer
        opts = {k: v for k, v in opts.items() if v is not NotSpecified}
        opts.update(encoder_layer_opts or {})
        if not encoder_layer:
            return ConformerEncoderLayer(**opts)
        if isinstance(encoder_layer, type):
            return encoder_layer(**opts)
        opts = {k: v for k, v in opts.items() if k not in encoder_layer}
        return build_from_dict(encoder_layer, **opts)

    def __call__(
        self,
        source: Tensor,
        *,
        in_spatial_dim: Dim,
        collected_outputs: dict[str, Tensor] | None = None,
    ) -> tuple[Tensor, Dim]:
        """The encoding of ``source`` over ``in_spatial_dim``: the output over
        ``out_dim`` and its spatial dim (shorter after a downsampling frontend).

        :param collected_outputs: if given, receives each layer's output by name
        """
        _check_dim("ConformerEncoder", "in_spatial_dim", in_spatial_dim, source)
        if self.input_layer and self.input_layer.in_dim in source.dims:
            x, out_spatial_dim = self.input_layer(source, in_spatial_dim=in_spatial_dim)
        else:
            x, out_spatial_dim = source, in_spatial_dim
        if self.input_projection and self.input_projection.in_dim in x.dims:
            x = self.input_projection(x)
        if self.out_dim not in x.dims:
            expected = self.input_layer.in_dim if self.input_layer else self.in_dim
            raise ValueError(
                f"ConformerEncoder: the input {_dims_str(source)} has neither the in_dim"
                f" {expected.name} ({expected.dimension}) nor the model dim {self.out_dim.name}"
            )
        if self.input_embedding_scale != 1.0:
            x = x * self.input_embedding_scale
        if self.pos_enc is not None:
            x = x + self.pos_enc(spatial_dim=out_spatial_dim)
        x = rf.dropout(x, self.input_dropout, axis=self.out_dim if self.dropout_broadcast else None)
        x = self.layers(x, spatial_dim=out_spatial_dim, collected_outputs=collected_outputs)
        return x, out_spatial_dim
