//! One part of a step, product and gates fused, on AVX-512.
//!
//! The portable step (`forward::Step::part`, `backward::Step::gates`) runs the
//! recurrent product through the `gemm` crate, which packs both operands again
//! at every call and writes the product to memory, and then a gate loop reads
//! it back. Here a register tile of the product ([`tile`]) is finished by the
//! gate loop while it is still in registers:
//! - forward: the tile is 6 rows by one block of 16 units' four gates, the
//!   products of `x_t` with `W_ih^T` and of `h_{t-1}` with `W_hh^T` (so the
//!   input projection needs no pass of its own over all frames), plus the
//!   bias; the gate activations, the cell and the output go to memory once;
//! - backward: the tile is 6 rows by up to four blocks of `dh` (the product of
//!   the next step's gate gradients and `W_hh`), which the gate backward of
//!   the same rows uses at once; its gate gradients go to memory once and are
//!   added to the bias gradient there. Then the part adds its rows' share of
//!   the frame to the weight gradients (`dgates_t^T h_{t-1}` and
//!   `dgates_t^T x_t`) and writes their `dx_t = dgates_t W_ih` while those
//!   gate gradients are still in cache: large products over all frames
//!   afterwards read them from memory again and cost more than these small
//!   ones.
//!
//! It needs whole blocks (`H` a multiple of 16) in the blocked layout, and the
//! CPU's AVX-512F; [`available`] says whether a plan gets it.

use super::backward::Step as BackwardStep;
use super::forward::Step as ForwardStep;
use super::layout::{Layout, BLOCK};
use super::tile::{
    accumulate, dispatch_tile, load_tile, store_tile, tail_mask, zeros, Lhs, Tile, ALL, LANES, ROWS,
};
use super::vmath::{sigmoid, splat, tanh};
use rayon::prelude::*;
use std::arch::x86_64::*;
use std::ops::Range;

/// Whether the fused kernel runs steps of this layout on this CPU.
pub(super) fn available(layout: &Layout, hidden: usize) -> bool {
    layout.blocked()
        && hidden.is_multiple_of(BLOCK)
        && std::arch::is_x86_feature_detected!("avx512f")
}

/// Runs `work(part, rows)` for the parts of a batch of `batch` sequences,
/// each on its own thread: contiguous ranges of rows, as even as they come.
///
/// The rows of an LSTM are independent, so a part runs every step of its
/// sequences without waiting for another: no barrier per step, and each
/// thread's state stays in its own cache. (Splitting each step's hidden units
/// across the threads instead needed a barrier per step, at which every thread
/// fetched the other's half of `h_{t-1}`.)
pub(super) fn run_parts(batch: usize, work: impl Fn(usize, Range<usize>) + Sync) {
    let parts = parts(batch);
    let rows = |p: usize| p * batch / parts..(p + 1) * batch / parts;
    (0..parts)
        .into_par_iter()
        .with_max_len(1)
        .for_each(|p| work(p, rows(p)));
}

/// The number of parts [`run_parts`] cuts a batch into: one per thread, each
/// of at least one tile of rows.
pub(super) fn parts(batch: usize) -> usize {
    rayon::current_num_threads().clamp(1, batch.div_ceil(ROWS).max(1))
}

/// Loads 16 floats at `p`.
///
/// # Safety
/// `p..p + 16` must be readable.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn load(p: *const f32) -> __m512 {
    // SAFETY: the caller's contract.
    unsafe { _mm512_loadu_ps(p) }
}

/// Stores 16 floats at `p`.
///
/// # Safety
/// `p..p + 16` must be writable, and no other thread may touch it meanwhile.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn store(p: *mut f32, v: __m512) {
    // SAFETY: the caller's contract.
    unsafe { _mm512_storeu_ps(p, v) }
}

/// Loads 16 floats at `at` of `src`, or zeros without a source.
///
/// # Safety
/// `at..at + 16` must lie inside `src`.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn load_or_zero(src: Option<&[f32]>, at: usize) -> __m512 {
    match src {
        // SAFETY: in bounds (the caller's contract).
        Some(s) => unsafe { load(s.as_ptr().add(at)) },
        None => _mm512_setzero_ps(),
    }
}

impl ForwardStep<'_> {
    /// Forward step `t` of the sequences `rows`.
    ///
    /// # Safety
    /// [`available`] holds for this step's layout, and no other thread touches
    /// these rows (see [`run_parts`]).
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn fused_step(&self, t: usize, rows: Range<usize>) {
        // Blocks outer, rows inner: a block's columns of W_hh^T stay in cache
        // while every row of the step runs against them.
        for u0 in (0..self.plan.hidden).step_by(BLOCK) {
            let mut b0 = rows.start;
            while b0 < rows.end {
                let rows = ROWS.min(rows.end - b0);
                // SAFETY: the caller's contract; the rows and the block lie inside the step.
                unsafe {
                    match rows {
                        6 => self.fused_rows::<6>(t, b0, u0),
                        5 => self.fused_rows::<5>(t, b0, u0),
                        4 => self.fused_rows::<4>(t, b0, u0),
                        3 => self.fused_rows::<3>(t, b0, u0),
                        2 => self.fused_rows::<2>(t, b0, u0),
                        _ => self.fused_rows::<1>(t, b0, u0),
                    }
                }
                b0 += rows;
            }
        }
    }

    /// Rows `b0..b0 + R` of the block of units from `u0`: the gate
    /// pre-activations (the input projection and the recurrent product) in
    /// registers, then the gates, the cell and the output.
    ///
    /// # Safety
    /// As [`ForwardStep::fused_step`], for these rows.
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn fused_rows<const R: usize>(&self, t: usize, b0: usize, u0: usize) {
        let (b_len, h_len) = (self.plan.batch, self.plan.hidden);
        let g_len = 4 * h_len;
        let col = 4 * u0;
        let f_len = self.plan.input;
        let acts = self.acts.ptr();
        let x = Lhs {
            // SAFETY: rows b0.. of x_t [B, F].
            ptr: unsafe { self.v.x.as_ptr().add((t * b_len + b0) * f_len) },
            rs: f_len,
            cs: 1,
        };
        // SAFETY: W_ih^T [F, 4H] in gate order, this block's 64 columns.
        let mut acc: Tile<R, 4> =
            unsafe { accumulate(zeros(), f_len, x, self.w_ih_t.as_ptr().add(col), g_len, ALL) };
        if let Some(h_prev) = self.h_prev(t) {
            let a = Lhs {
                // SAFETY: rows b0.. of h_{t-1} [B, H].
                ptr: unsafe { h_prev.add(b0 * h_len) },
                rs: h_len,
                cs: 1,
            };
            // SAFETY: W_hh^T [H, 4H] in gate order, this block's 64 columns.
            acc = unsafe { accumulate(acc, h_len, a, self.w_hh_t.as_ptr().add(col), g_len, ALL) };
        }
        for (r, pre) in acc.iter().enumerate() {
            let b = b0 + r;
            let state = (t * b_len + b) * h_len + u0;
            // SAFETY: frame t-1's cells (or c0) of row b at these units.
            let c_prev = unsafe {
                if t == 0 {
                    load_or_zero(self.v.c0, b * h_len + u0)
                } else {
                    load(self.cells.ptr().add(state - b_len * h_len))
                }
            };
            // SAFETY: frame t of the cells and outputs, in bounds.
            let (c_out, h_out) = unsafe { (self.cells.ptr().add(state), self.y.ptr().add(state)) };
            if !self.v.active(b, t) {
                // Finished: the state is carried, the output is 0.
                // SAFETY: this part's units of frame t, row b.
                unsafe {
                    store(c_out, c_prev);
                    store(h_out, _mm512_setzero_ps());
                }
                continue;
            }
            let mut gate = [_mm512_setzero_ps(); 4];
            for (q, (g, &p)) in gate.iter_mut().zip(pre).enumerate() {
                // SAFETY: the summed bias has 4H entries.
                let bias = unsafe { load_or_zero(self.bias, col + LANES * q) };
                let p = _mm512_add_ps(p, bias);
                *g = if q == 2 { tanh(p) } else { sigmoid(p) };
                // SAFETY: this part's columns of frame t, row b.
                unsafe { store(acts.add((t * b_len + b) * g_len + col + LANES * q), *g) };
            }
            let [i, f, g, o] = gate;
            let c = _mm512_fmadd_ps(f, c_prev, _mm512_mul_ps(i, g));
            // SAFETY: as above.
            unsafe {
                store(c_out, c);
                store(h_out, _mm512_mul_ps(o, tanh(c)));
            }
        }
    }
}

impl BackwardStep<'_> {
    /// Stage `s` of the backward of the sequences `rows` (part `part`):
    /// `dh` of step `t = T-1-s` from the gate gradients of step `t + 1` (for
    /// `s > 0`), then the gate backward of step `t` and its share of the
    /// weight gradients; the stage `s = T` (when `dh0` is asked for) only
    /// finishes `dh` from step 0's gate gradients.
    ///
    /// # Safety
    /// [`available`] holds for this step's layout, and no other thread touches
    /// these rows or this part's gradient sums (see [`run_parts`]).
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn fused_stage(&self, s: usize, rows: Range<usize>, part: usize) {
        let (h_len, g_len) = (self.plan.hidden, 4 * self.plan.hidden);
        // The product's depth `4H` in slices whose rows of W_hh stay in the
        // L1 cache while every row runs against them; the partial sums of all
        // but the last slice wait in `dh_rec`.
        let last_slice = if s > 0 {
            (g_len - 1) / DEPTH * DEPTH
        } else {
            0
        };
        let mut u0 = 0;
        while u0 < h_len {
            let blocks = ((h_len - u0) / BLOCK).min(4);
            for k0 in (0..last_slice).step_by(DEPTH) {
                let mut b0 = rows.start;
                while b0 < rows.end {
                    let r = ROWS.min(rows.end - b0);
                    // SAFETY: the caller's contract; the rows and blocks lie inside the step.
                    unsafe { dispatch_tile!(r, blocks, partial_rows(self, s, b0, u0, k0)) };
                    b0 += r;
                }
            }
            let mut b0 = rows.start;
            while b0 < rows.end {
                let r = ROWS.min(rows.end - b0);
                let at = TileAt {
                    s,
                    b0,
                    u0,
                    k0: last_slice,
                    part,
                };
                // SAFETY: as above.
                unsafe { dispatch_tile!(r, blocks, fused_rows_backward(self, at)) };
                b0 += r;
            }
            u0 += blocks * BLOCK;
        }
        if s < self.plan.steps {
            // SAFETY: the caller's contract; this part owns its gradient sums.
            unsafe { self.fused_weight_grads(self.plan.steps - 1 - s, rows, part) };
        }
    }

    /// Adds the share of the sequences `rows` in frame `t` to part `part`'s
    /// sums of `dW_hh` and `dW_ih`, and writes their rows of frame `t`'s `dx`,
    /// when they are asked for.
    ///
    /// # Safety
    /// As [`BackwardStep::fused_stage`]; frame `t`'s gate gradients of these
    /// rows are written.
    #[target_feature(enable = "avx512f")]
    unsafe fn fused_weight_grads(&self, t: usize, rows: Range<usize>, part: usize) {
        let (b_len, f_len, h_len) = (self.plan.batch, self.plan.input, self.plan.hidden);
        let g_len = 4 * h_len;
        let first = t * b_len + rows.start;
        // A(c, b): the gate gradient of row `rows.start + b`, column c.
        let dgates = Lhs {
            // SAFETY: frame t's gate gradients from row rows.start, in bounds.
            ptr: unsafe { self.dgates.ptr().add(first * g_len) },
            rs: 1,
            cs: g_len,
        };
        let sums = part * self.dw_part_len;
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
                    let dst = dw.ptr().add(sums);
                    add_product(dst, h_len, g_len, dgates, rows.len(), h_prev);
                }
            }
        }
        if let Some(dw) = &self.dw_ih {
            // SAFETY: as above, for these rows of frame t's inputs [B, F].
            unsafe {
                let x = self.v.x.as_ptr().add(first * f_len);
                add_product(dw.ptr().add(sums), f_len, g_len, dgates, rows.len(), x);
            }
        }
        if let Some(dx) = &self.dx {
            // A(b, c): the gate gradient of row `rows.start + b`, column c.
            let dgates = Lhs {
                rs: g_len,
                cs: 1,
                ..dgates
            };
            // SAFETY: these rows of frame t of dx [T, B, F] (zeroed, this
            // part's alone) and W_ih [4H, F] in gate order.
            unsafe {
                let dst = dx.ptr().add(first * f_len);
                add_product(dst, f_len, rows.len(), dgates, g_len, self.w_ih.as_ptr());
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
#[target_feature(enable = "avx512f")]
unsafe fn add_product(dst: *mut f32, n: usize, m: usize, a: Lhs, k: usize, b: *const f32) {
    let mut n0 = 0;
    while n0 < n {
        let width = (n - n0).min(4 * LANES);
        let (vectors, last) = (width.div_ceil(LANES), tail_mask(width));
        let mut c0 = 0;
        while c0 < m {
            let rows = ROWS.min(m - c0);
            // SAFETY: the caller's contract, for rows c0.. and columns n0..
            unsafe {
                let a = Lhs {
                    ptr: a.ptr.add(c0 * a.rs),
                    ..a
                };
                let (dst, b) = (dst.add(c0 * n + n0), b.add(n0));
                dispatch_tile!(rows, vectors, add_tile(dst, n, a, k, b, last));
            }
            c0 += rows;
        }
        n0 += width;
    }
}

/// One tile of [`add_product`]: `R` rows of `dst` (rows `n` apart) by `NQ`
/// vectors, of which the last has the lanes of `last`.
///
/// # Safety
/// As [`add_product`], for this tile.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn add_tile<const R: usize, const NQ: usize>(
    dst: *mut f32,
    n: usize,
    a: Lhs,
    k: usize,
    b: *const f32,
    last: __mmask16,
) {
    // SAFETY: the caller's contract.
    let acc: Tile<R, NQ> = unsafe { accumulate(zeros(), k, a, b, n, last) };
    for (r, row) in acc.iter().enumerate() {
        for (q, &v) in row.iter().enumerate() {
            let lanes = if q + 1 == NQ { last } else { ALL };
            // SAFETY: these lanes of row r of the tile, written by this part alone.
            unsafe {
                let p = dst.add(r * n + LANES * q);
                let sum = _mm512_add_ps(_mm512_maskz_loadu_ps(lanes, p), v);
                _mm512_mask_storeu_ps(p, lanes, sum);
            }
        }
    }
}

/// Rows of the product's depth in one slice of the backward's recurrent
/// product: 128 rows of four vectors, 32 KiB of `W_hh`.
const DEPTH: usize = 128;

/// The tile `A[rows] W_hh[k0.., units]` of stage `s > 0` over the depth slice
/// from `k0` (at most [`DEPTH`] rows): started from `init` (the earlier
/// slices' partial sums) unless `k0 = 0`.
///
/// # Safety
/// As [`BackwardStep::fused_stage`], for these rows and blocks.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn recurrent_tile<const R: usize, const NQ: usize>(
    step: &BackwardStep<'_>,
    s: usize,
    b0: usize,
    u0: usize,
    k0: usize,
) -> Tile<R, NQ> {
    let (t_len, b_len, h_len) = (step.plan.steps, step.plan.batch, step.plan.hidden);
    let g_len = 4 * h_len;
    let acc: Tile<R, NQ> = if k0 > 0 {
        // SAFETY: this part's units of rows b0.. of the partial sums.
        unsafe { load_tile(step.dh_rec.ptr().add(b0 * h_len + u0), h_len) }
    } else {
        zeros()
    };
    // The gate gradients of step `src`, whose product finishes dh_{src - 1}.
    let src = t_len - s;
    let a = Lhs {
        // SAFETY: rows b0.. of frame src's gate gradients [B, 4H], from column k0.
        ptr: unsafe { step.dgates.ptr().add((src * b_len + b0) * g_len + k0) },
        rs: g_len,
        cs: 1,
    };
    let depth = DEPTH.min(g_len - k0);
    // SAFETY: W_hh [4H, H] with rows in gate order: rows k0.., these blocks' columns.
    unsafe {
        let b = step.w_hh.as_ptr().add(k0 * h_len + u0);
        accumulate(acc, depth, a, b, h_len, ALL)
    }
}

/// A depth slice of the recurrent product before the last, for rows
/// `b0..b0 + R` of the `NQ` blocks from `u0`: its partial sums to `dh_rec`.
///
/// # Safety
/// As [`BackwardStep::fused_stage`], for these rows and blocks.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn partial_rows<const R: usize, const NQ: usize>(
    step: &BackwardStep<'_>,
    s: usize,
    b0: usize,
    u0: usize,
    k0: usize,
) {
    let h_len = step.plan.hidden;
    // SAFETY: the caller's contract.
    let acc: Tile<R, NQ> = unsafe { recurrent_tile(step, s, b0, u0, k0) };
    // SAFETY: this part's units of rows b0.. of the partial sums.
    unsafe { store_tile(&acc, step.dh_rec.ptr().add(b0 * h_len + u0), h_len) };
}

/// Where a tile of [`fused_rows_backward`] lies: stage `s`, rows from `b0`,
/// units from `u0`, the recurrent product's last depth slice from `k0`, the
/// sums of part `part`.
#[derive(Clone, Copy)]
struct TileAt {
    s: usize,
    b0: usize,
    u0: usize,
    k0: usize,
    part: usize,
}

/// Rows `b0..b0 + R` of the `NQ` blocks of units from `u0` of a stage of
/// [`BackwardStep::fused_stage`].
///
/// # Safety
/// As [`BackwardStep::fused_stage`], for these rows and blocks.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn fused_rows_backward<const R: usize, const NQ: usize>(
    step: &BackwardStep<'_>,
    at: TileAt,
) {
    let TileAt {
        s,
        b0,
        u0,
        k0,
        part,
    } = at;
    let (t_len, b_len, h_len) = (step.plan.steps, step.plan.batch, step.plan.hidden);
    let g_len = 4 * h_len;
    let dh_rec: Tile<R, NQ> = if s > 0 {
        // SAFETY: the caller's contract.
        unsafe { recurrent_tile(step, s, b0, u0, k0) }
    } else {
        zeros()
    };
    let dh_state = step.dh.ptr();
    if s == t_len {
        // dh0: the product for the sequences that ran at frame 0.
        for (r, row) in dh_rec.iter().enumerate() {
            let b = b0 + r;
            if step.v.active(b, 0) {
                for (q, &v) in row.iter().enumerate() {
                    // SAFETY: this part's units of row b of dh.
                    unsafe { store(dh_state.add(b * h_len + u0 + LANES * q), v) };
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
            let u = u0 + LANES * q;
            let gate_at = (t * b_len + b) * g_len + 4 * u;
            // SAFETY: this part's columns of frame t, row b, and its units of
            // the state gradients; the reads lie inside their buffers.
            unsafe {
                let dg = step.dgates.ptr().add(gate_at);
                if !step.v.active(b, t) {
                    // A carried state passes its gradients through unchanged.
                    for k in 0..4 {
                        store(dg.add(LANES * k), _mm512_setzero_ps());
                    }
                    continue;
                }
                let state = b * h_len + u;
                let frame = (t * b_len + b) * h_len + u;
                let mut dh = if ran_next {
                    rec
                } else {
                    load(dh_state.add(state))
                };
                dh = _mm512_add_ps(dh, load_or_zero(step.dy, frame));
                let a = step.acts.as_ptr().add(gate_at);
                let [i, f, g, o] = [0, 1, 2, 3].map(|k| load(a.add(LANES * k)));
                let c = load(step.cells.as_ptr().add(frame));
                let c_prev = if t == 0 {
                    load_or_zero(step.v.c0, state)
                } else {
                    load(step.cells.as_ptr().add(frame - b_len * h_len))
                };
                let dc = step.dc.ptr().add(state);
                let one = splat(1.0);
                let tc = tanh(c);
                let dct = _mm512_fmadd_ps(
                    _mm512_mul_ps(dh, o),
                    _mm512_fnmadd_ps(tc, tc, one),
                    load(dc),
                );
                // sigma' = s (1 - s), tanh' = 1 - t^2.
                let di = _mm512_mul_ps(_mm512_mul_ps(dct, g), _mm512_fnmadd_ps(i, i, i));
                let df = _mm512_mul_ps(_mm512_mul_ps(dct, c_prev), _mm512_fnmadd_ps(f, f, f));
                let dgg = _mm512_mul_ps(_mm512_mul_ps(dct, i), _mm512_fnmadd_ps(g, g, one));
                let d_o = _mm512_mul_ps(_mm512_mul_ps(dh, tc), _mm512_fnmadd_ps(o, o, o));
                store(dc, _mm512_mul_ps(dct, f));
                let grads = [di, df, dgg, d_o];
                for (k, &d) in grads.iter().enumerate() {
                    store(dg.add(LANES * k), d);
                }
                if let Some(db) = &step.db {
                    let db = db.ptr().add(part * g_len + 4 * u);
                    for (k, &d) in grads.iter().enumerate() {
                        let at = db.add(LANES * k);
                        store(at, _mm512_add_ps(load(at), d));
                    }
                }
            }
        }
    }
}
