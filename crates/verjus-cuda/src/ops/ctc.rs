//! The CTC loss on the GPU: the lengths and targets are checked on the host
//! (`ops::ctc_check`, one small download each), then one block per batch
//! entry runs the forward-backward pass of `kernels/ctc.cu` over scratch
//! `alpha [B, T, 2S+1]` and `beta [B, 2, 2S+1]`.

use crate::backend::CudaBackend;
use crate::device::arg;
use crate::kernels::Module;
use crate::storage::{ptr, ptr_mut};
use verjus_core::ops::{ctc_check, CtcInputs, CtcPlan};
use verjus_core::{Result, Tensor};

const OP: &str = "ctc_loss";

pub(crate) fn ctc_loss(
    be: &CudaBackend,
    plan: &CtcPlan,
    inputs: &CtcInputs<'_>,
    losses: &mut Tensor,
    grad: Option<&mut Tensor>,
) -> Result<()> {
    be.enter(OP)?;
    if plan.batch == 0 {
        return Ok(());
    }
    let targets = download_i32(be, inputs.targets)?;
    let in_lens = download_i32(be, inputs.input_lengths)?;
    let tgt_lens = download_i32(be, inputs.target_lengths)?;
    ctc_check(plan, &targets, &in_lens, &tgt_lens)?;
    let width = 2 * plan.max_target + 1;
    let alpha = be.scratch(OP, 4 * plan.batch * plan.time.max(1) * width)?;
    let beta = be.scratch(OP, 4 * plan.batch * 2 * width)?;
    let (lp, tp, ip, lp2) = (
        ptr(OP, inputs.log_probs)?,
        ptr(OP, inputs.targets)?,
        ptr(OP, inputs.input_lengths)?,
        ptr(OP, inputs.target_lengths)?,
    );
    let lossp = ptr_mut(OP, losses)?;
    let gp = match grad {
        Some(g) => ptr_mut(OP, g)?,
        None => 0,
    };
    let (ap, bp) = (alpha.ptr(), beta.ptr());
    let (time, classes, max_target) = (
        plan.time as i64,
        plan.classes as i64,
        plan.max_target as i64,
    );
    let (blank, max_approx) = (plan.blank as i32, i32::from(plan.max_approx));
    let grid = u32::try_from(plan.batch).map_err(|_| {
        verjus_core::Error::invalid(OP, format!("batch {} exceeds a grid", plan.batch))
    })?;
    be.launch(
        OP,
        Module::Ctc,
        "ctc_loss",
        grid,
        &mut [
            arg(&lp),
            arg(&tp),
            arg(&ip),
            arg(&lp2),
            arg(&lossp),
            arg(&gp),
            arg(&ap),
            arg(&bp),
            arg(&time),
            arg(&classes),
            arg(&max_target),
            arg(&blank),
            arg(&max_approx),
        ],
    )
}

/// The host copy of an int32 tensor.
fn download_i32(be: &CudaBackend, t: &Tensor) -> Result<Vec<i32>> {
    let mut bytes = vec![0u8; 4 * t.numel()];
    if !bytes.is_empty() {
        be.read_back(OP, ptr(OP, t)?, &mut bytes)?;
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}
