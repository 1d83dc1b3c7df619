//! Checks of max and average pooling and their gradients, with padding, uneven
//! strides, ties (first maximum wins) and all-negative inputs (padding is not a
//! zero element of a max window). Tolerance: `Tolerance::REDUCTION`.

use crate::array::Array;
use crate::compare::{close, every_case, Tolerance};
use crate::inputs::{quantized, uniform};
use crate::reference::pool as reference;
use crate::transfer::{get, put, zeros, Context};
use verjus_core::ops::{self, Pool2dParams, PoolKind};
use verjus_core::{Backend, DType};

const fn params(kernel: [usize; 2], stride: [usize; 2], padding: [usize; 2]) -> Pool2dParams {
    Pool2dParams {
        kernel,
        stride,
        padding,
    }
}

const CASES: [([usize; 4], Pool2dParams); 8] = [
    ([1, 1, 1, 1], params([1, 1], [1, 1], [0, 0])),
    ([2, 3, 7, 13], params([2, 2], [2, 2], [0, 0])),
    ([1, 2, 17, 9], params([3, 3], [2, 2], [1, 1])),
    ([0, 3, 5, 5], params([2, 2], [1, 1], [1, 1])),
    ([1, 1, 33, 5], params([3, 2], [1, 2], [1, 1])),
    ([2, 1, 4, 4], params([4, 4], [4, 4], [0, 0])),
    ([1, 3, 13, 31], params([2, 3], [3, 1], [1, 0])),
    ([1, 1, 65, 2], params([5, 1], [4, 1], [2, 0])),
];

/// Ties for max pooling, shifted below zero in every other case.
fn input(kind: PoolKind, i: usize, dims: &[usize]) -> Array {
    match kind {
        PoolKind::Max => {
            let mut x = quantized(i as u64, dims, 2, 0.5);
            if i % 2 == 1 {
                x.data.iter_mut().for_each(|v| *v -= 3.0);
            }
            x
        }
        PoolKind::Avg => uniform(i as u64, dims, -1.0, 1.0),
    }
}

fn forward(be: &dyn Backend, kind: PoolKind) -> Result<(), String> {
    every_case(CASES.into_iter().enumerate(), |(i, (dims, p))| {
        let what = format!("{kind:?} pool2d x {dims:?} {p:?}");
        let x = input(kind, i, &dims);
        let expected = reference::pool2d(kind, &x, p);
        let tx = put(be, &what, &x)?;
        let mut ty = zeros(be, &what, &expected.dims, DType::F32)?;
        ops::pool2d(be, kind, &tx, p, &mut ty).context(&what)?;
        close(
            &what,
            &expected.dims,
            &expected.data,
            &get(be, &what, &ty)?,
            Tolerance::REDUCTION,
        )
    })
}

fn backward(be: &dyn Backend, kind: PoolKind) -> Result<(), String> {
    every_case(CASES.into_iter().enumerate(), |(i, (dims, p))| {
        let what = format!("{kind:?} pool2d_backward x {dims:?} {p:?}");
        let x = input(kind, i + 20, &dims);
        let y = reference::pool2d(kind, &x, p);
        let dy = uniform(i as u64 + 40, &y.dims, -1.0, 1.0);
        let (tx, ty, tdy) = (
            put(be, &what, &x)?,
            put(be, &what, &y)?,
            put(be, &what, &dy)?,
        );
        let mut tdx = zeros(be, &what, &dims, DType::F32)?;
        ops::pool2d_backward(be, kind, &tx, &ty, &tdy, p, &mut tdx).context(&what)?;
        let expected = reference::pool2d_backward(kind, &x, &dy, p);
        close(
            &what,
            &dims,
            &expected.data,
            &get(be, &what, &tdx)?,
            Tolerance::REDUCTION,
        )
    })
}

/// `ops::pool2d` with `PoolKind::Max`.
pub fn max_pool2d(be: &dyn Backend) -> Result<(), String> {
    forward(be, PoolKind::Max)
}

/// `ops::pool2d` with `PoolKind::Avg` (padding counts in the divisor).
pub fn avg_pool2d(be: &dyn Backend) -> Result<(), String> {
    forward(be, PoolKind::Avg)
}

/// `ops::pool2d_backward` with `PoolKind::Max`: each window's gradient to its first maximum.
pub fn max_pool2d_backward(be: &dyn Backend) -> Result<(), String> {
    backward(be, PoolKind::Max)
}

/// `ops::pool2d_backward` with `PoolKind::Avg`.
pub fn avg_pool2d_backward(be: &dyn Backend) -> Result<(), String> {
    backward(be, PoolKind::Avg)
}
