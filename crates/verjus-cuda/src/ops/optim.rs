//! Fused SGD and Adam steps; Adam's per-step constants are computed on the
//! host in f64 exactly as the native backend does.

use crate::backend::CudaBackend;
use crate::device::arg;
use crate::kernels::Module;
use crate::storage::{ptr, ptr_mut};
use verjus_core::ops::{AdamHyper, SgdHyper};
use verjus_core::{Result, Tensor};

pub(crate) fn sgd_update(
    be: &CudaBackend,
    hp: &SgdHyper,
    param: &mut Tensor,
    grad: &Tensor,
    velocity: Option<&mut Tensor>,
) -> Result<()> {
    let op = "sgd_update";
    be.enter(op)?;
    let n = param.numel();
    let (pp, gp) = (ptr_mut(op, param)?, ptr(op, grad)?);
    let vp = match velocity {
        Some(v) if hp.momentum != 0.0 => ptr_mut(op, v)?,
        _ => 0,
    };
    let (count, nesterov, first) = (n as i64, i32::from(hp.nesterov), i32::from(hp.first_step));
    be.launch_n(
        op,
        Module::Optim,
        "sgd_f32",
        n,
        &mut [
            arg(&pp),
            arg(&gp),
            arg(&vp),
            arg(&count),
            arg(&hp.lr),
            arg(&hp.momentum),
            arg(&hp.dampening),
            arg(&nesterov),
            arg(&hp.weight_decay),
            arg(&hp.grad_scale),
            arg(&first),
        ],
    )
}

pub(crate) fn adam_update(
    be: &CudaBackend,
    hp: &AdamHyper,
    param: &mut Tensor,
    grad: &Tensor,
    m: &mut Tensor,
    v: &mut Tensor,
) -> Result<()> {
    let op = "adam_update";
    be.enter(op)?;
    let n = param.numel();
    let t = hp.step as f64;
    let bias1 = 1.0 - f64::from(hp.beta1).powf(t);
    let bias2 = 1.0 - f64::from(hp.beta2).powf(t);
    let (decay, l2) = if hp.decoupled {
        (1.0 - hp.lr * hp.weight_decay, 0.0f32)
    } else {
        (1.0f32, hp.weight_decay)
    };
    let step_size = (f64::from(hp.lr) / bias1) as f32;
    let bias2_sqrt = bias2.sqrt() as f32;
    let (pp, gp, mp, vp) = (
        ptr_mut(op, param)?,
        ptr(op, grad)?,
        ptr_mut(op, m)?,
        ptr_mut(op, v)?,
    );
    let count = n as i64;
    be.launch_n(
        op,
        Module::Optim,
        "adam_f32",
        n,
        &mut [
            arg(&pp),
            arg(&gp),
            arg(&mp),
            arg(&vp),
            arg(&count),
            arg(&hp.beta1),
            arg(&hp.beta2),
            arg(&hp.eps),
            arg(&hp.grad_scale),
            arg(&step_size),
            arg(&bias2_sqrt),
            arg(&decay),
            arg(&l2),
        ],
    )
}
