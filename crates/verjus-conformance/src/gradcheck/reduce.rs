//! Gradient checks of the reductions (every op, kept and squeezed outputs) and of
//! softmax and log-softmax.

use super::{check_input, weighted_sum};
use crate::array::Array;
use crate::compare::every_case;
use crate::inputs::{distinct, uniform};
use crate::reference::reduce::{keepdims, squeezed};
use crate::transfer::{put, zeros, Context};
use verjus_core::ops::{self, ReduceOp};
use verjus_core::{Backend, DType, Tensor};

/// `(dims, axes, keep the reduced axes)`.
const CASES: [(&[usize], &[usize], bool); 4] = [
    (&[3, 4, 5], &[0, 2], false),
    (&[6], &[0], true),
    (&[2, 3], &[], true),
    (&[4, 3], &[1], true),
];

/// `reduce_backward` against differences of `reduce`, for every op. Max and min
/// inputs are distinct and 0.05 apart, so the arg-extremum never changes under a step.
pub fn reduce(be: &dyn Backend) -> Result<(), String> {
    let ops = [ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max, ReduceOp::Min];
    let cases = ops
        .into_iter()
        .flat_map(|op| CASES.iter().map(move |&c| (op, c)));
    every_case(cases, |(op, (dims, axes, keep))| {
        let out = if keep {
            keepdims(dims, axes)
        } else {
            squeezed(dims, axes)
        };
        let what = format!(
            "gradcheck {} {dims:?} over axes {axes:?} into {out:?}",
            op.name()
        );
        let x = match op {
            ReduceOp::Max | ReduceOp::Min => distinct(6, dims, 0.05),
            _ => uniform(6, dims, -1.0, 1.0),
        };
        let r = uniform(7, &out, -1.0, 1.0);
        let forward = |x: &Array| -> Result<(Tensor, Tensor), String> {
            let tx = put(be, &what, x)?;
            let mut ty = zeros(be, &what, &out, DType::F32)?;
            ops::reduce(be, op, &tx, axes, &mut ty).context(&what)?;
            Ok((tx, ty))
        };
        let (tx, ty) = forward(&x)?;
        let tr = put(be, &what, &r)?;
        let mut tdx = zeros(be, &what, dims, DType::F32)?;
        ops::reduce_backward(be, op, &tx, axes, &ty, &tr, &mut tdx).context(&what)?;
        check_input(be, &what, &x, &tdx, |p| {
            weighted_sum(be, &what, &forward(p)?.1, &r)
        })
    })
}

fn softmax_like(be: &dyn Backend, log: bool) -> Result<(), String> {
    let name = if log { "log_softmax" } else { "softmax" };
    let cases: [(&[usize], usize); 3] = [(&[3, 5], 1), (&[4, 3, 2], 1), (&[3, 2], 0)];
    every_case(cases, |(dims, axis)| {
        let what = format!("gradcheck {name} {dims:?} along axis {axis}");
        let x = uniform(8, dims, -2.0, 2.0);
        let r = uniform(9, dims, -1.0, 1.0);
        let forward = |x: &Array| -> Result<Tensor, String> {
            let tx = put(be, &what, x)?;
            let mut ty = zeros(be, &what, dims, DType::F32)?;
            ops::softmax(be, &tx, axis, log, &mut ty).context(&what)?;
            Ok(ty)
        };
        let ty = forward(&x)?;
        let tr = put(be, &what, &r)?;
        let mut tdx = zeros(be, &what, dims, DType::F32)?;
        ops::softmax_backward(be, &ty, &tr, axis, log, &mut tdx).context(&what)?;
        check_input(be, &what, &x, &tdx, |p| {
            weighted_sum(be, &what, &forward(p)?, &r)
        })
    })
}

/// `softmax_backward` against differences of `softmax`.
pub fn softmax(be: &dyn Backend) -> Result<(), String> {
    softmax_like(be, false)
}

/// `softmax_backward` (log) against differences of `log_softmax`.
pub fn log_softmax(be: &dyn Backend) -> Result<(), String> {
    softmax_like(be, true)
}
