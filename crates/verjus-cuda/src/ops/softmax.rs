//! Softmax, log-softmax, their gradients, and the fused cross-entropy loss.

use crate::backend::CudaBackend;
use crate::device::arg;
use crate::kernels::Module;
use crate::launch::block_per_row;
use crate::storage::{ptr, ptr_mut};
use verjus_core::ops::{AxisPlan, CrossEntropyPlan};
use verjus_core::{DType, Error, Result, Tensor};

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

pub(crate) fn softmax_cross_entropy(
    be: &CudaBackend,
    plan: &CrossEntropyPlan,
    logits: &Tensor,
    labels: &Tensor,
    grad_scale: f32,
    losses: &mut Tensor,
    dlogits: Option<&mut Tensor>,
) -> Result<()> {
    let name = "softmax_cross_entropy";
    be.enter(name)?;
    if plan.n == 0 {
        return Ok(());
    }
    if let Some((row, label)) = super::index::first_out_of_range(be, name, labels, plan.classes)? {
        return Err(Error::invalid(
            name,
            format!(
                "label {label} at row {row} is outside [0, {})",
                plan.classes
            ),
        ));
    }
    let kernel = match labels.dtype() {
        DType::I64 => "cross_entropy_i64",
        _ => "cross_entropy_i32",
    };
    let (lp, labp, lossp) = (
        ptr(name, logits)?,
        ptr(name, labels)?,
        ptr_mut(name, losses)?,
    );
    let dp = match dlogits {
        Some(d) => ptr_mut(name, d)?,
        None => 0,
    };
    let (n, c, pb) = (
        plan.n as i64,
        plan.classes as i64,
        i32::from(block_per_row(plan.classes)),
    );
    be.launch_rows(
        name,
        Module::Softmax,
        kernel,
        plan.n,
        plan.classes,
        &mut [
            arg(&lp),
            arg(&labp),
            arg(&lossp),
            arg(&dp),
            arg(&n),
            arg(&c),
            arg(&plan.smoothing),
            arg(&grad_scale),
            arg(&pb),
        ],
    )
}
