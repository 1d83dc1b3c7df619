//! Reference GEMM: `C = alpha * op(A) @ op(B) + beta * C`, batched.
//!
//! The last two axes are the matrix; leading axes are the batch. Either both
//! operands carry the same batch axes, or one is a plain matrix shared by every
//! batch entry. `beta == 0` overwrites `C` without reading it (BLAS semantics, so
//! a NaN in an uninitialised `C` does not leak into the result).

use crate::array::{numel, Array};
use verjus_core::ops::GemmSpec;

/// `alpha * op(a) @ op(b) + beta * c`; `c` must already have the output dims.
pub fn gemm(a: &Array, b: &Array, c: &Array, spec: GemmSpec) -> Array {
    let (ra, rb) = (a.dims.len(), b.dims.len());
    assert!(
        ra >= 2 && rb >= 2,
        "reference gemm: operands must be matrices"
    );
    let (m, k) = if spec.trans_a {
        (a.dims[ra - 1], a.dims[ra - 2])
    } else {
        (a.dims[ra - 2], a.dims[ra - 1])
    };
    let (kb, n) = if spec.trans_b {
        (b.dims[rb - 1], b.dims[rb - 2])
    } else {
        (b.dims[rb - 2], b.dims[rb - 1])
    };
    assert_eq!(k, kb, "reference gemm: inner dimensions");
    let (a_batch, b_batch) = (&a.dims[..ra - 2], &b.dims[..rb - 2]);
    let batch_dims = if a_batch.is_empty() { b_batch } else { a_batch };
    let mut out_dims = batch_dims.to_vec();
    out_dims.extend([m, n]);
    assert_eq!(c.dims, out_dims, "reference gemm: C dims");

    let a_at = |base: usize, i: usize, p: usize| {
        let idx = if spec.trans_a { p * m + i } else { i * k + p };
        f64::from(a.data[base + idx])
    };
    let b_at = |base: usize, p: usize, j: usize| {
        let idx = if spec.trans_b { j * k + p } else { p * n + j };
        f64::from(b.data[base + idx])
    };
    let mut out = c.clone();
    for batch in 0..numel(batch_dims) {
        let a_base = if a_batch.is_empty() { 0 } else { batch * m * k };
        let b_base = if b_batch.is_empty() { 0 } else { batch * k * n };
        for i in 0..m {
            for j in 0..n {
                let dot: f64 = (0..k)
                    .map(|p| a_at(a_base, i, p) * b_at(b_base, p, j))
                    .sum();
                let slot = &mut out.data[(batch * m + i) * n + j];
                let old = if spec.beta == 0.0 {
                    0.0
                } else {
                    f64::from(spec.beta) * f64::from(*slot)
                };
                *slot = (f64::from(spec.alpha) * dot + old) as f32;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(trans_a: bool, trans_b: bool, alpha: f32, beta: f32) -> GemmSpec {
        GemmSpec {
            trans_a,
            trans_b,
            alpha,
            beta,
        }
    }

    #[test]
    fn two_by_two_by_hand() {
        // [[1, 2], [3, 4]] @ [[5, 6], [7, 8]] = [[19, 22], [43, 50]].
        let a = Array::new([2, 2], vec![1.0, 2.0, 3.0, 4.0]);
        let b = Array::new([2, 2], vec![5.0, 6.0, 7.0, 8.0]);
        let c = Array::zeros([2, 2]);
        let y = gemm(&a, &b, &c, spec(false, false, 1.0, 0.0));
        assert_eq!(y.data, vec![19.0, 22.0, 43.0, 50.0]);
        // A^T @ B = [[1, 3], [2, 4]] @ B = [[26, 30], [38, 44]].
        let y = gemm(&a, &b, &c, spec(true, false, 1.0, 0.0));
        assert_eq!(y.data, vec![26.0, 30.0, 38.0, 44.0]);
        // A @ B^T = [[1*5+2*6, 1*7+2*8], [3*5+4*6, 3*7+4*8]] = [[17, 23], [39, 53]].
        let y = gemm(&a, &b, &c, spec(false, true, 1.0, 0.0));
        assert_eq!(y.data, vec![17.0, 23.0, 39.0, 53.0]);
        // A^T @ B^T = (B @ A)^T; B @ A = [[23, 34], [31, 46]].
        let y = gemm(&a, &b, &c, spec(true, true, 1.0, 0.0));
        assert_eq!(y.data, vec![23.0, 31.0, 34.0, 46.0]);
    }

    #[test]
    fn alpha_beta_and_nan_overwrite() {
        let a = Array::new([1, 2], vec![1.0, 2.0]);
        let b = Array::new([2, 1], vec![3.0, 4.0]);
        let c = Array::new([1, 1], vec![10.0]);
        // 0.5 * 11 + 2 * 10 = 25.5
        assert_eq!(gemm(&a, &b, &c, spec(false, false, 0.5, 2.0)).data, [25.5]);
        let nan = Array::new([1, 1], vec![f32::NAN]);
        assert_eq!(
            gemm(&a, &b, &nan, spec(false, false, 1.0, 0.0)).data,
            [11.0]
        );
        // k = 0: only beta * C remains.
        let e = Array::zeros([1, 0]);
        let f = Array::zeros([0, 1]);
        assert_eq!(gemm(&e, &f, &c, spec(false, false, 1.0, 0.5)).data, [5.0]);
    }

    #[test]
    fn batched_with_a_shared_operand() {
        // Two batch entries of A = [1x2] against one shared B = I.
        let a = Array::new([2, 1, 2], vec![1.0, 2.0, 3.0, 4.0]);
        let b = Array::new([2, 2], vec![0.0, 1.0, 1.0, 0.0]);
        let y = gemm(&a, &b, &Array::zeros([2, 1, 2]), GemmSpec::default());
        assert_eq!(y.data, vec![2.0, 1.0, 4.0, 3.0]);
        // Shared A against batched B.
        let y = gemm(
            &Array::new([1, 2], vec![1.0, 1.0]),
            &Array::new([3, 2, 1], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
            &Array::zeros([3, 1, 1]),
            GemmSpec::default(),
        );
        assert_eq!(y.data, vec![3.0, 7.0, 11.0]);
    }
}
