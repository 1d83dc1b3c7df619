//! The gradient of inverted dropout.
//!
//! Nothing is saved: the mask is drawn again from the forward's `(seed,
//! offset)` of the shared Philox stream.

use crate::ops;
use crate::{Backend, Result, Tensor};

/// `dx` of `y = dropout(x, p)` drawn at `(seed, offset)`: `dy` through the
/// same mask and scale `1 / (1 - p)`.
pub fn dropout(
    be: &dyn Backend,
    dy: &Tensor,
    p: f32,
    seed: u64,
    offset: u64,
    dx: &mut Tensor,
) -> Result<()> {
    ops::dropout_backward(be, dy, p, seed, offset, dx)
}
