//! Random draws as recorded ops.
//!
//! A draw has no inputs and no gradient, so outside a gradient checkpoint
//! scope it is a plain constant. Inside one it is recorded like any op: its
//! Philox `(seed, offset)` is part of its forward, so backward can draw the
//! same numbers again instead of keeping them (weight noise keeps no noise).

use super::alloc;
use super::node::BackwardFn;
use super::record::Saves;
use super::var::Var;
use crate::ops::{self, Distribution};
use crate::{BackendRef, Result, Shape};
use std::sync::Arc;

impl Var {
    /// Values of `dist` over `shape` from the Philox stream at `(seed, offset)`
    /// (element `i` as [`ops::random`] defines it), on `backend`; a constant.
    pub fn random(
        shape: &Shape,
        dist: Distribution,
        seed: u64,
        offset: u64,
        backend: &BackendRef,
    ) -> Result<Var> {
        let shape = shape.clone();
        Var::record("random", backend, &[], Saves::NOTHING, move |be, _| {
            let mut t = alloc::output(be, &shape)?;
            ops::random(be, &mut t, dist, seed, offset)?;
            let backward: BackwardFn = Box::new(|_, _, _, _| Ok(Vec::new()));
            Ok((Arc::new(t), backward))
        })
    }
}
