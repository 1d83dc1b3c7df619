//! Gradient checks of every unary op and every differentiable binary op (with
//! broadcasting, so the reduction of gradients over broadcast axes is covered).

use super::{check_input, weighted_sum};
use crate::array::Array;
use crate::checks::{BINARY_OPS, UNARY_OPS};
use crate::compare::every_case;
use crate::inputs::{away_from_zero, uniform};
use crate::transfer::{put, zeros, Context};
use verjus_core::ops::{self, BinaryDomain, BinaryOp, UnaryDomain, UnaryOp};
use verjus_core::{Backend, DType, Tensor};

/// Inputs in the op's domain and at least 0.1 away from the kink of relu and abs.
fn unary_input(op: UnaryOp, dims: &[usize]) -> Array {
    match op.domain() {
        UnaryDomain::Positive | UnaryDomain::PowerBase => uniform(1, dims, 0.5, 2.0),
        UnaryDomain::NonZero => away_from_zero(1, dims, 0.5, 2.0),
        UnaryDomain::Kink => away_from_zero(1, dims, 0.1, 2.0),
        UnaryDomain::Real => uniform(1, dims, -2.0, 2.0),
    }
}

/// `unary_backward` against differences of `unary`, for every unary op.
pub fn unary(be: &dyn Backend) -> Result<(), String> {
    let dims = [2, 3];
    every_case(UNARY_OPS.iter().copied(), |op| {
        let what = format!("gradcheck {} ({op:?}) {dims:?}", op.name());
        let x = unary_input(op, &dims);
        let r = uniform(2, &dims, -1.0, 1.0);
        let forward = |x: &Array| -> Result<(Tensor, Tensor), String> {
            let tx = put(be, &what, x)?;
            let mut ty = zeros(be, &what, &dims, DType::F32)?;
            ops::unary(be, op, &tx, &mut ty).context(&what)?;
            Ok((tx, ty))
        };
        let (tx, ty) = forward(&x)?;
        let tr = put(be, &what, &r)?;
        let mut tdx = zeros(be, &what, &dims, DType::F32)?;
        ops::unary_backward(be, op, &tx, &ty, &tr, &mut tdx).context(&what)?;
        check_input(be, &what, &x, &tdx, |p| {
            weighted_sum(be, &what, &forward(p)?.1, &r)
        })
    })
}

/// Operands in the op's domain; for max and min every pair differs by at least 0.5.
fn binary_inputs(op: BinaryOp, a: &[usize], b: &[usize]) -> (Array, Array) {
    match op.domain() {
        BinaryDomain::Divisor => (uniform(3, a, -2.0, 2.0), away_from_zero(4, b, 0.5, 2.0)),
        BinaryDomain::PositiveBase => (uniform(3, a, 0.5, 2.0), uniform(4, b, -1.5, 1.5)),
        BinaryDomain::Ties => (away_from_zero(3, a, 1.0, 2.0), uniform(4, b, -0.5, 0.5)),
        BinaryDomain::Real | BinaryDomain::Comparison => {
            (uniform(3, a, -2.0, 2.0), uniform(4, b, -2.0, 2.0))
        }
    }
}

/// `binary_backward` against differences of `binary`, for every differentiable op
/// on equal shapes, a scalar operand, and two-sided broadcasting.
pub fn binary(be: &dyn Backend) -> Result<(), String> {
    let shapes: [(&[usize], &[usize], &[usize]); 3] = [
        (&[2, 3], &[2, 3], &[2, 3]),
        (&[], &[5], &[5]),
        (&[3, 1, 4], &[2, 1], &[3, 2, 4]),
    ];
    let cases = BINARY_OPS
        .iter()
        .filter(|op| op.is_differentiable())
        .flat_map(|&op| shapes.iter().map(move |&s| (op, s)));
    every_case(cases, |(op, (a_dims, b_dims, out_dims))| {
        let what = format!("gradcheck {} {a_dims:?} with {b_dims:?}", op.name());
        let (a, b) = binary_inputs(op, a_dims, b_dims);
        let r = uniform(5, out_dims, -1.0, 1.0);
        let loss = |a: &Array, b: &Array| {
            let (ta, tb) = (put(be, &what, a)?, put(be, &what, b)?);
            let mut tc = zeros(be, &what, out_dims, DType::F32)?;
            ops::binary(be, op, &ta, &tb, &mut tc).context(&what)?;
            weighted_sum(be, &what, &tc, &r)
        };
        let (ta, tb, tr) = (
            put(be, &what, &a)?,
            put(be, &what, &b)?,
            put(be, &what, &r)?,
        );
        let mut tda = zeros(be, &what, a_dims, DType::F32)?;
        let mut tdb = zeros(be, &what, b_dims, DType::F32)?;
        ops::binary_backward(be, op, &ta, &tb, &tr, Some(&mut tda), Some(&mut tdb))
            .context(&what)?;
        check_input(be, &format!("{what}: da"), &a, &tda, |p| loss(p, &b))?;
        check_input(be, &format!("{what}: db"), &b, &tdb, |p| loss(&a, p))
    })
}
