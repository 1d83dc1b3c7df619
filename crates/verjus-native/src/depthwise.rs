//! Depthwise 1-D convolution, channels last, and its gradients (formulas in
//! `verjus_core::ops::depthwise`).
//!
//! Every loop runs along the channels, which are contiguous in `x`, `y` and
//! the taps-major copy of the filter (`[K, C]`, made per call; it is small):
//! an output row is the bias plus `K` scaled input rows, and an input
//! gradient row is `K` scaled output gradient rows. Rows split over threads
//! (`for_rows`). The filter and bias gradients are sums over all rows, in
//! blocks that do not depend on the thread count (`sum_row_blocks`).

use crate::parallel::{for_rows, sum_row_blocks};
use crate::simd::simd;
use verjus_core::ops::{DepthwiseArgs, DepthwiseGrads, DepthwisePlan};
use verjus_core::{Result, Tensor};

/// `[K, C]` from `[C, K]`.
fn taps_major(filter: &[f32], c: usize, k: usize) -> Vec<f32> {
    let mut out = vec![0.0; c * k];
    for (ch, row) in filter.chunks_exact(k).enumerate() {
        for (tap, &w) in row.iter().enumerate() {
            out[tap * c + ch] = w;
        }
    }
    out
}

/// `out += w * src`, elementwise.
#[inline(always)]
fn add_scaled(out: &mut [f32], w: &[f32], src: &[f32]) {
    for ((o, &w), &s) in out.iter_mut().zip(w).zip(src) {
        *o += w * s;
    }
}

pub(crate) fn forward(
    plan: &DepthwisePlan,
    args: &DepthwiseArgs<'_>,
    y: &mut Tensor,
) -> Result<()> {
    let (c, k) = (plan.channels, plan.taps);
    let x = args.x.as_slice::<f32>()?;
    let w = taps_major(args.filter.as_slice::<f32>()?, c, k);
    let bias = args.bias.map(|b| b.as_slice::<f32>()).transpose()?;
    let y = y.as_mut_slice::<f32>()?;
    let (frames, out_frames) = (plan.frames, plan.out_frames);
    for_rows(y, c, c * k, |first, rows| {
        simd(
            #[inline(always)]
            || {
                for (i, yr) in rows.chunks_exact_mut(c).enumerate() {
                    let (n, t) = ((first + i) / out_frames, (first + i) % out_frames);
                    match bias {
                        Some(b) => yr.copy_from_slice(b),
                        None => yr.fill(0.0),
                    }
                    for tap in 0..k {
                        if let Some(s) = plan.source(t, tap) {
                            let src = &x[(n * frames + s) * c..][..c];
                            add_scaled(yr, &w[tap * c..][..c], src);
                        }
                    }
                }
            },
        )
    });
    Ok(())
}

pub(crate) fn backward(
    plan: &DepthwisePlan,
    args: &DepthwiseArgs<'_>,
    dy: &Tensor,
    grads: DepthwiseGrads<'_>,
) -> Result<()> {
    let (c, k) = (plan.channels, plan.taps);
    let x = args.x.as_slice::<f32>()?;
    let dy = dy.as_slice::<f32>()?;
    if let Some(dx) = grads.dx {
        let w = taps_major(args.filter.as_slice::<f32>()?, c, k);
        input_grad(plan, &w, dy, dx.as_mut_slice::<f32>()?);
    }
    if grads.dfilter.is_some() || grads.dbias.is_some() {
        let (dw, db) = filter_grads(plan, x, dy);
        if let Some(df) = grads.dfilter {
            let df = df.as_mut_slice::<f32>()?;
            for (ch, row) in df.chunks_exact_mut(k).enumerate() {
                for (tap, v) in row.iter_mut().enumerate() {
                    *v = dw[tap * c + ch];
                }
            }
        }
        if let Some(b) = grads.dbias {
            b.as_mut_slice::<f32>()?.copy_from_slice(&db);
        }
    }
    Ok(())
}

/// `dx[n, s] = sum_k w[k] * dy[n, t]` over the output frames `t` whose tap
/// `k` reads `s` (`t = s + left - k d`).
fn input_grad(plan: &DepthwisePlan, w: &[f32], dy: &[f32], dx: &mut [f32]) {
    let (c, k) = (plan.channels, plan.taps);
    let (frames, out_frames) = (plan.frames, plan.out_frames);
    for_rows(dx, c, c * k, |first, rows| {
        simd(
            #[inline(always)]
            || {
                for (i, dxr) in rows.chunks_exact_mut(c).enumerate() {
                    let (n, s) = ((first + i) / frames, (first + i) % frames);
                    dxr.fill(0.0);
                    for tap in 0..k {
                        let Some(t) = (s + plan.padding[0]).checked_sub(tap * plan.dilation) else {
                            continue;
                        };
                        if t < out_frames {
                            let g = &dy[(n * out_frames + t) * c..][..c];
                            add_scaled(dxr, &w[tap * c..][..c], g);
                        }
                    }
                }
            },
        )
    });
}

/// `(dw [K, C], dbias [C])`: sums over every output row, in blocks.
fn filter_grads(plan: &DepthwisePlan, x: &[f32], dy: &[f32]) -> (Vec<f32>, Vec<f32>) {
    let (c, k) = (plan.channels, plan.taps);
    let rows = plan.batch * plan.out_frames;
    let mut sums = sum_row_blocks(rows, (k + 1) * c, |block, out| {
        simd(
            #[inline(always)]
            || {
                let (dw, db) = out.split_at_mut(k * c);
                for r in block {
                    let (n, t) = (r / plan.out_frames, r % plan.out_frames);
                    let g = &dy[r * c..][..c];
                    db.iter_mut().zip(g).for_each(|(s, &v)| *s += v);
                    for tap in 0..k {
                        if let Some(s) = plan.source(t, tap) {
                            let src = &x[(n * plan.frames + s) * c..][..c];
                            add_scaled(&mut dw[tap * c..][..c], g, src);
                        }
                    }
                }
            },
        )
    });
    let db = sums.split_off(k * c);
    (sums, db)
}
