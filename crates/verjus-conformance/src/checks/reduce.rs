//! Checks of reductions over arbitrary axis sets (output with the reduced axes
//! kept or squeezed), their gradients, and argmax.
//! Tolerance: `Tolerance::REDUCTION`; max, min and argmax must be exact.

use crate::array::Array;
use crate::compare::{close, equal, every_case, Tolerance};
use crate::inputs::{quantized, uniform};
use crate::reference::reduce as reference;
use crate::transfer::{get, put, put_vec, zeros, Context};
use verjus_core::ops::{self, ReduceOp};
use verjus_core::{Backend, DType};

const OPS: [ReduceOp; 4] = [ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max, ReduceOp::Min];

/// `(input dims, reduced axes)`, including unordered axes, no axes, a scalar and empty groups.
const CASES: [(&[usize], &[usize]); 13] = [
    (&[7], &[0]),
    (&[13, 17], &[0]),
    (&[13, 17], &[1]),
    (&[13, 17], &[0, 1]),
    (&[13, 17], &[]),
    (&[3, 5, 7], &[0, 2]),
    (&[3, 5, 7], &[1]),
    (&[2, 3, 4, 5], &[3, 1]),
    (&[], &[]),
    (&[0, 5], &[1]),
    (&[0, 5], &[0]),
    (&[65, 33], &[1]),
    (&[1, 1, 31], &[2, 0]),
];

/// Data with ties for max and min (to test tie handling), plain uniform otherwise.
fn input(op: ReduceOp, seed: u64, dims: &[usize]) -> Array {
    match op {
        ReduceOp::Max | ReduceOp::Min => quantized(seed, dims, 3, 0.5),
        _ => uniform(seed, dims, -1.0, 1.0),
    }
}

/// Max and min of an empty group are errors (tested in `errors`), not values.
fn defined(op: ReduceOp, dims: &[usize], axes: &[usize]) -> bool {
    let empty_group = axes.iter().any(|&a| dims[a] == 0);
    let empty_output = reference::keepdims(dims, axes).contains(&0);
    !(matches!(op, ReduceOp::Max | ReduceOp::Min) && empty_group && !empty_output)
}

/// The output dims of case `i`: alternately keepdims and squeezed.
fn output_dims(i: usize, dims: &[usize], axes: &[usize]) -> Vec<usize> {
    if i.is_multiple_of(2) {
        reference::keepdims(dims, axes)
    } else {
        reference::squeezed(dims, axes)
    }
}

fn cases() -> impl Iterator<Item = (ReduceOp, usize, &'static [usize], &'static [usize])> {
    OPS.into_iter().flat_map(|op| {
        CASES
            .iter()
            .enumerate()
            .filter(move |(_, (d, a))| defined(op, d, a))
            .map(move |(i, &(d, a))| (op, i, d, a))
    })
}

/// `ops::reduce` for every op and axis set.
pub fn reduce(be: &dyn Backend) -> Result<(), String> {
    every_case(cases(), |(op, i, dims, axes)| {
        let out_dims = output_dims(i, dims, axes);
        let what = format!(
            "{} {dims:?} over axes {axes:?} into {out_dims:?}",
            op.name()
        );
        let x = input(op, i as u64, dims);
        let tx = put(be, &what, &x)?;
        let mut ty = zeros(be, &what, &out_dims, DType::F32)?;
        ops::reduce(be, op, &tx, axes, &mut ty).context(&what)?;
        let expected = reference::reduce(op, &x, axes);
        close(
            &what,
            &out_dims,
            &expected.data,
            &get(be, &what, &ty)?,
            Tolerance::REDUCTION,
        )
    })
}

/// `ops::reduce_backward` for every op and axis set; max and min split the
/// gradient evenly between ties.
pub fn reduce_backward(be: &dyn Backend) -> Result<(), String> {
    every_case(cases(), |(op, i, dims, axes)| {
        let out_dims = output_dims(i, dims, axes);
        let what = format!(
            "{}_backward {dims:?} over axes {axes:?} from {out_dims:?}",
            op.name()
        );
        let x = input(op, i as u64 + 50, dims);
        let y = reference::reduce(op, &x, axes).reshaped(out_dims.clone());
        let dy = uniform(i as u64 + 60, &out_dims, -1.0, 1.0);
        let (tx, ty, tdy) = (
            put(be, &what, &x)?,
            put(be, &what, &y)?,
            put(be, &what, &dy)?,
        );
        let mut tdx = zeros(be, &what, dims, DType::F32)?;
        ops::reduce_backward(be, op, &tx, axes, &ty, &tdy, &mut tdx).context(&what)?;
        let expected = reference::reduce_backward(op, &x, axes, &dy.data);
        close(
            &what,
            dims,
            &expected.data,
            &get(be, &what, &tdx)?,
            Tolerance::REDUCTION,
        )
    })
}

/// `ops::argmax` on data full of ties: the first maximum wins.
pub fn argmax(be: &dyn Backend) -> Result<(), String> {
    let cases: [(&[usize], usize); 8] = [
        (&[7], 0),
        (&[13, 17], 1),
        (&[13, 17], 0),
        (&[3, 5, 7], 1),
        (&[0, 4], 1),
        (&[4, 0, 3], 0),
        (&[65, 33], 1),
        (&[1], 0),
    ];
    every_case(cases.into_iter().enumerate(), |(i, (dims, axis))| {
        let what = format!("argmax {dims:?} along axis {axis}");
        let x = quantized(i as u64, dims, 2, 1.0);
        let (out_dims, expected) = reference::argmax(&x, axis);
        let tx = put(be, &what, &x)?;
        let mut ty = put_vec(be, &what, &out_dims, vec![-1i64; expected.len()])?;
        ops::argmax(be, &tx, axis, &mut ty).context(&what)?;
        equal(&what, &out_dims, &expected, &get::<i64>(be, &what, &ty)?)
    })
}
