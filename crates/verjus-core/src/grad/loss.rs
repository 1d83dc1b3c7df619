//! The gradient of the fused softmax cross-entropy.
//!
//! The fused op gives the logits' gradient of each example's loss in the
//! same pass as the losses; the backward only scales each row of it by the
//! incoming per-example gradient.

use crate::ops::{self, BinaryOp};
use crate::{Backend, Result, Tensor};

/// `dx` of the per-example losses `[n]` of logits `[n, classes]`, from the
/// logits' gradient `dlogits` the forward computed (with scale 1) and the
/// per-example output gradient `dy` as a column `[n, 1]`.
pub fn softmax_cross_entropy(
    be: &dyn Backend,
    dlogits: &Tensor,
    dy: &Tensor,
    dx: &mut Tensor,
) -> Result<()> {
    ops::binary(be, BinaryOp::Mul, dlogits, dy, dx)
}
