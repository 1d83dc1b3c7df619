//! Check of select (`where`) with broadcasting of all three operands, empty
//! and rank-0 shapes, and infinities in the operands. Tolerance: exact (it
//! copies values).

use crate::compare::{equal, every_case};
use crate::inputs::{quantized, uniform};
use crate::reference::elementwise as reference;
use crate::transfer::{get, put, zeros, Context};
use verjus_core::{ops, Backend, DType};

/// (cond, x, y) dims.
const CASES: [(&[usize], &[usize], &[usize]); 7] = [
    (&[], &[], &[]),
    (&[7], &[7], &[7]),
    (&[2, 1], &[2, 3], &[]),
    (&[1, 17], &[33, 1], &[33, 17]),
    (&[0, 3], &[3], &[1]),
    (&[2, 3, 5], &[5], &[3, 1]),
    (&[13], &[2, 13], &[2, 1]),
];

/// `ops::select` against the reference.
pub fn select(be: &dyn Backend) -> Result<(), String> {
    every_case(CASES.iter().enumerate(), |(k, &(c, x, y))| {
        let what = format!("select cond {c:?}, x {x:?}, y {y:?}");
        // A condition of -1, 0 or 1 (nonzero is true), x with an infinity.
        let cond = quantized(k as u64, c, 1, 1.0);
        let mut xa = uniform(k as u64 + 10, x, -1.0, 1.0);
        if let Some(v) = xa.data.first_mut() {
            *v = f32::INFINITY;
        }
        let ya = uniform(k as u64 + 20, y, -1.0, 1.0);
        let expected = reference::select(&cond, &xa, &ya);
        let (tc, tx, ty) = (
            put(be, &what, &cond)?,
            put(be, &what, &xa)?,
            put(be, &what, &ya)?,
        );
        let mut out = zeros(be, &what, &expected.dims, DType::F32)?;
        ops::select(be, &tc, &tx, &ty, &mut out).context(&what)?;
        equal(
            &what,
            &expected.dims,
            &expected.data,
            &get::<f32>(be, &what, &out)?,
        )
    })
}
