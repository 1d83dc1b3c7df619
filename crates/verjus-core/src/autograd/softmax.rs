//! Softmax and log-softmax along one axis.

use super::alloc;
use super::node::BackwardFn;
use super::record::{Reads, Saves};
use super::saved::Saved;
use super::var::Var;
use crate::ops;
use crate::Result;
use std::sync::Arc;

impl Var {
    /// Softmax along `axis`.
    pub fn softmax(&self, axis: usize) -> Result<Var> {
        self.softmax_impl(axis, false)
    }

    /// Log-softmax along `axis` (stable; prefer it to `softmax().log()`).
    pub fn log_softmax(&self, axis: usize) -> Result<Var> {
        self.softmax_impl(axis, true)
    }

    fn softmax_impl(&self, axis: usize, log: bool) -> Result<Var> {
        let name = if log { "log_softmax" } else { "softmax" };
        let saves = Saves::own(Reads::Nothing);
        Var::record(name, self.backend(), &[self], saves, move |be, xs| {
            let mut y = alloc::output(be, xs[0].shape())?;
            ops::softmax(be, &xs[0], axis, log, &mut y)?;
            let y = Arc::new(y);
            // The gradient needs only the output.
            let saved_y = Saved::new(y.clone());
            let backward: BackwardFn = Box::new(move |be, dy, _, _| {
                let mut dx = alloc::output(be, dy.shape())?;
                ops::softmax_backward(be, &saved_y, &dy, axis, log, &mut dx)?;
                Ok(vec![Some(dx)])
            });
            Ok((y, backward))
        })
    }
}
