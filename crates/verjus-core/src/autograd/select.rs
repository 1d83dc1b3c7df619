//! `select` (`where`): elementwise choice by a condition, the base of masking.

use super::alloc;
use super::node::{need, BackwardFn};
use super::record::{Reads, Saves};
use super::var::Var;
use crate::grad::{self, SelectGrads};
use crate::ops::{self, SelectPlan};
use crate::{Result, Shape};
use std::sync::Arc;

impl Var {
    /// `where(cond != 0, x, y)` elementwise, the three broadcast together
    /// (NumPy rules). The unchosen value is never read, so infinities in it
    /// do not turn into NaN. No gradient flows to `cond`; `x` gets the
    /// output gradient where `cond` holds, `y` where it does not, each summed
    /// over the axes it was broadcast along.
    pub fn select(cond: &Var, x: &Var, y: &Var) -> Result<Var> {
        let saves = Saves::inputs(Reads::Only(&[0]));
        Var::record(
            "select",
            x.backend(),
            &[cond, x, y],
            saves,
            move |be, xs| {
                let (c, xv, yv) = (&xs[0], &xs[1], &xs[2]);
                let plan = SelectPlan::new(c.shape(), xv.shape(), yv.shape())?;
                let mut out = alloc::output(be, &plan.out)?;
                ops::select(be, c, xv, yv, &mut out)?;
                let (x_shape, y_shape) = (xv.shape().clone(), yv.shape().clone());
                let backward: BackwardFn = Box::new(move |be, dout, inputs, needs| {
                    let c = inputs.get(0)?;
                    let zero = alloc::zeros(be, &Shape::scalar())?;
                    let fresh = |i: usize, shape: &Shape| {
                        need(needs, i).then(|| alloc::output(be, shape)).transpose()
                    };
                    let (mut dx, mut dy) = (fresh(1, &x_shape)?, fresh(2, &y_shape)?);
                    let summed = [&dx, &dy]
                        .iter()
                        .any(|g| g.as_ref().is_some_and(|g| g.shape() != dout.shape()));
                    let mut scratch = summed
                        .then(|| alloc::output(be, dout.shape()))
                        .transpose()?;
                    let grads = SelectGrads {
                        dx: dx.as_mut(),
                        dy: dy.as_mut(),
                    };
                    grad::select(be, &c, &dout, &zero, grads, scratch.as_mut())?;
                    Ok(vec![None, dx, dy])
                });
                Ok((Arc::new(out), backward))
            },
        )
    }
}
