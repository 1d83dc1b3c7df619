//! Max and average 2-D pooling (NCHW) and their gradients.
//!
//! Every `(n, c)` plane pools independently, so planes are the unit of
//! parallelism. Max pooling picks the *first* maximum of a window in row-major
//! order (NaN counting as the largest value), in the forward and the backward
//! pass alike, so the gradient lands exactly where the forward value came from;
//! overlapping windows add their gradients. Average pooling divides by the full
//! window size (padding counts, PyTorch's `count_include_pad=True`). The common
//! 2x2 window with stride 2 and no padding has its own loop without window
//! clipping.

use rayon::prelude::*;
use verjus_core::ops::{Pool2dPlan, PoolKind};
use verjus_core::{Result, Tensor};

/// Below this many elements per task, rayon's overhead outweighs the work.
const MIN_TASK: usize = 1 << 14;

/// Sizes of one plane's pooling.
#[derive(Clone, Copy, Debug)]
struct Geom {
    kind: PoolKind,
    h: usize,
    w: usize,
    oh: usize,
    ow: usize,
    kernel: [usize; 2],
    stride: [usize; 2],
    pad: [usize; 2],
}

impl Geom {
    fn new(p: &Pool2dPlan) -> Self {
        Geom {
            kind: p.kind,
            h: p.h,
            w: p.w,
            oh: p.oh,
            ow: p.ow,
            kernel: p.params.kernel,
            stride: p.params.stride,
            pad: p.params.padding,
        }
    }

    /// The 2x2, stride-2, unpadded window.
    fn is_halving(&self) -> bool {
        self.kernel == [2, 2] && self.stride == [2, 2] && self.pad == [0, 0]
    }

    /// The input rows (`axis` 0) or columns (1) of output position `o`'s window,
    /// clipped to the image.
    fn window(&self, axis: usize, o: usize) -> std::ops::Range<usize> {
        let len = [self.h, self.w][axis];
        let start = o * self.stride[axis];
        let lo = start.saturating_sub(self.pad[axis]).min(len);
        let hi = (start + self.kernel[axis])
            .saturating_sub(self.pad[axis])
            .min(len);
        lo..hi
    }

    /// The divisor of average pooling: the whole window, padding included.
    fn area(&self) -> f32 {
        (self.kernel[0] * self.kernel[1]) as f32
    }

    /// Planes per rayon task, so that a task has about [`MIN_TASK`] elements.
    fn planes_per_task(&self) -> usize {
        (MIN_TASK / (self.h * self.w).max(self.oh * self.ow).max(1)).max(1)
    }
}

/// Whether `v` beats the best so far `b` (NaN counts as the largest value; ties
/// keep the earlier element).
fn beats(v: f32, b: f32) -> bool {
    v > b || (v.is_nan() && !b.is_nan())
}

/// Index in the plane of the first maximum of window `(oy, ox)`, if the window
/// holds any input element.
fn argmax(g: &Geom, x: &[f32], oy: usize, ox: usize) -> Option<usize> {
    let mut best: Option<usize> = None;
    for iy in g.window(0, oy) {
        for i in g.window(1, ox).map(|ix| iy * g.w + ix) {
            if best.is_none_or(|b| beats(x[i], x[b])) {
                best = Some(i);
            }
        }
    }
    best
}

/// The 2x2 window `(oy, ox)`: plane indices in row-major order.
fn quad(g: &Geom, oy: usize, ox: usize) -> [usize; 4] {
    let top = 2 * oy * g.w + 2 * ox;
    [top, top + 1, top + g.w, top + g.w + 1]
}

/// The first maximum of a 2x2 window (as a plane index).
fn quad_argmax(x: &[f32], q: [usize; 4]) -> usize {
    q.into_iter()
        .reduce(|b, i| if beats(x[i], x[b]) { i } else { b })
        .unwrap_or(q[0]) // a 2x2 window is never empty
}

/// Pools one plane `x [h, w]` into `y [oh, ow]`.
fn pool_plane(g: &Geom, x: &[f32], y: &mut [f32]) {
    for (oy, row) in y.chunks_exact_mut(g.ow).enumerate() {
        for (ox, out) in row.iter_mut().enumerate() {
            *out = match (g.is_halving(), g.kind) {
                (true, PoolKind::Max) => x[quad_argmax(x, quad(g, oy, ox))],
                (true, PoolKind::Avg) => quad(g, oy, ox).map(|i| x[i]).iter().sum::<f32>() * 0.25,
                (false, _) => pool_window(g, x, oy, ox),
            };
        }
    }
}

/// One output of the general window.
fn pool_window(g: &Geom, x: &[f32], oy: usize, ox: usize) -> f32 {
    match g.kind {
        // A window of padding only (possible for an empty input) has no maximum.
        PoolKind::Max => argmax(g, x, oy, ox).map_or(f32::NEG_INFINITY, |i| x[i]),
        PoolKind::Avg => {
            let rows = g.window(0, oy);
            let sum: f32 = rows
                .map(|iy| x[iy * g.w..][g.window(1, ox)].iter().sum::<f32>())
                .sum();
            sum / g.area()
        }
    }
}

/// Adds one plane's gradient `dy [oh, ow]` into `dx [h, w]`.
fn unpool_plane(g: &Geom, x: &[f32], dy: &[f32], dx: &mut [f32]) {
    for (oy, row) in dy.chunks_exact(g.ow).enumerate() {
        for (ox, &d) in row.iter().enumerate() {
            match (g.is_halving(), g.kind) {
                (true, PoolKind::Max) => dx[quad_argmax(x, quad(g, oy, ox))] += d,
                (true, PoolKind::Avg) => {
                    quad(g, oy, ox).into_iter().for_each(|i| dx[i] += d * 0.25)
                }
                (false, _) => unpool_window(g, x, oy, ox, d, dx),
            };
        }
    }
}

/// Routes the gradient `d` of one general window into `dx`.
fn unpool_window(g: &Geom, x: &[f32], oy: usize, ox: usize, d: f32, dx: &mut [f32]) {
    match g.kind {
        PoolKind::Max => {
            if let Some(i) = argmax(g, x, oy, ox) {
                dx[i] += d;
            }
        }
        PoolKind::Avg => {
            let share = d / g.area();
            for iy in g.window(0, oy) {
                dx[iy * g.w..][g.window(1, ox)]
                    .iter_mut()
                    .for_each(|v| *v += share);
            }
        }
    }
}

/// `y = pool(x)`.
pub(crate) fn pool2d(plan: &Pool2dPlan, x: &Tensor, y: &mut Tensor) -> Result<()> {
    let g = Geom::new(plan);
    let x = x.as_slice::<f32>()?;
    let y = y.as_mut_slice::<f32>()?;
    let (plane_in, plane_out) = (g.h * g.w, g.oh * g.ow);
    let per_task = g.planes_per_task();
    // Output planes are never empty (validation makes oh, ow >= 1).
    y.par_chunks_mut(plane_out * per_task)
        .enumerate()
        .for_each(|(t, ys)| {
            for (i, y_p) in ys.chunks_exact_mut(plane_out).enumerate() {
                let p = t * per_task + i;
                pool_plane(&g, &x[p * plane_in..(p + 1) * plane_in], y_p);
            }
        });
    Ok(())
}

/// `dx` from `dy` (overwrites `dx`).
pub(crate) fn pool2d_backward(
    plan: &Pool2dPlan,
    x: &Tensor,
    _y: &Tensor,
    dy: &Tensor,
    dx: &mut Tensor,
) -> Result<()> {
    let g = Geom::new(plan);
    let (x, dy) = (x.as_slice::<f32>()?, dy.as_slice::<f32>()?);
    let dx = dx.as_mut_slice::<f32>()?;
    let (plane_in, plane_out) = (g.h * g.w, g.oh * g.ow);
    if plane_in == 0 {
        return Ok(());
    }
    let per_task = g.planes_per_task();
    dx.par_chunks_mut(plane_in * per_task)
        .enumerate()
        .for_each(|(t, dxs)| {
            dxs.fill(0.0);
            for (i, dx_p) in dxs.chunks_exact_mut(plane_in).enumerate() {
                let p = t * per_task + i;
                let x_p = &x[p * plane_in..(p + 1) * plane_in];
                unpool_plane(&g, x_p, &dy[p * plane_out..(p + 1) * plane_out], dx_p);
            }
        });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NativeBackend;
    use verjus_core::ops::{self, Pool2dParams};

    fn t(dims: &[usize], v: Vec<f32>) -> Tensor {
        Tensor::from_vec(dims.to_vec(), v).unwrap()
    }

    /// Forward and backward of one pooling; returns `(y, dx)`.
    fn run(kind: PoolKind, p: Pool2dParams, x: &Tensor, dy: Vec<f32>) -> (Vec<f32>, Vec<f32>) {
        let plan = Pool2dPlan::new(kind, x.shape(), p).unwrap();
        let out = plan.output_shape().unwrap();
        let mut y = t(out.dims(), vec![0.0; out.numel()]);
        ops::pool2d(&NativeBackend, kind, x, p, &mut y).unwrap();
        let dy = t(out.dims(), dy);
        let mut dx = t(x.dims(), vec![f32::NAN; x.numel()]);
        ops::pool2d_backward(&NativeBackend, kind, x, &y, &dy, p, &mut dx).unwrap();
        (y.to_vec().unwrap(), dx.to_vec().unwrap())
    }

    fn params(k: usize, s: usize, pad: usize) -> Pool2dParams {
        Pool2dParams {
            kernel: [k, k],
            stride: [s, s],
            padding: [pad, pad],
        }
    }

    #[test]
    fn max_backward_routes_ties_to_the_first_maximum_and_accumulates() {
        let x = t(
            &[1, 1, 3, 3],
            vec![1.0, 5.0, 5.0, 5.0, 2.0, 0.0, 3.0, 5.0, 4.0],
        );
        let (y, dx) = run(PoolKind::Max, params(2, 1, 0), &x, vec![1.0, 2.0, 3.0, 4.0]);
        assert_eq!(y, [5.0; 4]);
        // Windows (0,0) and (0,1) both pick x[0,1]; (1,0) picks x[1,0]; (1,1) x[2,1].
        assert_eq!(dx, [0.0, 3.0, 0.0, 3.0, 0.0, 0.0, 0.0, 4.0, 0.0]);
    }

    #[test]
    fn halving_max_with_ties() {
        let x = t(&[1, 1, 2, 4], vec![7.0, 7.0, 1.0, 2.0, 7.0, 0.0, 2.0, 2.0]);
        let (y, dx) = run(PoolKind::Max, Pool2dParams::square(2), &x, vec![10.0, 20.0]);
        assert_eq!(y, [7.0, 2.0]);
        assert_eq!(dx, [10.0, 0.0, 0.0, 20.0, 0.0, 0.0, 0.0, 0.0]);
    }

    #[test]
    fn avg_counts_padding_in_the_divisor() {
        let x = t(&[1, 1, 3, 3], (1..=9).map(|v| v as f32).collect());
        let (y, dx) = run(
            PoolKind::Avg,
            params(2, 2, 1),
            &x,
            vec![4.0, 8.0, 12.0, 16.0],
        );
        assert_eq!(y, [0.25, 1.25, 2.75, 7.0]);
        assert_eq!(dx, [1.0, 2.0, 2.0, 3.0, 4.0, 4.0, 3.0, 4.0, 4.0]);
    }

    #[test]
    fn max_ignores_padding() {
        let x = t(&[1, 1, 2, 2], vec![-1.0, -2.0, -3.0, -4.0]);
        let (y, dx) = run(PoolKind::Max, params(3, 2, 1), &x, vec![1.0]);
        assert_eq!(y, [-1.0]);
        assert_eq!(dx, [1.0, 0.0, 0.0, 0.0]);
    }

    #[test]
    fn halving_path_matches_the_general_window() {
        let (n, c, h, w) = (3, 5, 7, 6);
        let x: Vec<f32> = (0..n * c * h * w).map(|i| (i * 37 % 11) as f32).collect();
        let dy: Vec<f32> = (0..n * c * 3 * 3).map(|i| i as f32).collect();
        let x = t(&[n, c, h, w], x);
        for kind in [PoolKind::Max, PoolKind::Avg] {
            let p = Pool2dParams::square(2);
            let (y, dx) = run(kind, p, &x, dy.clone());
            let plan = Pool2dPlan::new(kind, x.shape(), p).unwrap();
            let g = Geom::new(&plan);
            let xs = x.as_slice::<f32>().unwrap();
            let mut dx_ref = vec![0.0; xs.len()];
            for plane in 0..n * c {
                let xp = &xs[plane * h * w..][..h * w];
                let dxp = &mut dx_ref[plane * h * w..][..h * w];
                for o in 0..9 {
                    let (oy, ox) = (o / 3, o % 3);
                    assert_eq!(y[plane * 9 + o], pool_window(&g, xp, oy, ox));
                    unpool_window(&g, xp, oy, ox, dy[plane * 9 + o], dxp);
                }
            }
            assert_eq!(dx, dx_ref, "{kind:?}");
        }
    }
}
