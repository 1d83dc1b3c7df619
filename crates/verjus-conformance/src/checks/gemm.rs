//! Check of batched GEMM with every transpose combination, several `alpha` and
//! `beta`, shared operands, empty dimensions and an empty batch; and of the
//! same products from bfloat16 and float16 operands.
//! Tolerance: `Tolerance::GEMM` (inner lengths up to 65).

use crate::array::Array;
use crate::compare::{close, every_case, Tolerance};
use crate::inputs::uniform;
use crate::reference::gemm::gemm as reference;
use crate::reference::memory::cast;
use crate::transfer::{get, put, Context};
use verjus_core::ops::{self, GemmSpec};
use verjus_core::{Backend, DType, HostData, Tensor};

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
    every_case(cases, |(seed, case, t, s)| {
        check(be, DType::F32, seed, case, t, s)
    })
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
    every_case(cases, |(dtype, seed, case, t, s)| {
        check(be, dtype, seed, case, t, s)
    })
}

/// One case: `A` and `B` of `dtype` (their values rounded to it), `C` float32.
fn check(
    be: &dyn Backend,
    dtype: DType,
    seed: u64,
    (a_batch, b_batch, m, n, k): Case,
    (trans_a, trans_b): (bool, bool),
    (alpha, beta): (f32, f32),
) -> Result<(), String> {
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
        "gemm {dtype} A {:?} B {:?} trans_a={trans_a} trans_b={trans_b} alpha={alpha} beta={beta}",
        a.dims, b.dims
    );
    let (a, ta) = as_dtype(be, &what, a, dtype)?;
    let (b, tb) = as_dtype(be, &what, b, dtype)?;
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
}

/// `a` uploaded as `dtype`, and the values the backend then holds (`a`'s,
/// rounded to `dtype`) for the reference.
fn as_dtype(
    be: &dyn Backend,
    what: &str,
    a: Array,
    dtype: DType,
) -> Result<(Array, Tensor), String> {
    let narrow = cast(&HostData::F32(a.data), dtype);
    let HostData::F32(values) = cast(&narrow, DType::F32) else {
        unreachable!("a cast to float32 gives float32")
    };
    let tensor = super::memory::upload(be, what, &a.dims, narrow)?;
    Ok((Array::new(a.dims, values), tensor))
}
