//! Check of batched GEMM with every transpose combination, several `alpha` and
//! `beta`, shared operands, empty dimensions and an empty batch.
//! Tolerance: `Tolerance::GEMM` (inner lengths up to 65).

use crate::array::Array;
use crate::compare::{close, every_case, Tolerance};
use crate::inputs::uniform;
use crate::reference::gemm::gemm as reference;
use crate::transfer::{get, put, Context};
use verjus_core::ops::{self, GemmSpec};
use verjus_core::Backend;

/// `(batch axes of A, batch axes of B, m, n, k)`.
type Case = (&'static [usize], &'static [usize], usize, usize, usize);

const CASES: [Case; 13] = [
    (&[], &[], 1, 1, 1),
    (&[], &[], 7, 13, 31),
    (&[], &[], 17, 33, 65),
    (&[], &[], 65, 17, 33),
    (&[], &[], 0, 5, 3),
    (&[], &[], 4, 0, 3),
    (&[], &[], 3, 5, 0),
    (&[2, 3], &[2, 3], 7, 5, 13),
    (&[3], &[], 5, 17, 7),
    (&[], &[4], 13, 3, 9),
    (&[0], &[0], 3, 4, 5),
    (&[0], &[], 3, 4, 5),
    (&[2], &[2], 31, 1, 1),
];

/// `(alpha, beta)`: overwrite, accumulate, and general scalars.
const SCALARS: [(f32, f32); 3] = [(1.0, 0.0), (0.5, 1.0), (-2.0, 0.25)];

fn matrix_dims(batch: &[usize], rows: usize, cols: usize, trans: bool) -> Vec<usize> {
    let mut d = batch.to_vec();
    d.extend(if trans { [cols, rows] } else { [rows, cols] });
    d
}

/// `ops::gemm` against the reference. With `beta = 0`, `C` starts as NaN and must
/// be overwritten, not scaled.
pub fn gemm(be: &dyn Backend) -> Result<(), String> {
    let cases = CASES.iter().enumerate().flat_map(|(i, &case)| {
        [(false, false), (true, false), (false, true), (true, true)]
            .into_iter()
            .flat_map(move |t| SCALARS.into_iter().map(move |s| (i as u64, case, t, s)))
    });
    every_case(
        cases,
        |(seed, (a_batch, b_batch, m, n, k), (trans_a, trans_b), (alpha, beta))| {
            let spec = GemmSpec {
                trans_a,
                trans_b,
                alpha,
                beta,
            };
            let a = uniform(seed, &matrix_dims(a_batch, m, k, trans_a), -1.0, 1.0);
            let b = uniform(seed + 100, &matrix_dims(b_batch, k, n, trans_b), -1.0, 1.0);
            let batch = if a_batch.is_empty() { b_batch } else { a_batch };
            let c_dims = matrix_dims(batch, m, n, false);
            let c0 = if beta == 0.0 {
                Array::new(c_dims.clone(), vec![f32::NAN; crate::array::numel(&c_dims)])
            } else {
                uniform(seed + 200, &c_dims, -1.0, 1.0)
            };
            let what = format!(
                "gemm A {:?} B {:?} trans_a={trans_a} trans_b={trans_b} alpha={alpha} beta={beta}",
                a.dims, b.dims
            );
            let (ta, tb) = (put(be, &what, &a)?, put(be, &what, &b)?);
            let mut tc = put(be, &what, &c0)?;
            ops::gemm(be, &ta, &tb, &mut tc, spec).context(&what)?;
            let expected = reference(&a, &b, &c0, spec);
            close(
                &what,
                &c_dims,
                &expected.data,
                &get(be, &what, &tc)?,
                Tolerance::GEMM,
            )
        },
    )
}
