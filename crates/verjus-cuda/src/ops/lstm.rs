//! The LSTM ops: a sequence through cuDNN (`lstm_cudnn.rs`), one step through
//! cuBLAS and fused kernels (`lstm_cell.rs`), and what both share.
//!
//! Which path runs, and so the reserve's layout, follows from the plan alone
//! (as [`reserve_len`] must): one frame without lengths, a cell step or a
//! sequence of `T = 1`, is a step (no cuDNN set-up, no wait for the host);
//! anything else goes to cuDNN. A sequence call where no frame runs (`T = 0`,
//! `B = 0`, or every length 0) is done here without either.

use super::lstm_cell::{self, StepGrads, StepOut};
use super::lstm_cudnn;
use super::memory::{copy_bytes, fill_f32};
use crate::backend::CudaBackend;
use crate::cudnn::LstmKey;
use crate::storage::{ptr, ptr_mut};
use cudarc::driver::sys::CUdeviceptr;
use verjus_core::ops::{LstmArgs, LstmGrads, LstmOutputGrads, LstmOutputs, LstmPlan};
use verjus_core::{Result, Tensor};

/// Whether `plan` runs as one step (see the module doc).
fn one_step(plan: &LstmPlan) -> bool {
    plan.steps == 1 && !plan.has_lengths
}

/// The f32 elements of the reserve of `plan`.
pub(crate) fn reserve_len(be: &CudaBackend, plan: &LstmPlan) -> Result<usize> {
    if one_step(plan) {
        return Ok(lstm_cell::reserve_len(plan));
    }
    if plan.steps == 0 || plan.batch == 0 {
        return Ok(0);
    }
    let op = "lstm_reserve_len";
    be.enter(op)?;
    let key = LstmKey::new(plan, be.tf32());
    Ok(be
        .cudnn
        .lstm_space(op, &key, plan.steps, plan.batch)?
        .reserve
        .f32_len())
}

pub(crate) fn sequence(
    be: &CudaBackend,
    plan: &LstmPlan,
    args: &LstmArgs<'_>,
    out: LstmOutputs<'_>,
) -> Result<()> {
    let op = "lstm_sequence";
    be.enter(op)?;
    if !one_step(plan) {
        return lstm_cudnn::forward(be, op, plan, args, out);
    }
    let step = StepOut {
        h: ptr_mut(op, out.y)?,
        h2: out.h_n.map(|t| ptr_mut(op, t)).transpose()?.unwrap_or(0),
        c: ptr_mut(op, out.c_n)?,
        reserve: ptr_mut(op, out.reserve)?,
    };
    lstm_cell::forward(be, op, plan, args, step)
}

pub(crate) fn sequence_backward(
    be: &CudaBackend,
    plan: &LstmPlan,
    args: &LstmArgs<'_>,
    y: &Tensor,
    reserve: &Tensor,
    dout: &LstmOutputGrads<'_>,
    grads: LstmGrads<'_>,
) -> Result<()> {
    let op = "lstm_sequence_backward";
    be.enter(op)?;
    let g = GradPtrs::new(op, grads)?;
    if g.none() {
        return Ok(());
    }
    if !one_step(plan) {
        return lstm_cudnn::backward(be, op, plan, args, y, reserve, dout, &g);
    }
    let dh = StepGrads {
        dh: [opt(op, dout.dy)?, opt(op, dout.dh_n)?],
        dc: opt(op, dout.dc_n)?,
    };
    lstm_cell::backward(be, op, plan, args, ptr(op, reserve)?, dh, &g)
}

pub(crate) fn cell(
    be: &CudaBackend,
    plan: &LstmPlan,
    args: &LstmArgs<'_>,
    out: LstmOutputs<'_>,
) -> Result<()> {
    let op = "lstm_cell";
    be.enter(op)?;
    let step = StepOut {
        h: ptr_mut(op, out.y)?,
        h2: 0,
        c: ptr_mut(op, out.c_n)?,
        reserve: ptr_mut(op, out.reserve)?,
    };
    lstm_cell::forward(be, op, plan, args, step)
}

pub(crate) fn cell_backward(
    be: &CudaBackend,
    plan: &LstmPlan,
    args: &LstmArgs<'_>,
    reserve: &Tensor,
    dout: &LstmOutputGrads<'_>,
    grads: LstmGrads<'_>,
) -> Result<()> {
    let op = "lstm_cell_backward";
    be.enter(op)?;
    let g = GradPtrs::new(op, grads)?;
    if g.none() {
        return Ok(());
    }
    // Validation leaves no dh_n here: the step's h gradient is dy.
    let dh = StepGrads {
        dh: [opt(op, dout.dy)?, 0],
        dc: opt(op, dout.dc_n)?,
    };
    lstm_cell::backward(be, op, plan, args, ptr(op, reserve)?, dh, &g)
}

/// The device address of an optional operand (0 when absent).
pub(super) fn opt(op: &str, t: Option<&Tensor>) -> Result<CUdeviceptr> {
    Ok(t.map(|t| ptr(op, t)).transpose()?.unwrap_or(0))
}

/// The input gradients a backward writes, as device addresses (0: not
/// wanted). Every wanted one is overwritten.
#[derive(Clone, Copy, Debug)]
pub(super) struct GradPtrs {
    pub dx: CUdeviceptr,
    pub dh0: CUdeviceptr,
    pub dc0: CUdeviceptr,
    pub dw_ih: CUdeviceptr,
    pub dw_hh: CUdeviceptr,
    pub db_ih: CUdeviceptr,
    pub db_hh: CUdeviceptr,
}

impl GradPtrs {
    fn new(op: &str, g: LstmGrads<'_>) -> Result<Self> {
        let p = |t: Option<&mut Tensor>| -> Result<CUdeviceptr> {
            Ok(t.map(|t| ptr_mut(op, t)).transpose()?.unwrap_or(0))
        };
        Ok(GradPtrs {
            dx: p(g.dx)?,
            dh0: p(g.dh0)?,
            dc0: p(g.dc0)?,
            dw_ih: p(g.dw_ih)?,
            dw_hh: p(g.dw_hh)?,
            db_ih: p(g.db_ih)?,
            db_hh: p(g.db_hh)?,
        })
    }

    fn none(&self) -> bool {
        [
            self.dx, self.dh0, self.dc0, self.dw_ih, self.dw_hh, self.db_ih, self.db_hh,
        ]
        .iter()
        .all(|&p| p == 0)
    }

    /// Whether a weight or bias gradient is wanted.
    pub fn weights(&self) -> bool {
        [self.dw_ih, self.dw_hh, self.db_ih, self.db_hh]
            .iter()
            .any(|&p| p != 0)
    }
}

/// `dst = src` over `n` floats, or 0 without a source (address 0); nothing
/// when `dst` is not wanted.
pub(super) fn carry(
    be: &CudaBackend,
    op: &str,
    dst: CUdeviceptr,
    src: CUdeviceptr,
    n: usize,
) -> Result<()> {
    match (dst, src) {
        (0, _) => Ok(()),
        (d, 0) => fill_f32(be, op, d, n, 0.0),
        (d, s) => copy_bytes(be, op, d, s, 4 * n),
    }
}

/// The backward when no frame ran: a state gradient passes to the initial
/// state unchanged, every other gradient is 0.
pub(super) fn no_frames_backward(
    be: &CudaBackend,
    op: &str,
    plan: &LstmPlan,
    dh_n: CUdeviceptr,
    dc_n: CUdeviceptr,
    g: &GradPtrs,
) -> Result<()> {
    let (b, f, h) = (plan.batch, plan.input, plan.hidden);
    carry(be, op, g.dh0, dh_n, b * h)?;
    carry(be, op, g.dc0, dc_n, b * h)?;
    let zeros = [
        (g.dx, plan.steps * b * f),
        (g.dw_ih, 4 * h * f),
        (g.dw_hh, 4 * h * h),
        (g.db_ih, 4 * h),
        (g.db_hh, 4 * h),
    ];
    for (p, n) in zeros {
        carry(be, op, p, 0, n)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use verjus_core::ops::LstmPlan;

    fn plan(steps: usize, has_lengths: bool) -> LstmPlan {
        LstmPlan {
            steps,
            batch: 2,
            input: 3,
            hidden: 4,
            has_lengths,
            has_h0: true,
            has_c0: true,
            has_bias: true,
        }
    }

    /// A cell step and a sequence of one frame without lengths share the
    /// step path (their plans are the same, and so must their reserve be);
    /// lengths or more frames go to cuDNN.
    #[test]
    fn one_frame_without_lengths_is_a_step() {
        assert!(one_step(&plan(1, false)));
        assert!(!one_step(&plan(1, true)));
        assert!(!one_step(&plan(2, false)));
        assert!(!one_step(&plan(0, false)));
    }
}
