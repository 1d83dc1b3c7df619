//! Elementwise unary ops and broadcasting binary ops, with their gradients.
//!
//! The scalar definitions in verjus-core (`UnaryOp::apply`, `derivative`,
//! `BinaryOp::apply`, `partials`) are used directly, so this backend cannot drift
//! from the reference, except that exp, log, sigmoid, tanh and GELU use the
//! vectorisable versions in [`crate::vmath`] (a few ulp from the same values,
//! several times faster than the library's scalar calls), and unary loops are
//! compiled for the CPU's vector width by [`simd`]. ReLU's backward has its own
//! loop that reads `y` instead of `x` (see [`relu_backward`]).
//!
//! To keep the `match op` out of the inner loops, the `specialise_*` macros
//! run a loop body once per op variant with the variant rebuilt as a constant
//! inside the element closure; after inlining, each arm is a straight loop over
//! one formula that the compiler can vectorise.
//!
//! Broadcasting is handled by [`Broadcast`]: it coalesces the output axes so
//! that the innermost one is a *run* along which each operand is either
//! contiguous or constant, then walks runs. Same-shape operands become a single
//! run, a scalar operand a constant, `[N, C] + [C]` runs of `C`, and
//! `[N, C, H, W] + [1, C, 1, 1]` runs of `H * W` against one value, so the
//! common cases need no special code and no per-element index arithmetic.

use crate::parallel::{for_rows, for_rows2};
use crate::reduce;
use crate::vmath::{self, simd};
use std::ops::Range;
use verjus_core::ops::{BinaryOp, BinaryPlan, ReduceOp, ReducePlan, UnaryOp};
use verjus_core::{Result, Tensor, MAX_RANK};

/// Runs `$body` with `$k` bound to a closure returning `$op`; `$k()` inside an
/// element closure is a constant variant, so `apply`/`derivative` inline to
/// one formula per arm.
macro_rules! specialise_unary {
    ($op:expr, $k:ident => $body:expr) => {
        match $op {
            UnaryOp::Neg => {
                let $k = || UnaryOp::Neg;
                $body
            }
            UnaryOp::Exp => {
                let $k = || UnaryOp::Exp;
                $body
            }
            UnaryOp::Log => {
                let $k = || UnaryOp::Log;
                $body
            }
            UnaryOp::Sqrt => {
                let $k = || UnaryOp::Sqrt;
                $body
            }
            UnaryOp::Rsqrt => {
                let $k = || UnaryOp::Rsqrt;
                $body
            }
            UnaryOp::Abs => {
                let $k = || UnaryOp::Abs;
                $body
            }
            UnaryOp::Square => {
                let $k = || UnaryOp::Square;
                $body
            }
            UnaryOp::Recip => {
                let $k = || UnaryOp::Recip;
                $body
            }
            UnaryOp::Relu => {
                let $k = || UnaryOp::Relu;
                $body
            }
            UnaryOp::Sigmoid => {
                let $k = || UnaryOp::Sigmoid;
                $body
            }
            UnaryOp::Tanh => {
                let $k = || UnaryOp::Tanh;
                $body
            }
            UnaryOp::Gelu => {
                let $k = || UnaryOp::Gelu;
                $body
            }
            UnaryOp::Scale(s) => {
                let $k = move || UnaryOp::Scale(s);
                $body
            }
            UnaryOp::AddScalar(s) => {
                let $k = move || UnaryOp::AddScalar(s);
                $body
            }
            UnaryOp::Powf(p) => {
                let $k = move || UnaryOp::Powf(p);
                $body
            }
        }
    };
}

/// [`specialise_unary`] for binary ops.
macro_rules! specialise_binary {
    ($op:expr, $k:ident => $body:expr) => {
        match $op {
            BinaryOp::Add => {
                let $k = || BinaryOp::Add;
                $body
            }
            BinaryOp::Sub => {
                let $k = || BinaryOp::Sub;
                $body
            }
            BinaryOp::Mul => {
                let $k = || BinaryOp::Mul;
                $body
            }
            BinaryOp::Div => {
                let $k = || BinaryOp::Div;
                $body
            }
            BinaryOp::Max => {
                let $k = || BinaryOp::Max;
                $body
            }
            BinaryOp::Min => {
                let $k = || BinaryOp::Min;
                $body
            }
            BinaryOp::Pow => {
                let $k = || BinaryOp::Pow;
                $body
            }
            BinaryOp::Eq => {
                let $k = || BinaryOp::Eq;
                $body
            }
            BinaryOp::Ne => {
                let $k = || BinaryOp::Ne;
                $body
            }
            BinaryOp::Lt => {
                let $k = || BinaryOp::Lt;
                $body
            }
            BinaryOp::Le => {
                let $k = || BinaryOp::Le;
                $body
            }
            BinaryOp::Gt => {
                let $k = || BinaryOp::Gt;
                $body
            }
            BinaryOp::Ge => {
                let $k = || BinaryOp::Ge;
                $body
            }
        }
    };
}

/// Relative cost of one element of a unary op, for the parallel threshold
/// (a library `powf` costs about ten plain operations, the [`vmath`] functions
/// a few).
fn unary_cost(op: UnaryOp) -> usize {
    match op {
        UnaryOp::Powf(_) => 10,
        UnaryOp::Gelu => 8,
        UnaryOp::Exp | UnaryOp::Log | UnaryOp::Sigmoid | UnaryOp::Tanh => 4,
        _ => 1,
    }
}

/// Relative cost of one element of a binary op (see [`unary_cost`]).
fn binary_cost(op: BinaryOp) -> usize {
    if op == BinaryOp::Pow {
        10
    } else {
        1
    }
}

/// `op.apply(x)`, with the vectorisable transcendental functions.
#[inline(always)]
fn apply(op: UnaryOp, x: f32) -> f32 {
    match op {
        UnaryOp::Exp => vmath::exp(x),
        UnaryOp::Log => vmath::ln(x),
        UnaryOp::Sigmoid => vmath::sigmoid(x),
        UnaryOp::Tanh => vmath::tanh(x),
        UnaryOp::Gelu => vmath::gelu(x),
        other => other.apply(x),
    }
}

/// `op.derivative(x, y)`, with the vectorisable GELU derivative.
#[inline(always)]
fn derivative(op: UnaryOp, x: f32, y: f32) -> f32 {
    match op {
        UnaryOp::Gelu => vmath::gelu_derivative(x),
        other => other.derivative(x, y),
    }
}

/// `y = op(x)`.
pub(crate) fn unary(op: UnaryOp, x: &Tensor, y: &mut Tensor) -> Result<()> {
    let x = x.as_slice::<f32>()?;
    let y = y.as_mut_slice::<f32>()?;
    let cost = unary_cost(op);
    specialise_unary!(op, k => for_rows(y, 1, cost, |start, out| {
        let x = &x[start..start + out.len()];
        simd(#[inline(always)] || {
            for (o, &v) in out.iter_mut().zip(x) {
                *o = apply(k(), v);
            }
        });
    }));
    Ok(())
}

/// `dx = dy * op'(x, y)`.
pub(crate) fn unary_backward(
    op: UnaryOp,
    x: &Tensor,
    y: &Tensor,
    dy: &Tensor,
    dx: &mut Tensor,
) -> Result<()> {
    let (x, y, dy) = (
        x.as_slice::<f32>()?,
        y.as_slice::<f32>()?,
        dy.as_slice::<f32>()?,
    );
    let dx = dx.as_mut_slice::<f32>()?;
    if op == UnaryOp::Relu {
        relu_backward(y, dy, dx);
        return Ok(());
    }
    let cost = unary_cost(op);
    specialise_unary!(op, k => for_rows(dx, 1, cost, |start, out| {
        let r = start..start + out.len();
        let inputs = x[r.clone()].iter().zip(&y[r.clone()]).zip(&dy[r]);
        simd(#[inline(always)] || {
            for (o, ((&xv, &yv), &g)) in out.iter_mut().zip(inputs) {
                *o = g * derivative(k(), xv, yv);
            }
        });
    }));
    Ok(())
}

/// `dx = dy * relu'(x)` read from `y` alone: `y > 0` exactly where `x > 0`
/// (`max(x, 0)` is 0 for NaN, and `NaN > 0` is false), so the input need not be
/// streamed in. ReLU backward is bandwidth-bound on large activations, and one
/// input stream fewer is a quarter less traffic.
fn relu_backward(y: &[f32], dy: &[f32], dx: &mut [f32]) {
    for_rows(dx, 1, 1, |start, out| {
        let r = start..start + out.len();
        simd(
            #[inline(always)]
            || {
                for (o, (&yv, &g)) in out.iter_mut().zip(y[r.clone()].iter().zip(&dy[r])) {
                    *o = g * if yv > 0.0 { 1.0 } else { 0.0 };
                }
            },
        );
    });
}

/// The output axes of a broadcast, coalesced into runs (see the module docs).
#[derive(Clone, Debug)]
pub(crate) struct Broadcast {
    /// Elements per run (the innermost coalesced axis; 1 for a one-element output).
    inner: usize,
    /// Whether `a` / `b` advance along a run (otherwise they are constant on it).
    a_vec: bool,
    b_vec: bool,
    /// The outer axes, innermost first: sizes and each operand's strides.
    outer: usize,
    dims: [usize; MAX_RANK],
    a: [usize; MAX_RANK],
    b: [usize; MAX_RANK],
}

impl Broadcast {
    /// The runs of an output of dimensions `out` read through the element
    /// strides `a` and `b` (zero on broadcast axes, contiguous otherwise, as
    /// `BinaryPlan` gives them).
    pub(crate) fn new(out: &[usize], a: &[usize], b: &[usize]) -> Self {
        let mut bc = Broadcast {
            inner: 1,
            a_vec: false,
            b_vec: false,
            outer: 0,
            dims: [0; MAX_RANK],
            a: [0; MAX_RANK],
            b: [0; MAX_RANK],
        };
        // Coalesce innermost first into `dims/a/b[0..n]`, then split off the run.
        let mut n = 0;
        for i in (0..out.len()).rev() {
            if out[i] == 1 {
                continue;
            }
            let merges = n > 0
                && a[i] == bc.a[n - 1] * bc.dims[n - 1]
                && b[i] == bc.b[n - 1] * bc.dims[n - 1];
            if merges {
                bc.dims[n - 1] *= out[i];
            } else {
                (bc.dims[n], bc.a[n], bc.b[n]) = (out[i], a[i], b[i]);
                n += 1;
            }
        }
        if n > 0 {
            // The innermost stride of a contiguous operand is 1 by construction.
            debug_assert!(bc.a[0] <= 1 && bc.b[0] <= 1);
            (bc.inner, bc.a_vec, bc.b_vec) = (bc.dims[0], bc.a[0] != 0, bc.b[0] != 0);
            bc.dims.copy_within(1..n, 0);
            bc.a.copy_within(1..n, 0);
            bc.b.copy_within(1..n, 0);
            bc.outer = n - 1;
        }
        bc
    }

    /// `a` restricted to the run of `len` elements starting at offset `off`.
    fn a_run<'s>(&self, a: &'s [f32], off: usize, len: usize) -> Operand<'s> {
        Operand::new(a, off, len, self.a_vec)
    }

    /// `b` restricted to the run of `len` elements starting at offset `off`.
    pub(crate) fn b_run<'s>(&self, b: &'s [f32], off: usize, len: usize) -> Operand<'s> {
        Operand::new(b, off, len, self.b_vec)
    }

    /// [`Broadcast::segments`] with the operands `a` and `b` cut to each run:
    /// `f(out_range, a_run, b_run)`.
    pub(crate) fn runs<'s>(
        &self,
        a: &'s [f32],
        b: &'s [f32],
        start: usize,
        end: usize,
        mut f: impl FnMut(Range<usize>, Operand<'s>, Operand<'s>),
    ) {
        self.segments(start, end, |r, ao, bo| {
            let len = r.len();
            f(r, self.a_run(a, ao, len), self.b_run(b, bo, len));
        });
    }

    /// Calls `f(out_range, a_offset, b_offset)` for every run, or part of a run,
    /// of output elements in `start..end`, in order.
    pub(crate) fn segments(
        &self,
        start: usize,
        end: usize,
        mut f: impl FnMut(Range<usize>, usize, usize),
    ) {
        if start >= end {
            return;
        }
        let (mut row, mut col) = (start / self.inner, start % self.inner);
        let mut idx = [0usize; MAX_RANK];
        let (mut ao, mut bo) = (0, 0);
        let axes = || self.dims.iter().zip(&self.a).zip(&self.b).take(self.outer);
        for (i, ((&d, &sa), &sb)) in idx.iter_mut().zip(axes()) {
            *i = row % d;
            row /= d;
            ao += *i * sa;
            bo += *i * sb;
        }
        let mut pos = start;
        loop {
            let len = (self.inner - col).min(end - pos);
            let (a_col, b_col) = (col * usize::from(self.a_vec), col * usize::from(self.b_vec));
            f(pos..pos + len, ao + a_col, bo + b_col);
            pos += len;
            if pos >= end {
                return;
            }
            col = 0;
            // Advance the outer index like an odometer.
            for (i, ((&d, &sa), &sb)) in idx.iter_mut().zip(axes()) {
                *i += 1;
                ao += sa;
                bo += sb;
                if *i < d {
                    break;
                }
                *i = 0;
                ao -= sa * d;
                bo -= sb * d;
            }
        }
    }
}

/// An operand along one run: its elements, or one value repeated.
#[derive(Clone, Copy)]
pub(crate) enum Operand<'a> {
    Run(&'a [f32]),
    Const(f32),
}

impl<'a> Operand<'a> {
    /// Element `i` of the run.
    #[inline(always)]
    pub(crate) fn get(&self, i: usize) -> f32 {
        match self {
            Operand::Run(s) => s[i],
            Operand::Const(c) => *c,
        }
    }

    /// The elements `range` of the run.
    pub(crate) fn sub(&self, range: Range<usize>) -> Self {
        match self {
            Operand::Run(s) => Operand::Run(&s[range]),
            Operand::Const(c) => Operand::Const(*c),
        }
    }

    fn new(data: &'a [f32], off: usize, len: usize, advances: bool) -> Self {
        if advances {
            Operand::Run(&data[off..off + len])
        } else {
            Operand::Const(data[off])
        }
    }
}

/// `out[i] = f(a[i], b[i])` over one run, with the constant cases split out so
/// each loop vectorises.
#[inline(always)]
fn zip_with(out: &mut [f32], a: Operand<'_>, b: Operand<'_>, f: impl Fn(f32, f32) -> f32) {
    match (a, b) {
        (Operand::Run(a), Operand::Run(b)) => {
            for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
                *o = f(x, y);
            }
        }
        (Operand::Run(a), Operand::Const(y)) => {
            for (o, &x) in out.iter_mut().zip(a) {
                *o = f(x, y);
            }
        }
        (Operand::Const(x), Operand::Run(b)) => {
            for (o, &y) in out.iter_mut().zip(b) {
                *o = f(x, y);
            }
        }
        (Operand::Const(x), Operand::Const(y)) => out.fill(f(x, y)),
    }
}

/// `out[i] = g[i] * f(a[i], b[i])` over one run (a gradient times a partial).
#[inline(always)]
pub(crate) fn zip_grad(
    out: &mut [f32],
    g: &[f32],
    a: Operand<'_>,
    b: Operand<'_>,
    f: impl Fn(f32, f32) -> f32,
) {
    match (a, b) {
        (Operand::Run(a), Operand::Run(b)) => {
            for (((o, &d), &x), &y) in out.iter_mut().zip(g).zip(a).zip(b) {
                *o = d * f(x, y);
            }
        }
        (Operand::Run(a), Operand::Const(y)) => {
            for ((o, &d), &x) in out.iter_mut().zip(g).zip(a) {
                *o = d * f(x, y);
            }
        }
        (Operand::Const(x), Operand::Run(b)) => {
            for ((o, &d), &y) in out.iter_mut().zip(g).zip(b) {
                *o = d * f(x, y);
            }
        }
        (Operand::Const(x), Operand::Const(y)) => {
            let p = f(x, y);
            for (o, &d) in out.iter_mut().zip(g) {
                *o = d * p;
            }
        }
    }
}

/// `c = a op b` with broadcasting.
pub(crate) fn binary(plan: &BinaryPlan, a: &Tensor, b: &Tensor, c: &mut Tensor) -> Result<()> {
    let (a, b) = (a.as_slice::<f32>()?, b.as_slice::<f32>()?);
    let c = c.as_mut_slice::<f32>()?;
    let bc = Broadcast::new(plan.out.dims(), &plan.a_strides, &plan.b_strides);
    specialise_binary!(plan.op, k => for_rows(c, 1, binary_cost(plan.op), |start, out| {
        bc.runs(a, b, start, start + out.len(), |r, ra, rb| {
            zip_with(&mut out[r.start - start..r.end - start], ra, rb, |x, y| k().apply(x, y));
        });
    }));
    Ok(())
}

/// Gradients of `c = a op b`: `da`, `db` = `dy` times the partial, summed over
/// the axes along which that operand was broadcast.
pub(crate) fn binary_backward(
    plan: &BinaryPlan,
    a: &Tensor,
    b: &Tensor,
    dy: &Tensor,
    da: Option<&mut Tensor>,
    db: Option<&mut Tensor>,
) -> Result<()> {
    let (a, b, dy) = (
        a.as_slice::<f32>()?,
        b.as_slice::<f32>()?,
        dy.as_slice::<f32>()?,
    );
    let bc = Broadcast::new(plan.out.dims(), &plan.a_strides, &plan.b_strides);
    let numel = plan.out.numel();
    let (a_full, b_full) = (plan.a.numel() == numel, plan.b.numel() == numel);
    let cost = binary_cost(plan.op);
    specialise_binary!(plan.op, k => {
        let pa = move |x, y| k().partials(x, y).0;
        let pb = move |x, y| k().partials(x, y).1;
        match (da, db) {
            (Some(da), Some(db)) if a_full && b_full => {
                let (da, db) = (da.as_mut_slice::<f32>()?, db.as_mut_slice::<f32>()?);
                for_rows2(da, 1, db, 1, cost, |start, ra, rb| {
                    let r = start..start + ra.len();
                    let inputs = dy[r.clone()].iter().zip(&a[r.clone()]).zip(&b[r]);
                    for ((oa, ob), ((&g, &x), &y)) in ra.iter_mut().zip(rb).zip(inputs) {
                        let (p, q) = k().partials(x, y);
                        (*oa, *ob) = (g * p, g * q);
                    }
                });
            }
            (da, db) => {
                let ctx = GradCtx { plan, bc: &bc, a, b, dy, cost };
                if let Some(da) = da {
                    ctx.operand_grad(&plan.a_strides, a_full, da, pa)?;
                }
                if let Some(db) = db {
                    ctx.operand_grad(&plan.b_strides, b_full, db, pb)?;
                }
            }
        }
    });
    Ok(())
}

/// The inputs of a binary backward, shared by the two operands' gradients.
struct GradCtx<'a> {
    plan: &'a BinaryPlan,
    bc: &'a Broadcast,
    a: &'a [f32],
    b: &'a [f32],
    dy: &'a [f32],
    cost: usize,
}

impl GradCtx<'_> {
    /// `out = dy * partial(a, b)` over the whole output shape.
    fn full_grad(&self, out: &mut [f32], partial: impl Fn(f32, f32) -> f32 + Sync + Send) {
        let (bc, a, b, dy) = (self.bc, self.a, self.b, self.dy);
        for_rows(out, 1, self.cost, |start, out| {
            bc.runs(a, b, start, start + out.len(), |r, ra, rb| {
                let seg = &mut out[r.start - start..r.end - start];
                zip_grad(seg, &dy[r], ra, rb, &partial);
            });
        });
    }

    /// The gradient of the operand read through `strides` into `dx`: written
    /// directly when it has the output's size, otherwise summed over the
    /// broadcast axes as it is formed.
    fn operand_grad(
        &self,
        strides: &[usize],
        full: bool,
        dx: &mut Tensor,
        partial: impl Fn(f32, f32) -> f32 + Sync + Send,
    ) -> Result<()> {
        let dx = dx.as_mut_slice::<f32>()?;
        if full {
            self.full_grad(dx, partial);
            return Ok(());
        }
        let out = &self.plan.out;
        let axes: Vec<usize> = (0..out.rank())
            .filter(|&i| strides[i] == 0 && out.dims()[i] != 1)
            .collect();
        let rplan = ReducePlan::new(ReduceOp::Sum, out, &axes)?;
        if matches!(self.plan.op, BinaryOp::Add | BinaryOp::Sub) {
            // A constant partial (1 or -1): sum dy itself.
            reduce::reduce_slice(&rplan, self.dy, dx);
            let p = partial(1.0, 1.0);
            if p != 1.0 {
                dx.iter_mut().for_each(|v| *v *= p);
            }
        } else {
            let (bc, a, b, dy) = (self.bc, self.a, self.b, self.dy);
            let grad = reduce::GradSum {
                bc,
                a,
                b,
                dy,
                partial,
            };
            reduce::sum_grad(&rplan, &grad, dx);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use verjus_core::{DType, Shape};

    fn tensor(dims: &[usize], data: Vec<f32>) -> Tensor {
        Tensor::from_vec(dims.to_vec(), data).unwrap()
    }

    fn seq(n: usize) -> Vec<f32> {
        (0..n).map(|i| (i % 97) as f32 * 0.25 - 7.0).collect()
    }

    /// `c = a op b` by explicit multi-indices, the definition of broadcasting.
    fn naive(op: BinaryOp, a: &Tensor, b: &Tensor) -> Vec<f32> {
        let plan = BinaryPlan::new(op, a.shape(), b.shape()).unwrap();
        let (av, bv) = (a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap());
        let dims = plan.out.dims();
        (0..plan.out.numel())
            .map(|flat| {
                let (mut rem, mut ai, mut bi) = (flat, 0, 0);
                for k in (0..dims.len()).rev() {
                    let i = rem % dims[k];
                    rem /= dims[k];
                    ai += i * plan.a_strides[k];
                    bi += i * plan.b_strides[k];
                }
                op.apply(av[ai], bv[bi])
            })
            .collect()
    }

    fn run_binary(op: BinaryOp, a: &Tensor, b: &Tensor) -> Vec<f32> {
        let plan = BinaryPlan::new(op, a.shape(), b.shape()).unwrap();
        let mut c = Tensor::zeros_host(&plan.out, DType::F32).unwrap();
        binary(&plan, a, b, &mut c).unwrap();
        c.to_vec().unwrap()
    }

    #[test]
    fn binary_matches_explicit_broadcasting() {
        let cases: &[(&[usize], &[usize])] = &[
            (&[2, 3], &[2, 3]),
            (&[2, 3], &[]),
            (&[1], &[4, 3]),
            (&[4, 3], &[3]),
            (&[2, 3, 2, 2], &[1, 3, 1, 1]),
            (&[2, 1, 3], &[4, 1]),
            (&[3, 1], &[1, 5]),
            // Large enough to split over the pool at chunk boundaries inside runs.
            (&[301, 257], &[257]),
            (&[7, 33, 301], &[33, 1]),
        ];
        for &(sa, sb) in cases {
            let a = tensor(sa, seq(Shape::new(sa).unwrap().numel()));
            let b = tensor(
                sb,
                seq(Shape::new(sb).unwrap().numel())
                    .iter()
                    .map(|v| v + 0.5)
                    .collect(),
            );
            for op in [BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Max, BinaryOp::Lt] {
                assert_eq!(
                    run_binary(op, &a, &b),
                    naive(op, &a, &b),
                    "{op:?} {sa:?} {sb:?}"
                );
                assert_eq!(
                    run_binary(op, &b, &a),
                    naive(op, &b, &a),
                    "{op:?} {sb:?} {sa:?}"
                );
            }
        }
    }

    #[test]
    fn unary_and_its_gradient() {
        let x = tensor(&[4], vec![-2.0, -0.5, 0.0, 3.0]);
        let mut y = tensor(&[4], vec![0.0; 4]);
        unary(UnaryOp::Relu, &x, &mut y).unwrap();
        assert_eq!(y.to_vec::<f32>().unwrap(), [0.0, 0.0, 0.0, 3.0]);
        unary(UnaryOp::Sigmoid, &x, &mut y).unwrap();
        let dy = tensor(&[4], vec![1.0, 2.0, 3.0, 4.0]);
        let mut dx = tensor(&[4], vec![0.0; 4]);
        unary_backward(UnaryOp::Sigmoid, &x, &y, &dy, &mut dx).unwrap();
        // sigmoid'(0) = 1/4, so dx[2] = 3/4.
        assert_eq!(dx.to_vec::<f32>().unwrap()[2], 0.75);
        unary_backward(UnaryOp::Scale(-3.0), &x, &y, &dy, &mut dx).unwrap();
        assert_eq!(dx.to_vec::<f32>().unwrap(), [-3.0, -6.0, -9.0, -12.0]);
    }

    fn grads(op: BinaryOp, a: &Tensor, b: &Tensor, dy: &Tensor) -> (Vec<f32>, Vec<f32>) {
        let plan = BinaryPlan::new(op, a.shape(), b.shape()).unwrap();
        // Pre-filled with garbage: the gradients must overwrite, not accumulate.
        let mut da = tensor(a.dims(), vec![9.0; a.numel()]);
        let mut db = tensor(b.dims(), vec![9.0; b.numel()]);
        binary_backward(&plan, a, b, dy, Some(&mut da), Some(&mut db)).unwrap();
        (da.to_vec().unwrap(), db.to_vec().unwrap())
    }

    #[test]
    fn backward_sums_over_broadcast_axes() {
        let a = tensor(&[2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let b = tensor(&[3], vec![10.0, 20.0, 30.0]);
        let dy = tensor(&[2, 3], vec![1.0, 1.0, 1.0, 2.0, 2.0, 2.0]);
        let (da, db) = grads(BinaryOp::Sub, &a, &b, &dy);
        assert_eq!(da, [1.0, 1.0, 1.0, 2.0, 2.0, 2.0]);
        assert_eq!(db, [-3.0, -3.0, -3.0]);
        let (da, db) = grads(BinaryOp::Mul, &a, &b, &dy);
        assert_eq!(da, [10.0, 20.0, 30.0, 20.0, 40.0, 60.0]);
        // db[c] = sum_n dy[n, c] * a[n, c]
        assert_eq!(db, [9.0, 12.0, 15.0]);
        // A scalar operand gets the sum over everything.
        let s = tensor(&[], vec![2.0]);
        let (ds, da) = grads(BinaryOp::Mul, &s, &a, &dy);
        assert_eq!(ds, [1.0 + 2.0 + 3.0 + 8.0 + 10.0 + 12.0]);
        assert_eq!(da, [2.0, 2.0, 2.0, 4.0, 4.0, 4.0]);
    }

    /// Gradients by explicit multi-indices, accumulated in f64.
    fn naive_grads(op: BinaryOp, a: &Tensor, b: &Tensor, dy: &[f32]) -> (Vec<f32>, Vec<f32>) {
        let plan = BinaryPlan::new(op, a.shape(), b.shape()).unwrap();
        let (av, bv) = (a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap());
        let (mut da, mut db) = (vec![0f64; av.len()], vec![0f64; bv.len()]);
        let dims = plan.out.dims();
        for (flat, &g) in dy.iter().enumerate() {
            let (mut rem, mut ai, mut bi) = (flat, 0, 0);
            for k in (0..dims.len()).rev() {
                let i = rem % dims[k];
                rem /= dims[k];
                ai += i * plan.a_strides[k];
                bi += i * plan.b_strides[k];
            }
            let (p, q) = op.partials(av[ai], bv[bi]);
            da[ai] += f64::from(g * p);
            db[bi] += f64::from(g * q);
        }
        let f = |v: Vec<f64>| v.into_iter().map(|x| x as f32).collect();
        (f(da), f(db))
    }

    #[test]
    fn backward_matches_explicit_sums() {
        let cases: &[(&[usize], &[usize])] = &[
            (&[2, 1, 3], &[4, 1]),
            (&[301, 257], &[257]),
            (&[7, 33, 301], &[33, 1]),
            (&[100_003], &[]),
            (&[4, 3, 50, 60], &[1, 3, 1, 1]),
        ];
        // b is never 0 (it is a multiple of 1/4 plus 0.3), so div is finite.
        for &(sa, sb) in cases {
            let a = tensor(sa, seq(Shape::new(sa).unwrap().numel()));
            let b = tensor(
                sb,
                seq(Shape::new(sb).unwrap().numel())
                    .iter()
                    .map(|v| v + 0.3)
                    .collect(),
            );
            let plan = BinaryPlan::new(BinaryOp::Mul, a.shape(), b.shape()).unwrap();
            let dy: Vec<f32> = seq(plan.out.numel() + 3)[3..].to_vec();
            let dyt = tensor(plan.out.dims(), dy.clone());
            for op in [BinaryOp::Mul, BinaryOp::Div, BinaryOp::Sub] {
                let (da, db) = grads(op, &a, &b, &dyt);
                let (wa, wb) = naive_grads(op, &a, &b, &dy);
                for (got, want) in [(da, wa), (db, wb)] {
                    for (g, w) in got.iter().zip(&want) {
                        assert!(
                            (g - w).abs() <= 1e-4 * w.abs().max(1.0),
                            "{op:?} {sa:?} {sb:?}: {g} vs {w}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn same_shape_backward_and_single_gradient() {
        let a = tensor(&[3], vec![1.0, 5.0, 2.0]);
        let b = tensor(&[3], vec![4.0, 5.0, 1.0]);
        let dy = tensor(&[3], vec![1.0, 2.0, 3.0]);
        // Ties of maximum go to a.
        assert_eq!(
            grads(BinaryOp::Max, &a, &b, &dy),
            (vec![0.0, 2.0, 3.0], vec![1.0, 0.0, 0.0])
        );
        let plan = BinaryPlan::new(BinaryOp::Div, a.shape(), b.shape()).unwrap();
        let mut db = tensor(&[3], vec![0.0; 3]);
        binary_backward(&plan, &a, &b, &dy, None, Some(&mut db)).unwrap();
        // d(a/b)/db = -a / b^2
        assert_eq!(db.to_vec::<f32>().unwrap(), [-1.0 / 16.0, -0.4, -6.0]);
    }
}
