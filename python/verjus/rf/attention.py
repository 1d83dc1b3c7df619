"""Attention after RETURNN's ``returnn/frontend/attention.py``: ``dot_attention``,
``SelfAttentionBase``, ``SelfAttention``, ``CausalSelfAttention`` (with its
step-wise state) and ``CrossAttention``, with RETURNN's names, keyword arguments
and parameter names (``qkv``, ``proj``; ``q``, ``kv``), so state dicts load by
name.

The attention itself is one fused native op (``verjus._verjus.
rf_fused_dot_attention``: scores, key mask, softmax and weighted sum, whose
backward recomputes the weights), so no score tensor is a frontend tensor. Only
dropout on the weights (``att_dropout`` while training) and keys whose lengths
differ per query frame (a causal sequence after a state) need more: then the
scores, (causal) mask, softmax, dropout and sum run as separate rf ops, as
RETURNN's generic backend does (self-attention moves the keys to their own dim
of the same lengths, ``rf.replace_dim``). Whether that dropout shares its mask
over all but the keys' axis follows RETURNN's behavior version
(``_att_dropout_broadcast_default``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from verjus import _verjus
from verjus._verjus import Dim, Tensor
from verjus.rf._dim_args import takes_dims
from verjus.rf.backend import behavior_version_at_least, returnn_config_bool
from verjus.rf.module import Linear, Module
from verjus.rf.rec import State
from verjus.rf.replace_dim import replace_dim
from verjus.rf.rope import _apply_rope as _apply_rope  # RETURNN's module has them
from verjus.rf.rope import _apply_rope_real as _apply_rope_real
from verjus.rf.run_ctx import get_run_ctx

__all__ = [
    "CausalSelfAttention",
    "CausalSelfAttentionState",
    "CrossAttention",
    "SelfAttention",
    "SelfAttentionBase",
    "dot_attention",
]


@takes_dims
def dot_attention(
    query: Tensor,
    keys: Tensor,
    values: Tensor,
    *,
    key_dim: Dim,
    axis: Dim,
    att_dropout: float = 0.0,
    att_dropout_broadcast: bool | None = None,
    causal_query_spatial_dim: Dim | None = None,
    scale: float | None = None,
) -> Tensor:
    """Attention over ``axis`` of ``keys``/``values`` for ``query``, as RETURNN's
    ``rf.dot_attention``: ``softmax_axis(scale * query . keys) . values``.

    Dims shared by all three are batch dims (heads included); the keys' dims
    that the query lacks are broadcast over (RETURNN's). Keys of padded
    frames of a dynamic ``axis`` never get weight. ``axis`` in the query means
    self-attention (every query frame attends over all key frames).

    :param query: ``{..., key_dim}``
    :param keys: ``{..., axis, key_dim}``
    :param values: ``{..., axis, value feature dim}``
    :param key_dim: reduced to get the scores
    :param axis: softmax over it, then reduced
    :param att_dropout: dropout on the weights, while training
    :param att_dropout_broadcast: share the dropout mask over all but ``axis``
        (None: ``_att_dropout_broadcast_default()``)
    :param causal_query_spatial_dim: if given, query position ``i`` attends key
        positions ``<= i`` (``axis`` itself for causal self-attention)
    :param scale: default ``key_dim ** -0.5``
    :return: like ``values`` without ``axis``, with the query's other dims
    """
    # Dims only the keys have (e.g. a batch dim of a flat query) are broadcast over.
    keys_only = [d for d in keys.dims if d not in query.dims and d not in (axis, key_dim)]
    if keys_only:
        from verjus.rf.shape_ops import expand_dims

        query = expand_dims(query, keys_only)
    drop = att_dropout if get_run_ctx().train_flag else 0.0
    # The fused op masks the keys by lengths over their own dims; lengths over
    # the query's dims too (a history per query frame: CausalSelfAttention after
    # a state) need the separate ops, as does dropout on the weights.
    per_query = axis.is_dynamic() and not set(axis.dyn_size_ext.dims) <= set(keys.dims)
    if drop or per_query:
        if att_dropout_broadcast is None:
            att_dropout_broadcast = _att_dropout_broadcast_default()
        return _unfused(
            query,
            keys,
            values,
            key_dim,
            axis,
            drop,
            att_dropout_broadcast,
            scale,
            causal_query_spatial_dim,
        )
    return _verjus.rf_fused_dot_attention(
        query,
        keys,
        values,
        key_dim=key_dim,
        axis=axis,
        causal_query_spatial_dim=causal_query_spatial_dim,
        scale=scale,
    )


def _att_dropout_broadcast_default() -> bool:
    """Whether the dropout on attention weights shares its mask over all dims but
    the keys' axis, as RETURNN decides it: its config options
    ``rf_att_dropout_broadcast``, then ``rf_dropout_broadcast``, where RETURNN's
    settings are in effect (``verjus.rf.backend.returnn_behavior_version``);
    else True up to behavior version 18 (RETURNN's old behavior: one mask per
    key position, the same for every query, head and sequence), False from 19
    on and without RETURNN's settings (a mask per weight)."""
    for key in ("rf_att_dropout_broadcast", "rf_dropout_broadcast"):
        value = returnn_config_bool(key)
        if value is not None:
            return value
    return not behavior_version_at_least(19)


def _unfused(
    query: Tensor,
    keys: Tensor,
    values: Tensor,
    key_dim: Dim,
    axis: Dim,
    drop: float,
    broadcast: bool,
    scale: float | None,
    causal: Dim | None,
) -> Tensor:
    """The same with dropout on the weights, by separate ops (RETURNN's generic
    ``scaled_dot_product_attention``): with ``axis`` in the query
    (self-attention), the keys and values move to their own dim of the same
    lengths; a causal query dim masks keys after each query position."""
    from verjus import rf

    if axis in query.dims:
        keys, kv_dim = replace_dim(keys, in_dim=axis)
        values, _ = replace_dim(values, in_dim=axis, out_dim=kv_dim)
    else:
        kv_dim = axis
    if scale is None:
        scale = key_dim.dimension**-0.5
    energy = rf.matmul(query * scale, keys, reduce=key_dim)
    if causal is not None:
        if causal not in query.dims or causal.size != axis.size:
            raise ValueError(
                f"dot_attention: causal_query_spatial_dim {causal!r} must be a query dim"
                f" of the size of axis {axis!r}"
            )
        visible = rf.compare(
            rf.range_over_dim(kv_dim),
            "<=",
            rf.range_over_dim(causal),
            allow_broadcast_all_sources=True,
        )
        energy = rf.where(visible, energy, float("-inf"))
    weights = rf.softmax(energy, axis=kv_dim)
    weights = rf.dropout(weights, drop, axis=kv_dim if broadcast else None)
    return rf.matmul(weights, values, reduce=kv_dim, use_mask=False)


def _init_heads(
    module: Module, proj_dim: Dim | None, key_dim_total: Dim, value_dim_total: Dim, num_heads: Any
) -> None:
    """The head dims every attention module sets (RETURNN's attributes):
    ``num_heads``, ``key_dim_total``/``key_dim_per_head``,
    ``value_dim_total``/``value_dim_per_head`` and ``out_dim``."""
    if isinstance(num_heads, int):
        num_heads = Dim(num_heads, name="num_heads")
    heads = num_heads.dimension
    module.out_dim = proj_dim if proj_dim else value_dim_total
    module.key_dim_total = key_dim_total
    module.key_dim_per_head = key_dim_total.div_left(heads)
    module.value_dim_total = value_dim_total
    module.value_dim_per_head = value_dim_total.div_left(heads)
    module.num_heads = num_heads


def merge_heads(module: Any, att: Tensor) -> Tensor:
    """An attention module's per-head output merged into ``value_dim_total``,
    then projected by ``module.proj`` if it has one.

    :param module: the attention module (after ``_init_heads``)
    :param att: the attention output over ``num_heads`` and ``value_dim_per_head``
    :return: over ``module.out_dim``
    """
    from verjus import rf

    output, _ = rf.merge_dims(
        att, dims=(module.num_heads, module.value_dim_per_head), out_dim=module.value_dim_total
    )
    return module.proj(output) if module.proj else output


class SelfAttentionBase(Module):
    """Shared base of ``SelfAttention`` and ``CausalSelfAttention`` (RETURNN's):
    the ``qkv`` projection split per head, ``dot_attention``, the optional ``proj``.

    :param in_dim: input dim
    :param proj_dim: if given, a final linear projection to it
    :param key_dim_total: total key dim, a multiple of ``num_heads``
    :param value_dim_total: total value dim, a multiple of ``num_heads``
    :param num_heads: number of heads (int or Dim)
    :param with_bias: biases in the ``qkv`` and ``proj`` projections
    :param att_dropout: dropout on the attention weights
    :param att_dropout_broadcast: see ``dot_attention``
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
        att_dropout: float = 0.1,
        att_dropout_broadcast: bool | None = None,
    ) -> None:
        super().__init__()
        self.in_dim = in_dim
        _init_heads(self, proj_dim, key_dim_total, value_dim_total, num_heads)
        self.qkv_dim_total = 2 * key_dim_total + value_dim_total
        self.qkv_dim_per_head = 2 * self.key_dim_per_head + self.value_dim_per_head
        self.qkv = Linear(in_dim, self.qkv_dim_total, with_bias=with_bias)
        self.proj = Linear(value_dim_total, proj_dim, with_bias=with_bias) if proj_dim else None
        self.att_dropout = att_dropout
        if att_dropout_broadcast is None:
            att_dropout_broadcast = _att_dropout_broadcast_default()
        self.att_dropout_broadcast = att_dropout_broadcast

    def forward_qkv(self, source: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The projection split per head.

        :return: q, k, v
        """
        from verjus import rf

        qkv = self.qkv(source)
        qkv = rf.split_dims(
            qkv, axis=self.qkv_dim_total, dims=(self.num_heads, self.qkv_dim_per_head)
        )
        q, k, v = rf.split(
            qkv,
            axis=self.qkv_dim_per_head,
            out_dims=(self.key_dim_per_head, self.key_dim_per_head, self.value_dim_per_head),
        )
        return q, k, v

    def attention(
        self, q: Tensor, k: Tensor, v: Tensor, *, kv_axis: Dim, causal: Dim | None = None
    ) -> Tensor:
        """``dot_attention`` over ``kv_axis``, heads merged, projected.

        :return: over the batch dims, the query dims and ``out_dim``
        """

        att = dot_attention(
            q,
            k,
            v,
            key_dim=self.key_dim_per_head,
            axis=kv_axis,
            att_dropout=self.att_dropout,
            att_dropout_broadcast=self.att_dropout_broadcast,
            causal_query_spatial_dim=causal,
        )
        return merge_heads(self, att)


class SelfAttention(SelfAttentionBase):
    """Self-attention over a whole sequence (RETURNN's)."""

    def __call__(self, source: Tensor, *, axis: Dim) -> Tensor:
        """Every frame attends over all frames of ``axis`` (padded ones excluded).

        :return: over ``source``'s dims with ``out_dim`` for ``in_dim``
        """
        q, k, v = self.forward_qkv(source)
        return self.attention(q, k, v, kv_axis=axis)


class CausalSelfAttentionState(State):
    """The state of ``CausalSelfAttention``: the keys and values so far
    (``k_accum``, ``v_accum``) over ``accum_axis``."""

    def __init__(
        self,
        *_args: object,
        k_accum: Tensor | None = None,
        v_accum: Tensor | None = None,
        accum_axis: Dim | None = None,
    ) -> None:
        super().__init__(*_args)
        if not _args:
            self.k_accum = k_accum
            self.v_accum = v_accum
            self.accum_axis = accum_axis


class CausalSelfAttention(SelfAttentionBase):
    """Causal self-attention (RETURNN's): frame ``i`` attends frames ``<= i``,
    over a whole sequence or step by step with ``axis=rf.single_step_dim``."""

    def __call__(
        self, source: Tensor, axis: Dim, *, state: CausalSelfAttentionState | None = None
    ) -> tuple[Tensor, CausalSelfAttentionState]:
        """Over a sequence (``state`` None or empty) or one step (appends this
        frame's key and value to the state's, then attends over them all).

        :return: the output and the new state
        """
        from verjus import rf

        q, k, v = self.forward_qkv(source)
        if axis != rf.single_step_dim:
            if state is None or state.accum_axis.dimension == 0:
                out = self.attention(q, k, v, kv_axis=axis, causal=axis)
                return out, CausalSelfAttentionState(k_accum=k, v_accum=v, accum_axis=axis)
            k, v, hist_dim, new_state = _after_state(k, v, axis=axis, state=state)
            return self.attention(q, k, v, kv_axis=hist_dim), new_state
        if state is None:
            raise ValueError(f"{self}: a single step needs state (default_initial_state)")
        k, hist = rf.cum_concat_step(k, prev_accum=state.k_accum, axis=state.accum_axis)
        v, _ = rf.cum_concat_step(
            v, prev_accum=state.v_accum, axis=state.accum_axis, out_spatial_dim=hist
        )
        out = self.attention(q, k, v, kv_axis=hist)
        return out, CausalSelfAttentionState(k_accum=k, v_accum=v, accum_axis=hist)

    def default_initial_state(
        self, *, batch_dims: Sequence[Dim], capacity: int | None = None
    ) -> CausalSelfAttentionState:
        """Empty keys and values over a history dim of size 0 (``capacity`` is
        accepted for RETURNN's signature; the history grows per step).

        :return: the initial state
        """
        from verjus import rf

        del capacity
        hist = Dim(0, name="self_att_expand_dim_init")
        return CausalSelfAttentionState(
            k_accum=rf.zeros([*batch_dims, hist, self.num_heads, self.key_dim_per_head]),
            v_accum=rf.zeros([*batch_dims, hist, self.num_heads, self.value_dim_per_head]),
            accum_axis=hist,
        )


def _after_state(
    k: Tensor, v: Tensor, *, axis: Dim, state: CausalSelfAttentionState
) -> tuple[Tensor, Tensor, Dim, CausalSelfAttentionState]:
    """Causal attention over a sequence after a non-empty state (RETURNN's
    ``_causal_self_att_step``): the keys and values follow the state's, per
    sequence, and frame ``t`` attends the state's frames and its own sequence's
    up to ``t``: a history dim whose lengths are over ``axis`` too.

    :return: the keys and values over the history dim, that dim, and the new
        state (the keys and values over the state's frames and ``axis``)
    """
    from verjus import rf

    k, concat_dim = rf.concat((state.k_accum, state.accum_axis), (k, axis))
    v, _ = rf.concat((state.v_accum, state.accum_axis), (v, axis), out_dim=concat_dim)
    new_state = CausalSelfAttentionState(k_accum=k, v_accum=v, accum_axis=concat_dim)
    hist_lens = rf.combine_bc(state.accum_axis.get_size_tensor(), "+", rf.range_over_dim(axis))
    hist_dim = Dim(hist_lens + 1, name=f"{axis.name}:kv")
    k = rf.replace_dim_v2(k, in_dim=concat_dim, out_dim=hist_dim)
    v = rf.replace_dim_v2(v, in_dim=concat_dim, out_dim=hist_dim)
    return k, v, hist_dim, new_state


class CrossAttention(Module):
    """Cross attention (RETURNN's): queries from ``q`` projected by ``q``, keys
    and values from the encoder by ``kv``.

    :param encoder_dim: the encoder's feature dim
    :param query_in_dim: the query input's feature dim
    :param proj_dim: if given, a final linear projection to it
    :param key_dim_total: total key dim, a multiple of ``num_heads``
    :param value_dim_total: total value dim, a multiple of ``num_heads``
    :param num_heads: number of heads (int or Dim)
    :param with_bias: biases in the projections
    :param att_dropout: dropout on the attention weights
    :param att_dropout_broadcast: see ``dot_attention``
    """

    def __init__(
        self,
        encoder_dim: Dim,
        query_in_dim: Dim,
        proj_dim: Dim | None,
        *,
        key_dim_total: Dim,
        value_dim_total: Dim,
        num_heads: int | Dim,
        with_bias: bool = True,
        att_dropout: float = 0.1,
        att_dropout_broadcast: bool | None = None,
    ) -> None:
        super().__init__()
        self.encoder_dim = encoder_dim
        self.query_in_dim = query_in_dim
        _init_heads(self, proj_dim, key_dim_total, value_dim_total, num_heads)
        self.kv_dim_total = key_dim_total + value_dim_total
        self.kv_dim_per_head = self.key_dim_per_head + self.value_dim_per_head
        self.kv = Linear(encoder_dim, self.kv_dim_total, with_bias=with_bias)
        self.q = Linear(query_in_dim, self.key_dim_total, with_bias=with_bias)
        self.proj = Linear(value_dim_total, proj_dim, with_bias=with_bias) if proj_dim else None
        self.att_dropout = att_dropout
        if att_dropout_broadcast is None:
            att_dropout_broadcast = _att_dropout_broadcast_default()
        self.att_dropout_broadcast = att_dropout_broadcast

    def transform_encoder(self, encoder: Tensor, *, axis: Dim) -> State:
        """The keys and values of the encoder output, computed once.

        :return: ``State(k=, v=, kv_axis=)``
        """
        k, v = self.forward_kv(encoder)
        return State(k=k, v=v, kv_axis=axis)

    def forward_kv(self, source: Tensor) -> tuple[Tensor, Tensor]:
        """The encoder's keys and values per head.

        :return: k, v
        """
        from verjus import rf

        kv = self.kv(source)
        kv = rf.split_dims(kv, axis=self.kv_dim_total, dims=(self.num_heads, self.kv_dim_per_head))
        k, v = rf.split(
            kv, axis=self.kv_dim_per_head, out_dims=(self.key_dim_per_head, self.value_dim_per_head)
        )
        return k, v

    def forward_query(self, source: Tensor) -> Tensor:
        """The queries per head.

        :return: q
        """
        from verjus import rf

        q = self.q(source)
        return rf.split_dims(
            q, axis=self.key_dim_total, dims=(self.num_heads, self.key_dim_per_head)
        )

    def __call__(self, q: Tensor, encoder: State) -> Tensor:
        """Attends from ``q`` over the transformed encoder.

        :return: over ``q``'s dims with ``out_dim`` for ``query_in_dim``
        """
        return self.attention(q=self.forward_query(q), **encoder)

    def attention(self, q: Tensor, k: Tensor, v: Tensor, *, kv_axis: Dim) -> Tensor:
        """``dot_attention`` over ``kv_axis``, heads merged, projected.

        :return: the output
        """

        att = dot_attention(
            q,
            k,
            v,
            key_dim=self.key_dim_per_head,
            axis=kv_axis,
            att_dropout=self.att_dropout,
            att_dropout_broadcast=self.att_dropout_broadcast,
        )
        return merge_heads(self, att)
