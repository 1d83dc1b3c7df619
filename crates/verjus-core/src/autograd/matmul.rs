//! Matrix products (batched, with transposes) through `ops::gemm`; each
//! operand's gradient is [`crate::grad::matmul`]'s, into fresh tensors.

use super::alloc;
use super::node::{need, BackwardFn};
use super::record::{Reads, Saves};
use super::var::Var;
use crate::grad::{self, Operand};
use crate::ops::{self, GemmPlan, GemmSpec};
use crate::{Backend, Result, Shape, Tensor};
use std::sync::Arc;

impl Var {
    /// `self @ other`: matrices in the last two axes, leading axes a batch
    /// (equal in both, or absent in one operand, which is then shared).
    pub fn matmul(&self, other: &Var) -> Result<Var> {
        self.matmul_t(other, false, false)
    }

    /// `op(self) @ op(other)`, where `op` transposes the last two axes when
    /// the flag is set (without moving memory). Inside an
    /// [`autocast`](super::autocast) scope, float32 operands are rounded to
    /// its dtype first (the result is float32; see `autocast.rs`).
    pub fn matmul_t(&self, other: &Var, trans_a: bool, trans_b: bool) -> Result<Var> {
        match super::autocast::autocast_operands(self, other)? {
            Some((a, b)) => a.product(&b, trans_a, trans_b),
            None => self.product(other, trans_a, trans_b),
        }
    }

    /// [`Var::matmul_t`] of the operands as they are.
    fn product(&self, other: &Var, trans_a: bool, trans_b: bool) -> Result<Var> {
        let saves = Saves::inputs(Reads::All);
        Var::record(
            "matmul",
            self.backend(),
            &[self, other],
            saves,
            move |be, xs| {
                let (a, b) = (&xs[0], &xs[1]);
                let spec = GemmSpec::new(trans_a, trans_b);
                let plan = GemmPlan::new(a.shape(), b.shape(), spec)?;
                let mut c = alloc::output(be, &plan.output_shape(a.shape(), b.shape())?)?;
                ops::gemm(be, a, b, &mut c, spec)?;
                // Each operand's gradient reads only the other operand's value, so
                // one made in a checkpoint scope is recomputed only when needed.
                let backward: BackwardFn = Box::new(move |be, g, inputs, needs| {
                    let mut grads = vec![None, None];
                    if need(needs, 0) {
                        let b = inputs.get(1)?;
                        grads[0] = Some(operand_grad(
                            be,
                            Operand::A,
                            inputs.shape(0)?,
                            &b,
                            &g,
                            spec,
                        )?);
                    }
                    if need(needs, 1) {
                        let a = inputs.get(0)?;
                        grads[1] = Some(operand_grad(
                            be,
                            Operand::B,
                            inputs.shape(1)?,
                            &a,
                            &g,
                            spec,
                        )?);
                    }
                    Ok(grads)
                });
                Ok((Arc::new(c), backward))
            },
        )
    }
}

/// The gradient of `operand` (of shape `this`) in a fresh tensor, with fresh
/// scratch where the rule needs it. A reduced-precision `other` (autocast's)
/// is widened, so gradients are float32 products.
fn operand_grad(
    be: &dyn Backend,
    operand: Operand,
    this: &Shape,
    other: &Tensor,
    g: &Tensor,
    spec: GemmSpec,
) -> Result<Tensor> {
    let wide = alloc::widened(be, other)?;
    let other = wide.as_ref().unwrap_or(other);
    let shapes = grad::matmul_scratch(operand, other.shape(), g.shape(), spec, this)?;
    let mut scratch = alloc::all_outputs(be, &shapes)?;
    let mut out = alloc::output(be, this)?;
    grad::matmul(be, operand, other, g, spec, &mut out, &mut scratch)?;
    Ok(out)
}
