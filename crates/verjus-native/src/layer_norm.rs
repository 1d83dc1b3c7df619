//! Layer normalisation over the last axis and its gradients (formulas in
//! `verjus_core::ops::layer_norm`).
//!
//! Rows are independent, so the forward and the input gradient split over
//! rows (`for_rows`). The scale and bias gradients are sums down the
//! columns, in blocks of rows that do not depend on the thread count
//! (`sum_row_blocks`). The mean is summed around the row's first element
//! and the variance is that of `x - mean` (two passes over a row in cache),
//! so rows far from 0 keep their digits.

use crate::parallel::{for_rows, for_rows2, sum_row_blocks};
use crate::reduce::sum_run;
use crate::simd::simd;
use verjus_core::ops::{LayerNormArgs, LayerNormGrads, LayerNormPlan};
use verjus_core::{Result, Tensor};

/// Relative cost of one element, for the parallel threshold.
const COST: usize = 4;

/// A host slice of an optional operand.
fn slice_of(t: Option<&Tensor>) -> Result<Option<&[f32]>> {
    t.map(|t| t.as_slice::<f32>()).transpose()
}

/// `y`, and the per-row `mean` and `rstd`.
pub(crate) fn forward(
    plan: &LayerNormPlan,
    args: &LayerNormArgs<'_>,
    y: &mut Tensor,
    mean: &mut Tensor,
    rstd: &mut Tensor,
) -> Result<()> {
    let x = args.x.as_slice::<f32>()?;
    let (scale, bias) = (slice_of(args.scale)?, slice_of(args.bias)?);
    let d = plan.features;
    let mut stats = vec![0.0f32; 2 * plan.rows];
    let y = y.as_mut_slice::<f32>()?;
    if d > 0 {
        for_rows2(y, d, &mut stats, 2, COST * d, |first, ys, st| {
            simd(
                #[inline(always)]
                || {
                    let rows = ys.chunks_exact_mut(d).zip(st.chunks_exact_mut(2));
                    for (i, (yr, s)) in rows.enumerate() {
                        let r = first + i;
                        let xr = &x[r * d..(r + 1) * d];
                        (s[0], s[1]) = normalise_row(xr, yr, scale, bias, plan.eps);
                    }
                },
            )
        });
    } else {
        let empty_rstd = 1.0 / plan.eps.sqrt();
        stats.chunks_exact_mut(2).for_each(|s| s[1] = empty_rstd);
    }
    let (mean, rstd) = (mean.as_mut_slice::<f32>()?, rstd.as_mut_slice::<f32>()?);
    for ((m, r), s) in mean
        .iter_mut()
        .zip(rstd.iter_mut())
        .zip(stats.chunks_exact(2))
    {
        (*m, *r) = (s[0], s[1]);
    }
    Ok(())
}

/// Normalises one row into `y`; returns its mean and `rstd`.
#[inline(always)]
fn normalise_row(
    x: &[f32],
    y: &mut [f32],
    scale: Option<&[f32]>,
    bias: Option<&[f32]>,
    eps: f32,
) -> (f32, f32) {
    let d = x.len() as f32;
    // Summed around the first element: exact enough for rows far from 0.
    let shift = x[0];
    for (o, &v) in y.iter_mut().zip(x) {
        *o = v - shift;
    }
    let mean = shift + sum_run(y) / d;
    for (o, &v) in y.iter_mut().zip(x) {
        let c = v - mean;
        *o = c * c;
    }
    let rstd = 1.0 / (sum_run(y) / d + eps).sqrt();
    for (o, &v) in y.iter_mut().zip(x) {
        *o = (v - mean) * rstd;
    }
    if let Some(s) = scale {
        y.iter_mut().zip(s).for_each(|(o, &s)| *o *= s);
    }
    if let Some(b) = bias {
        y.iter_mut().zip(b).for_each(|(o, &b)| *o += b);
    }
    (mean, rstd)
}

/// The gradients asked for in `grads`.
pub(crate) fn backward(
    plan: &LayerNormPlan,
    args: &LayerNormArgs<'_>,
    mean: &Tensor,
    rstd: &Tensor,
    dy: &Tensor,
    grads: LayerNormGrads<'_>,
) -> Result<()> {
    let x = args.x.as_slice::<f32>()?;
    let scale = slice_of(args.scale)?;
    let (mean, rstd, dy) = (
        mean.as_slice::<f32>()?,
        rstd.as_slice::<f32>()?,
        dy.as_slice::<f32>()?,
    );
    let d = plan.features;
    let rows = Rows {
        x,
        dy,
        mean,
        rstd,
        d,
    };
    if let Some(dx) = grads.dx {
        let dx = dx.as_mut_slice::<f32>()?;
        if d > 0 {
            for_rows(dx, d, COST * d, |first, out| {
                simd(
                    #[inline(always)]
                    || {
                        for (i, dxr) in out.chunks_exact_mut(d).enumerate() {
                            rows.input_grad(first + i, scale, dxr);
                        }
                    },
                )
            });
        }
    }
    if grads.dscale.is_some() || grads.dbias.is_some() {
        let sums = rows.column_sums(plan.rows);
        if let Some(ds) = grads.dscale {
            ds.as_mut_slice::<f32>()?.copy_from_slice(&sums[..d]);
        }
        if let Some(db) = grads.dbias {
            db.as_mut_slice::<f32>()?.copy_from_slice(&sums[d..]);
        }
    }
    Ok(())
}

/// What the backward reads, row by row.
#[derive(Clone, Copy)]
struct Rows<'a> {
    x: &'a [f32],
    dy: &'a [f32],
    mean: &'a [f32],
    rstd: &'a [f32],
    d: usize,
}

impl Rows<'_> {
    /// `dx` of row `r`: `rstd * (g - mean(g) - xhat * mean(g * xhat))` with
    /// `g = dy * scale`; `dxr` holds `g` in between.
    #[inline(always)]
    fn input_grad(&self, r: usize, scale: Option<&[f32]>, dxr: &mut [f32]) {
        let d = self.d;
        let (xr, dyr) = (&self.x[r * d..(r + 1) * d], &self.dy[r * d..(r + 1) * d]);
        let (mean, rstd) = (self.mean[r], self.rstd[r]);
        match scale {
            Some(s) => dxr
                .iter_mut()
                .zip(dyr)
                .zip(s)
                .for_each(|((o, &g), &s)| *o = g * s),
            None => dxr.copy_from_slice(dyr),
        }
        let g_mean = sum_run(dxr) / d as f32;
        let mut gx = [0.0f32; 16];
        for (gc, xc) in dxr.chunks(16).zip(xr.chunks(16)) {
            for ((acc, &g), &v) in gx.iter_mut().zip(gc).zip(xc) {
                *acc += g * ((v - mean) * rstd);
            }
        }
        let gx_mean = sum_run(&gx) / d as f32;
        for (o, &v) in dxr.iter_mut().zip(xr) {
            let xhat = (v - mean) * rstd;
            *o = rstd * (*o - g_mean - xhat * gx_mean);
        }
    }

    /// `[sum_rows dy * xhat, sum_rows dy]` (`2 d` values), summed in
    /// blocks of rows that do not depend on the thread count.
    fn column_sums(&self, rows: usize) -> Vec<f32> {
        let d = self.d;
        sum_row_blocks(rows, 2 * d, |block, out| {
            simd(
                #[inline(always)]
                || {
                    let (ds, db) = out.split_at_mut(d);
                    for r in block {
                        let (xr, dyr) = (&self.x[r * d..(r + 1) * d], &self.dy[r * d..(r + 1) * d]);
                        let (mean, rstd) = (self.mean[r], self.rstd[r]);
                        for (((s, bias), &g), &v) in
                            ds.iter_mut().zip(db.iter_mut()).zip(dyr).zip(xr)
                        {
                            *s += g * ((v - mean) * rstd);
                            *bias += g;
                        }
                    }
                },
            )
        })
    }
}
