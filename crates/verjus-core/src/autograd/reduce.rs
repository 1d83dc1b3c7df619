//! Reductions over axes: `sum`, `mean`, `max`, `min`.

use super::alloc;
use super::node::BackwardFn;
use super::record::{Reads, Saves};
use super::saved::Saved;
use super::var::Var;
use crate::grad;
use crate::ops::{self, ReduceOp, ReducePlan};
use crate::Result;
use std::sync::Arc;

impl Var {
    /// Sum over `axes`; `keepdims` keeps them as size 1.
    pub fn sum(&self, axes: &[usize], keepdims: bool) -> Result<Var> {
        self.reduce(ReduceOp::Sum, axes, keepdims)
    }

    /// Mean over `axes`; `keepdims` keeps them as size 1.
    pub fn mean(&self, axes: &[usize], keepdims: bool) -> Result<Var> {
        self.reduce(ReduceOp::Mean, axes, keepdims)
    }

    /// Maximum over `axes`; ties share the gradient evenly.
    pub fn max(&self, axes: &[usize], keepdims: bool) -> Result<Var> {
        self.reduce(ReduceOp::Max, axes, keepdims)
    }

    /// Minimum over `axes`; ties share the gradient evenly.
    pub fn min(&self, axes: &[usize], keepdims: bool) -> Result<Var> {
        self.reduce(ReduceOp::Min, axes, keepdims)
    }

    /// The sum of all elements, as a scalar (shape `[]`).
    pub fn sum_all(&self) -> Result<Var> {
        self.reduce(ReduceOp::Sum, &self.all_axes(), false)
    }

    /// The mean of all elements, as a scalar (shape `[]`).
    pub fn mean_all(&self) -> Result<Var> {
        self.reduce(ReduceOp::Mean, &self.all_axes(), false)
    }

    fn all_axes(&self) -> Vec<usize> {
        (0..self.shape().rank()).collect()
    }

    /// `op` over `axes`; `keepdims` keeps them as size 1.
    pub fn reduce(&self, op: ReduceOp, axes: &[usize], keepdims: bool) -> Result<Var> {
        let axes = axes.to_vec();
        let saves = Saves::own(Reads::All);
        Var::record(op.name(), self.backend(), &[self], saves, move |be, xs| {
            let x = &xs[0];
            let plan = ReducePlan::new(op, x.shape(), &axes)?;
            let shape = if keepdims {
                plan.keepdims.clone()
            } else {
                plan.squeezed()
            };
            let mut y = alloc::output(be, &shape)?;
            ops::reduce(be, op, x, &axes, &mut y)?;
            let y = Arc::new(y);
            let saved_y = Saved::new(y.clone());
            let axes = axes.clone();
            let backward: BackwardFn = Box::new(move |be, dy, inputs, _| {
                let x = inputs.get(0)?;
                let mut dx = alloc::output(be, x.shape())?;
                grad::reduce(be, op, &x, &axes, &saved_y, &dy, &mut dx)?;
                Ok(vec![Some(dx)])
            });
            Ok((y, backward))
        })
    }
}
