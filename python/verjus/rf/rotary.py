"""Self-attention with rotary positional encoding (RoPE, Su et al. 2021), after
RETURNN's ``returnn/frontend/attention.py``: ``RotaryPosSelfAttention`` and
``RotaryPosCausalSelfAttention``, with RETURNN's arguments and parameter names
(``qkv``, ``proj``: those of ``SelfAttention``), so state dicts load by name.

The queries and keys are rotated per head before the dot product: feature
pairs ``(x[2i], x[2i + 1])`` are turned by the angle ``p * d_i`` of their
position ``p``, with the angles of RETURNN's
``sinusoidal_positional_encoding`` (``base = 10000 ** (1 - 2 / D)``, ``D`` the
key dim per head, which gives the usual RoPE frequencies ``10000 ** (-2 i / D)``).
The rotation is ``verjus.rf.rope``'s, composed of rf ops, so it is on the
tape; the attention is ``dot_attention`` as in the base classes.
"""

from __future__ import annotations

from verjus._verjus import Dim, Tensor
from verjus.rf.attention import (
    CausalSelfAttention,
    CausalSelfAttentionState,
    SelfAttention,
    _after_state,
)
from verjus.rf.positional_encoding import sinusoidal_positional_encoding
from verjus.rf.rope import _apply_rope

__all__ = ["RotaryPosCausalSelfAttention", "RotaryPosSelfAttention"]


def _rope_table(spatial_dim: Dim, feat_dim: Dim) -> Tensor:
    """The ``sin`` / ``cos`` halves RoPE uses for the positions of ``spatial_dim``."""
    return sinusoidal_positional_encoding(
        spatial_dim=spatial_dim,
        feat_dim=feat_dim,
        base=10_000 ** (1 - 2 / feat_dim.dimension),
    )


class RotaryPosSelfAttention(SelfAttention):
    """Self-attention with RoPE on queries and keys (RETURNN's); the same
    options and parameters as ``SelfAttention``."""

    def __call__(self, source: Tensor, *, axis: Dim) -> Tensor:
        """Every frame attends over all frames of ``axis`` (padded ones
        excluded), queries and keys rotated by their positions.

        :return: over ``source``'s dims with ``out_dim`` for ``in_dim``
        """
        q, k, v = self.forward_qkv(source)
        pos_enc = _rope_table(axis, self.key_dim_per_head)
        q = _apply_rope(q, pos_enc, self.key_dim_per_head)
        k = _apply_rope(k, pos_enc, self.key_dim_per_head)
        return self.attention(q, k, v, kv_axis=axis)


class RotaryPosCausalSelfAttention(CausalSelfAttention):
    """Causal self-attention with RoPE (RETURNN's): over a whole sequence or
    step by step with ``axis=rf.single_step_dim``. The state keeps the keys
    before the rotation (as RETURNN's), which are rotated anew in every step."""

    def __call__(
        self, source: Tensor, axis: Dim, *, state: CausalSelfAttentionState | None = None
    ) -> tuple[Tensor, CausalSelfAttentionState]:
        """Over a sequence (after ``state``, if not empty) or one step (this
        frame's key and value appended to the state's; the query is rotated by
        its position, the last of the history).

        :return: the output and the new state
        """
        from verjus import rf

        feat = self.key_dim_per_head
        q, k, v = self.forward_qkv(source)
        if axis != rf.single_step_dim:
            if state is not None and state.accum_axis.dimension != 0:
                return self._after_state(q, k, v, axis=axis, state=state)
            pos_enc = _rope_table(axis, feat)
            att = self.attention(
                _apply_rope(q, pos_enc, feat),
                _apply_rope(k, pos_enc, feat),
                v,
                kv_axis=axis,
                causal=axis,
            )
            return att, CausalSelfAttentionState(k_accum=k, v_accum=v, accum_axis=axis)
        if state is None:
            raise ValueError(f"{type(self).__name__}: a single step needs state")
        k, hist = rf.cum_concat_step(k, prev_accum=state.k_accum, axis=state.accum_axis)
        v, _ = rf.cum_concat_step(
            v, prev_accum=state.v_accum, axis=state.accum_axis, out_spatial_dim=hist
        )
        new_state = CausalSelfAttentionState(k_accum=k, v_accum=v, accum_axis=hist)
        pos_enc = _rope_table(hist, feat)
        last = _last_position(hist)
        q = _apply_rope(q, rf.gather(pos_enc, indices=last, axis=hist), feat)
        k = _apply_rope(k, pos_enc, feat)
        return self.attention(q, k, v, kv_axis=hist), new_state

    def _after_state(
        self, q: Tensor, k: Tensor, v: Tensor, *, axis: Dim, state: CausalSelfAttentionState
    ) -> tuple[Tensor, CausalSelfAttentionState]:
        """A sequence after a non-empty state (RETURNN's): the history as in
        ``CausalSelfAttention``, the keys rotated by their history positions, the
        queries by theirs (after the state's frames)."""
        from verjus import rf

        feat = self.key_dim_per_head
        k, v, hist, new_state = _after_state(k, v, axis=axis, state=state)
        pos_enc = _rope_table(hist, feat)
        start = state.accum_axis.get_size_tensor()
        q_pos_enc, _ = rf.slice(pos_enc, axis=hist, start=start, out_dim=axis)
        q = _apply_rope(q, q_pos_enc, feat)
        k = _apply_rope(k, pos_enc, feat)
        return self.attention(q, k, v, kv_axis=hist), new_state


def _last_position(dim: Dim) -> Tensor | int:
    """The position of the last frame of ``dim`` (per sequence for a dynamic dim)."""
    from verjus import rf

    if dim.dyn_size_ext is None:
        return dim.dimension - 1
    return rf.cast(dim.dyn_size_ext, "int32") - 1
