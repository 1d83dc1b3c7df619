//! Check of batched GEMM with every transpose combination, several `alpha` and
//! `beta`, shared operands, empty dimensions and an empty batch; and of the
//! same products from bfloat16 and float16 operands.
//! Tolerance: `Tolerance::GEMM` (inner lengths up to 65).

use crate::array::Array;
use crate::compare::{close, every_case, Tolerance};
use crate::inputs::uniform;
use crate::reference::gemm::gemm as reference;
use crate::transfer::{get, put, put_vec, Context};
use verjus_core::ops::{self, GemmSpec};
use verjus_core::{Backend, DType, HostData};

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

/// `ops::gemm` of bfloat16 and float16 operands into a float32 `C`: the
/// reference's product of their (exactly widened) values, within the float32
/// tolerance (the products of two reduced values are exact in float32, so only
/// the order of the sums differs).
pub fn gemm_reduced_precision(be: &dyn Backend) -> Result<(), String> {
    let cases = [DType::BF16, DType::F16].into_iter().flat_map(|dtype| {
        CASES.iter().enumerate().flat_map(move |(i, &case)| {
            [(false, false), (true, true)]
                .into_iter()
                .flat_map(move |t| {
                    SCALARS[..2]
                        .iter()
                        .map(move |&s| (dtype, i as u64, case, t, s))
                })
        })
    });
    every_case(
        cases,
        |(dtype, seed, (a_batch, b_batch, m, n, k), (trans_a, trans_b), (alpha, beta))| {
            let spec = GemmSpec {
                trans_a,
                trans_b,
                alpha,
                beta,
            };
            let reduced = |a: Array| -> (Array, HostData) {
                let narrow = crate::reference::memory::cast(&HostData::F32(a.data.clone()), dtype);
                let HostData::F32(wide) = crate::reference::memory::cast(&narrow, DType::F32)
                else {
                    unreachable!("a cast to float32 gives float32")
                };
                (Array::new(a.dims, wide), narrow)
            };
            let (a, a_narrow) = reduced(uniform(
                seed,
                &matrix_dims(a_batch, m, k, trans_a),
                -1.0,
                1.0,
            ));
            let (b, b_narrow) = reduced(uniform(
                seed + 100,
                &matrix_dims(b_batch, k, n, trans_b),
                -1.0,
                1.0,
            ));
            let batch = if a_batch.is_empty() { b_batch } else { a_batch };
            let c_dims = matrix_dims(batch, m, n, false);
            let c0 = uniform(seed + 200, &c_dims, -1.0, 1.0);
            let what = format!(
                "gemm {dtype} A {:?} B {:?} trans_a={trans_a} trans_b={trans_b} alpha={alpha} beta={beta}",
                a.dims, b.dims
            );
            let upload = |dims: &[usize], data: HostData| match data {
                HostData::BF16(v) => put_vec(be, &what, dims, v),
                HostData::F16(v) => put_vec(be, &what, dims, v),
                other => Err(format!("{what}: {} is not reduced", other.dtype())),
            };
            let (ta, tb) = (upload(&a.dims, a_narrow)?, upload(&b.dims, b_narrow)?);
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
