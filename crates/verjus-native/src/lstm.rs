//! The fused LSTM: a sequence with per-sequence lengths, and one step.
//!
//! Forward: the input projection of all `T * B` frames is one GEMM, written
//! straight into the reserve's gate rows; each step adds `h_{t-1} W_hh^T` with
//! one `[B, H] x [H, 4H]` GEMM and runs one fused gate loop per row (biases,
//! vectorised sigmoid/tanh, the cell update, the length mask), which leaves
//! the gate activations in place. The reserve holds what the backward needs
//! and nothing else: the activations `[T, B, 4H]` and the cell states
//! `[T, B, H]`; `h_{t-1}` is read back from the outputs `y` (a finished
//! sequence's output rows are 0, and its gate rows are never used).
//!
//! Backward: one fused loop per step turns the output and state gradients into
//! the gate gradients (in a per-thread scratch buffer kept between calls),
//! then one recurrent GEMM gives `dh_{t-1}`; `dX`, `dW_ih` and `dW_hh` are
//! single GEMMs over all frames afterwards, and the bias gradients one column
//! sum. A step allocates nothing once the largest batch has run.
//!
//! A cell step is the same code with `T = 1` and no lengths.

use crate::gemm::{sgemm, MatRef};
use crate::parallel::rows_per_task;
use crate::scratch::Scratch;
use crate::simd::simd;
use rayon::prelude::*;
use verjus_core::math::fast::{sigmoid, tanh};
use verjus_core::ops::{
    check_lengths, LstmArgs, LstmGrads, LstmOutputGrads, LstmOutputs, LstmPlan,
};
use verjus_core::{Error, Result, Tensor};

/// f32 elements of the reserve: activations `[T, B, 4H]`, then cells `[T, B, H]`.
pub(crate) fn reserve_len(plan: &LstmPlan) -> usize {
    plan.steps * plan.batch * 5 * plan.hidden
}

/// The operands as host slices.
struct Operands<'a> {
    x: &'a [f32],
    lengths: Option<&'a [i32]>,
    h0: Option<&'a [f32]>,
    c0: Option<&'a [f32]>,
    w_ih: &'a [f32],
    w_hh: &'a [f32],
    bias: Option<(&'a [f32], &'a [f32])>,
}

impl<'a> Operands<'a> {
    fn new(op: &str, plan: &LstmPlan, args: &LstmArgs<'a>) -> Result<Self> {
        let lengths = args.lengths.map(|l| l.as_slice::<i32>()).transpose()?;
        if let Some(l) = lengths {
            check_lengths(op, l, plan.steps)?;
        }
        let slice = |t: Option<&'a Tensor>| t.map(|t| t.as_slice::<f32>()).transpose();
        let bias = match (slice(args.b_ih)?, slice(args.b_hh)?) {
            (Some(bi), Some(bh)) => Some((bi, bh)),
            _ => None,
        };
        Ok(Operands {
            x: args.x.as_slice()?,
            lengths,
            h0: slice(args.h0)?,
            c0: slice(args.c0)?,
            w_ih: args.w_ih.as_slice()?,
            w_hh: args.w_hh.as_slice()?,
            bias,
        })
    }

    /// Whether sequence `b` still runs at frame `t`.
    #[inline(always)]
    fn active(&self, b: usize, t: usize) -> bool {
        self.lengths.is_none_or(|l| t < l[b] as usize)
    }

    /// Sequence `b`'s length (`steps` without lengths).
    fn length(&self, b: usize, steps: usize) -> usize {
        self.lengths.map_or(steps, |l| l[b] as usize)
    }
}

/// Runs `f(first_row, rows...)` over `rows` rows of three outputs cut
/// alike (`a_len`, `b_len`, `c_len` elements a row), in parallel when the work
/// (`row_cost` per row) is worth it.
#[allow(clippy::too_many_arguments)] // three outputs and their row lengths
fn for_rows3(
    a: &mut [f32],
    a_len: usize,
    b: &mut [f32],
    b_len: usize,
    c: &mut [f32],
    c_len: usize,
    row_cost: usize,
    f: impl Fn(usize, &mut [f32], &mut [f32], &mut [f32]) + Sync + Send,
) {
    let rows = a.len() / a_len.max(1);
    match rows_per_task(rows, row_cost) {
        None => f(0, a, b, c),
        Some(per) => a
            .par_chunks_mut(per * a_len)
            .zip(b.par_chunks_mut(per * b_len))
            .zip(c.par_chunks_mut(per * c_len))
            .enumerate()
            .for_each(|(i, ((ra, rb), rc))| f(i * per, ra, rb, rc)),
    }
}

/// The forward of a sequence (`h_n` given) or of a cell step (`h_n` `None`,
/// `y` is then the new `h`).
pub(crate) fn forward(
    op: &str,
    plan: &LstmPlan,
    args: &LstmArgs<'_>,
    out: LstmOutputs<'_>,
) -> Result<()> {
    let v = Operands::new(op, plan, args)?;
    let (t_len, b_len, f_len, h_len) = (plan.steps, plan.batch, plan.input, plan.hidden);
    let g_len = 4 * h_len;
    let y = out.y.as_mut_slice::<f32>()?;
    let (acts, cells) = out
        .reserve
        .as_mut_slice::<f32>()?
        .split_at_mut(t_len * b_len * g_len);
    if t_len * b_len > 0 {
        // The input projection of every frame: one GEMM.
        let x = MatRef {
            data: v.x,
            trans: false,
        };
        let w_ih = MatRef {
            data: v.w_ih,
            trans: true,
        };
        sgemm(t_len * b_len, g_len, f_len, x, w_ih, acts, 1.0, 0.0)?;
    }
    let w_hh = MatRef {
        data: v.w_hh,
        trans: true,
    };
    let step_len = b_len * h_len;
    for t in 0..t_len {
        let gates = &mut acts[t * b_len * g_len..(t + 1) * b_len * g_len];
        let (done, rest) = y.split_at_mut(t * step_len);
        let y_t = &mut rest[..step_len];
        let h_prev = if t == 0 {
            v.h0
        } else {
            Some(&done[(t - 1) * step_len..])
        };
        if let Some(h_prev) = h_prev {
            let h_prev = MatRef {
                data: &h_prev[..step_len],
                trans: false,
            };
            sgemm(b_len, g_len, h_len, h_prev, w_hh, gates, 1.0, 1.0)?;
        }
        let (before, now) = cells.split_at_mut(t * step_len);
        let c_t = &mut now[..step_len];
        let c_prev = if t == 0 {
            v.c0
        } else {
            Some(&before[(t - 1) * step_len..])
        };
        let v = &v;
        for_rows3(
            gates,
            g_len,
            c_t,
            h_len,
            y_t,
            h_len,
            10 * g_len,
            |first, gates, c_t, y_t| {
                for (r, ((g, c), h)) in gates
                    .chunks_exact_mut(g_len)
                    .zip(c_t.chunks_exact_mut(h_len))
                    .zip(y_t.chunks_exact_mut(h_len))
                    .enumerate()
                {
                    let b = first + r;
                    let cp = c_prev.map(|c| &c[b * h_len..(b + 1) * h_len]);
                    if v.active(b, t) {
                        gate_forward(g, cp, v.bias, c, h);
                    } else {
                        // Finished: the state is carried, the output is 0.
                        match cp {
                            Some(cp) => c.copy_from_slice(cp),
                            None => c.fill(0.0),
                        }
                        h.fill(0.0);
                    }
                }
            },
        );
    }
    // The final state: each sequence's at its own last frame.
    let state_len = b_len * h_len;
    if t_len > 0 {
        out.c_n
            .as_mut_slice::<f32>()?
            .copy_from_slice(&cells[(t_len - 1) * state_len..]);
    } else {
        fill_or_copy(out.c_n.as_mut_slice::<f32>()?, v.c0);
    }
    if let Some(h_n) = out.h_n {
        let h_n = h_n.as_mut_slice::<f32>()?;
        for (b, row) in h_n.chunks_exact_mut(h_len).enumerate() {
            let last = v.length(b, t_len);
            if last > 0 {
                let at = (last - 1) * state_len + b * h_len;
                row.copy_from_slice(&y[at..at + h_len]);
            } else {
                fill_or_copy(row, v.h0.map(|h| &h[b * h_len..(b + 1) * h_len]));
            }
        }
    }
    Ok(())
}

/// `dst = src`, or 0 without a source.
fn fill_or_copy(dst: &mut [f32], src: Option<&[f32]>) {
    match src {
        Some(s) => dst.copy_from_slice(&s[..dst.len()]),
        None => dst.fill(0.0),
    }
}

/// One row of the gate loop: `g` holds the pre-activations `[i | f | g | o]`
/// (without the biases) and receives the activations; `c`, `h` the new state.
#[inline(always)]
fn gate_forward(
    g: &mut [f32],
    c_prev: Option<&[f32]>,
    bias: Option<(&[f32], &[f32])>,
    c: &mut [f32],
    h: &mut [f32],
) {
    simd(
        #[inline(always)]
        || {
            if let Some((bi, bh)) = bias {
                for ((v, &a), &b) in g.iter_mut().zip(bi).zip(bh) {
                    *v += a + b;
                }
            }
            // One loop per case of `c_prev`, over iterators only, so that each
            // compiles to straight vector code (no per-element branch or
            // bounds check).
            match c_prev {
                Some(cp) => cell_forward(g, c, h, cp.iter().copied()),
                None => cell_forward(g, c, h, std::iter::repeat(0.0)),
            }
        },
    );
}

/// The activations and the new state of one row, given `c_{t-1}` element by element.
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

/// The backward of [`forward`]: `y` is the forward's output (for a cell step,
/// the new `h`), `reserve` its reserve.
pub(crate) fn backward(
    op: &str,
    plan: &LstmPlan,
    args: &LstmArgs<'_>,
    y: &Tensor,
    reserve: &Tensor,
    dout: &LstmOutputGrads<'_>,
    grads: LstmGrads<'_>,
) -> Result<()> {
    let v = Operands::new(op, plan, args)?;
    let (t_len, b_len, h_len) = (plan.steps, plan.batch, plan.hidden);
    let g_len = 4 * h_len;
    let state_len = b_len * h_len;
    let frames = t_len * b_len;
    let y = y.as_slice::<f32>()?;
    let (acts, cells) = reserve.as_slice::<f32>()?.split_at(frames * g_len);
    let dy = dout.dy.map(|t| t.as_slice::<f32>()).transpose()?;
    // Scratch: the gate gradients of every frame, then dh and dc of the state.
    let len = frames * g_len + 3 * state_len;
    let mut scratch = Scratch::take(len).ok_or_else(|| Error::Device {
        device: "cpu".into(),
        msg: format!("{op}: cannot allocate {len} floats of scratch"),
    })?;
    let (dgates, rest) = scratch.0[..len].split_at_mut(frames * g_len);
    let (dh, rest) = rest.split_at_mut(state_len);
    let (dc, dh_rec) = rest.split_at_mut(state_len);
    fill_or_copy(dh, dout.dh_n.map(|t| t.as_slice::<f32>()).transpose()?);
    fill_or_copy(dc, dout.dc_n.map(|t| t.as_slice::<f32>()).transpose()?);
    let w_hh = MatRef {
        data: v.w_hh,
        trans: false,
    };
    for t in (0..t_len).rev() {
        let dg_t = &mut dgates[t * b_len * g_len..(t + 1) * b_len * g_len];
        let acts_t = &acts[t * b_len * g_len..(t + 1) * b_len * g_len];
        let c_t = &cells[t * state_len..(t + 1) * state_len];
        let c_prev = if t == 0 {
            v.c0
        } else {
            Some(&cells[(t - 1) * state_len..t * state_len])
        };
        let dy_t = dy.map(|d| &d[t * state_len..(t + 1) * state_len]);
        let v = &v;
        for_rows3(
            dg_t,
            g_len,
            dh,
            h_len,
            dc,
            h_len,
            10 * g_len,
            |first, dg, dh, dc| {
                for (r, ((dg, dh), dc)) in dg
                    .chunks_exact_mut(g_len)
                    .zip(dh.chunks_exact_mut(h_len))
                    .zip(dc.chunks_exact_mut(h_len))
                    .enumerate()
                {
                    let b = first + r;
                    if !v.active(b, t) {
                        // A carried state passes its gradients through unchanged.
                        dg.fill(0.0);
                        continue;
                    }
                    let row = b * h_len..(b + 1) * h_len;
                    gate_backward(
                        &acts_t[b * g_len..(b + 1) * g_len],
                        &c_t[row.clone()],
                        c_prev.map(|c| &c[row.clone()]),
                        dy_t.map(|d| &d[row]),
                        dh,
                        dc,
                        dg,
                    );
                }
            },
        );
        // dh_{t-1} = dgates_t W_hh for the sequences that ran at t.
        let needs_dh = t > 0 || grads.dh0.is_some();
        if needs_dh {
            let dg_t = MatRef {
                data: &dgates[t * b_len * g_len..(t + 1) * b_len * g_len],
                trans: false,
            };
            if v.lengths.is_none() {
                sgemm(b_len, h_len, g_len, dg_t, w_hh, dh, 1.0, 0.0)?;
            } else {
                sgemm(b_len, h_len, g_len, dg_t, w_hh, dh_rec, 1.0, 0.0)?;
                for b in (0..b_len).filter(|&b| v.active(b, t)) {
                    let row = b * h_len..(b + 1) * h_len;
                    dh[row.clone()].copy_from_slice(&dh_rec[row]);
                }
            }
        }
    }
    write_input_grads(plan, &v, y, dgates, dh, dc, grads)
}

/// One row of the backward gate loop: from the activations `a = [i | f | g | o]`,
/// the cell states and the gradients of `h` (`dh` plus the output's `dy`) and
/// `c`, writes the pre-activation gradients `dg` and leaves `dc` as the
/// gradient of `c_{t-1}` (`dh` is overwritten by the recurrent GEMM after).
#[inline(always)]
fn gate_backward(
    a: &[f32],
    c_t: &[f32],
    c_prev: Option<&[f32]>,
    dy: Option<&[f32]>,
    dh: &mut [f32],
    dc: &mut [f32],
    dg: &mut [f32],
) {
    let row = BackwardRow { a, c_t, dh, dc, dg };
    let zeros = || std::iter::repeat(0.0);
    simd(
        #[inline(always)]
        || match (c_prev, dy) {
            (Some(cp), Some(dy)) => row.run(cp.iter().copied(), dy.iter().copied()),
            (Some(cp), None) => row.run(cp.iter().copied(), zeros()),
            (None, Some(dy)) => row.run(zeros(), dy.iter().copied()),
            (None, None) => row.run(zeros(), zeros()),
        },
    );
}

/// The slices of one row of the backward gate loop.
struct BackwardRow<'a> {
    a: &'a [f32],
    c_t: &'a [f32],
    dh: &'a mut [f32],
    dc: &'a mut [f32],
    dg: &'a mut [f32],
}

impl BackwardRow<'_> {
    /// The loop, over iterators only (see [`gate_forward`]), given `c_{t-1}`
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

/// `dx`, `dh0`, `dc0`, the weight and bias gradients, from the gate gradients
/// of every frame and the state gradients left at frame 0.
fn write_input_grads(
    plan: &LstmPlan,
    v: &Operands<'_>,
    y: &[f32],
    dgates: &[f32],
    dh: &[f32],
    dc: &[f32],
    grads: LstmGrads<'_>,
) -> Result<()> {
    let (t_len, b_len, f_len, h_len) = (plan.steps, plan.batch, plan.input, plan.hidden);
    let g_len = 4 * h_len;
    let frames = t_len * b_len;
    let dg = MatRef {
        data: dgates,
        trans: false,
    };
    let dg_t = MatRef {
        data: dgates,
        trans: true,
    };
    if let Some(dx) = grads.dx {
        let w_ih = MatRef {
            data: v.w_ih,
            trans: false,
        };
        sgemm(frames, f_len, g_len, dg, w_ih, dx.as_mut_slice()?, 1.0, 0.0)?;
    }
    if let Some(dw) = grads.dw_ih {
        let x = MatRef {
            data: v.x,
            trans: false,
        };
        sgemm(g_len, f_len, frames, dg_t, x, dw.as_mut_slice()?, 1.0, 0.0)?;
    }
    if let Some(dw) = grads.dw_hh {
        let dw = dw.as_mut_slice::<f32>()?;
        let step = b_len * g_len;
        // Frames 1.. against the outputs before them, in one GEMM; frame 0
        // against h0.
        let later = (t_len.saturating_sub(1)) * b_len;
        let dg_later = MatRef {
            data: &dgates[step.min(dgates.len())..],
            trans: true,
        };
        let h_prev = MatRef {
            data: y,
            trans: false,
        };
        sgemm(g_len, h_len, later, dg_later, h_prev, dw, 1.0, 0.0)?;
        if let (Some(h0), true) = (v.h0, t_len > 0) {
            let dg0 = MatRef {
                data: &dgates[..step],
                trans: true,
            };
            let h0 = MatRef {
                data: h0,
                trans: false,
            };
            sgemm(g_len, h_len, b_len, dg0, h0, dw, 1.0, 1.0)?;
        }
    }
    for db in [grads.db_ih, grads.db_hh].into_iter().flatten() {
        let db = db.as_mut_slice::<f32>()?;
        db.fill(0.0);
        for row in dgates.chunks_exact(g_len) {
            for (d, &g) in db.iter_mut().zip(row) {
                *d += g;
            }
        }
    }
    if let Some(dh0) = grads.dh0 {
        dh0.as_mut_slice::<f32>()?.copy_from_slice(dh);
    }
    if let Some(dc0) = grads.dc0 {
        dc0.as_mut_slice::<f32>()?.copy_from_slice(dc);
    }
    Ok(())
}
