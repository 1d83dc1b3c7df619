//! Fused optimizer updates: one pass over a parameter, its gradient and state.
//!
//! `grad_scale` multiplies the raw gradient first; the trainer uses it to divide a
//! summed gradient by the actual batch size and to apply global-norm clipping
//! without another pass over memory.
//!
//! These are the kernels' arguments for one step of one parameter; the user's
//! settings, their checks and how a step turns them into these arguments are in
//! [`crate::optim`].

use super::{check_f32_on, check_shape};
use crate::{Backend, Error, Result, Tensor};

/// SGD with momentum (PyTorch's formulation):
/// `g = grad_scale * grad + weight_decay * p`;
/// with momentum: `v = momentum * v + (1 - dampening) * g` (v = g on the first
/// step) and `p -= lr * (nesterov ? g + momentum * v : v)`;
/// without momentum (`momentum == 0`): `p -= lr * g`, dampening and any velocity
/// buffer unused.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SgdHyper {
    pub lr: f32,
    pub momentum: f32,
    pub dampening: f32,
    pub nesterov: bool,
    pub weight_decay: f32,
    pub grad_scale: f32,
    /// Whether this is the first step (the velocity starts as the gradient).
    pub first_step: bool,
}

/// Adam / AdamW:
/// `g = grad_scale * grad` (+ `weight_decay * p` for Adam);
/// `m = b1 m + (1 - b1) g`; `v = b2 v + (1 - b2) g^2`;
/// `p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)`, and for AdamW
/// (`decoupled`) first `p -= lr * weight_decay * p`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamHyper {
    pub lr: f32,
    pub beta1: f32,
    pub beta2: f32,
    pub eps: f32,
    pub weight_decay: f32,
    /// AdamW's decoupled weight decay instead of Adam's L2 term.
    pub decoupled: bool,
    /// The step number `t`, starting at 1.
    pub step: u64,
    pub grad_scale: f32,
}

/// One SGD step; `velocity` is required when `momentum != 0`.
pub fn sgd_update(
    be: &dyn Backend,
    hp: &SgdHyper,
    param: &mut Tensor,
    grad: &Tensor,
    velocity: Option<&mut Tensor>,
) -> Result<()> {
    let op = "sgd_update";
    check_f32_on(op, be, &[("param", param), ("grad", grad)])?;
    check_shape(op, "grad", grad, param.shape())?;
    if hp.momentum != 0.0 && velocity.is_none() {
        return Err(Error::invalid(op, "momentum needs a velocity buffer"));
    }
    if hp.nesterov && (hp.momentum <= 0.0 || hp.dampening != 0.0) {
        return Err(Error::invalid(
            op,
            "Nesterov momentum needs momentum > 0 and zero dampening",
        ));
    }
    if let Some(v) = &velocity {
        check_f32_on(op, be, &[("velocity", v)])?;
        check_shape(op, "velocity", v, param.shape())?;
    }
    be.sgd_update(hp, param, grad, velocity)
}

/// One Adam/AdamW step with first and second moments `m` and `v`.
pub fn adam_update(
    be: &dyn Backend,
    hp: &AdamHyper,
    param: &mut Tensor,
    grad: &Tensor,
    m: &mut Tensor,
    v: &mut Tensor,
) -> Result<()> {
    let op = "adam_update";
    if hp.step == 0 {
        return Err(Error::invalid(op, "the step number starts at 1"));
    }
    if !(0.0..1.0).contains(&hp.beta1) || !(0.0..1.0).contains(&hp.beta2) {
        return Err(Error::invalid(
            op,
            format!("betas must be in [0, 1), got ({}, {})", hp.beta1, hp.beta2),
        ));
    }
    check_f32_on(
        op,
        be,
        &[("param", param), ("grad", grad), ("m", m), ("v", v)],
    )?;
    for (what, t) in [("grad", grad), ("m", &*m), ("v", &*v)] {
        check_shape(op, what, t, param.shape())?;
    }
    be.adam_update(hp, param, grad, m, v)
}
