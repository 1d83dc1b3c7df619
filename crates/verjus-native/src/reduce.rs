//! Reductions over any set of axes, their gradients, and argmax.
//!
//! A reduction is first *coalesced*: size-1 axes are dropped and neighbouring
//! axes that are both kept or both reduced are merged, so `[N, C, H, W]` summed
//! over `(0, 2, 3)` becomes `[R, K, R]`. The walk then only ever touches the
//! innermost axis as a contiguous run: when it is reduced, a run folds into one
//! output (16 independent lanes, so the loop vectorises); when it is kept, a run
//! combines element-wise into a row of outputs (also vectorised). Accumulation
//! is in f32.
//!
//! Large reductions split over the pool in one of two ways: along the first
//! kept axis, when it is long enough, each task owning a disjoint block of
//! outputs; otherwise along the first reduced axis, each task folding a fixed
//! group of its indices into a private copy of the (then small) output, the
//! copies merged in order at the end (so the bits do not depend on the
//! threads or their scheduling). A kept axis
//! that is innermost (`[R, K]`) is split only when very long, because strips
//! of it repeated over many rows read memory with a large stride.
//!
//! Reducers address their input by index rather than by slice, so the same
//! walk also sums a binary op's gradient `dy * partial(a, b)` over broadcast
//! axes without materialising it ([`GradSum`]).

use crate::broadcast::{zip_grad, Broadcast, Operand};
use crate::parallel::{for_rows, SEQUENTIAL_WORK};
use rayon::prelude::*;
use verjus_core::ops::{AxisPlan, BinaryOp, BinaryPlan, ReduceOp, ReducePlan};
use verjus_core::{DType, Result, Tensor, MAX_RANK};

/// An associative, commutative combination with its identity.
trait Combine: Sync {
    const IDENTITY: f32;
    fn combine(a: f32, b: f32) -> f32;
}

struct Sum;
struct Max;
struct Min;

impl Combine for Sum {
    const IDENTITY: f32 = 0.0;
    #[inline(always)]
    fn combine(a: f32, b: f32) -> f32 {
        a + b
    }
}

impl Combine for Max {
    const IDENTITY: f32 = f32::NEG_INFINITY;
    /// NaN-propagating, as NumPy's and PyTorch's max.
    #[inline(always)]
    fn combine(a: f32, b: f32) -> f32 {
        if a > b || a.is_nan() {
            a
        } else {
            b
        }
    }
}

impl Combine for Min {
    const IDENTITY: f32 = f32::INFINITY;
    /// NaN-propagating, as NumPy's and PyTorch's min.
    #[inline(always)]
    fn combine(a: f32, b: f32) -> f32 {
        if a < b || a.is_nan() {
            a
        } else {
            b
        }
    }
}

/// Folds a run with 16 independent accumulators (which vectorise), then
/// combines them.
#[inline(always)]
fn fold_lanes<C: Combine>(run: &[f32]) -> f32 {
    const LANES: usize = 16;
    let mut lanes = [C::IDENTITY; LANES];
    let mut chunks = run.chunks_exact(LANES);
    for chunk in &mut chunks {
        for (l, &v) in lanes.iter_mut().zip(chunk) {
            *l = C::combine(*l, v);
        }
    }
    let head = lanes.iter().fold(C::IDENTITY, |a, &b| C::combine(a, b));
    chunks
        .remainder()
        .iter()
        .fold(head, |a, &b| C::combine(a, b))
}

/// The sum of a run.
#[inline(always)]
pub(crate) fn sum_run(run: &[f32]) -> f32 {
    fold_lanes::<Sum>(run)
}

/// The maximum of a run (NaN if it holds one; `-inf` when empty).
#[inline(always)]
pub(crate) fn max_run(run: &[f32]) -> f32 {
    fold_lanes::<Max>(run)
}

/// What a reduction does with the runs of its input. Inputs are addressed by
/// their flat index, outputs by their index in the whole output (`y_index`,
/// `y_start`), accumulators by the task's own slice.
trait Reducer: Sync {
    fn identity(&self) -> f32;
    /// Combines two partial results (of tasks that split a reduced axis).
    fn merge(&self, a: f32, b: f32) -> f32;
    /// Innermost axis reduced: folds inputs `start..start + len` into output
    /// `y_index`'s accumulator.
    fn fold(&self, start: usize, len: usize, y_index: usize, acc: &mut f32);
    /// Innermost axis kept: combines inputs `start..start + acc.len()` into
    /// outputs `y_start..`.
    fn accumulate(&self, start: usize, y_start: usize, acc: &mut [f32]);
}

/// A plain reduction of `x` by `C`.
struct Plain<'a, C>(&'a [f32], C);

impl<C: Combine> Reducer for Plain<'_, C> {
    fn identity(&self) -> f32 {
        C::IDENTITY
    }
    fn merge(&self, a: f32, b: f32) -> f32 {
        C::combine(a, b)
    }
    fn fold(&self, start: usize, len: usize, _: usize, acc: &mut f32) {
        *acc = C::combine(*acc, fold_lanes::<C>(&self.0[start..start + len]));
    }
    fn accumulate(&self, start: usize, _: usize, acc: &mut [f32]) {
        let run = &self.0[start..start + acc.len()];
        for (a, &v) in acc.iter_mut().zip(run) {
            *a = C::combine(*a, v);
        }
    }
}

/// Counts, for every output of a max or min, the inputs equal to it (its ties).
struct TieCount<'a> {
    x: &'a [f32],
    y: &'a [f32],
}

impl Reducer for TieCount<'_> {
    fn identity(&self) -> f32 {
        0.0
    }
    fn merge(&self, a: f32, b: f32) -> f32 {
        a + b
    }
    fn fold(&self, start: usize, len: usize, y_index: usize, acc: &mut f32) {
        let target = self.y[y_index];
        let run = &self.x[start..start + len];
        *acc += run.iter().filter(|&&v| v == target).count() as f32;
    }
    fn accumulate(&self, start: usize, y_start: usize, acc: &mut [f32]) {
        let n = acc.len();
        let pairs = self.x[start..start + n]
            .iter()
            .zip(&self.y[y_start..y_start + n]);
        for (a, (&v, &t)) in acc.iter_mut().zip(pairs) {
            *a += f32::from(u8::from(v == t));
        }
    }
}

/// Sums `dy * partial(a, b)` of a broadcasting binary op without forming it
/// at full size: each run is produced in pieces on the stack.
pub(crate) struct GradSum<'a, P> {
    pub bc: &'a Broadcast,
    pub a: &'a [f32],
    pub b: &'a [f32],
    pub dy: &'a [f32],
    pub partial: P,
}

/// Gradient values formed at a time by [`GradSum`] (fits in L1).
const PIECE: usize = 256;

impl<P: Fn(f32, f32) -> f32 + Sync> GradSum<'_, P> {
    /// Calls `f(offset, values)` for the gradient values of inputs
    /// `start..start + len`, in pieces, `offset` counted from `start`.
    fn pieces(&self, start: usize, len: usize, mut f: impl FnMut(usize, &[f32])) {
        let mut buf = [0.0; PIECE];
        self.bc
            .runs(self.a, self.b, start, start + len, |r, ra, rb| {
                for lo in (0..r.len()).step_by(PIECE) {
                    let piece = lo..(lo + PIECE).min(r.len());
                    let out = &mut buf[..piece.len()];
                    let dy = &self.dy[r.start + piece.start..r.start + piece.end];
                    zip_grad(
                        out,
                        dy,
                        ra.sub(piece.clone()),
                        rb.sub(piece.clone()),
                        &self.partial,
                    );
                    f(r.start + piece.start - start, out);
                }
            });
    }
}

impl<P: Fn(f32, f32) -> f32 + Sync> Reducer for GradSum<'_, P> {
    fn identity(&self) -> f32 {
        0.0
    }
    fn merge(&self, a: f32, b: f32) -> f32 {
        a + b
    }
    fn fold(&self, start: usize, len: usize, _: usize, acc: &mut f32) {
        self.pieces(start, len, |_, g| *acc += sum_run(g));
    }
    fn accumulate(&self, start: usize, _: usize, acc: &mut [f32]) {
        self.pieces(start, acc.len(), |off, g| {
            for (a, &v) in acc[off..off + g.len()].iter_mut().zip(g) {
                *a += v;
            }
        });
    }
}

/// A reduction's axes after coalescing (see the module docs), outermost first.
struct Layout {
    n: usize,
    dims: [usize; MAX_RANK],
    reduced: [bool; MAX_RANK],
    /// Input strides (contiguous).
    xs: [usize; MAX_RANK],
    /// Output strides: contiguous over kept axes, zero on reduced ones.
    ys: [usize; MAX_RANK],
}

impl Layout {
    fn new(plan: &ReducePlan) -> Self {
        let mut l = Layout {
            n: 0,
            dims: [0; MAX_RANK],
            reduced: [false; MAX_RANK],
            xs: [0; MAX_RANK],
            ys: [0; MAX_RANK],
        };
        for (&d, &r) in plan.x.dims().iter().zip(&plan.reduced) {
            if d == 1 {
                continue;
            }
            if l.n > 0 && l.reduced[l.n - 1] == r {
                l.dims[l.n - 1] *= d;
            } else {
                (l.dims[l.n], l.reduced[l.n]) = (d, r);
                l.n += 1;
            }
        }
        if l.n == 0 {
            // One element: a kept axis of length 1.
            (l.dims[0], l.n) = (1, 1);
        }
        let (mut xs, mut ys) = (1, 1);
        for i in (0..l.n).rev() {
            l.xs[i] = xs;
            xs *= l.dims[i];
            if !l.reduced[i] {
                l.ys[i] = ys;
                ys *= l.dims[i];
            }
        }
        l
    }

    /// The outermost axis that is reduced (`true`) or kept (`false`).
    fn first(&self, reduced: bool) -> Option<usize> {
        (0..self.n).find(|&i| self.reduced[i] == reduced)
    }
}

/// One task's share of a reduction: axis `split` restricted to `lo..hi`,
/// results combined into `acc`, which holds the outputs from index `base` on.
struct Task<'a, R> {
    r: &'a R,
    l: &'a Layout,
    split: usize,
    lo: usize,
    hi: usize,
    base: usize,
}

impl<R: Reducer> Task<'_, R> {
    fn walk(&self, axis: usize, x_off: usize, y_off: usize, acc: &mut [f32]) {
        let l = self.l;
        let (lo, hi) = if axis == self.split {
            (self.lo, self.hi)
        } else {
            (0, l.dims[axis])
        };
        if axis + 1 < l.n {
            for i in lo..hi {
                self.walk(
                    axis + 1,
                    x_off + i * l.xs[axis],
                    y_off + i * l.ys[axis],
                    acc,
                );
            }
            return;
        }
        // The innermost axis has stride 1 in the input (and in the output when kept).
        if l.reduced[axis] {
            self.r
                .fold(x_off + lo, hi - lo, y_off, &mut acc[y_off - self.base]);
        } else {
            let start = y_off + lo - self.base;
            let acc = &mut acc[start..start + hi - lo];
            self.r.accumulate(x_off + lo, y_off + lo, acc);
        }
    }
}

/// Below this many elements, a kept innermost axis is not split between tasks:
/// short strips of many rows defeat the prefetcher.
const LONG_STRIP: usize = 1 << 16;

/// The partial results of a split reduced axis (fixed groups of its indices,
/// merged in order), and the least length of a kept axis that is split by
/// outputs instead: constants, not the thread count, so that a reduction
/// gives the same bits on any number of threads.
const PARTIALS: usize = 16;

/// Runs reducer `r` over an input of `len` elements into `y` (overwritten),
/// splitting over the pool as the module docs describe. An empty input gives zeros.
fn run<R: Reducer>(r: &R, l: &Layout, len: usize, y: &mut [f32]) {
    if len == 0 {
        y.fill(0.0);
        return;
    }
    let task = |split, lo, hi, base| Task {
        r,
        l,
        split,
        lo,
        hi,
        base,
    };
    let (kept, red) = (l.first(false), l.first(true));
    // Disjoint output blocks when the kept axis is long and, if innermost, very long.
    let by_outputs = kept.filter(|&p| {
        red.is_none() || (l.dims[p] >= 4 * PARTIALS && (p + 1 < l.n || l.dims[p] >= LONG_STRIP))
    });
    if len < SEQUENTIAL_WORK {
        y.fill(r.identity());
        task(0, 0, l.dims[0], 0).walk(0, 0, 0, y);
    } else if let Some(p) = by_outputs {
        let row = l.ys[p];
        for_rows(y, row, len / l.dims[p], |first, chunk| {
            chunk.fill(r.identity());
            let rows = chunk.len() / row;
            task(p, first, first + rows, first * row).walk(0, 0, 0, chunk);
        });
    } else if let Some(q) = red {
        let per = l.dims[q].div_ceil(PARTIALS);
        // Merged in order, not by rayon's reduction tree (whose grouping
        // follows its work stealing): the same bits from run to run.
        let partials: Vec<Vec<f32>> = (0..l.dims[q].div_ceil(per))
            .into_par_iter()
            .map(|t| {
                let mut acc = vec![r.identity(); y.len()];
                task(q, t * per, ((t + 1) * per).min(l.dims[q]), 0).walk(0, 0, 0, &mut acc);
                acc
            })
            .collect();
        let merged = partials.into_iter().reduce(|mut a, b| {
            a.iter_mut().zip(&b).for_each(|(u, &v)| *u = r.merge(*u, v));
            a
        });
        if let Some(m) = merged {
            y.copy_from_slice(&m);
        }
    }
}

/// `y = sum over plan's axes of dy * partial(a, b)` for a broadcasting binary
/// op's gradient (`plan.x` is the op's output shape).
pub(crate) fn sum_grad<P: Fn(f32, f32) -> f32 + Sync>(
    plan: &ReducePlan,
    grad: &GradSum<'_, P>,
    y: &mut [f32],
) {
    run(grad, &Layout::new(plan), grad.dy.len(), y);
}

/// `y = op over plan's axes of x`, on slices (`y` in the plan's output order).
pub(crate) fn reduce_slice(plan: &ReducePlan, x: &[f32], y: &mut [f32]) {
    let l = Layout::new(plan);
    match plan.op {
        ReduceOp::Sum => run(&Plain(x, Sum), &l, x.len(), y),
        ReduceOp::Mean => {
            run(&Plain(x, Sum), &l, x.len(), y);
            if plan.group > 0 {
                let n = plan.group as f32;
                y.iter_mut().for_each(|v| *v /= n);
            }
        }
        ReduceOp::Max => run(&Plain(x, Max), &l, x.len(), y),
        ReduceOp::Min => run(&Plain(x, Min), &l, x.len(), y),
    }
}

/// `y = op over plan's axes of x`.
pub(crate) fn reduce(plan: &ReducePlan, x: &Tensor, y: &mut Tensor) -> Result<()> {
    reduce_slice(plan, x.as_slice::<f32>()?, y.as_mut_slice::<f32>()?);
    Ok(())
}

/// `dx` for `y = reduce(x)`: sum spreads `dy`, mean `dy / n`; max and min send
/// `dy` to the inputs equal to `y`, split evenly between ties.
pub(crate) fn reduce_backward(
    plan: &ReducePlan,
    x: &Tensor,
    y: &Tensor,
    dy: &Tensor,
    dx: &mut Tensor,
) -> Result<()> {
    let (xv, yv, dyv) = (
        x.as_slice::<f32>()?,
        y.as_slice::<f32>()?,
        dy.as_slice::<f32>()?,
    );
    let dx = dx.as_mut_slice::<f32>()?;
    // The outputs seen over the input's axes: a broadcast, zero strides on reduced axes.
    let bp = BinaryPlan::new(BinaryOp::Mul, &plan.x, &plan.keepdims)?;
    let bc = Broadcast::new(plan.x.dims(), &bp.a_strides, &bp.b_strides);
    match plan.op {
        ReduceOp::Sum | ReduceOp::Mean => {
            let scale = match plan.op {
                ReduceOp::Mean if plan.group > 0 => 1.0 / plan.group as f32,
                _ => 1.0,
            };
            spread(&bc, dx, |out, _, bo| match bc.b_run(dyv, bo, out.len()) {
                Operand::Run(g) => out.iter_mut().zip(g).for_each(|(o, &g)| *o = g * scale),
                Operand::Const(g) => out.fill(g * scale),
            });
        }
        ReduceOp::Max | ReduceOp::Min => {
            let mut share = Tensor::zeros_host(y.shape(), DType::F32)?;
            let share = share.as_mut_slice::<f32>()?;
            run(
                &TieCount { x: xv, y: yv },
                &Layout::new(plan),
                xv.len(),
                share,
            );
            // dy split between the ties (a NaN output has none and is never selected).
            share.iter_mut().zip(dyv).for_each(|(s, &g)| *s = g / *s);
            let share = &*share;
            spread(&bc, dx, |out, start, bo| {
                let xs = &xv[start..start + out.len()];
                let (t, s) = (bc.b_run(yv, bo, out.len()), bc.b_run(share, bo, out.len()));
                for (i, (o, &v)) in out.iter_mut().zip(xs).enumerate() {
                    *o = if v == t.get(i) { s.get(i) } else { 0.0 };
                }
            });
        }
    }
    Ok(())
}

/// Writes `dx` run by run: `f(dx_run, input_index, output_index)`, where the
/// run starts at `input_index` and reads the outputs from `output_index`.
fn spread(bc: &Broadcast, dx: &mut [f32], f: impl Fn(&mut [f32], usize, usize) + Sync + Send) {
    for_rows(dx, 1, 1, |first, chunk| {
        bc.segments(first, first + chunk.len(), |r, _, bo| {
            f(&mut chunk[r.start - first..r.end - first], r.start, bo);
        });
    });
}

/// `y = argmax of x along the plan's axis` (int64); the first maximum wins
/// and NaN counts as the maximum, as in NumPy.
pub(crate) fn argmax(plan: &AxisPlan, x: &Tensor, y: &mut Tensor) -> Result<()> {
    let x = x.as_slice::<f32>()?;
    let y = y.as_mut_slice::<i64>()?;
    let (len, inner) = (plan.len, plan.inner);
    if len == 0 {
        // The output is empty (checked by the caller).
        return Ok(());
    }
    let block = len * inner;
    for_rows(y, inner, block, |first, out| {
        let x = &x[first * block..];
        if inner == 1 {
            for (o, row) in out.iter_mut().zip(x.chunks_exact(len)) {
                *o = argmax_run(row) as i64;
            }
        } else {
            let mut best = vec![0.0; inner];
            for (o, xb) in out.chunks_exact_mut(inner).zip(x.chunks_exact(block)) {
                argmax_columns(xb, &mut best, o);
            }
        }
    });
    Ok(())
}

/// Index of the first maximum of a run (the first NaN if there is one).
fn argmax_run(run: &[f32]) -> usize {
    let mut best = 0;
    for (i, &v) in run.iter().enumerate() {
        if v.is_nan() {
            return i;
        }
        if v > run[best] {
            best = i;
        }
    }
    best
}

/// Argmax down the columns of `xb` (`len` rows of `best.len()`), into `out`.
fn argmax_columns(xb: &[f32], best: &mut [f32], out: &mut [i64]) {
    let inner = best.len();
    best.copy_from_slice(&xb[..inner]);
    out.fill(0);
    for (l, row) in xb.chunks_exact(inner).enumerate().skip(1) {
        for ((b, o), &v) in best.iter_mut().zip(out.iter_mut()).zip(row) {
            if !b.is_nan() && (v > *b || v.is_nan()) {
                (*b, *o) = (v, l as i64);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tensor(dims: &[usize], data: Vec<f32>) -> Tensor {
        Tensor::from_vec(dims.to_vec(), data).unwrap()
    }

    fn reduced(op: ReduceOp, x: &Tensor, axes: &[usize]) -> Vec<f32> {
        let plan = ReducePlan::new(op, x.shape(), axes).unwrap();
        let mut y = Tensor::zeros_host(&plan.squeezed(), DType::F32).unwrap();
        reduce(&plan, x, &mut y).unwrap();
        y.to_vec().unwrap()
    }

    /// `op` over `axes` by explicit indices, in f64.
    fn naive(op: ReduceOp, x: &Tensor, axes: &[usize]) -> Vec<f32> {
        let plan = ReducePlan::new(op, x.shape(), axes).unwrap();
        let xv = x.to_vec::<f32>().unwrap();
        let (dims, keep) = (x.dims(), plan.keepdims.strides());
        let mut groups = vec![Vec::new(); plan.keepdims.numel()];
        for (flat, &v) in xv.iter().enumerate() {
            let (mut rem, mut yi) = (flat, 0);
            for k in (0..dims.len()).rev() {
                let i = rem % dims[k];
                rem /= dims[k];
                yi += if plan.reduced[k] { 0 } else { i * keep[k] };
            }
            groups[yi].push(f64::from(v));
        }
        let combine = |g: &Vec<f64>| match op {
            ReduceOp::Sum => g.iter().sum(),
            ReduceOp::Mean => g.iter().sum::<f64>() / g.len().max(1) as f64,
            ReduceOp::Max => g.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            ReduceOp::Min => g.iter().copied().fold(f64::INFINITY, f64::min),
        };
        groups.iter().map(|g| combine(g) as f32).collect()
    }

    #[test]
    fn middle_axes_of_a_small_tensor() {
        let x = tensor(&[2, 3, 4], (0..24).map(|i| i as f32).collect());
        // Sum over axis 1: y[i, k] = x[i,0,k] + x[i,1,k] + x[i,2,k].
        assert_eq!(
            reduced(ReduceOp::Sum, &x, &[1]),
            [12.0, 15.0, 18.0, 21.0, 48.0, 51.0, 54.0, 57.0]
        );
        // Mean over axes 0 and 2: channel j holds 4j..4j+3 and 12+4j..12+4j+3.
        assert_eq!(reduced(ReduceOp::Mean, &x, &[0, 2]), [7.5, 11.5, 15.5]);
        assert_eq!(reduced(ReduceOp::Max, &x, &[0, 2]), [15.0, 19.0, 23.0]);
        assert_eq!(
            reduced(ReduceOp::Min, &x, &[2]),
            [0.0, 4.0, 8.0, 12.0, 16.0, 20.0]
        );
        assert_eq!(reduced(ReduceOp::Sum, &x, &[0, 1, 2]), [276.0]);
        assert_eq!(reduced(ReduceOp::Sum, &x, &[]), x.to_vec::<f32>().unwrap());
    }

    #[test]
    fn empty_groups_give_zero() {
        let x = tensor(&[2, 0], vec![]);
        assert_eq!(reduced(ReduceOp::Mean, &x, &[1]), [0.0, 0.0]);
        assert_eq!(reduced(ReduceOp::Sum, &x, &[1]), [0.0, 0.0]);
    }

    #[test]
    fn large_reductions_match_the_definition() {
        // Each shape exercises a different split: private accumulators along the
        // innermost axis, disjoint output blocks, and private copies of [R, K, R].
        let cases: &[(&[usize], &[usize])] = &[
            (&[3, 40_000], &[1]),
            (&[40_000, 3], &[0]),
            (&[5_000, 40], &[0]),
            (&[4, 9_000, 3], &[0, 2]),
            (&[60, 700, 5], &[1]),
            (&[200_000], &[0]),
        ];
        for &(dims, axes) in cases {
            let n: usize = dims.iter().product();
            let x = tensor(
                dims,
                (0..n).map(|i| ((i * 7919) % 1000) as f32 * 1e-3).collect(),
            );
            for op in [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Mean] {
                let (got, want) = (reduced(op, &x, axes), naive(op, &x, axes));
                for (g, w) in got.iter().zip(&want) {
                    assert!(
                        (g - w).abs() <= 1e-5 * w.abs().max(1.0),
                        "{op:?} {dims:?} {axes:?}: {g} vs {w}"
                    );
                }
            }
        }
    }

    #[test]
    fn max_propagates_nan() {
        let x = tensor(&[2, 3], vec![1.0, f32::NAN, 3.0, 4.0, 5.0, 6.0]);
        let y = reduced(ReduceOp::Max, &x, &[1]);
        assert!(y[0].is_nan() && y[1] == 6.0);
    }

    fn backward(op: ReduceOp, x: &Tensor, axes: &[usize], dy: Vec<f32>) -> Vec<f32> {
        let plan = ReducePlan::new(op, x.shape(), axes).unwrap();
        let mut y = Tensor::zeros_host(&plan.keepdims, DType::F32).unwrap();
        reduce(&plan, x, &mut y).unwrap();
        let dy = tensor(plan.keepdims.dims(), dy);
        let mut dx = tensor(x.dims(), vec![9.0; x.numel()]);
        reduce_backward(&plan, x, &y, &dy, &mut dx).unwrap();
        dx.to_vec().unwrap()
    }

    #[test]
    fn gradients_spread_and_split_ties() {
        let x = tensor(&[2, 3], vec![1.0, 5.0, 5.0, 7.0, 2.0, 3.0]);
        assert_eq!(
            backward(ReduceOp::Max, &x, &[1], vec![4.0, 1.0]),
            [0.0, 2.0, 2.0, 1.0, 0.0, 0.0]
        );
        assert_eq!(
            backward(ReduceOp::Min, &x, &[0], vec![1.0, 2.0, 3.0]),
            [1.0, 0.0, 0.0, 0.0, 2.0, 3.0]
        );
        assert_eq!(
            backward(ReduceOp::Mean, &x, &[0], vec![2.0, 4.0, 6.0]),
            [1.0, 2.0, 3.0, 1.0, 2.0, 3.0]
        );
        assert_eq!(backward(ReduceOp::Sum, &x, &[0, 1], vec![5.0]), [5.0; 6]);
    }

    fn argmax_of(x: &Tensor, axis: usize) -> Vec<i64> {
        let plan = AxisPlan::new("argmax", x.shape(), axis).unwrap();
        let mut y = Tensor::zeros_host(&plan.squeezed(), DType::I64).unwrap();
        argmax(&plan, x, &mut y).unwrap();
        y.to_vec().unwrap()
    }

    #[test]
    fn argmax_first_maximum_and_nan() {
        let x = tensor(
            &[3, 3],
            vec![1.0, 3.0, 3.0, f32::NAN, 9.0, f32::NAN, -1.0, -1.0, -2.0],
        );
        assert_eq!(argmax_of(&x, 1), [1, 0, 0]);
        // Down the columns: column 0 has a NaN in row 1, column 1 its max in row 1.
        assert_eq!(argmax_of(&x, 0), [1, 1, 1]);
        let y = tensor(&[2, 2], vec![1.0, 1.0, 1.0, 2.0]);
        assert_eq!(argmax_of(&y, 0), [0, 1]);
    }
}
