"""``returnn.tensor`` for RETURNN code on verjus (see ``verjus.rf.returnn_compat``).

RETURNN keeps its object model in ``returnn.tensor``; in verjus the same
classes live in ``verjus.rf``, and this package names them as RETURNN does.
"""

from verjus._verjus import Dim, Tensor
from verjus.rf import batch_dim, single_step_dim
from verjus.rf.tensor_dict import TensorDict

__all__ = ["Dim", "Tensor", "TensorDict", "batch_dim", "single_step_dim"]
