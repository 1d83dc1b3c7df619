"""Self-attention with relative positional encoding, after RETURNN's
``returnn/frontend/attention.py``: ``RelPosSelfAttention`` (Transformer-XL style,
Dai et al. 2019, or Shaw et al. 2018 with its options; the Conformer's default
self-attention) and ``LearnedRelativePositionalEncoding``, with RETURNN's
keyword arguments, defaults and parameter names (``qkv``, ``proj``,
``linear_pos``, ``pos_bias_u``, ``pos_bias_v``, ``learned_pos_emb.pos_emb``), so
a RETURNN state dict loads by name.

The scores add a position term to the content term, so they are not one fused
``dot_attention``: they are computed by rf ops as RETURNN's generic backend
does (``(q + u) . k + shift((q + v) . pos_emb)``, scaled, softmax over the
keys with padded keys masked, dropout, weighted sum). RETURNN's shift
(``_rel_pos_enc_shift``: pad, reshape, slice) picks, for query ``i`` and key
``j``, the encoding of distance ``j - i``; here that pick is one ``gather``
with those indices.
"""

from __future__ import annotations

import numpy as np

from verjus._verjus import Dim, Tensor
from verjus.rf import init
from verjus.rf.attention import SelfAttentionBase, merge_heads
from verjus.rf.module import Linear, Module
from verjus.rf.parameter import Parameter
from verjus.rf.positional_encoding import relative_positional_encoding
from verjus.rf.replace_dim import replace_dim

__all__ = ["LearnedRelativePositionalEncoding", "RelPosSelfAttention"]


def _int_tensor(array: np.ndarray, dims: list[Dim]) -> Tensor:
    from verjus import rf

    return rf.convert_to_tensor(array.astype(np.int32), dims=dims, dtype="int32")


class LearnedRelativePositionalEncoding(Module):
    """Learnable relative positional encoding (Shaw et al. 2018), RETURNN's:
    a parameter ``pos_emb`` over ``[2 * clipping + 1, feat_dim]`` (causal:
    ``clipping + 1``), distances clipped to ``[-clipping, clipping]``.

    :param feat_dim: the encoding's feature dim
    :param clipping: the largest distance told apart
    :param dtype: float32 (None)
    :param causal: only distances ``<= 0``
    """

    def __init__(
        self, feat_dim: Dim, *, clipping: int = 16, dtype: str | None = None, causal: bool = False
    ) -> None:
        super().__init__()
        self.feat_dim = feat_dim
        self.clipping = clipping
        self.clipped_spatial_dim = Dim((1 if causal else 2) * clipping + 1, name="learned-rel-pos")
        self.causal = causal
        self.pos_emb = Parameter([self.clipped_spatial_dim, feat_dim], dtype=dtype)

    def __call__(
        self, *, query_spatial_dim: Dim, key_value_spatial_dim: Dim, query_offset: int = 0
    ) -> tuple[Tensor, Dim]:
        """The same interface as ``relative_positional_encoding`` (static dims
        of known size; the distances ``-(Tq - 1) .. Tk - 1``).

        :return: the encoding over ``[out_spatial_dim, feat_dim]`` and ``out_spatial_dim``
        """
        from verjus import rf

        q, kv = query_spatial_dim, key_value_spatial_dim
        if q.size is None or kv.size is None:
            raise ValueError(
                f"LearnedRelativePositionalEncoding: the spatial dims need known sizes,"
                f" got {q!r}, {kv!r}"
            )
        name = f"2*{q.name}-1" if q == kv else f"{q.name}+{kv.name}-1"
        out_dim = Dim(q.size - 1 + kv.size, name=name)
        dist = np.arange(-(q.size - 1), kv.size) - query_offset
        idx = np.clip(dist, -self.clipping, 0 if self.causal else self.clipping) + self.clipping
        indices = _int_tensor(idx, [out_dim])
        return rf.gather(self.pos_emb, indices=indices, axis=self.clipped_spatial_dim), out_dim


class RelPosSelfAttention(SelfAttentionBase):
    """Self-attention with relative positional encoding (RETURNN's; see the
    module doc). Defaults give Transformer-XL style attention with a fixed
    sinusoidal encoding.

    :param in_dim: input dim
    :param proj_dim: if given, a final linear projection to it
    :param key_dim_total: total key dim, a multiple of ``num_heads``
    :param value_dim_total: total value dim, a multiple of ``num_heads``
    :param num_heads: number of heads (int or Dim)
    :param with_bias: biases in the ``qkv`` and ``proj`` projections
    :param with_linear_pos: project the encoding by ``linear_pos`` (no bias)
    :param with_pos_bias: the biases ``pos_bias_u`` / ``pos_bias_v`` added to the
        queries for the content and the position term
    :param learnable_pos_emb: a ``LearnedRelativePositionalEncoding`` instead of
        the sinusoidal one
    :param learnable_pos_emb_clipping: its ``clipping``
    :param separate_pos_emb_per_head: an encoding per head (else one shared)
    :param pos_emb_dropout: dropout on the encoding, while training
    :param att_dropout: dropout on the attention weights, while training
    """

    def __init__(
        self,
        in_dim: Dim,
        proj_dim: Dim | None,
        *,
        key_dim_total: Dim,
        value_dim_total: Dim,
        num_heads: int | Dim,
        with_bias: bool = True,
        with_linear_pos: bool = True,
        with_pos_bias: bool = True,
        learnable_pos_emb: bool = False,
        learnable_pos_emb_clipping: int = 16,
        separate_pos_emb_per_head: bool = True,
        pos_emb_dropout: float = 0.0,
        att_dropout: float = 0.1,
    ) -> None:
        super().__init__(
            in_dim=in_dim,
            proj_dim=proj_dim,
            key_dim_total=key_dim_total,
            value_dim_total=value_dim_total,
            num_heads=num_heads,
            with_bias=with_bias,
            att_dropout=att_dropout,
        )
        self.separate_pos_emb_per_head = separate_pos_emb_per_head
        if with_linear_pos:
            self.pos_emb_feat_dim = self.in_dim
        elif separate_pos_emb_per_head:
            self.pos_emb_feat_dim = self.key_dim_total
        else:
            self.pos_emb_feat_dim = self.key_dim_per_head
        self.linear_pos = None
        if with_linear_pos:
            pos_out = self.key_dim_total if separate_pos_emb_per_head else self.key_dim_per_head
            self.linear_pos = Linear(self.in_dim, pos_out, with_bias=False)
        self.learned_pos_emb = None
        if learnable_pos_emb:
            self.learned_pos_emb = LearnedRelativePositionalEncoding(
                self.pos_emb_feat_dim, clipping=learnable_pos_emb_clipping
            )
        self.pos_bias_u = None
        self.pos_bias_v = None
        if with_pos_bias:
            dims = [self.num_heads, self.key_dim_per_head]
            self.pos_bias_u = Parameter(dims, initial=init.Glorot())
            self.pos_bias_v = Parameter(dims, initial=init.Glorot())
        self.pos_emb_dropout = pos_emb_dropout

    def __call__(self, source: Tensor, *, axis: Dim, **_kwargs: object) -> Tensor:
        """Every frame attends over all frames of ``axis`` (padded ones excluded),
        the scores including the relative position term.

        :return: over ``source``'s dims with ``out_dim`` for ``in_dim``
        """
        from verjus import rf

        if self.in_dim not in source.dims:
            have = ", ".join(d.name for d in source.dims)
            raise ValueError(
                f"RelPosSelfAttention: in_dim {self.in_dim.name} is not a dim of the input [{have}]"
            )
        if axis not in source.dims:
            have = ", ".join(d.name for d in source.dims)
            raise ValueError(
                f"RelPosSelfAttention: axis {axis.name} is not a dim of the input [{have}]"
            )
        if self.learned_pos_emb is not None:
            pos_emb, pos_dim = self.learned_pos_emb(
                query_spatial_dim=axis, key_value_spatial_dim=axis
            )
        else:
            pos_emb, pos_dim = relative_positional_encoding(
                query_spatial_dim=axis, key_value_spatial_dim=axis, feat_dim=self.pos_emb_feat_dim
            )
        if self.pos_emb_dropout:
            pos_emb = rf.dropout(pos_emb, self.pos_emb_dropout)
        if self.linear_pos is not None:
            pos_emb = self.linear_pos(pos_emb)
        if self.separate_pos_emb_per_head:
            pos_emb = rf.split_dims(
                pos_emb, axis=self.key_dim_total, dims=(self.num_heads, self.key_dim_per_head)
            )
        q, k, v = self.forward_qkv(source)
        k, hist_dim = replace_dim(k, in_dim=axis)
        v, _ = replace_dim(v, in_dim=axis, out_dim=hist_dim)
        q_u = q + self.pos_bias_u if self.pos_bias_u is not None else q
        q_v = q + self.pos_bias_v if self.pos_bias_v is not None else q
        matrix_ac = rf.matmul(q_u, k, reduce=self.key_dim_per_head)
        matrix_bd = rf.matmul(q_v, pos_emb, reduce=self.key_dim_per_head)
        matrix_bd = _rel_pos_enc_shift(matrix_bd, axis, pos_dim, hist_dim)
        scores = (matrix_ac + matrix_bd) * self.key_dim_per_head.dimension**-0.5
        weights = rf.softmax(scores, axis=hist_dim)
        weights = rf.dropout(
            weights, self.att_dropout, axis=hist_dim if self.att_dropout_broadcast else None
        )
        att = rf.matmul(weights, v, reduce=hist_dim, use_mask=False)
        return merge_heads(self, att)

    @staticmethod
    def _rel_shift(x: Tensor, axis: Dim, pos_emb_spatial_dim: Dim, hist_dim: Dim) -> Tensor:
        """RETURNN's name for ``_rel_pos_enc_shift`` (kept for code calling it)."""
        return _rel_pos_enc_shift(x, axis, pos_emb_spatial_dim, hist_dim)


def _rel_pos_enc_shift(x: Tensor, axis: Dim, pos_emb_spatial_dim: Dim, hist_dim: Dim) -> Tensor:
    """RETURNN's shift of the position scores: ``x`` over ``[..., axis,
    pos_emb_spatial_dim]`` (distances ``-(T - 1) .. T - 1``, ``T`` the size of
    ``axis``) to ``[..., axis, hist_dim]``, entry ``(i, j)`` the score of
    distance ``j - i`` (index ``T - 1 - i + j``).

    :return: ``x`` with ``pos_emb_spatial_dim`` replaced by ``hist_dim``
    """
    from verjus import rf

    if pos_emb_spatial_dim == hist_dim:  # single_step_dim: no shift
        return x
    t, h, p = axis.size, hist_dim.size, pos_emb_spatial_dim.size
    if t is None or h is None or p is None or p < t - 1 + h:
        raise ValueError(
            f"RelPosSelfAttention: the position dim {pos_emb_spatial_dim!r} needs at least"
            f" {axis!r} + {hist_dim!r} - 1 entries"
        )
    idx = (t - 1) - np.arange(t)[:, None] + np.arange(h)[None, :]
    return rf.gather(x, indices=_int_tensor(idx, [axis, hist_dim]), axis=pos_emb_spatial_dim)
