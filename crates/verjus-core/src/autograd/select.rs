//! `select` (`where`): elementwise choice by a condition, the base of masking.

use super::alloc;
use super::node::{need, BackwardFn};
use super::var::Var;
use crate::ops::{self, ReduceOp, SelectPlan};
use crate::{Backend, Result, Shape, Tensor};
use std::sync::Arc;

impl Var {
    /// `where(cond != 0, x, y)` elementwise, the three broadcast together
    /// (NumPy rules). The unchosen value is never read, so infinities in it
    /// do not turn into NaN. No gradient flows to `cond`; `x` gets the
    /// output gradient where `cond` holds, `y` where it does not, each summed
    /// over the axes it was broadcast along.
    pub fn select(cond: &Var, x: &Var, y: &Var) -> Result<Var> {
        let be = x.backend();
        let (c, xv, yv) = (cond.value(), x.value(), y.value());
        let plan = SelectPlan::new(c.shape(), xv.shape(), yv.shape())?;
        let mut out = alloc::zeros(&**be, &plan.out)?;
        ops::select(&**be, &c, &xv, &yv, &mut out)?;
        let (x_shape, y_shape) = (xv.shape().clone(), yv.shape().clone());
        let backward: BackwardFn = Box::new(move |be, dy, needs| {
            let zero = alloc::zeros(be, &Shape::scalar())?;
            let mut grads = vec![None];
            for (i, shape) in [(1, &x_shape), (2, &y_shape)] {
                if !need(needs, i) {
                    grads.push(None);
                    continue;
                }
                let mut full = alloc::zeros(be, dy.shape())?;
                let (on, off) = if i == 1 { (&dy, &zero) } else { (&zero, &dy) };
                ops::select(be, &c, on, off, &mut full)?;
                grads.push(Some(sum_to(be, full, shape)?));
            }
            Ok(grads)
        });
        Ok(Var::from_op(
            "select",
            Arc::new(out),
            be,
            &[cond, x, y],
            backward,
        ))
    }
}

/// `g` summed over the axes along which `target` was broadcast to `g`'s shape.
fn sum_to(be: &dyn Backend, g: Tensor, target: &Shape) -> Result<Tensor> {
    if g.shape() == target {
        return Ok(g);
    }
    let out = g.dims();
    let offset = out.len() - target.rank();
    let axes: Vec<usize> = (0..out.len())
        .filter(|&i| i < offset || (target.dims()[i - offset] == 1 && out[i] != 1))
        .collect();
    let keep: Vec<usize> = (0..out.len())
        .map(|i| if axes.contains(&i) { 1 } else { out[i] })
        .collect();
    let mut r = alloc::zeros(be, &Shape::new(keep)?)?;
    ops::reduce(be, ReduceOp::Sum, &g, &axes, &mut r)?;
    r.reshape(target.dims().to_vec())
}
