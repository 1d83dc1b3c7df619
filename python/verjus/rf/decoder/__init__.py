"""Decoders, after RETURNN's ``returnn.frontend.decoder`` package: so that
``rf.decoder.transformer.TransformerDecoder`` and ``from
verjus.rf.decoder.transformer import TransformerDecoder`` work as RETURNN's
imports do."""

from verjus.rf.decoder import transformer

__all__ = ["transformer"]
