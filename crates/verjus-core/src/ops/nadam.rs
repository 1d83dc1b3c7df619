//! The NAdam step (`torch.optim.NAdam`): a fused kernel where the backend has
//! one, else composed from the backend's elementwise ops.
//!
//! The rule ([`crate::optim::NAdam`]) turns the step number and the momentum
//! schedule into the per-step constants of [`NAdamStep`], so a kernel is as
//! simple as Adam's: one pass over the parameter, its gradient and moments.
//! The composed form costs about a dozen passes and a temporary per pass
//! (measured: 0.6-2.5 s for the 87 M parameters of RETURNN's AED benchmark
//! demo, where the native kernel's single pass is what a step can afford).

use super::{check_f32_on, check_shape, BinaryOp, BinaryPlan, UnaryOp};
use crate::{Backend, DType, Error, Result, Tensor};

/// One NAdam step of one parameter, its constants worked out:
/// `g = grad_scale · grad + l2 · p`; `p *= decay`;
/// `m = β1 m + (1 − β1) g`; `v = β2 v + (1 − β2) g²`;
/// `p −= (moment_coef · m + grad_coef · g) / (sqrt(v / bias2) + eps)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NAdamStep {
    /// `η (1 − μ_t) / (1 − Π_t)`.
    pub grad_coef: f32,
    /// `η μ_{t+1} / (1 − Π_t μ_{t+1})`.
    pub moment_coef: f32,
    pub beta1: f32,
    pub beta2: f32,
    pub eps: f32,
    /// `1 − β2^t`, in `(0, 1]`.
    pub bias2: f32,
    /// The L2 penalty added to the gradient (0 when decoupled).
    pub l2: f32,
    /// `1 − η · weight_decay` when decoupled, else 1.
    pub decay: f32,
    pub grad_scale: f32,
}

/// One NAdam step (see [`NAdamStep`]).
pub fn nadam_update(
    be: &dyn Backend,
    s: &NAdamStep,
    param: &mut Tensor,
    grad: &Tensor,
    m: &mut Tensor,
    v: &mut Tensor,
) -> Result<()> {
    let op = "nadam_update";
    if !(0.0..1.0).contains(&s.beta1) || !(0.0..1.0).contains(&s.beta2) {
        return Err(Error::invalid(
            op,
            format!("betas must be in [0, 1), got ({}, {})", s.beta1, s.beta2),
        ));
    }
    if !(s.bias2 > 0.0 && s.bias2 <= 1.0) {
        return Err(Error::invalid(
            op,
            format!("bias2 must be in (0, 1], got {}", s.bias2),
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
    match be.nadam_update(s, param, grad, m, v) {
        Err(Error::Unsupported { .. }) => composed(be, s, param, grad, m, v),
        done => done,
    }
}

/// The step from elementwise ops, for backends without a kernel.
fn composed(
    be: &dyn Backend,
    s: &NAdamStep,
    param: &mut Tensor,
    grad: &Tensor,
    m: &mut Tensor,
    v: &mut Tensor,
) -> Result<()> {
    let mut g = scale(be, grad, s.grad_scale)?;
    if s.l2 != 0.0 {
        g = binary(be, BinaryOp::Add, &g, &scale(be, param, s.l2)?)?;
    }
    if s.decay != 1.0 {
        *param = scale(be, param, s.decay)?;
    }
    *m = blend(be, m, s.beta1, &g)?;
    *v = blend(be, v, s.beta2, &unary(be, UnaryOp::Square, &g)?)?;
    let root = unary(be, UnaryOp::Sqrt, &scale(be, v, 1.0 / s.bias2)?)?;
    let denom = unary(be, UnaryOp::AddScalar(s.eps), &root)?;
    let step = binary(
        be,
        BinaryOp::Add,
        &scale(be, &g, s.grad_coef)?,
        &scale(be, m, s.moment_coef)?,
    )?;
    *param = binary(
        be,
        BinaryOp::Sub,
        param,
        &binary(be, BinaryOp::Div, &step, &denom)?,
    )?;
    Ok(())
}

/// `op(x)` in a new tensor.
fn unary(be: &dyn Backend, op: UnaryOp, x: &Tensor) -> Result<Tensor> {
    let mut y = be.alloc_output(x.shape(), DType::F32)?;
    be.unary(op, x, &mut y)?;
    Ok(y)
}

/// `x · s` in a new tensor.
fn scale(be: &dyn Backend, x: &Tensor, s: f32) -> Result<Tensor> {
    unary(be, UnaryOp::Scale(s), x)
}

/// `a op b` (same shapes) in a new tensor.
fn binary(be: &dyn Backend, op: BinaryOp, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let plan = BinaryPlan::new(op, a.shape(), b.shape())?;
    let mut c = be.alloc_output(a.shape(), DType::F32)?;
    be.binary(&plan, a, b, &mut c)?;
    Ok(c)
}

/// The running average `β · avg + (1 − β) · x`.
fn blend(be: &dyn Backend, avg: &Tensor, beta: f32, x: &Tensor) -> Result<Tensor> {
    binary(
        be,
        BinaryOp::Add,
        &scale(be, avg, beta)?,
        &scale(be, x, 1.0 - beta)?,
    )
}
