//! Softmax and log-softmax along an axis, and their gradients.
//!
//! The tensor is seen as `[outer, len, inner]`. The usual case, `inner == 1`,
//! works row by row on contiguous rows; otherwise each outer block is handled
//! column-wise with `inner`-long scratch rows, so every inner loop is still
//! contiguous. Both subtract the maximum first (numerically stable).
//!
//! `exp` dominates these kernels; they use the vectorisable [`exp`], with
//! each task's loops compiled for the CPU's vector width by [`simd`] (hence
//! the `#[inline(always)]` on the row functions).

use crate::parallel::for_rows;
use crate::reduce::{max_run, sum_run};
use crate::simd::simd;
use verjus_core::math::fast::exp;
use verjus_core::ops::AxisPlan;
use verjus_core::{Result, Tensor};

/// Relative cost of one element (an `exp` and a few operations), for the
/// parallel threshold.
const COST: usize = 4;

/// `y = softmax(x)` (or log-softmax) along the plan's axis.
pub(crate) fn softmax(plan: &AxisPlan, log: bool, x: &Tensor, y: &mut Tensor) -> Result<()> {
    let x = x.as_slice::<f32>()?;
    let y = y.as_mut_slice::<f32>()?;
    let (len, inner) = (plan.len, plan.inner);
    let block = len * inner;
    for_rows(y, block, COST * block, |first, out| {
        let x = &x[first * block..first * block + out.len()];
        simd(
            #[inline(always)]
            || {
                if inner == 1 {
                    for (yr, xr) in out.chunks_exact_mut(len).zip(x.chunks_exact(len)) {
                        softmax_row(xr, yr, log);
                    }
                } else {
                    let mut scratch = vec![0.0; 2 * inner];
                    let (m, s) = scratch.split_at_mut(inner);
                    for (yb, xb) in out.chunks_exact_mut(block).zip(x.chunks_exact(block)) {
                        softmax_columns(xb, yb, m, s, log);
                    }
                }
            },
        );
    });
    Ok(())
}

/// Softmax of one contiguous row.
#[inline(always)]
fn softmax_row(x: &[f32], y: &mut [f32], log: bool) {
    let m = max_run(x);
    for (o, &v) in y.iter_mut().zip(x) {
        *o = exp(v - m);
    }
    let s = sum_run(y);
    if log {
        let ls = s.ln();
        for (o, &v) in y.iter_mut().zip(x) {
            *o = (v - m) - ls;
        }
    } else {
        let inv = 1.0 / s;
        y.iter_mut().for_each(|o| *o *= inv);
    }
}

/// Softmax down the columns of one `[len, inner]` block, with scratch rows
/// `m` (column maxima) and `s` (column sums) of `inner` elements.
#[inline(always)]
fn softmax_columns(x: &[f32], y: &mut [f32], m: &mut [f32], s: &mut [f32], log: bool) {
    let inner = m.len();
    m.fill(f32::NEG_INFINITY);
    for xr in x.chunks_exact(inner) {
        for (mv, &v) in m.iter_mut().zip(xr) {
            *mv = if v > *mv || v.is_nan() { v } else { *mv };
        }
    }
    s.fill(0.0);
    for (yr, xr) in y.chunks_exact_mut(inner).zip(x.chunks_exact(inner)) {
        for (((o, &v), &mv), sv) in yr.iter_mut().zip(xr).zip(&*m).zip(s.iter_mut()) {
            *o = exp(v - mv);
            *sv += *o;
        }
    }
    if log {
        s.iter_mut().for_each(|v| *v = v.ln());
        for (yr, xr) in y.chunks_exact_mut(inner).zip(x.chunks_exact(inner)) {
            for (((o, &v), &mv), &ls) in yr.iter_mut().zip(xr).zip(&*m).zip(&*s) {
                *o = (v - mv) - ls;
            }
        }
    } else {
        s.iter_mut().for_each(|v| *v = 1.0 / *v);
        for yr in y.chunks_exact_mut(inner) {
            yr.iter_mut().zip(&*s).for_each(|(o, &inv)| *o *= inv);
        }
    }
}

/// `dx` from the forward output `y`: softmax `dx = y * (dy - sum(dy * y))`,
/// log-softmax `dx = dy - exp(y) * sum(dy)`.
pub(crate) fn softmax_backward(
    plan: &AxisPlan,
    log: bool,
    y: &Tensor,
    dy: &Tensor,
    dx: &mut Tensor,
) -> Result<()> {
    let (y, dy) = (y.as_slice::<f32>()?, dy.as_slice::<f32>()?);
    let dx = dx.as_mut_slice::<f32>()?;
    let (len, inner) = (plan.len, plan.inner);
    let block = len * inner;
    for_rows(dx, block, COST * block, |first, out| {
        let range = first * block..first * block + out.len();
        let (y, dy) = (&y[range.clone()], &dy[range]);
        simd(
            #[inline(always)]
            || {
                if inner == 1 {
                    let rows = out
                        .chunks_exact_mut(len)
                        .zip(y.chunks_exact(len).zip(dy.chunks_exact(len)));
                    for (o, (yr, gr)) in rows {
                        backward_row(yr, gr, o, log);
                    }
                } else {
                    let mut s = vec![0.0; inner];
                    let blocks = out
                        .chunks_exact_mut(block)
                        .zip(y.chunks_exact(block).zip(dy.chunks_exact(block)));
                    for (o, (yb, gb)) in blocks {
                        backward_columns(yb, gb, o, &mut s, log);
                    }
                }
            },
        );
    });
    Ok(())
}

/// The gradient of one contiguous row.
#[inline(always)]
fn backward_row(y: &[f32], dy: &[f32], dx: &mut [f32], log: bool) {
    if log {
        let s = sum_run(dy);
        for ((o, &yv), &g) in dx.iter_mut().zip(y).zip(dy) {
            *o = g - exp(yv) * s;
        }
    } else {
        let s = dot(dy, y);
        for ((o, &yv), &g) in dx.iter_mut().zip(y).zip(dy) {
            *o = yv * (g - s);
        }
    }
}

/// The gradient down the columns of one `[len, inner]` block, with a scratch
/// row `s` of `inner` elements for the column sums.
#[inline(always)]
fn backward_columns(y: &[f32], dy: &[f32], dx: &mut [f32], s: &mut [f32], log: bool) {
    let inner = s.len();
    s.fill(0.0);
    for (yr, gr) in y.chunks_exact(inner).zip(dy.chunks_exact(inner)) {
        for ((sv, &yv), &g) in s.iter_mut().zip(yr).zip(gr) {
            *sv += if log { g } else { g * yv };
        }
    }
    let rows = dx
        .chunks_exact_mut(inner)
        .zip(y.chunks_exact(inner).zip(dy.chunks_exact(inner)));
    for (o, (yr, gr)) in rows {
        for (((o, &yv), &g), &sv) in o.iter_mut().zip(yr).zip(gr).zip(&*s) {
            *o = if log { g - exp(yv) * sv } else { yv * (g - sv) };
        }
    }
}

/// `sum(a * b)` with independent lanes (vectorises).
#[inline(always)]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    const LANES: usize = 16;
    let mut lanes = [0.0f32; LANES];
    let (mut ca, mut cb) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    for (x, y) in (&mut ca).zip(&mut cb) {
        for ((l, &u), &v) in lanes.iter_mut().zip(x).zip(y) {
            *l += u * v;
        }
    }
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(u, v)| u * v)
        .sum();
    lanes.iter().sum::<f32>() + tail
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tensor(dims: &[usize], data: Vec<f32>) -> Tensor {
        Tensor::from_vec(dims.to_vec(), data).unwrap()
    }

    fn forward(x: &Tensor, axis: usize, log: bool) -> Vec<f32> {
        let plan = AxisPlan::new("softmax", x.shape(), axis).unwrap();
        let mut y = tensor(x.dims(), vec![0.0; x.numel()]);
        softmax(&plan, log, x, &mut y).unwrap();
        y.to_vec().unwrap()
    }

    fn close(got: &[f32], want: &[f32]) {
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() < 1e-6, "{got:?} vs {want:?}");
        }
    }

    #[test]
    fn softmax_of_a_known_row() {
        let x = tensor(&[2, 3], vec![1.0, 2.0, 3.0, 1001.0, 1002.0, 1003.0]);
        let p = [0.090_030_57, 0.244_728_47, 0.665_240_94];
        let y = forward(&x, 1, false);
        close(&y[..3], &p);
        close(&y[3..], &p);
        let ly = forward(&x, 1, true);
        close(&ly[3..], &p.map(f32::ln));
    }

    #[test]
    fn columns_match_rows() {
        // The same rows laid out along axis 0 ([3, 2], inner = 2).
        let x = tensor(&[3, 2], vec![1.0, 1001.0, 2.0, 1002.0, 3.0, 1003.0]);
        for log in [false, true] {
            let y = forward(&x, 0, log);
            let rows = forward(
                &tensor(&[2, 3], vec![1.0, 2.0, 3.0, 1001.0, 1002.0, 1003.0]),
                1,
                log,
            );
            close(&y, &[rows[0], rows[3], rows[1], rows[4], rows[2], rows[5]]);
        }
    }

    #[test]
    fn gradients_from_the_output() {
        for (dims, axis) in [([1, 2], 1), ([2, 1], 0)] {
            let plan =
                AxisPlan::new("softmax", &verjus_core::Shape::new(dims).unwrap(), axis).unwrap();
            let dy = tensor(&dims, vec![1.0, 0.0]);
            let mut dx = tensor(&dims, vec![0.0; 2]);
            // softmax y = [1/2, 1/2]: dx = y * (dy - 1/2).
            softmax_backward(&plan, false, &tensor(&dims, vec![0.5, 0.5]), &dy, &mut dx).unwrap();
            close(&dx.to_vec::<f32>().unwrap(), &[0.25, -0.25]);
            // log-softmax y = ln [1/4, 3/4]: dx = dy - exp(y) * sum(dy).
            let y = tensor(&dims, vec![0.25f32.ln(), 0.75f32.ln()]);
            softmax_backward(&plan, true, &y, &dy, &mut dx).unwrap();
            close(&dx.to_vec::<f32>().unwrap(), &[0.75, -0.75]);
        }
    }
}
