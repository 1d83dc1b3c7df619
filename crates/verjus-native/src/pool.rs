//! Max and average 2-D pooling (NCHW) and their gradients.
//!
//! Every `(n, c)` plane pools independently, so planes are the unit of
//! parallelism. Max pooling picks the *first* maximum of a window in row-major
//! order (NaN counting as the largest value), in the forward and the backward
//! pass alike, so the gradient lands exactly where the forward value came from;
//! overlapping windows add their gradients. Average pooling divides by the full
//! window size (padding counts, PyTorch's `count_include_pad=True`). The common
//! 2x2 window with stride 2 and no padding has its own loop without window
//! clipping; for max pooling that loop walks two input rows at a time with a
//! branchless pick of the maximum and, backward, writes every `dx` element of a
//! window once (the windows do not overlap) instead of zero-filling `dx` and
//! scattering into it. The generic per-output index arithmetic made pooling a
//! fifth of the Fashion-MNIST CNN training step.

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
    // `|` and `&` rather than short-circuits keep the pick branchless.
    (v > b) | (v.is_nan() & !b.is_nan())
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

/// The first maximum of the 2x2 window `[a, b; c, d]` as a tournament:
/// the first maximum of each row, then the bottom row's only if it beats the
/// top row's. This picks the same element as scanning in row-major order (ties
/// keep the earlier element), and every choice is a select rather than a
/// branch: with random data a branch per comparison mispredicts half the time,
/// which made the pooling backward a quarter of the CNN's training step.
#[derive(Clone, Copy)]
struct QuadMax {
    value: f32,
    /// Whether the maximum is in the bottom row.
    bottom: bool,
    /// Whether it is the right element of its row.
    right: bool,
}

impl QuadMax {
    #[inline(always)]
    fn of(a: f32, b: f32, c: f32, d: f32) -> Self {
        let top_right = beats(b, a);
        let top = if top_right { b } else { a };
        let bottom_right = beats(d, c);
        let bottom_max = if bottom_right { d } else { c };
        let bottom = beats(bottom_max, top);
        QuadMax {
            value: if bottom { bottom_max } else { top },
            bottom,
            right: if bottom { bottom_right } else { top_right },
        }
    }

    /// `g` at the maximum's position, 0 elsewhere: `[[a, b], [c, d]]`.
    #[inline(always)]
    fn route(self, g: f32) -> [[f32; 2]; 2] {
        let pick = |row: bool, right: bool| {
            if self.bottom == row && self.right == right {
                g
            } else {
                0.0
            }
        };
        [
            [pick(false, false), pick(false, true)],
            [pick(true, false), pick(true, true)],
        ]
    }
}

/// The rows `2 * oy` and `2 * oy + 1` of a plane of width `w`, cut to the
/// `2 * ow` columns that the 2x2 windows cover.
fn row_pair(x: &[f32], w: usize, ow: usize, oy: usize) -> (&[f32], &[f32]) {
    let (top, bottom) = x[2 * oy * w..][..2 * w].split_at(w);
    (&top[..2 * ow], &bottom[..2 * ow])
}

/// 2x2, stride-2 max pooling of one plane `x [h, w]` into `y [oh, ow]`.
fn max_halving_plane(g: &Geom, x: &[f32], y: &mut [f32]) {
    for (oy, y_row) in y.chunks_exact_mut(g.ow).enumerate() {
        let (top, bottom) = row_pair(x, g.w, g.ow, oy);
        for ((out, t), b) in y_row
            .iter_mut()
            .zip(top.chunks_exact(2))
            .zip(bottom.chunks_exact(2))
        {
            *out = QuadMax::of(t[0], t[1], b[0], b[1]).value;
        }
    }
}

/// Writes (not adds) one plane's gradient of 2x2, stride-2 max pooling: each
/// window's `dy` at its first maximum, zero elsewhere, including the last row
/// or column that an odd height or width leaves outside every window.
fn max_halving_unpool_plane(g: &Geom, x: &[f32], dy: &[f32], dx: &mut [f32]) {
    let covered = 2 * g.oh * g.w;
    for (oy, dy_row) in dy.chunks_exact(g.ow).enumerate() {
        let (top, bottom) = row_pair(x, g.w, g.ow, oy);
        let (dx_top, dx_bottom) = dx[2 * oy * g.w..][..2 * g.w].split_at_mut(g.w);
        dx_top[2 * g.ow..].fill(0.0);
        dx_bottom[2 * g.ow..].fill(0.0);
        for ((((&d, t), b), dt), db) in dy_row
            .iter()
            .zip(top.chunks_exact(2))
            .zip(bottom.chunks_exact(2))
            .zip(dx_top.chunks_exact_mut(2))
            .zip(dx_bottom.chunks_exact_mut(2))
        {
            let [top_grad, bottom_grad] = QuadMax::of(t[0], t[1], b[0], b[1]).route(d);
            dt.copy_from_slice(&top_grad);
            db.copy_from_slice(&bottom_grad);
        }
    }
    dx[covered..].fill(0.0);
}

/// Pools one plane `x [h, w]` into `y [oh, ow]`.
fn pool_plane(g: &Geom, x: &[f32], y: &mut [f32]) {
    if g.is_halving() && g.kind == PoolKind::Max {
        return max_halving_plane(g, x, y);
    }
    for (oy, row) in y.chunks_exact_mut(g.ow).enumerate() {
        for (ox, out) in row.iter_mut().enumerate() {
            *out = match (g.is_halving(), g.kind) {
                (true, PoolKind::Avg) => quad(g, oy, ox).map(|i| x[i]).iter().sum::<f32>() * 0.25,
                _ => pool_window(g, x, oy, ox),
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

/// Adds one plane's gradient `dy [oh, ow]` into `dx [h, w]` (all but the
/// halving max pooling, which [`max_halving_unpool_plane`] handles).
fn unpool_plane(g: &Geom, x: &[f32], dy: &[f32], dx: &mut [f32]) {
    for (oy, row) in dy.chunks_exact(g.ow).enumerate() {
        for (ox, &d) in row.iter().enumerate() {
            match (g.is_halving(), g.kind) {
                (true, PoolKind::Avg) => {
                    quad(g, oy, ox).into_iter().for_each(|i| dx[i] += d * 0.25)
                }
                _ => unpool_window(g, x, oy, ox, d, dx),
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
    let overwrites = g.is_halving() && g.kind == PoolKind::Max;
    dx.par_chunks_mut(plane_in * per_task)
        .enumerate()
        .for_each(|(t, dxs)| {
            if !overwrites {
                dxs.fill(0.0);
            }
            for (i, dx_p) in dxs.chunks_exact_mut(plane_in).enumerate() {
                let p = t * per_task + i;
                let x_p = &x[p * plane_in..(p + 1) * plane_in];
                let dy_p = &dy[p * plane_out..(p + 1) * plane_out];
                if overwrites {
                    max_halving_unpool_plane(&g, x_p, dy_p, dx_p);
                } else {
                    unpool_plane(&g, x_p, dy_p, dx_p);
                }
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
