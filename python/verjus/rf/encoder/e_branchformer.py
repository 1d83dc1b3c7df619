"""The E-Branchformer layer (Kim et al. 2022, https://arxiv.org/abs/2210.00077),
after RETURNN's ``returnn/frontend/encoder/e_branchformer.py``: the same classes
(``EBranchformerLayer``, ``FeedForwardConvGated``, ``Merge``), constructor
options, defaults and parameter names, so RETURNN model code runs with only the
import changed and a RETURNN state dict loads by name.

It is a layer for ``ConformerEncoder`` (``encoder_layer=rf.build_dict(
EBranchformerLayer, ...)``): half-step feed-forward, then two branches side by
side, global (relative-position self-attention) and local (a convolutional
gating MLP, cgMLP), merged by a depthwise convolution over their concatenation
and a projection, then a second half-step feed-forward and a final norm. All is
composed of rf modules and ops, so the gradients come with them.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from verjus import rf
from verjus._verjus import Dim, Tensor
from verjus.rf.build_from_dict import NotSpecified, build_from_dict
from verjus.rf.encoder.conformer import make_ff
from verjus.rf.feed_forward import make_norm

__all__ = ["EBranchformerLayer", "FeedForwardConvGated", "Merge"]


class EBranchformerLayer(rf.Module):
    """One E-Branchformer block (see the module doc), RETURNN's parameter names
    (``ffn1``, ``ffn1_layer_norm``, ``self_att``, ``self_att_layer_norm``,
    ``cgmlp``, ``cgmlp_layer_norm``, ``merge``, ``ffn2``, ``ffn2_layer_norm``,
    ``final_layer_norm``).

    :param out_dim: the model dim
    :param ff: the feed-forward modules (class, dict or module; Conformer's by default)
    :param ff_dim: their inner dim
    :param ff_activation: their activation
    :param dropout: after each block, while training
    :param num_heads: attention heads
    :param self_att: the self-attention (RelPosSelfAttention; class, dict or module)
    :param att_dropout: dropout on the attention weights
    :param cgmlp: the local branch (``FeedForwardConvGated``; class, dict or module)
    :param cgmlp_ff_dim: its gating dim (default ``3 * out_dim``)
    :param cgmlp_conv_kernel: its depthwise convolution's filter size
    :param merge_conv_kernel: the merge's depthwise convolution's filter size
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
        num_heads: int = 4,
        self_att: Any = NotSpecified,
        att_dropout: float = 0.1,
        cgmlp: Any = NotSpecified,
        cgmlp_ff_dim: Dim | int = NotSpecified,  # type: ignore[assignment]
        cgmlp_conv_kernel: int = 31,
        merge_conv_kernel: int = 3,
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
        self.self_att = _make_self_att(self_att, out_dim, num_heads, att_dropout)
        self.self_att_layer_norm = make_norm(norm, out_dim)
        self.cgmlp = _make_cgmlp(cgmlp, out_dim, cgmlp_ff_dim, cgmlp_conv_kernel, dropout)
        self.cgmlp_layer_norm = make_norm(norm, out_dim)
        self.merge = Merge(
            in_dim1=out_dim, in_dim2=out_dim, out_dim=out_dim, merge_conv_kernel=merge_conv_kernel
        )
        self.final_layer_norm = make_norm(norm, out_dim)

    def _drop(self, x: Tensor) -> Tensor:
        return rf.dropout(x, self.dropout, axis=self.out_dim if self.dropout_broadcast else None)

    def __call__(self, inp: Tensor, *, spatial_dim: Dim) -> Tensor:
        """The block over ``spatial_dim``; same dims as ``inp``."""
        x_ffn1_out = 0.5 * self._drop(self.ffn1(self.ffn1_layer_norm(inp))) + inp
        x_mhsa = self.self_att(self.self_att_layer_norm(x_ffn1_out), axis=spatial_dim)
        x_mhsa = self._drop(x_mhsa)
        x_cgmlp = self.cgmlp(self.cgmlp_layer_norm(x_ffn1_out), spatial_dim=spatial_dim)
        x_cgmlp = self._drop(x_cgmlp)
        x_merge = self._drop(self.merge(x_mhsa, x_cgmlp, spatial_dim=spatial_dim))
        x_merge_out = x_merge + x_ffn1_out
        x_ffn2 = self.ffn2(self.ffn2_layer_norm(x_merge_out))
        x_ffn2_out = 0.5 * self._drop(x_ffn2) + x_merge_out
        return self.final_layer_norm(x_ffn2_out)


def _make_self_att(self_att: Any, out_dim: Dim, num_heads: int, att_dropout: float) -> Any:
    """The global branch (RETURNN's handling of ``self_att``): RelPosSelfAttention by
    default, a class or dict built with the layer's options (a dict's own win), a
    module deep-copied (fresh parameters)."""
    if isinstance(self_att, rf.Module):
        return copy.deepcopy(self_att)
    opts = {
        "in_dim": out_dim,
        "proj_dim": out_dim,
        "key_dim_total": out_dim,
        "value_dim_total": out_dim,
        "num_heads": num_heads,
        "att_dropout": att_dropout,
    }
    if self_att is NotSpecified:
        return rf.RelPosSelfAttention(**opts)
    if isinstance(self_att, type):
        return self_att(**opts)
    if isinstance(self_att, dict):
        return build_from_dict(self_att, **{k: v for k, v in opts.items() if k not in self_att})
    raise TypeError(f"EBranchformerLayer: invalid self_att {self_att!r}")


def _make_cgmlp(
    cgmlp: Any, out_dim: Dim, ff_dim: Any, kernel_size: int, dropout: float
) -> rf.Module:
    """The local branch (RETURNN's handling of ``cgmlp``), as ``_make_self_att``."""
    if isinstance(cgmlp, rf.Module):
        return copy.deepcopy(cgmlp)
    if cgmlp is NotSpecified:
        cgmlp = FeedForwardConvGated
    opts = {"ff_dim": ff_dim, "kernel_size": kernel_size, "dropout": dropout}
    opts = {k: v for k, v in opts.items() if v is not NotSpecified}
    if isinstance(cgmlp, type):
        cgmlp = cgmlp(out_dim, **opts)
    elif isinstance(cgmlp, dict):
        cgmlp = build_from_dict(cgmlp, out_dim, **{k: v for k, v in opts.items() if k not in cgmlp})
    if not isinstance(cgmlp, rf.Module):
        raise TypeError(f"EBranchformerLayer: unexpected cgmlp {cgmlp!r}")
    return cgmlp


class FeedForwardConvGated(rf.Module):
    """The convolutional gating MLP (cgMLP, https://openreview.net/forum?id=RA-zVvZLYIy),
    the E-Branchformer's local branch: ``linear_ff`` to twice ``ff_dim`` and
    ``activation``; one half normed, convolved depthwise over time and through
    ``gate_activation`` gates the other (the convolutional spatial gating unit);
    dropout; ``linear_out``.

    :param out_dim: the model dim
    :param ff_dim: the gating dim (an int or Dim; default ``3 * out_dim``; ESPnet's
        ``cgmlp_linear_units`` is twice it)
    :param kernel_size: the depthwise convolution's filter size
    :param dropout: before ``linear_out``, while training
    :param activation: after ``linear_ff`` (gelu; a callable, module, class or dict)
    :param gate_activation: on the gate (identity)
    :param with_bias: biases in the linear layers and the convolution
    :param norm: the gate's norm (LayerNorm)
    """

    def __init__(
        self,
        out_dim: Dim,
        *,
        ff_dim: Dim | int = NotSpecified,  # type: ignore[assignment]
        kernel_size: int = 31,
        dropout: float = 0.1,
        activation: Any = rf.gelu,
        gate_activation: Any = rf.identity,
        with_bias: bool = True,
        norm: Any = rf.LayerNorm,
    ) -> None:
        super().__init__()
        if ff_dim is NotSpecified:
            ff_dim = out_dim * 3
        if isinstance(ff_dim, int):
            ff_dim = Dim(ff_dim, name="e-branchformer-ff-dim")
        if not isinstance(ff_dim, Dim):
            raise TypeError(f"FeedForwardConvGated: unexpected ff_dim {ff_dim!r}")
        self.out_dim = out_dim
        self.ff_dim = ff_dim
        self.dropout = dropout
        self.dropout_broadcast = rf.dropout_broadcast_default()
        self.activation = _make_activation(rf.gelu if activation is NotSpecified else activation)
        if gate_activation is NotSpecified:
            gate_activation = rf.identity
        self.gate_activation = _make_activation(gate_activation)
        self.linear_ff = rf.Linear(out_dim, 2 * ff_dim, with_bias=with_bias)
        self.norm = make_norm(norm, ff_dim)
        self.conv = rf.Conv1d(
            ff_dim,
            ff_dim,
            filter_size=kernel_size,
            groups=ff_dim.dimension,
            padding="same",
            with_bias=with_bias,
        )
        self.linear_out = rf.Linear(ff_dim, out_dim, with_bias=with_bias)

    def __call__(self, x: Tensor, *, spatial_dim: Dim) -> Tensor:
        """The branch over ``spatial_dim``; same dims as ``x``."""
        x = self.activation(self.linear_ff(x))
        x_g, x_r = rf.split(x, axis=self.linear_ff.out_dim, out_dims=[self.ff_dim] * 2)
        x_g, _ = self.conv(self.norm(x_g), in_spatial_dim=spatial_dim)
        x = self.gate_activation(x_g) * x_r
        x = rf.dropout(x, self.dropout, axis=self.ff_dim if self.dropout_broadcast else None)
        return self.linear_out(x)


class Merge(rf.Module):
    """The E-Branchformer's merge of the two branches: their concatenation plus its
    depthwise convolution over time (``depthwise_conv_fusion``), projected to
    ``out_dim`` (``merge_proj``).

    :param in_dim1: the first branch's feature dim
    :param in_dim2: the second branch's
    :param out_dim: the merged feature dim
    :param merge_conv_kernel: the convolution's filter size
    """

    def __init__(
        self, *, in_dim1: Dim, in_dim2: Dim, out_dim: Dim, merge_conv_kernel: int = 3
    ) -> None:
        super().__init__()
        self.in_dim1 = in_dim1
        self.in_dim2 = in_dim2
        self.concat_in_dim = in_dim1 + in_dim2
        self.out_dim = out_dim
        self.depthwise_conv_fusion = rf.Conv1d(
            self.concat_in_dim,
            self.concat_in_dim,
            filter_size=merge_conv_kernel,
            groups=self.concat_in_dim.dimension,
            padding="same",
        )
        self.merge_proj = rf.Linear(self.concat_in_dim, out_dim)

    def __call__(self, x1: Tensor, x2: Tensor, *, spatial_dim: Dim) -> Tensor:
        """The merged branches over ``spatial_dim``, with ``out_dim``."""
        x_concat, _ = rf.concat((x1, self.in_dim1), (x2, self.in_dim2), out_dim=self.concat_in_dim)
        x_conv, _ = self.depthwise_conv_fusion(x_concat, in_spatial_dim=spatial_dim)
        return self.merge_proj(x_concat + x_conv)


def _make_activation(activation: Any) -> Callable[[Tensor], Tensor]:
    """An activation option as a callable (RETURNN's handling): a dict built, a
    module deep-copied, a class instantiated, a callable kept."""
    if isinstance(activation, dict):
        activation = build_from_dict(activation)
    elif isinstance(activation, rf.Module):
        activation = copy.deepcopy(activation)
    elif isinstance(activation, type):
        activation = activation()
    if not callable(activation):
        raise TypeError(f"FeedForwardConvGated: unexpected activation {activation!r}")
    return activation
