//! The backward of a sequence or a cell step.
//!
//! Each step is one stage of [`run_stages`]. A part (a thread's block of
//! hidden units) first finishes `dh_t` for its units from the gate gradients
//! of step `t + 1` (its columns of `dgates_{t+1} W_hh`, a single-threaded GEMM
//! against its columns of the weights in gate order), then runs the fused
//! gate backward of its units, which writes its columns of `dgates_t` and
//! adds them to the bias gradient. So a step needs all of the previous stage's
//! gate gradients but nothing another part writes in the same stage: one
//! barrier a step. `dX`, `dW_ih` and `dW_hh` are single GEMMs over all frames
//! afterwards. The gate gradients live in a per-thread scratch buffer kept
//! between calls, so a step allocates nothing once the largest batch has run.

#[cfg(target_arch = "x86_64")]
use super::fused::{parts as row_parts, run_parts, Part};
use super::gates::backward_row;
use super::layout::Layout;
use super::team::{run_stages, Shared};
use super::{fill_or_copy, plan_layout, take_scratch, Isa, Operands, Split};
use crate::gemm::{sgemm, sgemm_strided, MatRef};
use std::ops::Range;
use verjus_core::ops::{LstmArgs, LstmGrads, LstmOutputGrads, LstmPlan};
use verjus_core::{Result, Tensor};

/// The backward of [`super::forward`]: `y` is the forward's output (for a
/// cell step, the new `h`), `reserve` its reserve.
pub(crate) fn backward(
    op: &str,
    plan: &LstmPlan,
    args: &LstmArgs<'_>,
    y: &Tensor,
    reserve: &Tensor,
    dout: &LstmOutputGrads<'_>,
    mut grads: LstmGrads<'_>,
) -> Result<()> {
    let v = Operands::new(op, plan, args)?;
    let (layout, isa) = plan_layout(plan);
    let (t_len, b_len, f_len, h_len) = (plan.steps, plan.batch, plan.input, plan.hidden);
    let g_len = 4 * h_len;
    let state_len = b_len * h_len;
    let frames = t_len * b_len;
    let y = y.as_slice::<f32>()?;
    let (acts, cells) = reserve.as_slice::<f32>()?.split_at(frames * g_len);
    // Scratch: the gate gradients of every frame, dh, dc and the recurrent
    // product of the state, the bias gradient, and (blocked) W_hh, W_ih in gate
    // order and the weight gradients in gate order (`dW_hh`, then `dW_ih`);
    // the fused kernel's parts each sum the bias and weight gradients of their
    // rows (the first part's sums come first).
    // A row split sums the weight gradients as it goes, each part its own.
    let split = isa.map(Isa::split);
    let accumulates = split == Some(Split::Rows);
    #[cfg(target_arch = "x86_64")]
    let parts = match isa {
        Some(isa) if accumulates => row_parts(isa, b_len),
        _ => 1,
    };
    #[cfg(not(target_arch = "x86_64"))]
    let parts = 1;
    let dw_part_len = g_len * (h_len + f_len);
    let (w_hh_len, w_ih_len, dw_len) = if layout.blocked() {
        (g_len * h_len, g_len * f_len, parts * dw_part_len)
    } else {
        (0, 0, 0)
    };
    let db_len = parts * g_len;
    let len = frames * g_len + 3 * state_len + db_len + w_hh_len + w_ih_len + dw_len;
    let mut scratch = take_scratch(op, len)?;
    let (dgates, rest) = scratch.0[..len].split_at_mut(frames * g_len);
    let (dh, rest) = rest.split_at_mut(state_len);
    let (dc, rest) = rest.split_at_mut(state_len);
    let (dh_rec, rest) = rest.split_at_mut(state_len);
    let (db, rest) = rest.split_at_mut(db_len);
    let (w_hh, rest) = rest.split_at_mut(w_hh_len);
    let (w_ih, dw) = rest.split_at_mut(w_ih_len);
    fill_or_copy(dh, dout.dh_n.map(|t| t.as_slice::<f32>()).transpose()?);
    fill_or_copy(dc, dout.dc_n.map(|t| t.as_slice::<f32>()).transpose()?);
    db.fill(0.0);
    let (w_hh, w_ih): (&[f32], &[f32]) = if layout.blocked() {
        match isa {
            Some(isa) => layout.column_panels_to(v.w_hh, h_len, isa.panel_units(), w_hh),
            None => layout.rows_to(v.w_hh, h_len, w_hh),
        }
        layout.rows_to(v.w_ih, f_len, w_ih);
        (w_hh, w_ih)
    } else {
        (v.w_hh, v.w_ih)
    };
    let needs_db = grads.db_ih.is_some() || grads.db_hh.is_some();
    // The fused steps of a row split add each frame's share of the weight
    // gradients as they go, and write each frame's dx while its gate
    // gradients are in cache.
    let (dw_hh_acc, dw_ih_acc) = if accumulates {
        dw.fill(0.0);
        let (dw_hh, dw_ih) = dw.split_at_mut(g_len * h_len);
        (
            grads.dw_hh.is_some().then(|| Shared::new(dw_hh)),
            grads.dw_ih.is_some().then(|| Shared::new(dw_ih)),
        )
    } else {
        (None, None)
    };
    let dx = match grads.dx.take_if(|_| accumulates) {
        Some(dx) => {
            let dx = dx.as_mut_slice::<f32>()?;
            dx.fill(0.0);
            Some(Shared::new(dx))
        }
        None => None,
    };
    let step = Step {
        v: &v,
        layout,
        plan,
        w_hh,
        w_ih,
        dx,
        acts,
        cells,
        dy: dout.dy.map(|t| t.as_slice::<f32>()).transpose()?,
        dgates: Shared::new(dgates),
        dh: Shared::new(dh),
        dc: Shared::new(dc),
        dh_rec: Shared::new(dh_rec),
        db: needs_db.then(|| Shared::new(db)),
        y,
        dw_hh: dw_hh_acc,
        dw_ih: dw_ih_acc,
        dw_part_len,
    };
    // Stage s runs step t = T-1-s, after dh_t from step t+1; one more stage
    // gives dh_{-1} = dh0 when it is asked for.
    let stages = t_len + usize::from(grads.dh0.is_some());
    let mut failed = None;
    if let Some(isa) = isa {
        #[cfg(target_arch = "x86_64")]
        match isa.split() {
            Split::Rows => run_parts(isa, b_len, |sums, rows| {
                let part = Part {
                    rows,
                    units: 0..h_len,
                    sums,
                };
                for s in 0..stages {
                    // SAFETY: `isa` is this layout's, and the parts' rows and
                    // gradient sums are disjoint.
                    unsafe { step.fused_stage(isa, s, &part) };
                }
            }),
            Split::Units => {
                let unit_parts = layout.parts(rayon::current_num_threads());
                run_stages(stages, unit_parts, |s, p| {
                    let part = Part {
                        rows: 0..b_len,
                        units: layout.part_units(p, unit_parts),
                        sums: 0,
                    };
                    // SAFETY: `isa` is this layout's; the parts' units (and
                    // their gradient columns) are disjoint, and a stage starts
                    // when the previous one is done.
                    unsafe { step.fused_stage(isa, s, &part) };
                });
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        match isa {}
        // The parts' sums of the weight and bias gradients into the first's.
        let (first, rest) = dw.split_at_mut(dw_part_len);
        for sums in rest.chunks_exact(dw_part_len).take(parts - 1) {
            add_into(first, sums);
        }
        let (first, rest) = db.split_at_mut(g_len);
        for sums in rest.chunks_exact(g_len).take(parts - 1) {
            add_into(first, sums);
        }
    } else if layout.blocked() {
        let parts = layout.parts(rayon::current_num_threads());
        run_stages(stages, parts, |s, p| {
            let units = layout.part_units(p, parts);
            if s > 0 {
                step.recurrent_part(t_len - s, units.clone());
            }
            if s < t_len {
                step.gates(t_len - 1 - s, units);
            }
        });
    } else {
        for s in 0..stages {
            if s > 0 {
                if let Err(e) = step.recurrent_whole(t_len - s) {
                    failed = Some(e);
                    break;
                }
            }
            if s < t_len {
                step.gates(t_len - 1 - s, 0..h_len);
            }
        }
    }
    if let Some(e) = failed {
        return Err(e);
    }
    let done = Done {
        accumulated: accumulates,
        layout,
        plan,
        v: &v,
        y,
        w_ih,
        dgates,
        db,
    };
    done.write(dh, dc, dw, grads)
}

/// `dst += src`, element by element.
fn add_into(dst: &mut [f32], src: &[f32]) {
    for (d, &s) in dst.iter_mut().zip(src) {
        *d += s;
    }
}

/// What the stages of the backward share.
pub(super) struct Step<'a> {
    pub(super) v: &'a Operands<'a>,
    layout: Layout,
    pub(super) plan: &'a LstmPlan,
    /// `W_hh [4H, H]`, its rows in gate order (for the fused kernel, in the
    /// column panels of `Layout::column_panels_to`, `Isa::panel_units` wide).
    pub(super) w_hh: &'a [f32],
    /// `W_ih [4H, F]`, its rows in gate order.
    pub(super) w_ih: &'a [f32],
    /// The fused steps' input gradient `[T, B, F]` (zeroed), when asked for.
    pub(super) dx: Option<Shared>,
    pub(super) acts: &'a [f32],
    pub(super) cells: &'a [f32],
    pub(super) dy: Option<&'a [f32]>,
    /// The gate gradients `[T, B, 4H]`.
    pub(super) dgates: Shared,
    /// The gradients of the state `[B, H]` at the step being run.
    pub(super) dh: Shared,
    pub(super) dc: Shared,
    /// The recurrent product `dgates_t W_hh [B, H]` with lengths (the fused
    /// kernel's partial sums).
    pub(super) dh_rec: Shared,
    /// The bias gradient `[4H]` in gate order, when asked for (the fused
    /// kernel's parts each have their own sums, `4H` apart).
    pub(super) db: Option<Shared>,
    /// The outputs `[T, B, H]` (`h_{t-1}` of frame `t`).
    pub(super) y: &'a [f32],
    /// The fused steps' weight gradients `[4H, H]` and `[4H, F]` (rows in
    /// gate order), when asked for: the first part's sums, each later part's
    /// [`Step::dw_part_len`] further on.
    pub(super) dw_hh: Option<Shared>,
    pub(super) dw_ih: Option<Shared>,
    pub(super) dw_part_len: usize,
}

impl Step<'_> {
    /// `dh_{t-1}` over `units` from step `t`'s gate gradients, for the
    /// sequences that ran at `t` (the others carry theirs).
    fn recurrent_part(&self, t: usize, units: Range<usize>) {
        let (b_len, h_len) = (self.plan.batch, self.plan.hidden);
        let g_len = 4 * h_len;
        let dst = if self.v.lengths.is_none() {
            &self.dh
        } else {
            &self.dh_rec
        };
        // SAFETY: writes these units' columns of dh (or dh_rec), which no
        // other part touches in this stage; reads frame t's gate gradients
        // (written by the previous stage) and the weights; every extent lies
        // inside its buffer.
        unsafe {
            sgemm_strided(
                b_len,
                units.len(),
                g_len,
                dst.ptr().add(units.start),
                h_len,
                self.dgates.ptr().add(t * b_len * g_len),
                g_len,
                self.w_hh.as_ptr().add(units.start),
                h_len,
                false,
            );
        }
        self.keep_active(t, units);
    }

    /// [`Step::recurrent_part`] over all units on one thread, the GEMM threaded.
    fn recurrent_whole(&self, t: usize) -> Result<()> {
        let (b_len, h_len) = (self.plan.batch, self.plan.hidden);
        let g_len = 4 * h_len;
        // SAFETY: one thread; frame t's gate gradients do not overlap dh.
        let (dg_t, dst) = unsafe {
            let dst = if self.v.lengths.is_none() {
                &self.dh
            } else {
                &self.dh_rec
            };
            (
                &*self.dgates.slice(t * b_len * g_len, b_len * g_len),
                dst.slice(0, b_len * h_len),
            )
        };
        let dg_t = MatRef {
            data: dg_t,
            trans: false,
        };
        let w_hh = MatRef {
            data: self.w_hh,
            trans: false,
        };
        sgemm(b_len, h_len, g_len, dg_t, w_hh, dst, 1.0, 0.0)?;
        self.keep_active(t, 0..h_len);
        Ok(())
    }

    /// With lengths: copies the recurrent product of the sequences that ran at
    /// `t` into `dh` over `units`.
    fn keep_active(&self, t: usize, units: Range<usize>) {
        if self.v.lengths.is_none() {
            return;
        }
        let h_len = self.plan.hidden;
        for b in (0..self.plan.batch).filter(|&b| self.v.active(b, t)) {
            let at = b * h_len + units.start;
            // SAFETY: these units' columns are this part's alone in this stage.
            unsafe {
                self.dh
                    .slice(at, units.len())
                    .copy_from_slice(self.dh_rec.slice(at, units.len()));
            }
        }
    }

    /// The gate backward of step `t` over `units` (whole blocks), every row.
    fn gates(&self, t: usize, units: Range<usize>) {
        let (b_len, h_len) = (self.plan.batch, self.plan.hidden);
        let g_len = 4 * h_len;
        let w = units.len();
        let cols = 4 * units.start..4 * units.end;
        // SAFETY: the bias gradient's columns of these units are this part's alone.
        let mut db = self
            .db
            .as_ref()
            .map(|db| unsafe { db.slice(cols.start, cols.len()) });
        for b in 0..b_len {
            let gate = (t * b_len + b) * g_len + cols.start;
            // SAFETY: this part alone writes these units of the state
            // gradients and these columns of frame t's gate gradients.
            let dg = unsafe { self.dgates.slice(gate, cols.len()) };
            if !self.v.active(b, t) {
                // A carried state passes its gradients through unchanged.
                dg.fill(0.0);
                continue;
            }
            let row = b * h_len + units.start;
            let state = t * b_len * h_len + row;
            let c_prev = if t == 0 {
                self.v.c0.map(|c| &c[row..row + w])
            } else {
                Some(&self.cells[state - b_len * h_len..][..w])
            };
            // SAFETY: as above.
            let (dh, dc) = unsafe { (self.dh.slice(row, w), self.dc.slice(row, w)) };
            backward_row(
                &self.acts[gate..gate + cols.len()],
                &self.cells[state..state + w],
                c_prev,
                self.dy.map(|d| &d[state..state + w]),
                dh,
                dc,
                dg,
                db.as_deref_mut(),
                self.layout.blocks_in(units.clone()),
            );
        }
    }
}

/// What the gradients of the inputs are made from once the steps are done.
struct Done<'a> {
    /// Whether the steps left the weight gradients in the scratch (`dw_tmp`).
    accumulated: bool,
    layout: Layout,
    plan: &'a LstmPlan,
    v: &'a Operands<'a>,
    y: &'a [f32],
    /// `W_ih` with its rows in gate order.
    w_ih: &'a [f32],
    dgates: &'a [f32],
    db: &'a [f32],
}

impl Done<'_> {
    /// `dx`, `dh0`, `dc0`, the weight and bias gradients, from the gate
    /// gradients of every frame and the state gradients left at frame 0;
    /// `dw_tmp` is room for the weight gradients in gate order (blocked
    /// layouts), where the fused steps left them when `accumulated`.
    fn write(self, dh: &[f32], dc: &[f32], dw_tmp: &mut [f32], grads: LstmGrads<'_>) -> Result<()> {
        let plan = self.plan;
        let (t_len, b_len, f_len, h_len) = (plan.steps, plan.batch, plan.input, plan.hidden);
        let g_len = 4 * h_len;
        let frames = t_len * b_len;
        let dg = MatRef {
            data: self.dgates,
            trans: false,
        };
        if let Some(dx) = grads.dx {
            let w_ih = MatRef {
                data: self.w_ih,
                trans: false,
            };
            sgemm(frames, f_len, g_len, dg, w_ih, dx.as_mut_slice()?, 1.0, 0.0)?;
        }
        let layout = self.layout;
        // `dst = product` for a gradient of `g_len x n` in PyTorch's row order.
        let accumulated = self.accumulated;
        // dW_hh first in the scratch, then dW_ih.
        let mut in_order =
            |dst: &mut [f32], n: usize, at: usize, product: &dyn Fn(&mut [f32]) -> Result<()>| {
                if !layout.blocked() {
                    return product(dst);
                }
                let tmp = &mut dw_tmp[at..at + g_len * n];
                if !accumulated {
                    product(tmp)?;
                }
                layout.rows_from(tmp, n, dst);
                Ok(())
            };
        if let Some(dw) = grads.dw_ih {
            let x = MatRef {
                data: self.v.x,
                trans: false,
            };
            in_order(dw.as_mut_slice()?, f_len, g_len * h_len, &|dst| {
                let dg_t = MatRef {
                    data: self.dgates,
                    trans: true,
                };
                sgemm(g_len, f_len, frames, dg_t, x, dst, 1.0, 0.0)
            })?;
        }
        if let Some(dw) = grads.dw_hh {
            in_order(dw.as_mut_slice()?, h_len, 0, &|dst| self.dw_hh(dst))?;
        }
        for d in [grads.db_ih, grads.db_hh].into_iter().flatten() {
            layout.rows_from(self.db, 1, d.as_mut_slice()?);
        }
        if let Some(dh0) = grads.dh0 {
            dh0.as_mut_slice::<f32>()?.copy_from_slice(dh);
        }
        if let Some(dc0) = grads.dc0 {
            dc0.as_mut_slice::<f32>()?.copy_from_slice(dc);
        }
        Ok(())
    }

    /// `dW_hh` (rows in gate order): frames 1.. against the outputs before
    /// them in one GEMM, frame 0 against h0.
    fn dw_hh(&self, dw: &mut [f32]) -> Result<()> {
        let (t_len, b_len, h_len) = (self.plan.steps, self.plan.batch, self.plan.hidden);
        let g_len = 4 * h_len;
        let step = b_len * g_len;
        let later = t_len.saturating_sub(1) * b_len;
        let dg_later = MatRef {
            data: &self.dgates[step.min(self.dgates.len())..],
            trans: true,
        };
        let h_prev = MatRef {
            data: self.y,
            trans: false,
        };
        sgemm(g_len, h_len, later, dg_later, h_prev, dw, 1.0, 0.0)?;
        if let (Some(h0), true) = (self.v.h0, t_len > 0) {
            let dg0 = MatRef {
                data: &self.dgates[..step],
                trans: true,
            };
            let h0 = MatRef {
                data: h0,
                trans: false,
            };
            sgemm(g_len, h_len, b_len, dg0, h0, dw, 1.0, 1.0)?;
        }
        Ok(())
    }
}
