"""The (label-synchronous) Transformer decoder, after RETURNN's
``returnn/frontend/decoder/transformer.py``: ``TransformerDecoder`` and
``TransformerDecoderLayer`` with RETURNN's constructor options, parameter names
(so a RETURNN checkpoint loads by name) and call signatures: over a whole
sequence (causal self-attention) or one step at a time with
``spatial_dim=rf.single_step_dim`` carrying the state. ``FeedForward``,
``FeedForwardGated`` and ``make_norm`` are re-exported from
``verjus.rf.feed_forward`` (shared with the Conformer), as RETURNN users import
them from here.

The defaults are those of RETURNN's behavior version >= 20:
``share_embedding=True`` (unless ``embed_dim`` differs from ``model_dim``),
``input_embedding_scale = sqrt(model_dim)``, ``input_dropout = dropout``; with
an older version in effect (``verjus.rf.backend.returnn_behavior_version``),
RETURNN's older ones for an input embedding: no sharing, scale 1, no input
dropout. As in RETURNN, the ``num_layers`` layers are deep copies of one
layer, each with its own freshly initialized parameters.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from verjus._verjus import Dim, Tensor
from verjus._verjus import rf_single_step_dim as _single_step_dim
from verjus.rf.array_ import gather
from verjus.rf.attention import CausalSelfAttention, CrossAttention
from verjus.rf.backend import behavior_version_at_least
from verjus.rf.build_from_dict import NotSpecified, build_from_dict
from verjus.rf.container import Sequential
from verjus.rf.dropout import dropout_broadcast_default
from verjus.rf.feed_forward import FeedForward, FeedForwardGated, make_ff, make_norm
from verjus.rf.module import Embedding, Linear, Module
from verjus.rf.normalization import LayerNorm
from verjus.rf.positional_encoding import make_pos_enc, sinusoidal_positional_encoding
from verjus.rf.rec import State

__all__ = [
    "FeedForward",
    "FeedForwardGated",
    "TransformerDecoder",
    "TransformerDecoderLayer",
    "make_norm",
]


def _rf() -> Any:
    from verjus import rf

    return rf


class TransformerDecoderLayer(Module):
    """One pre-norm decoder block (RETURNN's): causal self-attention, cross
    attention to the encoder (if ``encoder_dim``), feed-forward, each with a
    residual connection and dropout.

    :param encoder_dim: the encoder's feature dim; None: no cross attention
    :param out_dim: the model dim
    :param ff: the feed-forward block: a class (``FeedForward`` by default), a
        build dict or a module (copied)
    :param ff_dim: its inner dim (the block's default if not given)
    :param ff_activation: its activation (the block's default if not given)
    :param dropout: dropout after each block (and inside the FF block)
    :param num_heads: attention heads
    :param self_att: the self-attention: ``rf.CausalSelfAttention`` by
        default, a class, build dict or module (copied)
    :param self_att_opts: options for it, over the defaults
    :param att_dropout: dropout on the attention weights
    :param cross_att: a build dict for the cross attention (``rf.CrossAttention``)
    :param norm: the pre-normalisation (``rf.LayerNorm``), see ``make_norm``
    """

    def __init__(
        self,
        encoder_dim: Dim | None,
        out_dim: Dim = Dim(512, name="transformer-dec-default-out-dim"),  # noqa: B008
        *,
        ff: Any = NotSpecified,
        ff_dim: Dim | int = NotSpecified,  # type: ignore[assignment]
        ff_activation: Any = NotSpecified,
        dropout: float = 0.1,
        num_heads: int = 8,
        self_att: Any = None,
        self_att_opts: dict[str, Any] | None = None,
        att_dropout: float = 0.1,
        cross_att: dict[str, Any] | None = None,
        norm: Any = LayerNorm,
    ) -> None:
        super().__init__()
        who = type(self).__name__
        self.encoder_dim = encoder_dim
        self.dropout = dropout
        self.dropout_broadcast = dropout_broadcast_default()
        self.out_dim = out_dim

        self.ff = make_ff(
            out_dim=out_dim, ff=ff, ff_dim=ff_dim, ff_activation=ff_activation, dropout=dropout
        )
        self.ff_layer_norm = make_norm(norm, out_dim)

        att_opts = {
            "proj_dim": out_dim,
            "key_dim_total": out_dim,
            "value_dim_total": out_dim,
            "num_heads": num_heads,
            "att_dropout": att_dropout,
        }
        if self_att is None or isinstance(self_att, (type, dict)):
            opts = {"in_dim": out_dim, **att_opts, **(self_att_opts or {})}
            if isinstance(self_att, dict):
                self.self_att = build_from_dict(self_att, **opts)
            else:
                self.self_att = (self_att or CausalSelfAttention)(**opts)
        elif isinstance(self_att, Module):
            self.self_att = copy.deepcopy(self_att)
        else:
            raise TypeError(f"{who}: unexpected self_att {self_att!r}")
        self.self_att_layer_norm = make_norm(norm, out_dim)

        self.cross_att = None
        self.cross_att_layer_norm = None
        if encoder_dim is not None:
            opts = {"encoder_dim": encoder_dim, "query_in_dim": out_dim, **att_opts}
            if cross_att is None:
                self.cross_att = CrossAttention(**opts)
            elif isinstance(cross_att, dict):
                self.cross_att = build_from_dict(cross_att, **opts)
            else:
                raise TypeError(f"{who}: cross_att must be None or a build dict, got {cross_att!r}")
            self.cross_att_layer_norm = make_norm(norm, out_dim)

    def _drop(self, x: Tensor) -> Tensor:
        return _rf().dropout(x, self.dropout, axis=self.out_dim if self.dropout_broadcast else None)

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
        x = self._drop(x_sa) + x
        if self.cross_att is not None:
            if encoder is None:
                raise ValueError(
                    "TransformerDecoderLayer: the layer has cross attention; give encoder= "
                    "(from transform_encoder)"
                )
            x_ca = self.cross_att(self.cross_att_layer_norm(x), encoder.cross_att)
            x = self._drop(x_ca) + x
        x_ff = self.ff(self.ff_layer_norm(x))
        x = self._drop(x_ff) + x
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
        dict or a module; it is deep-copied ``num_layers`` times (each copy with
        fresh parameters); ``decoder_layer`` is accepted as its older name
    :param layer_opts: options for the layer over the defaults
        (``decoder_layer_opts`` accepted)
    :param embed_dim: if given, an embedding into it then a linear map to ``model_dim``
    :param share_embedding: the logits use the embedding's weight; by default
        when there is an input embedding into ``model_dim`` (not before RETURNN's
        behavior version 20)
    :param input_embedding: whether ``source`` are labels to embed (else
        features over ``model_dim``)
    :param input_embedding_scale: multiplies the embedding; by default
        ``sqrt(model_dim)`` (1 without input embedding and positional encoding,
        and with an input embedding before RETURNN's behavior version 20)
    :param input_dropout: dropout after the positional encoding; by default
        ``dropout`` (0 before RETURNN's behavior version 20)
    :param logits_with_bias: a bias in the logits layer
    :param sequential: the container of the layers (``rf.Sequential``)
    """

    def __init__(
        self,
        encoder_dim: Dim | None,
        vocab_dim: Dim,
        model_dim: Dim | int = Dim(512, name="transformer-dec-default-model-dim"),  # noqa: B008
        *,
        num_layers: int,
        ff: Any = NotSpecified,
        ff_dim: Dim | int = NotSpecified,  # type: ignore[assignment]
        ff_activation: Any = NotSpecified,
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
        if isinstance(model_dim, int):
            model_dim = Dim(model_dim, name="transformer-dec-model-dim")
        if not isinstance(model_dim, Dim):
            raise TypeError(f"{who}: model_dim must be an int or Dim, got {model_dim!r}")
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
        self.pos_enc = make_pos_enc(who, pos_enc, embed_dim or model_dim)
        new_defaults = behavior_version_at_least(20)  # RETURNN's older ones otherwise
        if share_embedding is None:
            own_embed_dim = embed_dim and embed_dim != model_dim
            share_embedding = bool(input_embedding) and not own_embed_dim and new_defaults
        if input_embedding_scale is None:
            with_scale = new_defaults if input_embedding else pos_enc is not None
            input_embedding_scale = model_dim.dimension**0.5 if with_scale else 1.0
        self.input_embedding_scale = input_embedding_scale
        if input_dropout is None:
            input_dropout = dropout if new_defaults else 0.0
        self.input_dropout = input_dropout

        if not layer or isinstance(layer, (dict, type)):
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
            }
            opts = {k: v for k, v in opts.items() if v is not NotSpecified}
            opts.update(layer_opts or {})
            if isinstance(layer, dict):
                opts = {k: v for k, v in opts.items() if k not in layer}
                layer = build_from_dict(layer, **opts)
            else:
                layer = (layer or TransformerDecoderLayer)(**opts)
        elif not isinstance(layer, Module):
            raise TypeError(f"{who}: unexpected layer {layer!r}")
        self.layers = sequential(copy.deepcopy(layer) for _ in range(num_layers))
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
        state.pos = _rf().zeros((), dtype="int32")
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
        rf = _rf()
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
