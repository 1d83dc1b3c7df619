//! Inverted dropout.
//!
//! Nothing is saved: the backward pass regenerates the mask from the same
//! `(seed, offset)` of the shared Philox stream.

use super::alloc;
use super::node::BackwardFn;
use super::record::Saves;
use super::var::Var;
use crate::ops;
use crate::Result;
use std::sync::Arc;

impl Var {
    /// Zeroes each element with probability `p` and scales the rest by
    /// `1 / (1 - p)`; the mask is the Philox draw at `(seed, offset)`. A caller
    /// that applies dropout again advances `offset` by `rng::blocks_for(numel)`.
    pub fn dropout(&self, p: f32, seed: u64, offset: u64) -> Result<Var> {
        let saves = Saves::NOTHING;
        Var::record("dropout", self.backend(), &[self], saves, move |be, xs| {
            let mut y = alloc::output(be, xs[0].shape())?;
            ops::dropout(be, &xs[0], p, seed, offset, &mut y)?;
            let backward: BackwardFn = Box::new(move |be, dy, _, _| {
                let mut dx = alloc::output(be, dy.shape())?;
                ops::dropout_backward(be, &dy, p, seed, offset, &mut dx)?;
                Ok(vec![Some(dx)])
            });
            Ok((Arc::new(y), backward))
        })
    }
}
