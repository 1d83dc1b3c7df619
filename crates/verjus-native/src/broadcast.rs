//! Broadcasting as runs: the walk shared by the binary ops, their gradients
//! and the reductions of those gradients.
//!
//! [`Broadcast`] coalesces the output axes so that the innermost one is a
//! *run* along which each operand is either contiguous or constant, then walks
//! runs. Same-shape operands become a single run, a scalar operand a constant,
//! `[N, C] + [C]` runs of `C`, and `[N, C, H, W] + [1, C, 1, 1]` runs of
//! `H * W` against one value, so the common cases need no special code and no
//! per-element index arithmetic. [`zip_with`] and [`zip_grad`] are the loops
//! over one run, with the constant cases split out so that each vectorises.

use std::ops::Range;
use verjus_core::MAX_RANK;

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
pub(crate) fn zip_with(
    out: &mut [f32],
    a: Operand<'_>,
    b: Operand<'_>,
    f: impl Fn(f32, f32) -> f32,
) {
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
