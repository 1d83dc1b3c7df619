//! The gradients of ops that move elements without computing: reshape and
//! permute.

use crate::ops::{self, PermutePlan};
use crate::{Backend, Result, Tensor};

/// `dx` of a reshape: the same elements under the input's shape. A caller
/// that owns `dy` may relabel it in place instead (no copy).
pub fn reshape(be: &dyn Backend, dy: &Tensor, dx: &mut Tensor) -> Result<()> {
    ops::copy(be, dy, dx)
}

/// `dx` of `y = permute(x, perm)`: `dy` permuted back by the inverse of `perm`.
pub fn permute(be: &dyn Backend, dy: &Tensor, perm: &[usize], dx: &mut Tensor) -> Result<()> {
    let inverse = PermutePlan::new(dx.shape(), perm)?.inverse();
    ops::permute(be, dy, &inverse, dx)
}
