//! Inverted dropout.
//!
//! Nothing is saved: the backward pass regenerates the mask from the same
//! `(seed, offset)` of the shared Philox stream.

use super::alloc;
use super::node::BackwardFn;
use super::var::Var;
use crate::Result;
use crate::{grad, ops};
use std::sync::Arc;

impl Var {
    /// Zeroes each element with probability `p` and scales the rest by
    /// `1 / (1 - p)`; the mask is the Philox draw at `(seed, offset)`. A caller
    /// that applies dropout again advances `offset` by `rng::blocks_for(numel)`.
    pub fn dropout(&self, p: f32, seed: u64, offset: u64) -> Result<Var> {
        let be = self.backend();
        let x = self.value();
        let mut y = alloc::zeros(&**be, x.shape())?;
        ops::dropout(&**be, &x, p, seed, offset, &mut y)?;
        let backward: BackwardFn = Box::new(move |be, dy, _| {
            let mut dx = alloc::zeros(be, dy.shape())?;
            grad::dropout(be, &dy, p, seed, offset, &mut dx)?;
            Ok(vec![Some(dx)])
        });
        Ok(Var::from_op("dropout", Arc::new(y), be, &[self], backward))
    }
}
