//! Matrix products (batched, with transposes) through `ops::gemm`.
//!
//! For `C = op_a(A) @ op_b(B)` with output gradient `G`, each operand's
//! gradient is again one GEMM with transposes chosen so that no operand is
//! ever transposed in memory:
//!
//! | operand | no transpose            | transposed                  |
//! |---------|-------------------------|-----------------------------|
//! | `dA`    | `G @ op_b(B)^T`         | `op_b(B) @ G^T`             |
//! | `dB`    | `op_a(A)^T @ G`         | `G^T @ op_a(A)`             |
//!
//! When an operand is one matrix shared by a batch (a linear layer's weight
//! applied to a batch of sequences), its gradient sums over the batch: by
//! folding the batch into the contracted rows when the layout allows (one
//! GEMM), otherwise by a batched GEMM and a sum over the batch axes.

use super::alloc;
use super::node::{need, BackwardFn};
use super::var::Var;
use crate::ops::{self, GemmPlan, GemmSpec, ReduceOp};
use crate::{Backend, Result, Shape, Tensor};
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
        let be = self.backend();
        let (a, b) = (self.value(), other.value());
        let spec = GemmSpec::new(trans_a, trans_b);
        let plan = GemmPlan::new(a.shape(), b.shape(), spec)?;
        let mut c = alloc::zeros(&**be, &plan.output_shape(a.shape(), b.shape())?)?;
        ops::gemm(&**be, &a, &b, &mut c, spec)?;
        let backward: BackwardFn = Box::new(move |be, g, needs| {
            let da = need(needs, 0)
                .then(|| {
                    if trans_a {
                        product(be, &b, &g, trans_b, true, a.shape())
                    } else {
                        product(be, &g, &b, false, !trans_b, a.shape())
                    }
                })
                .transpose()?;
            let db = need(needs, 1)
                .then(|| {
                    if trans_b {
                        product(be, &g, &a, true, trans_a, b.shape())
                    } else {
                        product(be, &a, &g, !trans_a, false, b.shape())
                    }
                })
                .transpose()?;
            Ok(vec![da, db])
        });
        Ok(Var::from_op(
            "matmul",
            Arc::new(c),
            be,
            &[self, other],
            backward,
        ))
    }
}

/// `op(x) @ op(y)`, summed over the batch when `target` (the operand's shape)
/// has no batch axes but the product has.
fn product(
    be: &dyn Backend,
    x: &Tensor,
    y: &Tensor,
    trans_x: bool,
    trans_y: bool,
    target: &Shape,
) -> Result<Tensor> {
    let spec = GemmSpec::new(trans_x, trans_y);
    let out = GemmPlan::new(x.shape(), y.shape(), spec)?.output_shape(x.shape(), y.shape())?;
    if &out == target {
        let mut r = alloc::zeros(be, target)?;
        ops::gemm(be, x, y, &mut r, spec)?;
        return Ok(r);
    }
    let batched = |t: &Tensor| t.shape().rank() > 2;
    if trans_x && !trans_y && batched(x) && batched(y) {
        // Both are stored [batch.., rows, cols] with the batch next to the
        // contracted rows: view them as single matrices [batch * rows, cols].
        let (xm, ym) = (as_matrix(be, x)?, as_matrix(be, y)?);
        let mut r = alloc::zeros(be, target)?;
        ops::gemm(be, &xm, &ym, &mut r, spec)?;
        return Ok(r);
    }
    let mut full = alloc::zeros(be, &out)?;
    ops::gemm(be, x, y, &mut full, spec)?;
    let batch_axes: Vec<usize> = (0..out.rank() - 2).collect();
    let mut r = alloc::zeros(be, target)?;
    ops::reduce(be, ReduceOp::Sum, &full, &batch_axes, &mut r)?;
    Ok(r)
}

/// `t` as one matrix: all leading axes folded into the rows.
fn as_matrix(be: &dyn Backend, t: &Tensor) -> Result<Tensor> {
    let (cols, leading) = t.dims().split_last().unwrap_or((&1, &[]));
    let rows = leading.iter().product::<usize>();
    alloc::copy_as(be, t, &Shape::new([rows, *cols])?)
}
