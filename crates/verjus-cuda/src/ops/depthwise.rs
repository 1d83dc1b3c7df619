//! Depthwise 1-D convolution, channels last, and its gradients
//! (`kernels/depthwise.cu`).

use crate::backend::CudaBackend;
use crate::device::arg;
use crate::kernels::Module;
use crate::storage::{ptr, ptr_mut};
use cudarc::driver::sys::CUdeviceptr;
use verjus_core::ops::{DepthwiseArgs, DepthwiseGrads, DepthwisePlan};
use verjus_core::{Result, Tensor};

/// The plan's sizes as the kernels take them: batch, frames, channels, taps,
/// out frames, left padding, dilation.
fn sizes(plan: &DepthwisePlan) -> [i64; 7] {
    [
        plan.batch,
        plan.frames,
        plan.channels,
        plan.taps,
        plan.out_frames,
        plan.padding[0],
        plan.dilation,
    ]
    .map(|v| v as i64)
}

pub(crate) fn forward(
    be: &CudaBackend,
    plan: &DepthwisePlan,
    args: &DepthwiseArgs<'_>,
    y: &mut Tensor,
) -> Result<()> {
    let op = "depthwise_conv1d";
    be.enter(op)?;
    let (xp, fp) = (ptr(op, args.x)?, ptr(op, args.filter)?);
    let bp: CUdeviceptr = args.bias.map_or(Ok(0), |b| ptr(op, b))?;
    let yp = ptr_mut(op, y)?;
    let s = sizes(plan);
    let mut params = vec![arg(&xp), arg(&fp), arg(&bp), arg(&yp)];
    params.extend(s.iter().map(arg));
    be.launch_n(
        op,
        Module::Depthwise,
        "depthwise_f32",
        y.numel(),
        &mut params,
    )
}

pub(crate) fn backward(
    be: &CudaBackend,
    plan: &DepthwisePlan,
    args: &DepthwiseArgs<'_>,
    dy: &Tensor,
    grads: DepthwiseGrads<'_>,
) -> Result<()> {
    let op = "depthwise_conv1d_backward";
    be.enter(op)?;
    let (xp, fp, dyp) = (ptr(op, args.x)?, ptr(op, args.filter)?, ptr(op, dy)?);
    let s = sizes(plan);
    if let Some(dx) = grads.dx {
        let n = dx.numel();
        let dxp = ptr_mut(op, dx)?;
        let mut params = vec![arg(&fp), arg(&dyp), arg(&dxp)];
        params.extend(s.iter().map(arg));
        be.launch_n(op, Module::Depthwise, "depthwise_dx_f32", n, &mut params)?;
    }
    if grads.dfilter.is_some() || grads.dbias.is_some() {
        let dfp: CUdeviceptr = grads.dfilter.map_or(Ok(0), |t| ptr_mut(op, t))?;
        let dbp: CUdeviceptr = grads.dbias.map_or(Ok(0), |t| ptr_mut(op, t))?;
        let mut params = vec![arg(&xp), arg(&dyp), arg(&dfp), arg(&dbp)];
        params.extend(s.iter().map(arg));
        let threads = plan.channels * plan.taps;
        be.launch_n(
            op,
            Module::Depthwise,
            "depthwise_dfilter_f32",
            threads,
            &mut params,
        )?;
    }
    Ok(())
}
