//! Dropout from the shared Philox stream (see `verjus_core::rng`): one thread
//! per Philox block of four elements, so the GPU draws the CPU's mask.

use crate::backend::CudaBackend;
use crate::device::arg;
use crate::kernels::Module;
use crate::storage::{ptr, ptr_mut};
use verjus_core::ops::DropoutPlan;
use verjus_core::{Result, Tensor};

/// `y = x * mask * scale`, the mask drawn at `(seed, offset)`.
pub(crate) fn dropout(
    be: &CudaBackend,
    plan: &DropoutPlan,
    x: &Tensor,
    y: &mut Tensor,
) -> Result<()> {
    let op = "dropout";
    be.enter(op)?;
    let n = x.numel();
    let (xp, yp, count) = (ptr(op, x)?, ptr_mut(op, y)?, n as i64);
    be.launch_n(
        op,
        Module::Dropout,
        "dropout_f32",
        n.div_ceil(4),
        &mut [
            arg(&xp),
            arg(&yp),
            arg(&count),
            arg(&plan.seed),
            arg(&plan.offset),
            arg(&plan.threshold),
            arg(&plan.scale),
        ],
    )
}
