//! Check of permute for every dtype, ranks 0 to 5, and empty axes. Tolerance: exact.

use crate::compare::{equal, every_case};
use crate::reference::permute::permute as reference;
use crate::transfer::{get, put_vec, zeros, Context};
use verjus_core::{ops, Backend, DType, Element};

const CASES: [(&[usize], &[usize]); 8] = [
    (&[], &[]),
    (&[7], &[0]),
    (&[2, 3, 5], &[2, 0, 1]),
    (&[13, 1, 17], &[1, 2, 0]),
    (&[2, 3, 4, 5], &[3, 1, 0, 2]),
    (&[0, 3], &[1, 0]),
    (&[33, 17], &[1, 0]),
    (&[2, 3, 2, 3, 2], &[4, 2, 0, 3, 1]),
];

fn one<T: Element>(
    be: &dyn Backend,
    dims: &[usize],
    perm: &[usize],
    data: Vec<T>,
) -> Result<(), String> {
    let what = format!("permute {} {dims:?} by {perm:?}", T::DTYPE);
    let (out_dims, expected) = reference(dims, &data, perm);
    let tx = put_vec(be, &what, dims, data)?;
    let mut ty = zeros(be, &what, &out_dims, T::DTYPE)?;
    ops::permute(be, &tx, perm, &mut ty).context(&what)?;
    equal(&what, &out_dims, &expected, &get::<T>(be, &what, &ty)?)
}

/// `ops::permute` on float32, int64 and int32 data.
pub fn permute(be: &dyn Backend) -> Result<(), String> {
    let cases = CASES
        .iter()
        .flat_map(|&c| [DType::F32, DType::I64, DType::I32].map(|d| (c, d)));
    every_case(cases, |((dims, perm), dtype)| {
        let n = crate::array::numel(dims);
        match dtype {
            DType::I64 => one(be, dims, perm, (0..n as i64).map(|v| v * 3 - 7).collect()),
            DType::I32 => one(be, dims, perm, (0..n as i32).map(|v| 5 - v).collect()),
            _ => one(
                be,
                dims,
                perm,
                crate::inputs::uniform(n as u64, dims, -1.0, 1.0).data,
            ),
        }
    })
}
