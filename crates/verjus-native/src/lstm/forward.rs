//! The forward of a sequence or a cell step.
//!
//! The input projection of all `T * B` frames is one GEMM, written straight
//! into the reserve's gate rows. Then each step is one stage of
//! [`run_stages`]: every part (a thread's block of hidden units) adds its
//! columns of `h_{t-1} W_hh^T` with a single-threaded GEMM against its columns
//! of the weights (copied once per call into the gate order of `layout`) and
//! runs the fused gate loop of its units (bias, sigmoid/tanh, cell update,
//! length mask), leaving the activations in place for the backward.

#[cfg(target_arch = "x86_64")]
use super::fused::{run_parts, Part};
use super::gates::forward_row;
use super::layout::Layout;
use super::team::{run_stages, Shared};
use super::{fill_or_copy, plan_layout, take_scratch, Isa, Operands, Split};
use crate::gemm::{sgemm, sgemm_strided, MatRef};
use verjus_core::ops::{LstmArgs, LstmOutputs, LstmPlan};
use verjus_core::Result;

/// The forward of a sequence (`h_n` given) or of a cell step (`h_n` `None`,
/// `y` is then the new `h`).
pub(crate) fn forward(
    op: &str,
    plan: &LstmPlan,
    args: &LstmArgs<'_>,
    out: LstmOutputs<'_>,
) -> Result<()> {
    let v = Operands::new(op, plan, args)?;
    let (layout, isa) = plan_layout(plan);
    let (t_len, b_len, f_len, h_len) = (plan.steps, plan.batch, plan.input, plan.hidden);
    let g_len = 4 * h_len;
    let y = out.y.as_mut_slice::<f32>()?;
    let (acts, cells) = out
        .reserve
        .as_mut_slice::<f32>()?
        .split_at_mut(t_len * b_len * g_len);
    // Scratch: the summed bias, then (blocked) W_ih (in panels when the fused
    // kernel projects the inputs), W_hh^T (in panels for the fused kernel)
    // and room for a weight in gate order (on the way to its transpose).
    let split = isa.map(Isa::split);
    let kernel_projects = split == Some(Split::Rows);
    let (w_ih_len, w_hh_len) = if layout.blocked() {
        (g_len * f_len, g_len * h_len)
    } else {
        (0, 0)
    };
    let len = g_len + w_ih_len + w_hh_len + w_ih_len.max(w_hh_len);
    let mut scratch = take_scratch(op, len)?;
    let (bias, rest) = scratch.0.split_at_mut(g_len);
    let (w_ih, rest) = rest.split_at_mut(w_ih_len);
    let (w_hh_t, rows) = rest.split_at_mut(w_hh_len);
    let bias = v.bias.map(|(bi, bh)| {
        layout.sum_to(bi, bh, bias);
        &*bias
    });
    let w_ih: &[f32] = if layout.blocked() {
        if kernel_projects {
            layout.panels_to(v.w_ih, f_len, rows, w_ih);
        } else {
            layout.rows_to(v.w_ih, f_len, w_ih);
        }
        if isa.is_some() {
            layout.panels_to(v.w_hh, h_len, rows, w_hh_t);
        } else {
            layout.transposed_to(v.w_hh, h_len, rows, w_hh_t);
        }
        w_ih
    } else {
        v.w_ih
    };
    if t_len * b_len > 0 && !kernel_projects {
        // The input projection of every frame: one GEMM (the fused kernel of
        // a row split adds each frame's to its tile instead).
        let x = MatRef {
            data: v.x,
            trans: false,
        };
        let w_ih = MatRef {
            data: w_ih,
            trans: true,
        };
        sgemm(t_len * b_len, g_len, f_len, x, w_ih, acts, 1.0, 0.0)?;
    }
    let parts = if layout.blocked() {
        layout.parts(rayon::current_num_threads())
    } else {
        1
    };
    let step = Step {
        v: &v,
        layout,
        plan,
        bias,
        w_ih_t: if kernel_projects { w_ih } else { &[] },
        w_hh_t,
        acts: Shared::new(acts),
        cells: Shared::new(cells),
        y: Shared::new(y),
    };
    let mut failed = None;
    if let Some(isa) = isa {
        #[cfg(target_arch = "x86_64")]
        match isa.split() {
            Split::Rows => run_parts(isa, b_len, |_, rows| {
                let part = Part {
                    rows,
                    units: 0..h_len,
                    sums: 0,
                };
                for t in 0..t_len {
                    // SAFETY: `isa` is this layout's, and the parts' rows are disjoint.
                    unsafe { step.fused_step(isa, t, &part) };
                }
            }),
            Split::Units => run_stages(t_len, parts, |t, p| {
                let part = Part {
                    rows: 0..b_len,
                    units: layout.part_units(p, parts),
                    sums: 0,
                };
                // SAFETY: `isa` is this layout's; the parts' units are
                // disjoint, and a stage starts when the previous one is done.
                unsafe { step.fused_step(isa, t, &part) };
            }),
        }
        #[cfg(not(target_arch = "x86_64"))]
        match isa {}
    } else if layout.blocked() {
        run_stages(t_len, parts, |t, p| step.part(t, p, parts));
    } else {
        // One part: PyTorch's order, the GEMM on W_hh as given.
        for t in 0..t_len {
            if let Err(e) = step.whole_gemm(t) {
                failed = Some(e);
                break;
            }
            step.gates(t, 0..h_len);
        }
    }
    if let Some(e) = failed {
        return Err(e);
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

/// What the stages of the forward share.
pub(super) struct Step<'a> {
    pub(super) v: &'a Operands<'a>,
    layout: Layout,
    pub(super) plan: &'a LstmPlan,
    /// `b_ih + b_hh` in gate order.
    pub(super) bias: Option<&'a [f32]>,
    /// `W_ih^T [F, 4H]` in gate order when the fused kernel projects the
    /// inputs (a row split; in the panels of `Layout::panels_to`), else
    /// empty: the gates then hold the projection.
    pub(super) w_ih_t: &'a [f32],
    /// `W_hh^T [H, 4H]` in gate order (blocked layouts only; in panels for
    /// the fused kernel).
    pub(super) w_hh_t: &'a [f32],
    /// The gates `[T, B, 4H]`: pre-activations, then activations.
    pub(super) acts: Shared,
    /// The cell states `[T, B, H]`.
    pub(super) cells: Shared,
    /// The outputs `[T, B, H]`.
    pub(super) y: Shared,
}

impl Step<'_> {
    /// `h_{t-1}` (`None`: zeros).
    pub(super) fn h_prev(&self, t: usize) -> Option<*const f32> {
        let state = self.plan.batch * self.plan.hidden;
        if t == 0 {
            self.v.h0.map(|h| h.as_ptr())
        } else {
            // SAFETY: frame t-1 of `y` lies inside it (t < T).
            Some(unsafe { self.y.ptr().add((t - 1) * state) }.cast_const())
        }
    }

    /// Part `p` of step `t`: its columns of the recurrent GEMM, then its gates.
    fn part(&self, t: usize, p: usize, parts: usize) {
        let (b_len, h_len) = (self.plan.batch, self.plan.hidden);
        let g_len = 4 * h_len;
        let units = self.layout.part_units(p, parts);
        if let Some(h_prev) = self.h_prev(t) {
            let cols = 4 * units.start;
            // SAFETY: the GEMM writes this part's columns of frame t's gates,
            // which no other part touches in this stage, and reads h_{t-1}
            // (written by the previous stage, or h0) and the weights (read-only);
            // every extent lies inside its buffer.
            unsafe {
                sgemm_strided(
                    b_len,
                    4 * units.len(),
                    h_len,
                    self.acts.ptr().add(t * b_len * g_len + cols),
                    g_len,
                    h_prev,
                    h_len,
                    self.w_hh_t.as_ptr().add(cols),
                    g_len,
                    true,
                );
            }
        }
        self.gates(t, units);
    }

    /// The recurrent GEMM of step `t` over all columns, on `W_hh` as given.
    fn whole_gemm(&self, t: usize) -> Result<()> {
        let (b_len, h_len) = (self.plan.batch, self.plan.hidden);
        let g_len = 4 * h_len;
        let Some(h_prev) = self.h_prev(t) else {
            return Ok(());
        };
        // SAFETY: one thread; h_{t-1} (frame t-1 of y, or h0) does not overlap
        // frame t's gates.
        let (h_prev, gates) = unsafe {
            (
                std::slice::from_raw_parts(h_prev, b_len * h_len),
                self.acts.slice(t * b_len * g_len, b_len * g_len),
            )
        };
        let h_prev = MatRef {
            data: h_prev,
            trans: false,
        };
        let w_hh = MatRef {
            data: self.v.w_hh,
            trans: true,
        };
        sgemm(b_len, g_len, h_len, h_prev, w_hh, gates, 1.0, 1.0)
    }

    /// The gate loop of step `t` over hidden `units` (whole blocks), every row.
    fn gates(&self, t: usize, units: std::ops::Range<usize>) {
        let (b_len, h_len) = (self.plan.batch, self.plan.hidden);
        let g_len = 4 * h_len;
        let w = units.len();
        let bias = self.bias.map(|b| &b[4 * units.start..4 * units.end]);
        for b in 0..b_len {
            let state = (t * b_len + b) * h_len + units.start;
            // SAFETY: this part alone reads and writes these units of frame t
            // (gates, cell, output) and reads them in frame t-1 in this stage.
            let (g, c, h, c_prev) = unsafe {
                let c_prev = if t == 0 {
                    self.v.c0.map(|c| &c[b * h_len + units.start..][..w])
                } else {
                    Some(&*self.cells.slice(state - b_len * h_len, w))
                };
                (
                    self.acts
                        .slice((t * b_len + b) * g_len + 4 * units.start, 4 * w),
                    self.cells.slice(state, w),
                    self.y.slice(state, w),
                    c_prev,
                )
            };
            if self.v.active(b, t) {
                let blocks = self.layout.blocks_in(units.clone());
                forward_row(g, bias, c_prev, c, h, blocks);
            } else {
                // Finished: the state is carried, the output is 0.
                fill_or_copy(c, c_prev);
                h.fill(0.0);
            }
        }
    }
}
