//! Checks of concat and split along any axis, with single parts, empty parts and
//! an empty outer extent. Tolerance: exact.

use crate::array::Array;
use crate::compare::{close, every_case, Tolerance};
use crate::inputs::uniform;
use crate::reference::concat as reference;
use crate::transfer::{get, put, zeros, Context};
use verjus_core::{ops, Backend, DType, Tensor};

/// `(part dims, axis)`.
const CASES: [(&[&[usize]], usize); 7] = [
    (&[&[2, 3], &[2, 5]], 1),
    (&[&[1, 7], &[13, 7], &[0, 7]], 0),
    (&[&[3, 1, 2], &[3, 4, 2], &[3, 2, 2]], 1),
    (&[&[17]], 0),
    (&[&[2, 3, 0], &[2, 3, 4]], 2),
    (&[&[0, 5], &[0, 5]], 1),
    (&[&[5, 31], &[5, 33], &[5, 1]], 1),
];

fn parts(seed: u64, dims: &[&[usize]]) -> Vec<Array> {
    dims.iter()
        .enumerate()
        .map(|(j, d)| uniform(seed + j as u64, d, -1.0, 1.0))
        .collect()
}

/// `ops::concat`.
pub fn concat(be: &dyn Backend) -> Result<(), String> {
    every_case(CASES.into_iter().enumerate(), |(i, (dims, axis))| {
        let what = format!("concat {dims:?} along axis {axis}");
        let ps = parts(i as u64 * 10, dims);
        let expected = reference::concat(&ps.iter().collect::<Vec<_>>(), axis);
        let tensors = ps
            .iter()
            .map(|p| put(be, &what, p))
            .collect::<Result<Vec<_>, _>>()?;
        let refs: Vec<&Tensor> = tensors.iter().collect();
        let mut ty = zeros(be, &what, &expected.dims, DType::F32)?;
        ops::concat(be, &refs, axis, &mut ty).context(&what)?;
        close(
            &what,
            &expected.dims,
            &expected.data,
            &get(be, &what, &ty)?,
            Tolerance::EXACT,
        )
    })
}

/// `ops::split`.
pub fn split(be: &dyn Backend) -> Result<(), String> {
    every_case(CASES.into_iter().enumerate(), |(i, (dims, axis))| {
        let what = format!("split into {dims:?} along axis {axis}");
        let whole = reference::concat(
            &parts(i as u64 * 10 + 5, dims).iter().collect::<Vec<_>>(),
            axis,
        );
        let sizes: Vec<usize> = dims.iter().map(|d| d[axis]).collect();
        let expected = reference::split(&whole, axis, &sizes);
        let tx = put(be, &what, &whole)?;
        let mut outs = dims
            .iter()
            .map(|d| zeros(be, &what, d, DType::F32))
            .collect::<Result<Vec<_>, _>>()?;
        let mut refs: Vec<&mut Tensor> = outs.iter_mut().collect();
        ops::split(be, &tx, axis, &mut refs).context(&what)?;
        for (j, (e, t)) in expected.iter().zip(&outs).enumerate() {
            close(
                &format!("{what}, part {j}"),
                &e.dims,
                &e.data,
                &get(be, &what, t)?,
                Tolerance::EXACT,
            )?;
        }
        Ok(())
    })
}
