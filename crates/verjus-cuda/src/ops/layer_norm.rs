//! Layer normalisation over the last axis and its gradients
//! (`kernels/layer_norm.cu`).

use crate::backend::CudaBackend;
use crate::device::arg;
use crate::kernels::Module;
use crate::launch::block_per_row;
use crate::storage::{ptr, ptr_mut};
use cudarc::driver::sys::CUdeviceptr;
use verjus_core::ops::{LayerNormArgs, LayerNormGrads, LayerNormPlan};
use verjus_core::{Result, Tensor};

/// The device address of an optional operand, or 0 (null to the kernels).
fn opt_ptr(op: &str, t: Option<&Tensor>) -> Result<CUdeviceptr> {
    t.map_or(Ok(0), |t| ptr(op, t))
}

/// The device address of an optional output, or 0.
fn opt_ptr_mut(op: &str, t: Option<&mut Tensor>) -> Result<CUdeviceptr> {
    t.map_or(Ok(0), |t| ptr_mut(op, t))
}

pub(crate) fn forward(
    be: &CudaBackend,
    plan: &LayerNormPlan,
    args: &LayerNormArgs<'_>,
    y: &mut Tensor,
    mean: &mut Tensor,
    rstd: &mut Tensor,
) -> Result<()> {
    let op = "layer_norm";
    be.enter(op)?;
    let (xp, sp, bp) = (
        ptr(op, args.x)?,
        opt_ptr(op, args.scale)?,
        opt_ptr(op, args.bias)?,
    );
    let (yp, mp, rp) = (ptr_mut(op, y)?, ptr_mut(op, mean)?, ptr_mut(op, rstd)?);
    let (rows, d) = (plan.rows as i64, plan.features as i64);
    let (eps, pb) = (plan.eps, i32::from(block_per_row(plan.features)));
    be.launch_rows(
        op,
        Module::LayerNorm,
        "layer_norm_f32",
        plan.rows,
        plan.features,
        &mut [
            arg(&xp),
            arg(&sp),
            arg(&bp),
            arg(&yp),
            arg(&mp),
            arg(&rp),
            arg(&rows),
            arg(&d),
            arg(&eps),
            arg(&pb),
        ],
    )
}

pub(crate) fn backward(
    be: &CudaBackend,
    plan: &LayerNormPlan,
    args: &LayerNormArgs<'_>,
    mean: &Tensor,
    rstd: &Tensor,
    dy: &Tensor,
    grads: LayerNormGrads<'_>,
) -> Result<()> {
    let op = "layer_norm_backward";
    be.enter(op)?;
    let (xp, sp) = (ptr(op, args.x)?, opt_ptr(op, args.scale)?);
    let (mp, rp, dyp) = (ptr(op, mean)?, ptr(op, rstd)?, ptr(op, dy)?);
    let (rows, d) = (plan.rows as i64, plan.features as i64);
    if let Some(dx) = grads.dx {
        let dxp = ptr_mut(op, dx)?;
        let pb = i32::from(block_per_row(plan.features));
        be.launch_rows(
            op,
            Module::LayerNorm,
            "layer_norm_backward_f32",
            plan.rows,
            plan.features,
            &mut [
                arg(&xp),
                arg(&sp),
                arg(&mp),
                arg(&rp),
                arg(&dyp),
                arg(&dxp),
                arg(&rows),
                arg(&d),
                arg(&pb),
            ],
        )?;
    }
    if grads.dscale.is_some() || grads.dbias.is_some() {
        let (dsp, dbp) = (
            opt_ptr_mut(op, grads.dscale)?,
            opt_ptr_mut(op, grads.dbias)?,
        );
        be.launch_n(
            op,
            Module::LayerNorm,
            "layer_norm_columns_f32",
            plan.features,
            &mut [
                arg(&xp),
                arg(&mp),
                arg(&rp),
                arg(&dyp),
                arg(&dsp),
                arg(&dbp),
                arg(&rows),
                arg(&d),
            ],
        )?;
    }
    Ok(())
}
