"""Encoders, after RETURNN's ``returnn.frontend.encoder``: the interfaces
(``verjus.rf.encoder.base``) and the Conformer (``verjus.rf.encoder.conformer``),
reachable as ``rf.encoder.conformer.ConformerEncoder`` as in RETURNN."""

from verjus.rf.encoder import base, conformer

__all__ = ["base", "conformer"]
