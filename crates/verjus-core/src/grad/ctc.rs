//! The gradient of the CTC loss.
//!
//! The forward-backward pass gives each entry's gradient with respect to its
//! log-probabilities in the same pass as the loss; the backward only scales
//! each entry's `[T, C]` block by the incoming per-entry gradient.

use crate::ops::{self, BinaryOp};
use crate::{Backend, Result, Tensor};

/// `dx [B, T, C]` of the per-entry losses `[B]`, from the gradient `dlog_probs`
/// the forward computed and the per-entry output gradient `dy` as `[B, 1, 1]`.
pub fn ctc_loss(be: &dyn Backend, dlog_probs: &Tensor, dy: &Tensor, dx: &mut Tensor) -> Result<()> {
    ops::binary(be, BinaryOp::Mul, dlog_probs, dy, dx)
}
