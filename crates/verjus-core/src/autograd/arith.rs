//! Broadcasting binary ops: `add`, `sub`, `mul`, `div`, `maximum`, `minimum`, `pow`.

use super::alloc;
use super::node::{need, BackwardFn};
use super::record::{Reads, Saves};
use super::var::Var;
use crate::grad;
use crate::ops::{self, BinaryOp, BinaryPlan};
use crate::Result;
use std::sync::Arc;

impl Var {
    /// `self + other` (NumPy broadcasting).
    pub fn add(&self, other: &Var) -> Result<Var> {
        self.binary(BinaryOp::Add, other)
    }

    /// `self - other` (NumPy broadcasting).
    pub fn sub(&self, other: &Var) -> Result<Var> {
        self.binary(BinaryOp::Sub, other)
    }

    /// `self * other` (NumPy broadcasting).
    pub fn mul(&self, other: &Var) -> Result<Var> {
        self.binary(BinaryOp::Mul, other)
    }

    /// `self / other` (NumPy broadcasting).
    pub fn div(&self, other: &Var) -> Result<Var> {
        self.binary(BinaryOp::Div, other)
    }

    /// Elementwise maximum; a tie sends the gradient to `self`.
    pub fn maximum(&self, other: &Var) -> Result<Var> {
        self.binary(BinaryOp::Max, other)
    }

    /// Elementwise minimum; a tie sends the gradient to `self`.
    pub fn minimum(&self, other: &Var) -> Result<Var> {
        self.binary(BinaryOp::Min, other)
    }

    /// `self ^ other` (the gradient wrt `other` needs `self > 0`).
    pub fn pow(&self, other: &Var) -> Result<Var> {
        self.binary(BinaryOp::Pow, other)
    }

    /// `self op other` with NumPy broadcasting. Comparisons give 1.0 / 0.0
    /// constants: they have no gradient.
    pub fn binary(&self, op: BinaryOp, other: &Var) -> Result<Var> {
        let be = self.backend();
        if !op.is_differentiable() {
            let (a, b) = (self.value(), other.value());
            let plan = BinaryPlan::new(op, a.shape(), b.shape())?;
            let mut c = alloc::output(&**be, &plan.out)?;
            ops::binary(&**be, op, &a, &b, &mut c)?;
            return Ok(Var::from_parts(Arc::new(c), be.clone(), false, None));
        }
        let saves = Saves::inputs(Reads::All);
        Var::record(op.name(), be, &[self, other], saves, move |be, xs| {
            let (a, b) = (&xs[0], &xs[1]);
            let plan = BinaryPlan::new(op, a.shape(), b.shape())?;
            let mut c = alloc::output(be, &plan.out)?;
            ops::binary(be, op, a, b, &mut c)?;
            let backward: BackwardFn = Box::new(move |be, dy, inputs, needs| {
                let (a, b) = (inputs.get(0)?, inputs.get(1)?);
                let mut da = need(needs, 0)
                    .then(|| alloc::output(be, a.shape()))
                    .transpose()?;
                let mut db = need(needs, 1)
                    .then(|| alloc::output(be, b.shape()))
                    .transpose()?;
                grad::binary(be, op, &a, &b, &dy, da.as_mut(), db.as_mut())?;
                Ok(vec![da, db])
            });
            Ok((Arc::new(c), backward))
        })
    }
}
