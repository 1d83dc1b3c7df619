"""``ZoneoutLSTM``, RETURNN's LSTM with zoneout (Krueger et al. 2016).

Zoneout keeps, in training, each unit of the new cell / hidden state at its
previous value with probability ``factor``; at inference it uses the
expectation ``(1 - factor) * new + factor * prev``. That needs the previous
state at every step, so unlike ``LSTM`` (one fused op) the step is written out
in RF ops and iterated with ``rf.scan``; the parameters are ``LSTM``'s, so a
RETURNN checkpoint's ``ZoneoutLSTM`` maps by name.
"""

from __future__ import annotations

from verjus._verjus import Dim, Tensor
from verjus._verjus import rf_matmul as _matmul
from verjus._verjus import rf_sigmoid as _sigmoid
from verjus._verjus import rf_single_step_dim as _single_step_dim
from verjus._verjus import rf_tanh as _tanh
from verjus.rf.array_ import split
from verjus.rf.loop import scan
from verjus.rf.rec import LSTM, LstmState
from verjus.rf.run_ctx import get_run_ctx


def _dropout(source: Tensor, drop_prob: float, axis: Dim) -> Tensor:
    from verjus.rf import dropout  # the package imports this module first

    return dropout(source, drop_prob, axis=axis)


def _zoneout(*, prev: Tensor, cur: Tensor, factor: float, out_dim: Dim, broadcast: bool) -> Tensor:
    if factor == 0.0:
        return cur
    if get_run_ctx().train_flag:
        axis = out_dim if broadcast else None
        return (1.0 - factor) * _dropout(cur - prev, factor, axis) + prev
    return (1.0 - factor) * cur + factor * prev


class ZoneoutLSTM(LSTM):
    """An ``LSTM`` with zoneout on the cell and the hidden state, RETURNN's
    ``rf.ZoneoutLSTM`` (same options and parameters).

    :param zoneout_factor_cell: the probability to keep a cell unit (0: off)
    :param zoneout_factor_output: the same for the hidden state / output
    :param use_zoneout_output: True: the output is the zoned-out hidden state
        (the paper); False: the plain new hidden state (older RETURNN)
    :param forget_bias: added to the forget gate's input
    :param parts_order: the gate order in the weights: letters ``i``, ``f``,
        ``o`` and the input ``j`` (also ``c`` or ``g``); ``"ifco"`` is
        PyTorch's (``LSTM``'s), ``"icfo"`` RETURNN/TF's ZoneoutLSTM
    :param dropout_broadcast: True (RETURNN's default): the zoneout mask varies
        over ``out_dim`` only, shared by the batch
    """

    def __init__(
        self,
        in_dim: Dim,
        out_dim: Dim,
        *,
        with_bias: bool = True,
        zoneout_factor_cell: float = 0.0,
        zoneout_factor_output: float = 0.0,
        use_zoneout_output: bool = True,
        forget_bias: float = 0.0,
        parts_order: str = "ifco",
        dropout_broadcast: bool = True,
    ):
        super().__init__(in_dim, out_dim, with_bias=with_bias)
        order = parts_order.replace("c", "j").replace("g", "j")
        if len(order) != 4 or set(order) != set("ijfo"):
            raise ValueError(
                f"rf.ZoneoutLSTM: parts_order {parts_order!r} must order the letters i, f, o "
                "and one of j / c / g"
            )
        self.zoneout_factor_cell = zoneout_factor_cell
        self.zoneout_factor_output = zoneout_factor_output
        self.use_zoneout_output = use_zoneout_output
        self.forget_bias = forget_bias
        self.parts_order = order
        self.dropout_broadcast = dropout_broadcast

    def _inner_step(self, x: Tensor, *, state: LstmState) -> tuple[Tensor, LstmState]:
        prev_c, prev_h = state.c, state.h
        x = x + _matmul(prev_h, self.rec_weight, reduce=self.out_dim)
        gates = self.rec_weight.dims[0]
        parts = dict(
            zip(self.parts_order, split(x, axis=gates, out_dims=[self.out_dim] * 4), strict=True)
        )
        new_c = _sigmoid(parts["f"] + self.forget_bias) * prev_c + _sigmoid(parts["i"]) * _tanh(
            parts["j"]
        )
        new_h = _sigmoid(parts["o"]) * _tanh(new_c)
        c = _zoneout(
            prev=prev_c,
            cur=new_c,
            factor=self.zoneout_factor_cell,
            out_dim=self.out_dim,
            broadcast=self.dropout_broadcast,
        )
        h = _zoneout(
            prev=prev_h,
            cur=new_h,
            factor=self.zoneout_factor_output,
            out_dim=self.out_dim,
            broadcast=self.dropout_broadcast,
        )
        out = h if self.use_zoneout_output else new_h
        out.feature_dim = self.out_dim  # as RETURNN's
        return out, LstmState(h=h, c=c)

    def __call__(
        self, source: Tensor, *, state: LstmState, spatial_dim: Dim
    ) -> tuple[Tensor, LstmState]:
        """Runs over ``spatial_dim`` of ``source`` from ``state`` (see
        ``LSTM.__call__``; each sequence to its own length, the state after its
        last frame), or one step with ``spatial_dim=rf.single_step_dim``."""
        h = state.get("h") if isinstance(state, dict) else getattr(state, "h", None)
        c = state.get("c") if isinstance(state, dict) else getattr(state, "c", None)
        if h is None or c is None:
            raise ValueError(
                f"rf.ZoneoutLSTM: state {state!r} needs the entries h (hidden) and c (cell)"
            )
        if self.in_dim not in source.dims:
            dims = ", ".join(d.name for d in source.dims)
            raise ValueError(
                f"rf.ZoneoutLSTM: input [{dims}] does not have in_dim {self.in_dim.name}"
            )
        x = _matmul(source, self.ff_weight, reduce=self.in_dim)
        if self.bias is not None:
            x = x + self.bias
        state = LstmState(h=h, c=c)
        if spatial_dim is _single_step_dim:
            return self._inner_step(x, state=state)
        out, new_state, _ = scan(
            spatial_dim=spatial_dim,
            initial=state,
            xs=x,
            ys=h,
            body=lambda x_t, s: self._inner_step(x_t, state=s),
        )
        return out, new_state
