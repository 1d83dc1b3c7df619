"""Encoders, after RETURNN's ``returnn.frontend.encoder``: the interfaces
(``verjus.rf.encoder.base``), the Conformer (``verjus.rf.encoder.conformer``) and
the E-Branchformer layer for it (``verjus.rf.encoder.e_branchformer``),
reachable as ``rf.encoder.conformer.ConformerEncoder`` as in RETURNN."""

from verjus.rf.encoder import base, conformer, e_branchformer

__all__ = ["base", "conformer", "e_branchformer"]
