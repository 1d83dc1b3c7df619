//! One LSTM step: two cuBLAS GEMMs and one fused gate kernel forward, one
//! fused kernel and up to four GEMMs and a column sum backward
//! (`kernels/lstm.cu`). It serves `lstm_cell` and sequences of one frame
//! without lengths, and waits for nothing.
//!
//! The reserve holds the gate activations `[B, 4H]` (i, f, g, o) and the new
//! cell `[B, H]`; the input projection is written straight into the
//! activation rows, the recurrent GEMM adds to them, and the gate kernel
//! turns them into activations in place.

use super::gemm::gemm_at;
use super::lstm::{no_frames_backward, opt, GradPtrs};
use super::memory::{copy_bytes, fill_f32};
use super::reduce::sum_into;
use crate::backend::CudaBackend;
use crate::device::arg;
use crate::kernels::Module;
use crate::storage::ptr;
use cudarc::driver::sys::CUdeviceptr;
use verjus_core::ops::{GemmPlan, GemmSpec, LstmArgs, LstmPlan};
use verjus_core::{Result, Shape};

/// The f32 elements of a step's reserve: activations `[B, 4H]`, cell `[B, H]`.
pub(crate) fn reserve_len(plan: &LstmPlan) -> usize {
    plan.batch * 5 * plan.hidden
}

/// Where a step's forward writes (device addresses; `h2`, a second copy of
/// the new `h` such as a sequence's `h_n`, may be 0).
#[derive(Clone, Copy, Debug)]
pub(super) struct StepOut {
    pub h: CUdeviceptr,
    pub h2: CUdeviceptr,
    pub c: CUdeviceptr,
    pub reserve: CUdeviceptr,
}

/// The output gradients of a step: the new `h`'s is the sum of `dh[0]` and
/// `dh[1]` (a sequence's `dy` and `dh_n`), the new `c`'s is `dc` (0: absent).
#[derive(Clone, Copy, Debug)]
pub(super) struct StepGrads {
    pub dh: [CUdeviceptr; 2],
    pub dc: CUdeviceptr,
}

/// A matrix operand: its address, row-major dims, and whether it is used
/// transposed.
type Mat = (CUdeviceptr, [usize; 2], bool);

/// `c = op(a) op(b)`, or `c += op(a) op(b)` with `accumulate`.
fn product(
    be: &CudaBackend,
    op: &str,
    a: Mat,
    b: Mat,
    c: CUdeviceptr,
    accumulate: bool,
) -> Result<()> {
    let spec = GemmSpec {
        trans_a: a.2,
        trans_b: b.2,
        alpha: 1.0,
        beta: if accumulate { 1.0 } else { 0.0 },
    };
    let plan = GemmPlan::new(&Shape::new(a.1)?, &Shape::new(b.1)?, spec)?;
    gemm_at(be, op, &plan, a.0, b.0, c, plan.m * plan.n)
}

pub(super) fn forward(
    be: &CudaBackend,
    op: &str,
    plan: &LstmPlan,
    args: &LstmArgs<'_>,
    out: StepOut,
) -> Result<()> {
    let (b, f, h) = (plan.batch, plan.input, plan.hidden);
    if b == 0 {
        return Ok(());
    }
    let g = 4 * h;
    let gates = out.reserve;
    let cells = out.reserve + (4 * b * g) as u64;
    let x = (ptr(op, args.x)?, [b, f], false);
    product(be, op, x, (ptr(op, args.w_ih)?, [g, f], true), gates, false)?;
    if let Some(h0) = args.h0 {
        let h0 = (ptr(op, h0)?, [b, h], false);
        product(be, op, h0, (ptr(op, args.w_hh)?, [g, h], true), gates, true)?;
    }
    let (b_ih, b_hh, c0) = (opt(op, args.b_ih)?, opt(op, args.b_hh)?, opt(op, args.c0)?);
    let (rows, hidden) = (b as i64, h as i64);
    be.launch_n(
        op,
        Module::Lstm,
        "lstm_cell_forward",
        b * h,
        &mut [
            arg(&gates),
            arg(&b_ih),
            arg(&b_hh),
            arg(&c0),
            arg(&out.c),
            arg(&cells),
            arg(&out.h),
            arg(&out.h2),
            arg(&rows),
            arg(&hidden),
        ],
    )
}

pub(super) fn backward(
    be: &CudaBackend,
    op: &str,
    plan: &LstmPlan,
    args: &LstmArgs<'_>,
    reserve: CUdeviceptr,
    dout: StepGrads,
    grads: &GradPtrs,
) -> Result<()> {
    let (b, f, h) = (plan.batch, plan.input, plan.hidden);
    if b == 0 {
        return no_frames_backward(be, op, plan, 0, 0, grads);
    }
    let g = 4 * h;
    let acts = reserve;
    let cells = reserve + (4 * b * g) as u64;
    let scratch = be.scratch(op, 4 * b * g)?;
    let dg = scratch.ptr();
    let c0 = opt(op, args.c0)?;
    let (rows, hidden) = (b as i64, h as i64);
    be.launch_n(
        op,
        Module::Lstm,
        "lstm_cell_backward",
        b * h,
        &mut [
            arg(&acts),
            arg(&cells),
            arg(&c0),
            arg(&dout.dh[0]),
            arg(&dout.dh[1]),
            arg(&dout.dc),
            arg(&dg),
            arg(&grads.dc0),
            arg(&rows),
            arg(&hidden),
        ],
    )?;
    let dgates = (dg, [b, g], false);
    let dgates_t = (dg, [b, g], true);
    let (w_ih, w_hh) = (ptr(op, args.w_ih)?, ptr(op, args.w_hh)?);
    if grads.dx != 0 {
        product(be, op, dgates, (w_ih, [g, f], false), grads.dx, false)?;
    }
    if grads.dh0 != 0 {
        product(be, op, dgates, (w_hh, [g, h], false), grads.dh0, false)?;
    }
    if grads.dw_ih != 0 {
        let x = (ptr(op, args.x)?, [b, f], false);
        product(be, op, dgates_t, x, grads.dw_ih, false)?;
    }
    if grads.dw_hh != 0 {
        match args.h0 {
            Some(h0) => product(
                be,
                op,
                dgates_t,
                (ptr(op, h0)?, [b, h], false),
                grads.dw_hh,
                false,
            )?,
            None => fill_f32(be, op, grads.dw_hh, g * h, 0.0)?,
        }
    }
    // Both biases enter the gates alike: one column sum serves both.
    let dbs: Vec<CUdeviceptr> = [grads.db_ih, grads.db_hh]
        .into_iter()
        .filter(|&p| p != 0)
        .collect();
    if let Some((&first, rest)) = dbs.split_first() {
        sum_into(be, op, &[b, g], &[true, false], dg, first, g)?;
        for &other in rest {
            copy_bytes(be, op, other, first, 4 * g)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reserve holds the four gate activations and the cell of every
    /// row, and is empty for an empty batch.
    #[test]
    fn the_step_reserve_holds_gates_and_cell() {
        let mut plan = LstmPlan {
            steps: 1,
            batch: 3,
            input: 2,
            hidden: 5,
            has_lengths: false,
            has_h0: false,
            has_c0: false,
            has_bias: false,
        };
        assert_eq!(reserve_len(&plan), 3 * (4 * 5 + 5));
        plan.batch = 0;
        assert_eq!(reserve_len(&plan), 0);
    }
}
