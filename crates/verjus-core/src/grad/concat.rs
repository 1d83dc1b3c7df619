//! The gradients of concatenation and splitting, each the other op.

use crate::ops;
use crate::{Backend, Result, Tensor};

/// The parts' gradients of `y = concat(parts, axis)`: `dy` split along
/// `axis`. Every part is written; a caller that wants only some passes
/// scratch tensors for the others.
pub fn concat(
    be: &dyn Backend,
    dy: &Tensor,
    axis: usize,
    dparts: &mut [&mut Tensor],
) -> Result<()> {
    ops::split(be, dy, axis, dparts)
}

/// `dx` of `parts = split(x, axis)` from the parts' gradients, joined along
/// `axis` (a part that got no gradient contributes zeros of its shape).
pub fn split(be: &dyn Backend, dparts: &[&Tensor], axis: usize, dx: &mut Tensor) -> Result<()> {
    ops::concat(be, dparts, axis, dx)
}
