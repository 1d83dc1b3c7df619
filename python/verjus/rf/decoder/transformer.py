"""The (label-synchronous) Transformer decoder, after RETURNN's
``returnn/frontend/decoder/transformer.py``: ``TransformerDecoder``,
``TransformerDecoderLayer``, ``FeedForward``, ``FeedForwardGated`` and
``make_norm``, with RETURNN's constructor options, parameter names (so a
RETURNN checkpoint loads by name) and call signatures: over a whole sequence
(causal self-attention) or one step at a time with
``spatial_dim=rf.single_step_dim`` carrying the state.

Differences from RETURNN, all from verjus having no behaviour versions, no
global config and no ``Dim`` match priorities:

- the defaults are those of RETURNN's current behaviour version (>= 20):
  ``share_embedding=True`` (unless ``embed_dim`` differs from ``model_dim``),
  ``input_embedding_scale = sqrt(model_dim)``, ``input_dropout = dropout``; the
  FF dropout masks are shared over all but the feature dim (RETURNN's
  ``rf_dropout_broadcast`` default);
- the attention modules get their own key and value dims (of ``model_dim``'s
  size; the same parameter shapes), since a verjus ``Linear`` from a dim to
  itself is ambiguous;
- ``num_layers`` copies of one layer: a layer given as a class, dict or None
  is built ``num_layers`` times (each with its own initialization); a layer
  given as a module is copied (see ``_build.copy_module``).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from verjus._verjus import Dim, Tensor
from verjus._verjus import rf_single_step_dim as _single_step_dim
from verjus.rf.array_ import gather
from verjus.rf.attention import CausalSelfAttention, CrossAttention
from verjus.rf.container import Sequential
from verjus.rf.decoder._build import build
from verjus.rf.decoder.feed_forward import (
    DROPOUT_BROADCAST,
    FeedForward,
    FeedForwardGated,
    as_dim,
    dropout_along,
    rf_module,
)
from verjus.rf.module import Embedding, Linear, Module
from verjus.rf.normalization import LayerNorm
from verjus.rf.positional_encoding import sinusoidal_positional_encoding
from verjus.rf.rec import State

__all__ = [
    "FeedForward",
    "FeedForwardGated",
    "TransformerDecoder",
    "TransformerDecoderLayer",
    "make_norm",
]


def make_norm(norm: Any, out_dim: Dim) -> Any:
    """The normalisation for ``out_dim``, as RETURNN's: a class (called with
    ``out_dim``), a build dict, a module (copied) or a callable (used as is).

    :param norm: e.g. ``rf.LayerNorm``
    :param out_dim: the model dim
    :return: the norm module or callable, e.g. ``rf.LayerNorm(out_dim)``
    """
    return build("make_norm", norm, LayerNorm, out_dim)


def _att_dims(out_dim: Dim) -> dict[str, Dim]:
    n = out_dim.dimension
    return {
        "key_dim_total": Dim(n, name=f"{out_dim.name}-att-key"),
        "value_dim_total": Dim(n, name=f"{out_dim.name}-att-value"),
    }


class TransformerDecoderLayer(Module):
    """One pre-norm decoder block (RETURNN's): causal self-attention, cross
    attention to the encoder (if ``encoder_dim``), feed-forward, each with a
    residual connection and dropout.

    :param encoder_dim: the encoder's feature dim; None: no cross attention
    :param out_dim: the model dim
    :param ff: the feed-forward block: a class (``FeedForward`` by default), a
        build dict or a module
    :param ff_dim: its inner dim (the block's default if None)
    :param ff_activation: its activation (the block's default if None)
    :param dropout: dropout after each block (and inside the FF block)
    :param num_heads: attention heads
    :param self_att: the self-attention: ``rf.CausalSelfAttention`` by
        default, a class, build dict or module
    :param self_att_opts: options for it, over the defaults
    :param att_dropout: dropout on the attention weights
    :param cross_att: a build dict for the cross attention (``rf.CrossAttention``)
    :param norm: the pre-normalisation (``rf.LayerNorm``), see ``make_norm``
    """

    def __init__(
        self,
        encoder_dim: Dim | None,
        out_dim: Dim,
        *,
        ff: Any = None,
        ff_dim: Dim | int | None = None,
        ff_activation: Any = None,
        dropout: float = 0.1,
        num_heads: int = 8,
        self_att: Any = None,
        self_att_opts: dict[str, Any] | None = None,
        att_dropout: float = 0.1,
        cross_att: dict[str, Any] | None = None,
        norm: Any = LayerNorm,
    ) -> None:
        super().__init__()
        self.encoder_dim = encoder_dim
        self.dropout = dropout
        self.dropout_broadcast = DROPOUT_BROADCAST
        self.out_dim = out_dim

        ff_kwargs = {"out_dim": out_dim, "dropout": dropout}
        ff_kwargs.update({"ff_dim": ff_dim} if ff_dim is not None else {})
        ff_kwargs.update({"activation": ff_activation} if ff_activation is not None else {})
        self.ff = build("TransformerDecoderLayer ff", ff, FeedForward, **ff_kwargs)
        self.ff_layer_norm = make_norm(norm, out_dim)

        att_opts = {"num_heads": num_heads, "att_dropout": att_dropout, **_att_dims(out_dim)}
        sa_opts = {"in_dim": out_dim, "proj_dim": out_dim, **att_opts, **(self_att_opts or {})}
        self.self_att = build(
            "TransformerDecoderLayer self_att", self_att, CausalSelfAttention, **sa_opts
        )
        self.self_att_layer_norm = make_norm(norm, out_dim)

        self.cross_att = None
        self.cross_att_layer_norm = None
        if encoder_dim is not None:
            if cross_att is not None and not isinstance(cross_att, dict):
                raise TypeError(
                    f"TransformerDecoderLayer: cross_att must be a build dict, got {cross_att!r}"
                )
            ca_opts = {"encoder_dim": encoder_dim, "query_in_dim": out_dim, "proj_dim": out_dim}
            ca_opts.update(_att_dims(out_dim), num_heads=num_heads, att_dropout=att_dropout)
            self.cross_att = build(
                "TransformerDecoderLayer cross_att", cross_att, CrossAttention, **ca_opts
            )
            self.cross_att_layer_norm = make_norm(norm, out_dim)

    def default_initial_state(
        self, *, batch_dims: Sequence[Dim], capacity: int | None = None
    ) -> State:
        """The self-attention's empty history.

        :param batch_dims: the state's batch dims
        :param capacity: for the self-attention's key/value cache (accepted)
        :return: ``State(self_att=...)``
        """
        if capacity is not None and isinstance(self.self_att, CausalSelfAttention):
            return State(
                self_att=self.self_att.default_initial_state(
                    batch_dims=batch_dims, capacity=capacity
                )
            )
        return State(self_att=self.self_att.default_initial_state(batch_dims=batch_dims))

    def transform_encoder(self, encoder: Tensor, *, axis: Dim) -> State:
        """The cross attention's keys and values of ``encoder``, computed once.

        :return: ``State(cross_att=...)``
        """
        if self.cross_att is None:
            raise ValueError(
                "TransformerDecoderLayer.transform_encoder: the layer has no cross attention "
                "(encoder_dim=None)"
            )
        return State(cross_att=self.cross_att.transform_encoder(encoder, axis=axis))

    def __call__(
        self, x: Tensor, *, spatial_dim: Dim, state: State, encoder: State | None = None
    ) -> tuple[Tensor, State]:
        """The block over a sequence or one step (``spatial_dim=rf.single_step_dim``).

        :return: the output over ``x``'s dims and the new state
        """
        new_state = State()
        x_sa, new_state.self_att = self.self_att(
            self.self_att_layer_norm(x), axis=spatial_dim, state=state.self_att
        )
        x = dropout_along(x_sa, self.dropout, self.dropout_broadcast, self.out_dim) + x
        if self.cross_att is not None:
            if encoder is None:
                raise ValueError(
                    "TransformerDecoderLayer: the layer has cross attention; give encoder= "
                    "(from transform_encoder)"
                )
            x_ca = self.cross_att(self.cross_att_layer_norm(x), encoder.cross_att)
            x = dropout_along(x_ca, self.dropout, self.dropout_broadcast, self.out_dim) + x
        x_ff = self.ff(self.ff_layer_norm(x))
        x = dropout_along(x_ff, self.dropout, self.dropout_broadcast, self.out_dim) + x
        return x, new_state


class TransformerDecoder(Module):
    """The Transformer decoder (RETURNN's): embedding (scaled), positional
    encoding, dropout, ``num_layers`` decoder layers, final norm, logits.

    :param encoder_dim: the encoder's feature dim for cross attention; None: none
    :param vocab_dim: the labels' dim (input embedding and logits)
    :param model_dim: the model dim (a Dim or an int)
    :param num_layers: how many layers
    :param ff: the layers' feed-forward block (see ``TransformerDecoderLayer``)
    :param ff_dim: its inner dim
    :param ff_activation: its activation
    :param pos_enc: positional encoding: a function called with ``spatial_dim``,
        ``offset`` and ``feat_dim`` (``rf.sinusoidal_positional_encoding``), a
        build dict, a module, or None
    :param dropout: dropout after each block
    :param num_heads: attention heads
    :param att_dropout: dropout on the attention weights
    :param norm: pre-normalisation (``rf.LayerNorm``), see ``make_norm``
    :param layer: the layer: None (``TransformerDecoderLayer``), a class, a build
        dict or a module; ``decoder_layer`` is accepted as its older name
    :param layer_opts: options for the layer over the defaults
        (``decoder_layer_opts`` accepted)
    :param embed_dim: if given, an embedding into it then a linear map to ``model_dim``
    :param share_embedding: the logits use the embedding's weight; by default
        when there is an input embedding into ``model_dim``
    :param input_embedding: whether ``source`` are labels to embed (else
        features over ``model_dim``)
    :param input_embedding_scale: multiplies the embedding; by default
        ``sqrt(model_dim)`` (1 without input embedding and positional encoding)
    :param input_dropout: dropout after the positional encoding; by default ``dropout``
    :param logits_with_bias: a bias in the logits layer
    :param sequential: the container of the layers (``rf.Sequential``)
    """

    def __init__(
        self,
        encoder_dim: Dim | None,
        vocab_dim: Dim,
        model_dim: Dim | int = 512,
        *,
        num_layers: int,
        ff: Any = None,
        ff_dim: Dim | int | None = None,
        ff_activation: Any = None,
        pos_enc: Any = sinusoidal_positional_encoding,
        dropout: float = 0.1,
        num_heads: int = 8,
        att_dropout: float = 0.1,
        norm: Any = LayerNorm,
        layer: Any = None,
        layer_opts: dict[str, Any] | None = None,
        embed_dim: Dim | None = None,
        share_embedding: bool | None = None,
        input_embedding: bool = True,
        input_embedding_scale: float | None = None,
        input_dropout: float | None = None,
        logits_with_bias: bool = False,
        sequential: Any = Sequential,
        **compat_kwargs: Any,
    ) -> None:
        super().__init__()
        who = "TransformerDecoder"
        if "decoder_layer" in compat_kwargs:
            if layer is not None:
                raise TypeError(f"{who}: give layer or decoder_layer, not both")
            layer = compat_kwargs.pop("decoder_layer")
        if "decoder_layer_opts" in compat_kwargs:
            if layer_opts is not None:
                raise TypeError(f"{who}: give layer_opts or decoder_layer_opts, not both")
            layer_opts = compat_kwargs.pop("decoder_layer_opts")
        if compat_kwargs:
            raise TypeError(f"{who}: unexpected arguments {sorted(compat_kwargs)}")
        if not isinstance(vocab_dim, Dim):
            raise TypeError(f"{who}: vocab_dim must be a Dim, got {vocab_dim!r}")
        model_dim = as_dim(who, "model_dim", model_dim, "transformer-dec-model-dim")
        if not isinstance(num_layers, int) or num_layers < 0:
            raise ValueError(f"{who}: num_layers must be an int >= 0, got {num_layers!r}")

        self.encoder_dim = encoder_dim
        self.vocab_dim = vocab_dim
        self.model_dim = model_dim
        self.embed_dim = embed_dim
        self.input_embedding = (
            Embedding(vocab_dim, embed_dim or model_dim) if input_embedding else None
        )
        self.input_embedding_proj = (
            Linear(embed_dim, model_dim, with_bias=False) if embed_dim else None
        )
        self.pos_enc = _pos_enc(who, pos_enc, embed_dim or model_dim)
        if share_embedding is None:
            share_embedding = bool(input_embedding) and not (embed_dim and embed_dim != model_dim)
        if input_embedding_scale is None:
            with_scale = input_embedding or pos_enc is not None
            input_embedding_scale = model_dim.dimension**0.5 if with_scale else 1.0
        self.input_embedding_scale = input_embedding_scale
        self.input_dropout = dropout if input_dropout is None else input_dropout

        opts: dict[str, Any] = {
            "encoder_dim": encoder_dim,
            "out_dim": model_dim,
            "ff": ff,
            "ff_dim": ff_dim,
            "ff_activation": ff_activation,
            "dropout": dropout,
            "num_heads": num_heads,
            "att_dropout": att_dropout,
            "norm": norm,
            **(layer_opts or {}),
        }
        layers = [
            build(f"{who} layer", layer, TransformerDecoderLayer, **opts) for _ in range(num_layers)
        ]
        self.layers = sequential(layers)
        self.final_layer_norm = make_norm(norm, model_dim)
        self.logits = Linear(model_dim, vocab_dim, with_bias=logits_with_bias)
        if share_embedding:
            if self.input_embedding is None:
                raise ValueError(f"{who}: share_embedding needs input_embedding=True")
            if embed_dim and embed_dim != model_dim:
                raise ValueError(f"{who}: share_embedding needs embed_dim None or model_dim")
            if logits_with_bias:
                raise ValueError(f"{who}: share_embedding needs logits_with_bias=False")
            self.logits.weight = self.input_embedding.weight

    def default_initial_state(
        self, *, batch_dims: Sequence[Dim], capacity: int | None = None
    ) -> State:
        """Each layer's empty state and position 0.

        :param batch_dims: the state's batch dims
        :param capacity: passed on to the self-attention key/value caches
        :return: ``State(pos=, <layer name>=...)``
        """
        state = State(
            {
                name: layer.default_initial_state(batch_dims=batch_dims, capacity=capacity)
                for name, layer in self.layers.items()
            }
        )
        state.pos = rf_module().zeros((), dtype="int32")
        return state

    def transform_encoder(self, encoder: Tensor, *, axis: Dim) -> State:
        """Each layer's cross-attention keys and values of ``encoder`` (usually
        layer-normed already), computed once for all decoder steps.

        :param encoder: over ``axis`` and ``encoder_dim``
        :param axis: the encoder's time dim
        :return: a State per layer
        """
        who = "TransformerDecoder.transform_encoder"
        if self.encoder_dim is None:
            raise ValueError(f"{who}: the decoder has no cross attention (encoder_dim=None)")
        for dim, what in ((axis, "axis"), (self.encoder_dim, "encoder_dim")):
            if dim not in encoder.dims:
                raise ValueError(
                    f"{who}: {what} {dim.name} is not a dim of encoder "
                    f"{[d.name for d in encoder.dims]}"
                )
        return State({k: v.transform_encoder(encoder, axis=axis) for k, v in self.layers.items()})

    def _check(self, source: Tensor, spatial_dim: Dim, state: State, encoder: State | None) -> None:
        who = "TransformerDecoder"
        if spatial_dim != _single_step_dim and spatial_dim not in source.dims:
            raise ValueError(
                f"{who}: spatial_dim {spatial_dim.name} is not a dim of source "
                f"{[d.name for d in source.dims]} (give rf.single_step_dim for one step)"
            )
        if self.input_embedding is not None and source.sparse_dim != self.vocab_dim:
            got = source.sparse_dim.name if source.sparse_dim is not None else None
            raise ValueError(
                f"{who}: source must be labels with sparse_dim vocab_dim {self.vocab_dim.name}, "
                f"got sparse_dim {got}"
            )
        missing = [k for k in ("pos", *(n for n, _ in self.layers.items())) if k not in state]
        if missing:
            raise ValueError(
                f"{who}: state lacks {missing}; start from default_initial_state(batch_dims=...)"
            )
        if self.encoder_dim is not None and encoder is None:
            raise ValueError(
                f"{who}: has cross attention (encoder_dim {self.encoder_dim.name}); give "
                "encoder=transform_encoder(...)"
            )

    def __call__(
        self,
        source: Tensor,
        *,
        spatial_dim: Dim,
        state: State,
        encoder: State | None = None,
        collected_outputs: dict[str, Tensor] | None = None,
        output_only_last_frame: bool = False,
    ) -> tuple[Tensor, State]:
        """The logits for ``source``: over a whole sequence (causal: frame ``t``
        sees frames ``<= t``, each sequence over its own length) or one step
        (``spatial_dim=rf.single_step_dim``; the state carries the history).

        :param source: labels (sparse ``vocab_dim``), or features over ``model_dim``
            without input embedding
        :param spatial_dim: ``source``'s time dim, or ``rf.single_step_dim``
        :param state: from ``default_initial_state`` or the previous call
        :param encoder: from ``transform_encoder``
        :param collected_outputs: if given, receives each layer's output by name
        :param output_only_last_frame: only the last frame's logits (each
            sequence's own last frame)
        :return: logits over ``vocab_dim`` and the new state
        """
        self._check(source, spatial_dim, state, encoder)
        rf = rf_module()
        new_state = State()
        decoded = self.input_embedding(source) if self.input_embedding is not None else source
        if self.input_embedding_scale != 1:
            decoded = decoded * self.input_embedding_scale
        if self.pos_enc is not None:
            decoded = decoded + self.pos_enc(spatial_dim=spatial_dim, offset=state.pos)
        decoded = rf.dropout(decoded, self.input_dropout)
        if self.input_embedding_proj is not None:
            decoded = self.input_embedding_proj(decoded)
        if spatial_dim == _single_step_dim:
            new_state.pos = state.pos + 1
        elif spatial_dim.dyn_size_ext is not None:
            new_state.pos = state.pos + spatial_dim.dyn_size_ext
        else:
            new_state.pos = state.pos + spatial_dim.dimension
        for name, layer in self.layers.items():
            decoded, new_state[name] = layer(
                decoded,
                spatial_dim=spatial_dim,
                state=state[name],
                encoder=encoder[name] if encoder else None,
            )
            if collected_outputs is not None:
                collected_outputs[name] = decoded
        if output_only_last_frame and spatial_dim != _single_step_dim:
            last = (
                spatial_dim.dyn_size_ext - 1
                if spatial_dim.dyn_size_ext is not None
                else spatial_dim.dimension - 1
            )
            decoded = gather(decoded, axis=spatial_dim, indices=last)
        return self.logits(self.final_layer_norm(decoded)), new_state


def _pos_enc(who: str, pos_enc: Any, feat_dim: Dim) -> Any:
    """RETURNN's handling: a function gets ``feat_dim`` bound; a dict is built
    with it; a module is used as it is."""
    if pos_enc is None or isinstance(pos_enc, Module):
        return pos_enc
    if isinstance(pos_enc, dict):
        return build(f"{who} pos_enc", pos_enc, sinusoidal_positional_encoding, feat_dim=feat_dim)
    if callable(pos_enc):
        return functools.partial(pos_enc, feat_dim=feat_dim)
    raise TypeError(f"{who}: unexpected pos_enc {pos_enc!r}")
