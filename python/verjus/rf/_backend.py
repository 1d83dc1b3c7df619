"""What RETURNN code imports from ``returnn.frontend._backend``, on verjus.

RETURNN dispatches every op through a ``Backend`` class per framework; verjus
has one backend, its native ops, so ``Backend`` here only names them for code
that refers to backend functions (RETURNN's tests trace
``Backend.scaled_dot_product_attention``), and ``global_backend`` is it.
"""

from __future__ import annotations

import numpy as np

from verjus.rf.attention import dot_attention


class Backend:
    """The verjus backend: its ops are the functions of ``verjus.rf``; a tensor's
    ``raw_tensor`` is a numpy array (``RawTensorType``)."""

    name = "verjus"
    RawTensorType = np.ndarray
    scaled_dot_product_attention = staticmethod(dot_attention)


global_backend = Backend()
