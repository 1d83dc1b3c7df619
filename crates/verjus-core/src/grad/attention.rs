//! The gradient of fused attention: recomputes the weights from the kept
//! log-sum-exp (see [`crate::ops::attention`] for why nothing score-sized is
//! kept).

use crate::ops::{self, AttentionArgs, AttentionGrads};
use crate::{Backend, Result, Tensor};

/// `dq`, `dk`, `dv` (those asked for, overwritten) of
/// `out = attention(q, k, v)` from the forward's `out`, `lse` and `dout`.
pub fn attention(
    be: &dyn Backend,
    args: &AttentionArgs<'_>,
    out: &Tensor,
    lse: &Tensor,
    dout: &Tensor,
    grads: AttentionGrads<'_>,
) -> Result<()> {
    ops::attention_backward(be, args, out, lse, dout, grads)
}
