//! Checks of index_select and index_add along any axis, with int64 and int32
//! indices, repeated indices and empty index lists. Tolerance: exact for the
//! gather; `Tolerance::ELEMENTWISE` for the scatter-add (repeated indices may add
//! in any order).

use crate::compare::{close, every_case, Tolerance};
use crate::inputs::{indices, uniform};
use crate::reference::index as reference;
use crate::transfer::{get, put, put_int, Context};
use verjus_core::{ops, Backend, DType};

/// `(source dims, axis, indices, index dtype)`.
fn cases() -> Vec<(Vec<usize>, usize, Vec<i64>, DType)> {
    vec![
        (vec![5, 7], 0, vec![4, 0, 4, 2], DType::I64),
        (vec![3, 13, 2], 1, indices(1, 17, 13), DType::I32),
        (vec![7], 0, vec![], DType::I64),
        (vec![0, 4], 1, vec![3, 1], DType::I64),
        (vec![31, 33], 1, indices(2, 65, 33), DType::I64),
        (vec![2, 3, 5], 2, vec![4], DType::I32),
        (vec![1], 0, vec![0, 0, 0], DType::I64),
    ]
}

fn selected_dims(dims: &[usize], axis: usize, count: usize) -> Vec<usize> {
    let mut d = dims.to_vec();
    d[axis] = count;
    d
}

/// `ops::index_select`.
pub fn index_select(be: &dyn Backend) -> Result<(), String> {
    every_case(
        cases().into_iter().enumerate(),
        |(i, (dims, axis, idx, dtype))| {
            let what = format!("index_select x {dims:?} axis {axis} {dtype} indices {idx:?}");
            let x = uniform(i as u64, &dims, -1.0, 1.0);
            let expected = reference::index_select(&x, axis, &idx);
            let (tx, ti) = (put(be, &what, &x)?, put_int(be, &what, &idx, dtype)?);
            let mut ty = put(be, &what, &uniform(99, &expected.dims, 5.0, 6.0))?;
            ops::index_select(be, &tx, axis, &ti, &mut ty).context(&what)?;
            close(
                &what,
                &expected.dims,
                &expected.data,
                &get(be, &what, &ty)?,
                Tolerance::EXACT,
            )
        },
    )
}

/// `ops::index_add` into a non-zero destination (it accumulates).
pub fn index_add(be: &dyn Backend) -> Result<(), String> {
    every_case(
        cases().into_iter().enumerate(),
        |(i, (dims, axis, idx, dtype))| {
            let what = format!("index_add dst {dims:?} axis {axis} {dtype} indices {idx:?}");
            let dst = uniform(i as u64 + 10, &dims, -1.0, 1.0);
            let src = uniform(
                i as u64 + 20,
                &selected_dims(&dims, axis, idx.len()),
                -1.0,
                1.0,
            );
            let (tsrc, ti) = (put(be, &what, &src)?, put_int(be, &what, &idx, dtype)?);
            let mut tdst = put(be, &what, &dst)?;
            ops::index_add(be, &tsrc, axis, &ti, &mut tdst).context(&what)?;
            let expected = reference::index_add(&dst, &src, axis, &idx);
            close(
                &what,
                &dims,
                &expected.data,
                &get(be, &what, &tdst)?,
                Tolerance::ELEMENTWISE,
            )
        },
    )
}
