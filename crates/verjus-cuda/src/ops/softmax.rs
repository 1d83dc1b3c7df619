//! Softmax, log-softmax and their gradients.

use crate::backend::CudaBackend;
use crate::device::arg;
use crate::kernels::Module;
use crate::launch::block_per_row;
use crate::storage::{ptr, ptr_mut};
use verjus_core::ops::AxisPlan;
use verjus_core::{Result, Tensor};

pub(crate) fn softmax(
    be: &CudaBackend,
    plan: &AxisPlan,
    log: bool,
    x: &Tensor,
    y: &mut Tensor,
) -> Result<()> {
    let name = if log { "log_softmax" } else { "softmax" };
    be.enter(name)?;
    if x.numel() == 0 {
        return Ok(());
    }
    let (xp, yp) = (ptr(name, x)?, ptr_mut(name, y)?);
    let (o, l, i) = (plan.outer as i64, plan.len as i64, plan.inner as i64);
    let (lg, pb) = (i32::from(log), i32::from(block_per_row(plan.len)));
    be.launch_rows(
        name,
        Module::Softmax,
        "softmax_f32",
        plan.outer * plan.inner,
        plan.len,
        &mut [
            arg(&xp),
            arg(&yp),
            arg(&o),
            arg(&l),
            arg(&i),
            arg(&lg),
            arg(&pb),
        ],
    )
}

pub(crate) fn softmax_backward(
    be: &CudaBackend,
    plan: &AxisPlan,
    log: bool,
    y: &Tensor,
    dy: &Tensor,
    dx: &mut Tensor,
) -> Result<()> {
    let name = if log {
        "log_softmax_backward"
    } else {
        "softmax_backward"
    };
    be.enter(name)?;
    if y.numel() == 0 {
        return Ok(());
    }
    let (yp, dyp, dxp) = (ptr(name, y)?, ptr(name, dy)?, ptr_mut(name, dx)?);
    let (o, l, i) = (plan.outer as i64, plan.len as i64, plan.inner as i64);
    let (lg, pb) = (i32::from(log), i32::from(block_per_row(plan.len)));
    be.launch_rows(
        name,
        Module::Softmax,
        "softmax_backward_f32",
        plan.outer * plan.inner,
        plan.len,
        &mut [
            arg(&yp),
            arg(&dyp),
            arg(&dxp),
            arg(&o),
            arg(&l),
            arg(&i),
            arg(&lg),
            arg(&pb),
        ],
    )
}
