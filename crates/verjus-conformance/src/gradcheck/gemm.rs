//! Gradient check of GEMM, with the gradients themselves computed by `ops::gemm`
//! (the way the autograd tape computes them):
//!
//! - `dA = alpha * dC @ op(B)^T` (stored transposed when `trans_a`: `op(B) @ dC^T`);
//! - `dB = alpha * op(A)^T @ dC` (stored transposed when `trans_b`: `dC^T @ op(A)`).
//!
//! With a shared (unbatched) `B`, its gradient sums over the batch; for an
//! untransposed `A` that is one product of `A` and `dC` with the batch folded
//! into the rows.

use super::{check_input, weighted_sum};
use crate::array::{numel, Array};
use crate::compare::every_case;
use crate::inputs::uniform;
use crate::transfer::{put, zeros, Context};
use verjus_core::ops::{self, GemmSpec};
use verjus_core::{Backend, DType, Tensor};

const ALPHA: f32 = 1.5;

fn dims(batch: &[usize], rows: usize, cols: usize, trans: bool) -> Vec<usize> {
    let mut d = batch.to_vec();
    d.extend(if trans { [cols, rows] } else { [rows, cols] });
    d
}

fn spec(trans_a: bool, trans_b: bool) -> GemmSpec {
    GemmSpec {
        trans_a,
        trans_b,
        alpha: ALPHA,
        beta: 0.0,
    }
}

/// `out = gemm(x, y, spec)` on fresh tensors.
fn product(
    be: &dyn Backend,
    what: &str,
    x: &Tensor,
    y: &Tensor,
    s: GemmSpec,
    out: &[usize],
) -> Result<Tensor, String> {
    let mut t = zeros(be, what, out, DType::F32)?;
    ops::gemm(be, x, y, &mut t, s).context(what)?;
    Ok(t)
}

/// Gradients of `A` and `B` through GEMM against differences of GEMM, for every
/// transpose combination, unbatched, batched, and with a shared `B`.
pub fn gemm(be: &dyn Backend) -> Result<(), String> {
    let (m, n, k) = (3, 4, 5);
    let layouts: [(&[usize], &[usize]); 3] = [(&[], &[]), (&[2], &[2]), (&[3], &[])];
    let cases = layouts
        .into_iter()
        .flat_map(|l| [(false, false), (true, false), (false, true), (true, true)].map(|t| (l, t)));
    // A shared B's gradient needs A's batch folded into its rows: only untransposed A.
    let cases = cases.filter(|((a_batch, b_batch), (ta, _))| {
        !(b_batch.is_empty() && !a_batch.is_empty() && *ta)
    });
    every_case(cases, |((a_batch, b_batch), (ta, tb))| {
        let what =
            format!("gradcheck gemm batch A {a_batch:?} B {b_batch:?} trans_a={ta} trans_b={tb}");
        let a = uniform(28, &dims(a_batch, m, k, ta), -1.0, 1.0);
        let b = uniform(29, &dims(b_batch, k, n, tb), -1.0, 1.0);
        let c_dims = dims(a_batch, m, n, false);
        let r = uniform(30, &c_dims, -1.0, 1.0);
        let loss = |a: &Array, b: &Array| {
            let (x, y) = (put(be, &what, a)?, put(be, &what, b)?);
            weighted_sum(
                be,
                &what,
                &product(be, &what, &x, &y, spec(ta, tb), &c_dims)?,
                &r,
            )
        };
        let (tb_, tr) = (put(be, &what, &b)?, put(be, &what, &r)?);
        let da = if ta {
            product(be, &what, &tb_, &tr, spec(tb, true), &a.dims)?
        } else {
            product(be, &what, &tr, &tb_, spec(false, !tb), &a.dims)?
        };
        // Fold the batch into the rows when B is shared (A is untransposed then).
        let (a_fold, r_fold) = if b_batch.is_empty() && !a_batch.is_empty() {
            let rows = numel(a_batch) * m;
            (a.clone().reshaped([rows, k]), r.clone().reshaped([rows, n]))
        } else {
            (a.clone(), r.clone())
        };
        let (ta_, tr_) = (put(be, &what, &a_fold)?, put(be, &what, &r_fold)?);
        let db = if tb {
            product(be, &what, &tr_, &ta_, spec(true, ta), &b.dims)?
        } else {
            product(be, &what, &ta_, &tr_, spec(!ta, false), &b.dims)?
        };
        check_input(be, &format!("{what}: dA"), &a, &da, |v| loss(v, &b))?;
        check_input(be, &format!("{what}: dB"), &b, &db, |v| loss(&a, v))
    })
}
