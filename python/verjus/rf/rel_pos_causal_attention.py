"""Causal self-attention with relative positional encoding, after RETURNN's
``RelPosCausalSelfAttention`` (``returnn/frontend/attention.py``): the options,
defaults and parameters of ``RelPosSelfAttention`` (``qkv``, ``proj``,
``linear_pos``, ``pos_bias_u``, ``pos_bias_v``, ``learned_pos_emb.pos_emb``)
with the interface and state of ``CausalSelfAttention``.

Over a whole sequence, query ``i`` sees keys ``j <= i``: RETURNN gives the keys
a history dim of lengths ``i + 1`` per query; here the keys keep the lengths of
``axis`` and the later keys are masked (``-inf`` before the softmax), which
gives the same weights. In a step (``axis=rf.single_step_dim``) the one query
is the last frame of the history and the encoding is that of the distances
``-(len - 1) .. 0``, so no shift is needed.
"""

from __future__ import annotations

import numpy as np

from verjus._verjus import Dim, Tensor
from verjus.rf.attention import CausalSelfAttention, CausalSelfAttentionState, merge_heads
from verjus.rf.positional_encoding import relative_positional_encoding
from verjus.rf.rel_pos_attention import RelPosSelfAttention, _int_tensor, _rel_pos_enc_shift
from verjus.rf.replace_dim import replace_dim

__all__ = ["RelPosCausalSelfAttention"]


class RelPosCausalSelfAttention(RelPosSelfAttention, CausalSelfAttention):
    """Causal self-attention with relative positional encoding (RETURNN's; the
    arguments of ``RelPosSelfAttention``), over a sequence or step by step;
    ``default_initial_state`` as ``CausalSelfAttention``'s."""

    def __call__(
        self,
        source: Tensor,
        *,
        axis: Dim,
        state: CausalSelfAttentionState | None = None,
    ) -> tuple[Tensor, CausalSelfAttentionState]:
        """Over a sequence (``state`` None or empty: frame ``i`` attends frames
        ``<= i``) or one step (``axis=rf.single_step_dim``: this frame's key and
        value appended to the state's, attending over all of them).

        :return: the output and the new state
        """
        from verjus import rf

        who = type(self).__name__
        if self.in_dim not in source.dims:
            have = ", ".join(d.name for d in source.dims)
            raise ValueError(f"{who}: in_dim {self.in_dim.name} is not a dim of the input [{have}]")
        q, k, v = self.forward_qkv(source)
        if axis == rf.single_step_dim:
            if state is None:
                raise ValueError(f"{who}: a single step needs state (default_initial_state)")
            k, hist = rf.cum_concat_step(k, prev_accum=state.k_accum, axis=state.accum_axis)
            v, _ = rf.cum_concat_step(
                v, prev_accum=state.v_accum, axis=state.accum_axis, out_spatial_dim=hist
            )
            new_state = CausalSelfAttentionState(k_accum=k, v_accum=v, accum_axis=hist)
            pos_emb = self._step_pos_emb(hist)
            pos_dim = hist
        else:
            if axis not in source.dims:
                have = ", ".join(d.name for d in source.dims)
                raise ValueError(f"{who}: axis {axis.name} is not a dim of the input [{have}]")
            if state is not None and (state.accum_axis.dimension or 0) != 0:
                raise NotImplementedError(
                    f"{who}: a sequence after a non-empty state is not supported;"
                    " step with axis=rf.single_step_dim"
                )
            new_state = CausalSelfAttentionState(k_accum=k, v_accum=v, accum_axis=axis)
            k, hist = replace_dim(k, in_dim=axis)
            v, _ = replace_dim(v, in_dim=axis, out_dim=hist)
            if self.learned_pos_emb is not None:
                pos_emb, pos_dim = self.learned_pos_emb(
                    query_spatial_dim=axis, key_value_spatial_dim=hist
                )
            else:
                pos_emb, pos_dim = relative_positional_encoding(
                    query_spatial_dim=axis,
                    key_value_spatial_dim=hist,
                    feat_dim=self.pos_emb_feat_dim,
                )
        if self.pos_emb_dropout:
            pos_emb = rf.dropout(pos_emb, self.pos_emb_dropout)
        if self.linear_pos is not None:
            pos_emb = self.linear_pos(pos_emb)
        if self.separate_pos_emb_per_head:
            pos_emb = rf.split_dims(
                pos_emb, axis=self.key_dim_total, dims=(self.num_heads, self.key_dim_per_head)
            )
        q_u = q + self.pos_bias_u if self.pos_bias_u is not None else q
        q_v = q + self.pos_bias_v if self.pos_bias_v is not None else q
        matrix_ac = rf.matmul(q_u, k, reduce=self.key_dim_per_head)
        matrix_bd = rf.matmul(q_v, pos_emb, reduce=self.key_dim_per_head)
        if axis != rf.single_step_dim:
            matrix_bd = _rel_pos_enc_shift(matrix_bd, axis, pos_dim, hist)
        scores = (matrix_ac + matrix_bd) * self.key_dim_per_head.dimension**-0.5
        if axis != rf.single_step_dim:
            visible = rf.compare(
                rf.range_over_dim(hist),
                "<=",
                rf.range_over_dim(axis),
                allow_broadcast_all_sources=True,
            )
            scores = rf.where(visible, scores, float("-inf"))
        weights = rf.softmax(scores, axis=hist)
        weights = rf.dropout(
            weights, self.att_dropout, axis=hist if self.att_dropout_broadcast else None
        )
        att = rf.matmul(weights, v, reduce=hist, use_mask=False)
        return merge_heads(self, att), new_state

    def _step_pos_emb(self, hist: Dim) -> Tensor:
        """The encoding of the distances of the history's frames to its last
        frame (the query of a step), over ``hist`` (and its lengths' dims)."""
        from verjus import rf

        if self.learned_pos_emb is None:
            pos_emb, _ = relative_positional_encoding(
                query_spatial_dim=rf.single_step_dim,
                key_value_spatial_dim=hist,
                feat_dim=self.pos_emb_feat_dim,
            )
            return pos_emb
        learned = self.learned_pos_emb
        pos = np.arange(hist.size)
        if hist.dyn_size_ext is None:
            dist, dims = pos - (hist.size - 1), [hist]
        else:
            last = hist.dyn_size_ext.numpy().astype(np.int64) - 1
            dist = pos.reshape((-1,) + (1,) * last.ndim) - last
            dims = [hist, *hist.dyn_size_ext.dims]
        idx = np.clip(dist, -learned.clipping, 0 if learned.causal else learned.clipping)
        indices = _int_tensor(idx + learned.clipping, dims)
        return rf.gather(learned.pos_emb, indices=indices, axis=learned.clipped_spatial_dim)
