//! Gradient checks of max and average pooling.

use super::{check_input, weighted_sum};
use crate::array::Array;
use crate::compare::every_case;
use crate::inputs::{distinct, uniform};
use crate::reference::pool::output_dims;
use crate::transfer::{put, zeros, Context};
use verjus_core::ops::{self, Pool2dParams, PoolKind};
use verjus_core::{Backend, DType, Tensor};

fn run(be: &dyn Backend, kind: PoolKind) -> Result<(), String> {
    let cases: [([usize; 4], Pool2dParams); 2] = [
        (
            [2, 2, 5, 6],
            Pool2dParams {
                kernel: [3, 3],
                stride: [2, 2],
                padding: [1, 1],
            },
        ),
        (
            [1, 1, 4, 4],
            Pool2dParams {
                kernel: [2, 2],
                stride: [1, 1],
                padding: [0, 0],
            },
        ),
    ];
    every_case(cases, |(dims, p)| {
        let what = format!("gradcheck {kind:?} pool2d x {dims:?} {p:?}");
        let y_dims = output_dims(&dims, p);
        // Distinct values 0.05 apart: a step never changes which element is the maximum.
        let x = distinct(14, &dims, 0.05);
        let r = uniform(15, &y_dims, -1.0, 1.0);
        let forward = |x: &Array| -> Result<(Tensor, Tensor), String> {
            let tx = put(be, &what, x)?;
            let mut ty = zeros(be, &what, &y_dims, DType::F32)?;
            ops::pool2d(be, kind, &tx, p, &mut ty).context(&what)?;
            Ok((tx, ty))
        };
        let (tx, ty) = forward(&x)?;
        let tr = put(be, &what, &r)?;
        let mut tdx = zeros(be, &what, &dims, DType::F32)?;
        ops::pool2d_backward(be, kind, &tx, &ty, &tr, p, &mut tdx).context(&what)?;
        check_input(be, &what, &x, &tdx, |v| {
            weighted_sum(be, &what, &forward(v)?.1, &r)
        })
    })
}

/// `pool2d_backward` against differences of max pooling.
pub fn max_pool2d(be: &dyn Backend) -> Result<(), String> {
    run(be, PoolKind::Max)
}

/// `pool2d_backward` against differences of average pooling.
pub fn avg_pool2d(be: &dyn Backend) -> Result<(), String> {
    run(be, PoolKind::Avg)
}
