//! One part of a step, product and gates fused, on AVX-512 or AVX2.
//!
//! The portable step (`forward::Step::part`, `backward::Step::gates`) runs the
//! recurrent product through the `gemm` crate, which packs both operands again
//! at every call and writes the product to memory, and then a gate loop reads
//! it back. Here a register tile of the product ([`super::tile`]) is finished by the
//! gate loop while it is still in registers:
//! - forward: the tile is `S::ROWS` rows by one block's four gates (a block
//!   is one vector of units, see `super::plan_layout`),
//!   the products of `x_t` with `W_ih^T` and of `h_{t-1}` with `W_hh^T` (so
//!   the input projection needs no pass of its own over all frames), plus the
//!   bias; the gate activations, the cell and the output go to memory once;
//! - backward: the tile is `S::ROWS` rows by up to four vectors of `dh` (the
//!   product of the next step's gate gradients and `W_hh`), which the gate
//!   backward of the same rows uses at once; its gate gradients go to memory
//!   once and are added to the bias gradient there. Then the part adds its
//!   rows' share of the frame to the weight gradients (`dgates_t^T h_{t-1}`
//!   and `dgates_t^T x_t`) and writes their `dx_t = dgates_t W_ih` while those
//!   gate gradients are still in cache: large products over all frames
//!   afterwards read them from memory again and cost more than these small
//!   ones.
//!
//! It needs the blocked layout with blocks of one vector (any `H`: the last
//! block may be partial, its vector masked) and a CPU with AVX-512F or AVX2
//! and FMA; `super::plan_layout` says whether a plan gets it and with which.
//! The kernel is written once over [`Simd`]; `fused_step` and `fused_stage`
//! enter it through one function per instruction set (see [`super::isa`]).

use super::backward::Step as BackwardStep;
use super::forward::Step as ForwardStep;
use super::isa::{Avx2, Avx512, Isa, Simd};
use super::tile::{
    accumulate, dispatch_tile, load_tile, store_tile, zeros, Lanes, Lhs, Rows, Tile,
};
use super::vmath::{sigmoid, tanh};
use rayon::prelude::*;
use std::ops::Range;

/// Runs `work(part, rows)` for the parts of a batch of `batch` sequences,
/// each on its own thread: contiguous ranges of rows, as even as they come.
///
/// The rows of an LSTM are independent, so a part runs every step of its
/// sequences without waiting for another: no barrier per step, and each
/// thread's state stays in its own cache. (Splitting each step's hidden units
/// across the threads instead needed a barrier per step, at which every thread
/// fetched the other's half of `h_{t-1}`.)
pub(super) fn run_parts(isa: Isa, batch: usize, work: impl Fn(usize, Range<usize>) + Sync) {
    let parts = parts(isa, batch);
    let rows = |p: usize| p * batch / parts..(p + 1) * batch / parts;
    (0..parts)
        .into_par_iter()
        .with_max_len(1)
        .for_each(|p| work(p, rows(p)));
}

/// The number of parts [`run_parts`] cuts a batch into: one per thread, each
/// of at least one tile of rows.
pub(super) fn parts(isa: Isa, batch: usize) -> usize {
    rayon::current_num_threads().clamp(1, batch.div_ceil(isa.rows()).max(1))
}

/// The share of a step one call of the fused kernel runs: `rows` of the
/// batch, `units` (whole blocks), adding to the weight and bias gradient sums
/// number `sums`.
#[derive(Clone, Debug)]
pub(super) struct Part {
    pub(super) rows: Range<usize>,
    pub(super) units: Range<usize>,
    pub(super) sums: usize,
}

/// Calls `$run::<S, R>($args)` for the runtime `$r` (1..=6).
macro_rules! dispatch_rows {
    ($s:ty, $r:expr, $run:ident($($arg:expr),*)) => {
        match $r {
            6 => $run::<$s, 6>($($arg),*),
            5 => $run::<$s, 5>($($arg),*),
            4 => $run::<$s, 4>($($arg),*),
            3 => $run::<$s, 3>($($arg),*),
            2 => $run::<$s, 2>($($arg),*),
            _ => $run::<$s, 1>($($arg),*),
        }
    };
}

/// The block of units of one tile of the forward: `width` units from `u0`
/// (gate `q`'s columns start at `4 u0 + q width`), one vector of `lanes`.
struct Block<S: Simd> {
    u0: usize,
    width: usize,
    lanes: Lanes<S>,
}

impl<S: Simd> Clone for Block<S> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<S: Simd> Copy for Block<S> {}

impl ForwardStep<'_> {
    /// This part of forward step `t`.
    ///
    /// # Safety
    /// `isa` came with this step's layout from `super::plan_layout`, and no
    /// other thread touches this part's rows and units of the step, or reads
    /// them before the step is done.
    pub(super) unsafe fn fused_step(&self, isa: Isa, t: usize, part: &Part) {
        // SAFETY: the caller's contract; the token is this CPU's.
        unsafe {
            match isa {
                Isa::Avx512(s) => self.step_avx512(s, t, part),
                Isa::Avx2(s) => self.step_avx2(s, t, part),
            }
        }
    }

    /// # Safety
    /// As [`ForwardStep::fused_step`].
    #[target_feature(enable = "avx512f")]
    unsafe fn step_avx512(&self, s: Avx512, t: usize, part: &Part) {
        // SAFETY: the caller's contract.
        unsafe { self.step_with(s, t, part) }
    }

    /// # Safety
    /// As [`ForwardStep::fused_step`].
    #[target_feature(enable = "avx2,fma")]
    unsafe fn step_avx2(&self, s: Avx2, t: usize, part: &Part) {
        // SAFETY: the caller's contract.
        unsafe { self.step_with(s, t, part) }
    }

    /// [`ForwardStep::fused_step`] with `S`.
    ///
    /// # Safety
    /// As [`ForwardStep::fused_step`].
    #[inline(always)]
    unsafe fn step_with<S: Simd>(&self, s: S, t: usize, part: &Part) {
        let (h_len, rows) = (self.plan.hidden, &part.rows);
        // Blocks outer, rows inner: a block's columns of W_hh^T stay in cache
        // while every row of the step runs against them.
        for u0 in part.units.clone().step_by(S::LANES) {
            let width = S::LANES.min(h_len - u0);
            let block = Block {
                u0,
                width,
                lanes: Lanes::first(s, width),
            };
            let mut b0 = rows.start;
            while b0 < rows.end {
                let r = S::ROWS.min(rows.end - b0);
                // SAFETY: the caller's contract; the rows and units lie inside the step.
                unsafe { dispatch_rows!(S, r, fused_rows(self, s, t, b0, block)) };
                b0 += r;
            }
        }
    }
}

/// Rows `b0..b0 + R` of one block of units of forward step `t`: the gate
/// pre-activations (the input projection and the recurrent product) in
/// registers, then the gates, the cell and the output.
///
/// # Safety
/// As [`ForwardStep::fused_step`], for these rows.
#[inline(always)]
unsafe fn fused_rows<S: Simd, const R: usize>(
    step: &ForwardStep<'_>,
    s: S,
    t: usize,
    b0: usize,
    block: Block<S>,
) {
    let (b_len, h_len) = (step.plan.batch, step.plan.hidden);
    let g_len = 4 * h_len;
    let Block { u0, width, lanes } = block;
    let col = 4 * u0;
    let f_len = step.plan.input;
    let acts = step.acts.ptr();
    // The four gates' vectors of these units in a weight `[*, 4H]` in gate order.
    // This block's panel of a weight `[len, 4H]` (see `Layout::panels_to`).
    // SAFETY: the panel lies inside the weight.
    let gates = |w: &[f32], len: usize| {
        let panel = unsafe { w.as_ptr().add(col * len) };
        Rows::strided(panel, 4 * width, width, lanes)
    };
    let mut acc: Tile<S, R, 4> = if step.w_ih_t.is_empty() {
        // The input projection is in the gates already (a unit split).
        // SAFETY: rows b0.. of frame t's gates [B, 4H], these units' columns.
        let pre = unsafe { acts.add((t * b_len + b0) * g_len + col) };
        // SAFETY: as above.
        unsafe { load_tile(s, Rows::strided(pre, g_len, width, lanes)) }
    } else {
        let x = Lhs {
            // SAFETY: rows b0.. of x_t [B, F].
            ptr: unsafe { step.v.x.as_ptr().add((t * b_len + b0) * f_len) },
            rs: f_len,
            cs: 1,
        };
        // SAFETY: W_ih^T [F, 4H] in gate order.
        unsafe { accumulate(s, zeros(s), f_len, x, gates(step.w_ih_t, f_len)) }
    };
    if let Some(h_prev) = step.h_prev(t) {
        let a = Lhs {
            // SAFETY: rows b0.. of h_{t-1} [B, H].
            ptr: unsafe { h_prev.add(b0 * h_len) },
            rs: h_len,
            cs: 1,
        };
        // SAFETY: W_hh^T [H, 4H] in gate order.
        acc = unsafe { accumulate(s, acc, h_len, a, gates(step.w_hh_t, h_len)) };
    }
    for (r, pre) in acc.iter().enumerate() {
        let b = b0 + r;
        let state = (t * b_len + b) * h_len + u0;
        // SAFETY: frame t-1's cells (or c0) of row b at these units.
        let c_prev = unsafe {
            if t == 0 {
                lanes.load_or_zero(s, step.v.c0, b * h_len + u0)
            } else {
                lanes.load(s, step.cells.ptr().add(state - b_len * h_len))
            }
        };
        // SAFETY: frame t of the cells and outputs, in bounds.
        let (c_out, h_out) = unsafe { (step.cells.ptr().add(state), step.y.ptr().add(state)) };
        if !step.v.active(b, t) {
            // Finished: the state is carried, the output is 0.
            // SAFETY: this part's units of frame t, row b.
            unsafe {
                lanes.store(s, c_out, c_prev);
                lanes.store(s, h_out, s.zero());
            }
            continue;
        }
        let mut gate = [s.zero(); 4];
        for (q, (g, &p)) in gate.iter_mut().zip(pre).enumerate() {
            let at = col + width * q;
            // SAFETY: the summed bias has 4H entries.
            let bias = unsafe { lanes.load_or_zero(s, step.bias, at) };
            let p = s.add(p, bias);
            *g = if q == 2 { tanh(s, p) } else { sigmoid(s, p) };
            // SAFETY: this part's columns of frame t, row b.
            unsafe { lanes.store(s, acts.add((t * b_len + b) * g_len + at), *g) };
        }
        let [i, f, g, o] = gate;
        let c = s.fmadd(f, c_prev, s.mul(i, g));
        // SAFETY: as above.
        unsafe {
            lanes.store(s, c_out, c);
            lanes.store(s, h_out, s.mul(o, tanh(s, c)));
        }
    }
}

impl BackwardStep<'_> {
    /// This part of stage `s` of the backward: `dh` of step `t = T-1-s` from
    /// the gate gradients of step `t + 1` (for `s > 0`), then the gate
    /// backward of step `t` and its share of the weight gradients; the stage
    /// `s = T` (when `dh0` is asked for) only finishes `dh` from step 0's gate
    /// gradients.
    ///
    /// # Safety
    /// `isa` came with this step's layout from `super::plan_layout`; no other
    /// thread touches this part's rows and units of the stage or its gradient
    /// sums, and the previous stage is done.
    pub(super) unsafe fn fused_stage(&self, isa: Isa, s: usize, part: &Part) {
        // SAFETY: the caller's contract; the token is this CPU's.
        unsafe {
            match isa {
                Isa::Avx512(v) => self.stage_avx512(v, s, part),
                Isa::Avx2(v) => self.stage_avx2(v, s, part),
            }
        }
    }

    /// # Safety
    /// As [`BackwardStep::fused_stage`].
    #[target_feature(enable = "avx512f")]
    unsafe fn stage_avx512(&self, v: Avx512, s: usize, part: &Part) {
        // SAFETY: the caller's contract.
        unsafe { self.stage_with(v, s, part) }
    }

    /// # Safety
    /// As [`BackwardStep::fused_stage`].
    #[target_feature(enable = "avx2,fma")]
    unsafe fn stage_avx2(&self, v: Avx2, s: usize, part: &Part) {
        // SAFETY: the caller's contract.
        unsafe { self.stage_with(v, s, part) }
    }

    /// [`BackwardStep::fused_stage`] with `S`.
    ///
    /// # Safety
    /// As [`BackwardStep::fused_stage`].
    #[inline(always)]
    unsafe fn stage_with<S: Simd>(&self, v: S, s: usize, part: &Part) {
        let g_len = 4 * self.plan.hidden;
        let (rows, units) = (&part.rows, &part.units);
        // The product's depth `4H` in slices whose rows of W_hh stay in the
        // L1 cache while every row runs against them; the partial sums of all
        // but the last slice wait in `dh_rec`.
        let last_slice = if s > 0 {
            (g_len - 1) / DEPTH * DEPTH
        } else {
            0
        };
        let mut u0 = units.start;
        while u0 < units.end {
            // A tile lies in one panel of W_hh.
            let panel_end = (u0 / (4 * S::LANES) + 1) * 4 * S::LANES;
            let width = units.end.min(panel_end) - u0;
            let nq = width.div_ceil(S::LANES);
            for k0 in (0..last_slice).step_by(DEPTH) {
                let mut b0 = rows.start;
                while b0 < rows.end {
                    let r = S::ROWS.min(rows.end - b0);
                    let at = TileAt {
                        s,
                        b0,
                        u0,
                        width,
                        k0,
                        sums: part.sums,
                    };
                    // SAFETY: the caller's contract; the rows and units lie inside the step.
                    unsafe { dispatch_tile!(S, r, nq, partial_rows(self, v, at)) };
                    b0 += r;
                }
            }
            let mut b0 = rows.start;
            while b0 < rows.end {
                let r = S::ROWS.min(rows.end - b0);
                let at = TileAt {
                    s,
                    b0,
                    u0,
                    width,
                    k0: last_slice,
                    sums: part.sums,
                };
                // SAFETY: as above.
                unsafe { dispatch_tile!(S, r, nq, fused_rows_backward(self, v, at)) };
                b0 += r;
            }
            u0 += width;
        }
        if s < self.plan.steps {
            // SAFETY: the caller's contract; this part owns its gradient sums.
            unsafe { self.fused_weight_grads(v, self.plan.steps - 1 - s, part) };
        }
    }

    /// Adds the share of this part's rows in frame `t` to its sums of the
    /// rows of `dW_hh` and `dW_ih` of its units' gates, and writes their rows
    /// of frame `t`'s `dx` (a part of all units), when they are asked for.
    ///
    /// # Safety
    /// As [`BackwardStep::fused_stage`]; frame `t`'s gate gradients of this
    /// part are written.
    #[inline(always)]
    unsafe fn fused_weight_grads<S: Simd>(&self, v: S, t: usize, part: &Part) {
        let (b_len, f_len, h_len) = (self.plan.batch, self.plan.input, self.plan.hidden);
        let g_len = 4 * h_len;
        let rows = &part.rows;
        let cols = 4 * part.units.start..4 * part.units.end;
        let first = t * b_len + rows.start;
        // A(c, b): the gate gradient of row `rows.start + b`, column `cols.start + c`.
        let dgates = Lhs {
            // SAFETY: frame t's gate gradients from row rows.start, in bounds.
            ptr: unsafe { self.dgates.ptr().add(first * g_len + cols.start) },
            rs: 1,
            cs: g_len,
        };
        let sums = part.sums * self.dw_part_len;
        if let Some(dw) = &self.dw_hh {
            // SAFETY: these rows of frame t-1's outputs (or h0) [B, H], in bounds.
            let h_prev = if t == 0 {
                self.v
                    .h0
                    .map(|h| unsafe { h.as_ptr().add(rows.start * h_len) })
            } else {
                Some(unsafe { self.y.as_ptr().add((first - b_len) * h_len) })
            };
            if let Some(h_prev) = h_prev {
                // SAFETY: the caller's contract; the extents lie in the buffers.
                unsafe {
                    let dst = dw.ptr().add(sums + cols.start * h_len);
                    add_product(v, dst, h_len, cols.len(), dgates, rows.len(), h_prev);
                }
            }
        }
        if let Some(dw) = &self.dw_ih {
            // SAFETY: as above, for these rows of frame t's inputs [B, F].
            unsafe {
                let x = self.v.x.as_ptr().add(first * f_len);
                let dst = dw.ptr().add(sums + cols.start * f_len);
                add_product(v, dst, f_len, cols.len(), dgates, rows.len(), x);
            }
        }
        if let Some(dx) = &self.dx {
            // A(b, c): the gate gradient of row `rows.start + b`, column c
            // (the part has all columns: the caller's contract).
            let dgates = Lhs {
                rs: g_len,
                cs: 1,
                ..dgates
            };
            // SAFETY: these rows of frame t of dx [T, B, F] (zeroed, this
            // part's alone) and W_ih [4H, F] in gate order.
            unsafe {
                let dst = dx.ptr().add(first * f_len);
                add_product(v, dst, f_len, rows.len(), dgates, g_len, self.w_ih.as_ptr());
            }
        }
    }
}

/// `dst[c, 0..n] += sum_p A(c, p) B(p, 0..n)` for `c` in `0..m` and `p` in
/// `0..k`, `dst` and `B` row-major with rows of `n`.
///
/// # Safety
/// `dst` is writable over `m x n` and no other thread touches it; `A` and `B`
/// are readable over these extents.
#[inline(always)]
unsafe fn add_product<S: Simd>(
    v: S,
    dst: *mut f32,
    n: usize,
    m: usize,
    a: Lhs,
    k: usize,
    b: *const f32,
) {
    let mut n0 = 0;
    while n0 < n {
        let width = (n - n0).min(4 * S::LANES);
        let nq = width.div_ceil(S::LANES);
        let mut c0 = 0;
        while c0 < m {
            let rows = S::ROWS.min(m - c0);
            // SAFETY: the caller's contract, for rows c0.. and columns n0..
            unsafe {
                let a = Lhs {
                    ptr: a.ptr.add(c0 * a.rs),
                    ..a
                };
                let dst = Rows::contiguous(v, dst.add(c0 * n + n0), n, nq, width);
                let b = Rows::contiguous(v, b.add(n0), n, nq, width);
                dispatch_tile!(S, rows, nq, add_tile(v, dst, a, k, b));
            }
            c0 += rows;
        }
        n0 += width;
    }
}

/// One tile of [`add_product`]: `dst += A B` over `R` rows by `NQ` vectors.
///
/// # Safety
/// As [`add_product`], for this tile.
#[inline(always)]
unsafe fn add_tile<S: Simd, const R: usize, const NQ: usize>(
    v: S,
    dst: Rows<S>,
    a: Lhs,
    k: usize,
    b: Rows<S>,
) {
    // SAFETY: the caller's contract.
    let acc: Tile<S, R, NQ> = unsafe { accumulate(v, zeros(v), k, a, b) };
    for (r, row) in acc.iter().enumerate() {
        for (q, &x) in row.iter().enumerate() {
            // SAFETY: vector q of row r of the tile, written by this part alone.
            unsafe { dst.store(v, r, q, v.add(dst.load(v, r, q), x)) };
        }
    }
}

/// Rows of the product's depth in one slice of the backward's recurrent
/// product: 128 rows of four vectors, 32 KiB of `W_hh` on AVX-512.
const DEPTH: usize = 128;

/// Where a tile of the backward lies: stage `s`, rows from `b0`, `width`
/// units from `u0`, the recurrent product's depth slice from `k0`, the bias
/// gradient sums number `sums`.
#[derive(Clone, Copy)]
struct TileAt {
    s: usize,
    b0: usize,
    u0: usize,
    width: usize,
    k0: usize,
    sums: usize,
}

impl TileAt {
    /// This tile's units of the rows from `b0` of a `[B, H]` buffer at `ptr`.
    ///
    /// # Safety
    /// Row `b0`, unit `u0` lies inside the buffer.
    #[inline(always)]
    unsafe fn state<S: Simd>(self, v: S, ptr: *const f32, h_len: usize, nq: usize) -> Rows<S> {
        // SAFETY: the caller's contract.
        let ptr = unsafe { ptr.add(self.b0 * h_len + self.u0) };
        Rows::contiguous(v, ptr, h_len, nq, self.width)
    }
}

/// The tile `A[rows] W_hh[k0.., units]` of stage `s > 0` over the depth slice
/// from `k0` (at most [`DEPTH`] rows): started from the earlier slices'
/// partial sums unless `k0 = 0`.
///
/// # Safety
/// As [`BackwardStep::fused_stage`], for these rows and units.
#[inline(always)]
unsafe fn recurrent_tile<S: Simd, const R: usize, const NQ: usize>(
    step: &BackwardStep<'_>,
    v: S,
    at: TileAt,
) -> Tile<S, R, NQ> {
    let (t_len, b_len, h_len) = (step.plan.steps, step.plan.batch, step.plan.hidden);
    let g_len = 4 * h_len;
    let acc: Tile<S, R, NQ> = if at.k0 > 0 {
        // SAFETY: this part's units of rows b0.. of the partial sums.
        unsafe { load_tile(v, at.state(v, step.dh_rec.ptr(), h_len, NQ)) }
    } else {
        zeros(v)
    };
    // The gate gradients of step `src`, whose product finishes dh_{src - 1}.
    let src = t_len - at.s;
    let a = Lhs {
        // SAFETY: rows b0.. of frame src's gate gradients [B, 4H], from column k0.
        ptr: unsafe { step.dgates.ptr().add((src * b_len + at.b0) * g_len + at.k0) },
        rs: g_len,
        cs: 1,
    };
    let depth = DEPTH.min(g_len - at.k0);
    // W_hh [4H, H] with rows in gate order, in column panels: rows k0.. of
    // the panel of these units.
    let first = at.u0 / (4 * S::LANES) * 4 * S::LANES;
    let ld = (4 * S::LANES).min(h_len - first);
    let at_row = g_len * first + at.k0 * ld + (at.u0 - first);
    let b = Rows::contiguous(v, step.w_hh[at_row..].as_ptr(), ld, NQ, at.width);
    // SAFETY: the caller's contract.
    unsafe { accumulate(v, acc, depth, a, b) }
}

/// A depth slice of the recurrent product before the last, for rows
/// `b0..b0 + R` of the `NQ` vectors of units from `u0`: its partial sums to
/// `dh_rec`.
///
/// # Safety
/// As [`BackwardStep::fused_stage`], for these rows and units.
#[inline(always)]
unsafe fn partial_rows<S: Simd, const R: usize, const NQ: usize>(
    step: &BackwardStep<'_>,
    v: S,
    at: TileAt,
) {
    let h_len = step.plan.hidden;
    // SAFETY: the caller's contract.
    let acc: Tile<S, R, NQ> = unsafe { recurrent_tile(step, v, at) };
    // SAFETY: this part's units of rows b0.. of the partial sums.
    unsafe { store_tile(v, &acc, at.state(v, step.dh_rec.ptr(), h_len, NQ)) };
}

/// Rows `b0..b0 + R` of the `NQ` vectors of units from `u0` of a stage of
/// [`BackwardStep::fused_stage`].
///
/// # Safety
/// As [`BackwardStep::fused_stage`], for these rows and units.
#[inline(always)]
unsafe fn fused_rows_backward<S: Simd, const R: usize, const NQ: usize>(
    step: &BackwardStep<'_>,
    v: S,
    at: TileAt,
) {
    let TileAt { s, b0, u0, .. } = at;
    let (t_len, b_len, h_len) = (step.plan.steps, step.plan.batch, step.plan.hidden);
    let g_len = 4 * h_len;
    let dh_rec: Tile<S, R, NQ> = if s > 0 {
        // SAFETY: the caller's contract.
        unsafe { recurrent_tile(step, v, at) }
    } else {
        zeros(v)
    };
    let dh_state = step.dh.ptr();
    if s == t_len {
        // dh0: the product for the sequences that ran at frame 0.
        // SAFETY: rows b0.. of dh [B, H], units u0..
        let dst = unsafe { at.state(v, dh_state, h_len, NQ) };
        for (r, row) in dh_rec.iter().enumerate() {
            if step.v.active(b0 + r, 0) {
                for (q, &x) in row.iter().enumerate() {
                    // SAFETY: this part's units of row b0 + r of dh.
                    unsafe { dst.store(v, r, q, x) };
                }
            }
        }
        return;
    }
    let t = t_len - 1 - s;
    for (r, row) in dh_rec.iter().enumerate() {
        let b = b0 + r;
        // Gates of frame t follow the product only where the sequence ran at t + 1.
        let ran_next = s > 0 && step.v.active(b, t + 1);
        for (q, &rec) in row.iter().enumerate() {
            let u = u0 + S::LANES * q;
            // The block of units from u: its gates' columns are `width` apart.
            let width = S::LANES.min(h_len - u);
            let lanes = Lanes::first(v, width);
            let gate_col = 4 * u;
            let gate_at = (t * b_len + b) * g_len + gate_col;
            // SAFETY: this part's columns of frame t, row b, and its units of
            // the state gradients; the reads lie inside their buffers.
            unsafe {
                let dg = step.dgates.ptr().add(gate_at);
                if !step.v.active(b, t) {
                    // A carried state passes its gradients through unchanged.
                    for k in 0..4 {
                        lanes.store(v, dg.add(width * k), v.zero());
                    }
                    continue;
                }
                let state = b * h_len + u;
                let frame = (t * b_len + b) * h_len + u;
                let mut dh = if ran_next {
                    rec
                } else {
                    lanes.load(v, dh_state.add(state))
                };
                dh = v.add(dh, lanes.load_or_zero(v, step.dy, frame));
                let a = step.acts.as_ptr().add(gate_at);
                let i = lanes.load(v, a);
                let f = lanes.load(v, a.add(width));
                let g = lanes.load(v, a.add(2 * width));
                let o = lanes.load(v, a.add(3 * width));
                let c = lanes.load(v, step.cells.as_ptr().add(frame));
                let c_prev = if t == 0 {
                    lanes.load_or_zero(v, step.v.c0, state)
                } else {
                    lanes.load(v, step.cells.as_ptr().add(frame - b_len * h_len))
                };
                let dc = step.dc.ptr().add(state);
                let one = v.splat(1.0);
                let tc = tanh(v, c);
                let dct = v.fmadd(v.mul(dh, o), v.fnmadd(tc, tc, one), lanes.load(v, dc));
                // sigma' = s (1 - s), tanh' = 1 - t^2.
                let di = v.mul(v.mul(dct, g), v.fnmadd(i, i, i));
                let df = v.mul(v.mul(dct, c_prev), v.fnmadd(f, f, f));
                let dgg = v.mul(v.mul(dct, i), v.fnmadd(g, g, one));
                let d_o = v.mul(v.mul(dh, tc), v.fnmadd(o, o, o));
                lanes.store(v, dc, v.mul(dct, f));
                let grads = [di, df, dgg, d_o];
                for (k, &d) in grads.iter().enumerate() {
                    lanes.store(v, dg.add(width * k), d);
                }
                if let Some(db) = &step.db {
                    let db = db.ptr().add(at.sums * g_len + gate_col);
                    for (k, &d) in grads.iter().enumerate() {
                        let p = db.add(width * k);
                        lanes.store(v, p, v.add(lanes.load(v, p), d));
                    }
                }
            }
        }
    }
}
