//! Inverted dropout with a counter-based mask.
//!
//! Element `i` is kept when its Philox draw at `(seed, offset)` passes
//! [`crate::rng::keeps`]; kept elements are scaled by `1 / (1 - p)`. The backward
//! op regenerates the same mask from the same `(seed, offset)`, so no mask is
//! stored, and every device draws the same mask.

use super::{check_f32_on, check_shape};
use crate::{Backend, Error, Result, Tensor};

/// Probability and random stream of one dropout application.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DropoutPlan {
    /// Drop probability in `[0, 1)`.
    pub p: f32,
    pub seed: u64,
    /// Philox block offset (see [`crate::rng`]).
    pub offset: u64,
    /// `rng::dropout_threshold(p)`.
    pub threshold: u32,
    /// `1 / (1 - p)`.
    pub scale: f32,
}

impl DropoutPlan {
    /// Checks `p`.
    pub fn new(p: f32, seed: u64, offset: u64) -> Result<Self> {
        if !(0.0..1.0).contains(&p) {
            return Err(Error::invalid(
                "dropout",
                format!("drop probability must be in [0, 1), got {p}"),
            ));
        }
        Ok(DropoutPlan {
            p,
            seed,
            offset,
            threshold: crate::rng::dropout_threshold(p),
            scale: 1.0 / (1.0 - p),
        })
    }
}

/// `y = x * mask / (1 - p)`.
pub fn dropout(
    be: &dyn Backend,
    x: &Tensor,
    p: f32,
    seed: u64,
    offset: u64,
    y: &mut Tensor,
) -> Result<()> {
    let plan = DropoutPlan::new(p, seed, offset)?;
    check_f32_on("dropout", be, &[("x", x), ("y", y)])?;
    check_shape("dropout", "y", y, x.shape())?;
    be.dropout(&plan, x, y)
}

/// `dx = dy * mask / (1 - p)` with the mask of the forward call with the same seed and offset.
pub fn dropout_backward(
    be: &dyn Backend,
    dy: &Tensor,
    p: f32,
    seed: u64,
    offset: u64,
    dx: &mut Tensor,
) -> Result<()> {
    let plan = DropoutPlan::new(p, seed, offset)?;
    check_f32_on("dropout_backward", be, &[("dy", dy), ("dx", dx)])?;
    check_shape("dropout_backward", "dx", dx, dy.shape())?;
    be.dropout(&plan, dy, dx)
}
