//! The gradients of the LSTM over a sequence and of one LSTM step.
//!
//! The forward ([`crate::ops::lstm_sequence`], [`crate::ops::lstm_cell`])
//! leaves a backend-defined *reserve* holding what its backward needs (for the
//! native backend the gate activations and cell states, for cuDNN its own
//! reserve space), so the rule is the op set's fused backward: the caller keeps
//! the forward's operands, its output `y` (a step's new `h`) and the reserve,
//! and passes the output gradients it has (absent ones count as zero).

use crate::ops::{self, LstmArgs, LstmGrads, LstmOutputGrads};
use crate::{Backend, Result, Tensor};

/// The gradients of `(y, h_n, c_n) = lstm_sequence(args)` from `dout`, into
/// the tensors `grads` names (each overwritten; `None` skips one). `y` and
/// `reserve` are the forward's.
pub fn lstm_sequence(
    be: &dyn Backend,
    args: &LstmArgs<'_>,
    y: &Tensor,
    reserve: &Tensor,
    dout: &LstmOutputGrads<'_>,
    grads: LstmGrads<'_>,
) -> Result<()> {
    ops::lstm_sequence_backward(be, args, y, reserve, dout, grads)
}

/// The gradients of one step `(h, c) = lstm_cell(args)`: `dout.dy` is the new
/// `h`'s gradient and `dout.dc_n` the new `c`'s. `h` and `reserve` are the
/// forward's.
pub fn lstm_cell(
    be: &dyn Backend,
    args: &LstmArgs<'_>,
    h: &Tensor,
    reserve: &Tensor,
    dout: &LstmOutputGrads<'_>,
    grads: LstmGrads<'_>,
) -> Result<()> {
    ops::lstm_cell_backward(be, args, h, reserve, dout, grads)
}
