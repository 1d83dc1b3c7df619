"""``rf.Dropout``: ``rf.dropout`` as a module, for ``Sequential`` stacks
(RETURNN has only the function; the module takes its arguments), and
``dropout_broadcast_default``, RETURNN's default for the modules that share a
dropout mask along all but the feature dim (Conformer, FeedForward), with its
config option ``rf_dropout_broadcast``.
"""

from __future__ import annotations

from collections.abc import Sequence

from verjus._verjus import Dim, Tensor
from verjus._verjus import rf_dropout as _dropout
from verjus.rf.backend import returnn_config_bool
from verjus.rf.module import Module
from verjus.rf.run_ctx import get_run_ctx

__all__ = ["Dropout", "dropout_broadcast_default"]


class Dropout(Module):
    """Inverted dropout with probability ``drop_prob`` in training (or always with
    ``on_forward``); with ``axis`` the mask varies over those dims only and is
    shared along the others.

    :param drop_prob: the probability to drop an entry, in ``[0, 1)``
    :param axis: the dim(s) the mask varies over (default: all)
    :param on_forward: also apply it outside training
    """

    def __init__(
        self,
        drop_prob: float,
        *,
        axis: Dim | Sequence[Dim] | None = None,
        on_forward: bool = False,
    ):
        if not 0.0 <= drop_prob < 1.0:
            raise ValueError(f"Dropout: drop_prob must be in [0, 1), got {drop_prob}")
        self.drop_prob = drop_prob
        self.axis = axis
        self.on_forward = on_forward

    def __call__(self, source: Tensor) -> Tensor:
        """``source`` with dropout applied (in training or ``on_forward``)."""
        import verjus.rf as rf

        train = self.on_forward or get_run_ctx().is_train_flag_enabled(func=rf.dropout)
        return _dropout(source, self.drop_prob, self.axis, train)


def dropout_broadcast_default() -> bool:
    """Whether modules such as the Conformer's share their dropout masks over all
    but the feature dim, as RETURNN decides it: its config option
    ``rf_dropout_broadcast`` where RETURNN's settings are in effect
    (``verjus.rf.backend.returnn_behavior_version``), else True (RETURNN's
    default in every behavior version). ``rf.dropout`` itself does not read it:
    the modules pass the feature dim as ``axis`` when it is True.

    The attention weights' dropout is separate (``att_dropout_broadcast``, see
    ``verjus.rf.attention._att_dropout_broadcast_default``): its default depends
    on the behavior version (True up to 18, False from 19 on and without
    RETURNN's settings), RETURNN's options ``rf_att_dropout_broadcast`` and then
    ``rf_dropout_broadcast`` override it.

    :return: whether to broadcast the dropout masks
    """
    value = returnn_config_bool("rf_dropout_broadcast")
    return True if value is None else value
