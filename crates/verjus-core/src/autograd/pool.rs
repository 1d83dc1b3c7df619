//! Max and average 2-D pooling (NCHW).

use super::alloc;
use super::node::BackwardFn;
use super::record::{Reads, Saves};
use super::saved::Saved;
use super::var::Var;
use crate::ops::{self, Pool2dParams, Pool2dPlan, PoolKind};
use crate::Result;
use std::sync::Arc;

impl Var {
    /// Max or average pooling of `[n, c, h, w]`.
    pub fn pool2d(&self, kind: PoolKind, params: Pool2dParams) -> Result<Var> {
        let name = match kind {
            PoolKind::Max => "max_pool2d",
            PoolKind::Avg => "avg_pool2d",
        };
        let saves = Saves::own(Reads::All);
        Var::record(name, self.backend(), &[self], saves, move |be, xs| {
            let x = &xs[0];
            let plan = Pool2dPlan::new(kind, x.shape(), params)?;
            let mut y = alloc::output(be, &plan.output_shape()?)?;
            ops::pool2d(be, kind, x, params, &mut y)?;
            let y = Arc::new(y);
            let saved_y = Saved::new(y.clone());
            let backward: BackwardFn = Box::new(move |be, dy, inputs, _| {
                let x = inputs.get(0)?;
                let mut dx = alloc::output(be, x.shape())?;
                ops::pool2d_backward(be, kind, &x, &saved_y, &dy, params, &mut dx)?;
                Ok(vec![Some(dx)])
            });
            Ok((y, backward))
        })
    }
}
