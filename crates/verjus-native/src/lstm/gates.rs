//! The fused gate loops of one row (one sequence, one thread's units):
//! vectorised sigmoid/tanh and the cell update forward, the gate gradients
//! backward. A row's gate columns come block by block (see `layout`), each
//! block `[i | f | g | o]` of its units.

use super::layout::BLOCK;
use crate::simd::simd;
use std::ops::Range;
use verjus_core::math::fast::{sigmoid, tanh};

/// One row of the forward: `g` holds the pre-activations (without the bias,
/// `bias` in the same order) and receives the activations; `c`, `h` the new
/// state; `blocks` the unit ranges of the row's blocks.
#[inline(always)]
pub(super) fn forward_row(
    g: &mut [f32],
    bias: Option<&[f32]>,
    c_prev: Option<&[f32]>,
    c: &mut [f32],
    h: &mut [f32],
    blocks: impl Iterator<Item = Range<usize>>,
) {
    simd(
        #[inline(always)]
        || {
            if let Some(bias) = bias {
                for (v, &b) in g.iter_mut().zip(bias) {
                    *v += b;
                }
            }
            for u in blocks {
                // A whole block as a loop of known length (one vector wide):
                // of unknown length, it compiled to a vector loop of several
                // vectors that a block never entered, and ran scalar.
                match u.len() {
                    BLOCK => block_forward(g, c, h, c_prev, u.start, BLOCK),
                    n => block_forward(g, c, h, c_prev, u.start, n),
                }
            }
        },
    );
}

/// The block of `n` units from `at` of [`forward_row`]: one loop per case of
/// `c_prev`, over iterators only, so that each compiles to straight vector
/// code (no per-element branch or bounds check).
#[inline(always)]
fn block_forward(
    g: &mut [f32],
    c: &mut [f32],
    h: &mut [f32],
    c_prev: Option<&[f32]>,
    at: usize,
    n: usize,
) {
    let g = &mut g[4 * at..][..4 * n];
    let (c, h) = (&mut c[at..][..n], &mut h[at..][..n]);
    match c_prev {
        Some(cp) => cell_forward(g, c, h, cp[at..][..n].iter().copied()),
        None => cell_forward(g, c, h, std::iter::repeat(0.0)),
    }
}

/// The activations and the new state of one block, given `c_{t-1}` element by element.
#[inline(always)]
fn cell_forward(g: &mut [f32], c: &mut [f32], h: &mut [f32], c_prev: impl Iterator<Item = f32>) {
    let h_len = h.len();
    let (gi, rest) = g.split_at_mut(h_len);
    let (gf, rest) = rest.split_at_mut(h_len);
    let (gg, go) = rest.split_at_mut(h_len);
    let gates = gi
        .iter_mut()
        .zip(gf.iter_mut())
        .zip(gg.iter_mut())
        .zip(go.iter_mut());
    for ((((i, f), g), o), ((c, h), cp)) in gates.zip(c.iter_mut().zip(h.iter_mut()).zip(c_prev)) {
        (*i, *f, *g, *o) = (sigmoid(*i), sigmoid(*f), tanh(*g), sigmoid(*o));
        *c = *f * cp + *i * *g;
        *h = *o * tanh(*c);
    }
}

/// One row of the backward: from the activations `a`, the cell states and the
/// gradients of `h` (`dh` plus the output's `dy`) and `c`, writes the
/// pre-activation gradients `dg` (added to `db` as well, when given) and leaves
/// `dc` as the gradient of `c_{t-1}` (`dh` is overwritten by the recurrent
/// GEMM after).
#[allow(clippy::too_many_arguments)] // the row's operands, one slice each
#[inline(always)]
pub(super) fn backward_row(
    a: &[f32],
    c_t: &[f32],
    c_prev: Option<&[f32]>,
    dy: Option<&[f32]>,
    dh: &mut [f32],
    dc: &mut [f32],
    dg: &mut [f32],
    db: Option<&mut [f32]>,
    blocks: impl Iterator<Item = Range<usize>>,
) {
    simd(
        #[inline(always)]
        || {
            for u in blocks {
                // A whole block as a loop of known length (see `forward_row`).
                let row = Block {
                    a,
                    c_t,
                    c_prev,
                    dy,
                    at: u.start,
                };
                match u.len() {
                    BLOCK => row.backward(BLOCK, dh, dc, dg),
                    n => row.backward(n, dh, dc, dg),
                }
            }
            if let Some(db) = db {
                for (d, &g) in db.iter_mut().zip(dg.iter()) {
                    *d += g;
                }
            }
        },
    );
}

/// The inputs of one row of the backward gate loop, at the block of units from `at`.
#[derive(Clone, Copy)]
struct Block<'a> {
    a: &'a [f32],
    c_t: &'a [f32],
    c_prev: Option<&'a [f32]>,
    dy: Option<&'a [f32]>,
    at: usize,
}

impl Block<'_> {
    /// The block's `n` units: one loop per case of `c_{t-1}` and `dy` being given.
    #[inline(always)]
    fn backward(self, n: usize, dh: &mut [f32], dc: &mut [f32], dg: &mut [f32]) {
        let at = self.at;
        let row = BackwardRow {
            a: &self.a[4 * at..][..4 * n],
            c_t: &self.c_t[at..][..n],
            dh: &mut dh[at..][..n],
            dc: &mut dc[at..][..n],
            dg: &mut dg[4 * at..][..4 * n],
        };
        let zeros = || std::iter::repeat(0.0);
        let cp = self.c_prev.map(|c| &c[at..][..n]);
        match (cp, self.dy.map(|d| &d[at..][..n])) {
            (Some(cp), Some(dy)) => row.run(cp.iter().copied(), dy.iter().copied()),
            (Some(cp), None) => row.run(cp.iter().copied(), zeros()),
            (None, Some(dy)) => row.run(zeros(), dy.iter().copied()),
            (None, None) => row.run(zeros(), zeros()),
        }
    }
}

/// The slices of one block of the backward gate loop.
struct BackwardRow<'a> {
    a: &'a [f32],
    c_t: &'a [f32],
    dh: &'a mut [f32],
    dc: &'a mut [f32],
    dg: &'a mut [f32],
}

impl BackwardRow<'_> {
    /// The loop, over iterators only (see [`forward_row`]), given `c_{t-1}`
    /// and the output's gradient element by element.
    #[inline(always)]
    fn run(self, c_prev: impl Iterator<Item = f32>, dy: impl Iterator<Item = f32>) {
        let h_len = self.c_t.len();
        let (ai, rest) = self.a.split_at(h_len);
        let (af, rest) = rest.split_at(h_len);
        let (ag, ao) = rest.split_at(h_len);
        let (di, rest) = self.dg.split_at_mut(h_len);
        let (df, rest) = rest.split_at_mut(h_len);
        let (dgg, d_o) = rest.split_at_mut(h_len);
        let acts = ai.iter().zip(af).zip(ag).zip(ao);
        let grads = di
            .iter_mut()
            .zip(df.iter_mut())
            .zip(dgg.iter_mut())
            .zip(d_o.iter_mut());
        let state = self.c_t.iter().zip(c_prev).zip(self.dh.iter().zip(dy));
        for ((((&i, &f), &g), &o), ((((di, df), dg), d_o), (((&c, cp), (&dh, dy)), dc))) in
            acts.zip(grads.zip(state.zip(self.dc.iter_mut())))
        {
            let dh = dh + dy;
            let tc = tanh(c);
            let dct = *dc + dh * o * (1.0 - tc * tc);
            *di = dct * g * i * (1.0 - i);
            *df = dct * cp * f * (1.0 - f);
            *dg = dct * i * (1.0 - g * g);
            *d_o = dh * tc * o * (1.0 - o);
            *dc = dct * f;
        }
    }
}
