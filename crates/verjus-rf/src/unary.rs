//! Elementwise functions of one tensor, [`cast`], [`stop_gradient`], and
//! [`gradient`]. The dims never change, so nothing is moved.

use crate::binary::{cast_var, combine};
use crate::{RfDType, RfTensor};
use verjus_core::autograd::{self, Var};
use verjus_core::ops::{self, BinaryOp, UnaryOp};
use verjus_core::{Error, Result};

/// `op(x)` elementwise (relu, gelu, sigmoid, tanh, exp, log, sqrt, rsqrt,
/// abs, square, neg, ...) on a float32 tensor.
pub fn activation(x: &RfTensor, op: UnaryOp) -> Result<RfTensor> {
    if x.dtype().is_int()
        && matches!(
            op,
            UnaryOp::Abs | UnaryOp::Neg | UnaryOp::Square | UnaryOp::Relu
        )
    {
        // Integer-valued on integers: computed in float32 (exact below 2**24).
        return cast(&activation(&cast(x, RfDType::Float32)?, op)?, x.dtype());
    }
    if x.dtype() != RfDType::Float32 {
        return Err(Error::invalid(
            op.name(),
            format!("needs a float32 tensor, got {}", x.dtype()),
        ));
    }
    Ok(x.with_value(x.var().unary(op)?, x.dims().to_vec()))
}

/// `log(max(x, eps))`: finite where `x` is 0.
pub fn safe_log(x: &RfTensor, eps: f32) -> Result<RfTensor> {
    let e = RfTensor::scalar(eps, x.backend())?;
    let clipped = combine(x, BinaryOp::Max, &e, false)?;
    activation(&clipped, UnaryOp::Log)
}

/// `x` as `dtype`. Float to float keeps the gradient (float32 to bfloat16 and
/// float16 rounds to nearest even); casts to or from integers and bools are
/// constants. To bool is `x != 0`.
pub fn cast(x: &RfTensor, dtype: RfDType) -> Result<RfTensor> {
    let from = x.dtype();
    if from == dtype {
        return Ok(x.clone());
    }
    let var = match (from, dtype) {
        (_, RfDType::Bool) => {
            let zero = RfTensor::scalar(0.0, x.backend())?;
            let f = cast(x, RfDType::Float32)?;
            return combine(&f, BinaryOp::Ne, &zero, false);
        }
        // A bool never requires a gradient: the same storage, read as numbers.
        (RfDType::Bool, RfDType::Float32) => x.var().clone(),
        (RfDType::Bool, _) => return cast(&cast(x, RfDType::Float32)?, dtype),
        (f, t) if f.is_float() && t.is_float() => x.var().cast_float(t.storage())?,
        _ => cast_var(x.var(), dtype.storage())?,
    };
    Ok(RfTensor::from_parts(var, x.dims().to_vec(), dtype).keep_feature_dim(x))
}

/// The same value with no gradient flowing back through it.
pub fn stop_gradient(x: &RfTensor) -> RfTensor {
    x.with_value(x.var().detach(), x.dims().to_vec())
}

/// `d y / d x` for a one-element `y`, with `x`'s dims: zeros when `y` does
/// not depend on `x`. `x` must require a gradient (a parameter, or made
/// with `requires_grad`), or be computed from one.
pub fn gradient(y: &RfTensor, x: &RfTensor) -> Result<RfTensor> {
    let g = autograd::grad(std::slice::from_ref(y.var()), std::slice::from_ref(x.var()))?;
    let value = match g.into_iter().next().flatten() {
        Some(t) => t,
        None => ops::zeros(&**x.backend(), &x.var().shape(), verjus_core::DType::F32)?,
    };
    let var = Var::constant(value, x.backend().clone())?;
    Ok(RfTensor::from_parts(var, x.dims().to_vec(), RfDType::Float32).keep_feature_dim(x))
}
