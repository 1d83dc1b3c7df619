//! Gradient checks of the linear data-movement ops, each against the op that is
//! documented as its backward: dropout (same mask), index_select (index_add),
//! concat (split) and permute (the inverse permutation).

use super::{check_input, weighted_sum};
use crate::array::Array;
use crate::compare::every_case;
use crate::inputs::uniform;
use crate::transfer::{put, put_int, zeros, Context};
use verjus_core::ops::{self, PermutePlan};
use verjus_core::{Backend, DType, Shape, Tensor};

/// `dropout_backward` against differences of `dropout` (same seed and offset).
pub fn dropout(be: &dyn Backend) -> Result<(), String> {
    let (dims, p, seed, offset) = ([5, 7], 0.3, 5, 9);
    let what = format!("gradcheck dropout {dims:?} p={p}");
    let x = uniform(16, &dims, -1.0, 1.0);
    let r = uniform(17, &dims, -1.0, 1.0);
    let tr = put(be, &what, &r)?;
    let mut tdx = zeros(be, &what, &dims, DType::F32)?;
    ops::dropout_backward(be, &tr, p, seed, offset, &mut tdx).context(&what)?;
    check_input(be, &what, &x, &tdx, |v| {
        let tx = put(be, &what, v)?;
        let mut ty = zeros(be, &what, &dims, DType::F32)?;
        ops::dropout(be, &tx, p, seed, offset, &mut ty).context(&what)?;
        weighted_sum(be, &what, &ty, &r)
    })
}

/// `index_add` into zeros against differences of `index_select`, with repeated indices.
pub fn index_select(be: &dyn Backend) -> Result<(), String> {
    let cases: [(&[usize], usize, &[i64], DType); 2] = [
        (&[5, 3], 0, &[4, 0, 4, 2, 0], DType::I64),
        (&[2, 4, 3], 1, &[3, 3, 1], DType::I32),
    ];
    every_case(cases, |(dims, axis, idx, dtype)| {
        let what = format!("gradcheck index_select {dims:?} axis {axis} indices {idx:?}");
        let mut y_dims = dims.to_vec();
        y_dims[axis] = idx.len();
        let x = uniform(18, dims, -1.0, 1.0);
        let r = uniform(19, &y_dims, -1.0, 1.0);
        let ti = put_int(be, &what, idx, dtype)?;
        let tr = put(be, &what, &r)?;
        let mut tdx = zeros(be, &what, dims, DType::F32)?;
        ops::index_add(be, &tr, axis, &ti, &mut tdx).context(&what)?;
        check_input(be, &what, &x, &tdx, |v| {
            let tx = put(be, &what, v)?;
            let mut ty = zeros(be, &what, &y_dims, DType::F32)?;
            ops::index_select(be, &tx, axis, &ti, &mut ty).context(&what)?;
            weighted_sum(be, &what, &ty, &r)
        })
    })
}

/// `split` of `dy` against differences of `concat`, for every part.
pub fn concat(be: &dyn Backend) -> Result<(), String> {
    let (axis, part_dims): (usize, [&[usize]; 3]) = (1, [&[2, 3], &[2, 1], &[2, 2]]);
    let what = format!("gradcheck concat {part_dims:?} along axis {axis}");
    let parts: Vec<Array> = part_dims
        .iter()
        .enumerate()
        .map(|(j, d)| uniform(20 + j as u64, d, -1.0, 1.0))
        .collect();
    let r = uniform(23, &[2, 6], -1.0, 1.0);
    let loss = |parts: &[Array]| {
        let ts = parts
            .iter()
            .map(|p| put(be, &what, p))
            .collect::<Result<Vec<_>, _>>()?;
        let refs: Vec<&Tensor> = ts.iter().collect();
        let mut ty = zeros(be, &what, &[2, 6], DType::F32)?;
        ops::concat(be, &refs, axis, &mut ty).context(&what)?;
        weighted_sum(be, &what, &ty, &r)
    };
    let tr = put(be, &what, &r)?;
    let mut grads = part_dims
        .iter()
        .map(|d| zeros(be, &what, d, DType::F32))
        .collect::<Result<Vec<_>, _>>()?;
    let mut refs: Vec<&mut Tensor> = grads.iter_mut().collect();
    ops::split(be, &tr, axis, &mut refs).context(&what)?;
    every_case(0..parts.len(), |j| {
        check_input(
            be,
            &format!("{what}: part {j}"),
            &parts[j],
            &grads[j],
            |v| {
                let mut probe = parts.clone();
                probe[j] = v.clone();
                loss(&probe)
            },
        )
    })
}

/// `permute` by the inverse permutation against differences of `permute`.
pub fn permute(be: &dyn Backend) -> Result<(), String> {
    let (dims, perm) = ([2, 3, 4], [2, 0, 1]);
    let what = format!("gradcheck permute {dims:?} by {perm:?}");
    let plan = PermutePlan::new(&Shape::new(dims).context(&what)?, &perm).context(&what)?;
    let y_dims = plan.output.dims().to_vec();
    let x = uniform(24, &dims, -1.0, 1.0);
    let r = uniform(25, &y_dims, -1.0, 1.0);
    let tr = put(be, &what, &r)?;
    let mut tdx = zeros(be, &what, &dims, DType::F32)?;
    ops::permute(be, &tr, &plan.inverse(), &mut tdx).context(&what)?;
    check_input(be, &what, &x, &tdx, |v| {
        let tx = put(be, &what, v)?;
        let mut ty = zeros(be, &what, &y_dims, DType::F32)?;
        ops::permute(be, &tx, &perm, &mut ty).context(&what)?;
        weighted_sum(be, &what, &ty, &r)
    })
}
