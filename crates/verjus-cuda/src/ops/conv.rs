//! Convolution through cuDNN, with the empty shapes cuDNN rejects handled here:
//! no input channels (the output is the bias), no batch or no output channels
//! (zero gradients).

use super::memory::fill_f32;
use crate::backend::CudaBackend;
use crate::cudnn::{ConvOperands, Direction};
use crate::device::arg;
use crate::kernels::Module;
use crate::storage::{ptr, ptr_mut};
use verjus_core::ops::Conv2dPlan;
use verjus_core::{Result, Tensor};

pub(crate) fn conv2d(
    be: &CudaBackend,
    plan: &Conv2dPlan,
    x: &Tensor,
    w: &Tensor,
    bias: Option<&Tensor>,
    y: &mut Tensor,
) -> Result<()> {
    let op = "conv2d";
    be.enter(op)?;
    let n = y.numel();
    if n == 0 {
        return Ok(());
    }
    let yp = ptr_mut(op, y)?;
    if plan.c_in == 0 {
        fill_f32(be, op, yp, n, 0.0)?;
    } else {
        let t = ConvOperands {
            x: ptr(op, x)?,
            w: ptr(op, w)?,
            y: yp,
        };
        be.cudnn.convolve(Direction::Forward, plan, be.tf32(), t)?;
    }
    if let Some(b) = bias {
        let bp = ptr(op, b)?;
        let (nn, c, hw) = (plan.n as i64, plan.c_out as i64, (plan.oh * plan.ow) as i64);
        be.launch_n(
            op,
            Module::Conv,
            "add_channel_bias_f32",
            n,
            &mut [arg(&yp), arg(&bp), arg(&nn), arg(&c), arg(&hw)],
        )?;
    }
    Ok(())
}

pub(crate) fn conv2d_backward_data(
    be: &CudaBackend,
    plan: &Conv2dPlan,
    dy: &Tensor,
    w: &Tensor,
    dx: &mut Tensor,
) -> Result<()> {
    let op = "conv2d_backward_data";
    be.enter(op)?;
    let n = dx.numel();
    if n == 0 {
        return Ok(());
    }
    let dxp = ptr_mut(op, dx)?;
    if plan.c_out == 0 {
        return fill_f32(be, op, dxp, n, 0.0);
    }
    let t = ConvOperands {
        x: dxp,
        w: ptr(op, w)?,
        y: ptr(op, dy)?,
    };
    be.cudnn
        .convolve(Direction::BackwardData, plan, be.tf32(), t)
}

pub(crate) fn conv2d_backward_filter(
    be: &CudaBackend,
    plan: &Conv2dPlan,
    x: &Tensor,
    dy: &Tensor,
    dw: &mut Tensor,
) -> Result<()> {
    let op = "conv2d_backward_filter";
    be.enter(op)?;
    let n = dw.numel();
    if n == 0 {
        return Ok(());
    }
    let dwp = ptr_mut(op, dw)?;
    if plan.n == 0 {
        return fill_f32(be, op, dwp, n, 0.0);
    }
    let t = ConvOperands {
        x: ptr(op, x)?,
        w: dwp,
        y: ptr(op, dy)?,
    };
    be.cudnn
        .convolve(Direction::BackwardFilter, plan, be.tf32(), t)
}

pub(crate) fn conv2d_backward_bias(be: &CudaBackend, dy: &Tensor, db: &mut Tensor) -> Result<()> {
    let op = "conv2d_backward_bias";
    be.enter(op)?;
    let n = db.numel();
    if n == 0 {
        return Ok(());
    }
    let dbp = ptr_mut(op, db)?;
    if dy.numel() == 0 {
        return fill_f32(be, op, dbp, n, 0.0);
    }
    let d = dy.dims();
    be.cudnn
        .conv_backward_bias([d[0], d[1], d[2], d[3]], ptr(op, dy)?, dbp)
}
