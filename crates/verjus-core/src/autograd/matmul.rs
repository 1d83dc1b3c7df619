//! Matrix products (batched, with transposes) through `ops::gemm`; each
//! operand's gradient is [`crate::grad::matmul`]'s, into fresh tensors.

use super::alloc;
use super::node::{need, BackwardFn};
use super::var::Var;
use crate::grad::{self, Operand};
use crate::ops::{self, GemmPlan, GemmSpec};
use crate::{Backend, Result, Tensor};
use std::sync::Arc;

impl Var {
    /// `self @ other`: matrices in the last two axes, leading axes a batch
    /// (equal in both, or absent in one operand, which is then shared).
    pub fn matmul(&self, other: &Var) -> Result<Var> {
        self.matmul_t(other, false, false)
    }

    /// `op(self) @ op(other)`, where `op` transposes the last two axes when
    /// the flag is set (without moving memory).
    pub fn matmul_t(&self, other: &Var, trans_a: bool, trans_b: bool) -> Result<Var> {
        Var::record("matmul", self.backend(), &[self, other], move |be, xs| {
            let (a, b) = (xs[0].clone(), xs[1].clone());
            let spec = GemmSpec::new(trans_a, trans_b);
            let plan = GemmPlan::new(a.shape(), b.shape(), spec)?;
            let mut c = alloc::zeros(be, &plan.output_shape(a.shape(), b.shape())?)?;
            ops::gemm(be, &a, &b, &mut c, spec)?;
            let backward: BackwardFn = Box::new(move |be, g, needs| {
                let da = need(needs, 0)
                    .then(|| operand_grad(be, Operand::A, &a, &b, &g, spec))
                    .transpose()?;
                let db = need(needs, 1)
                    .then(|| operand_grad(be, Operand::B, &b, &a, &g, spec))
                    .transpose()?;
                Ok(vec![da, db])
            });
            Ok((Arc::new(c), backward))
        })
    }
}

/// The gradient of `operand` (whose value is `this`) in a fresh tensor, with
/// fresh scratch where the rule needs it.
fn operand_grad(
    be: &dyn Backend,
    operand: Operand,
    this: &Tensor,
    other: &Tensor,
    g: &Tensor,
    spec: GemmSpec,
) -> Result<Tensor> {
    let shapes = grad::matmul_scratch(operand, other.shape(), g.shape(), spec, this.shape())?;
    let mut scratch = alloc::all_zeros(be, &shapes)?;
    let mut out = alloc::zeros(be, this.shape())?;
    grad::matmul(be, operand, other, g, spec, &mut out, &mut scratch)?;
    Ok(out)
}
