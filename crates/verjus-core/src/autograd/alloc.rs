//! Allocate-and-call helpers: the eager ops, and the gradient rules of
//! [`crate::grad`] their backward closures call, write into fresh tensors.

use crate::ops::{self, BinaryOp};
use crate::{Backend, DType, Result, Shape, Tensor};

/// A zero-filled f32 tensor on the backend's device: for a gradient that
/// stays 0 or a buffer an op accumulates into (`index_add`).
pub(crate) fn zeros(be: &dyn Backend, shape: &Shape) -> Result<Tensor> {
    ops::zeros(be, shape, DType::F32)
}

/// An f32 tensor for an op to overwrite entirely (an op's output, a
/// gradient rule's result): no zero fill (see `Backend::alloc_output`).
pub(crate) fn output(be: &dyn Backend, shape: &Shape) -> Result<Tensor> {
    ops::output(be, shape, DType::F32)
}

/// f32 tensors of the given shapes for a gradient rule's scratch, which it
/// overwrites (no zero fill).
pub(crate) fn all_outputs(be: &dyn Backend, shapes: &[Shape]) -> Result<Vec<Tensor>> {
    shapes.iter().map(|s| output(be, s)).collect()
}

/// A bfloat16 or float16 `t` (an autocast operand) converted to float32 in a
/// fresh tensor (exact); `None` for float32, which is used as it is.
pub(crate) fn widened(be: &dyn Backend, t: &Tensor) -> Result<Option<Tensor>> {
    if !t.dtype().is_reduced_float() {
        return Ok(None);
    }
    let mut wide = output(be, t.shape())?;
    ops::cast(be, t, &mut wide)?;
    Ok(Some(wide))
}

/// `a + b` in a fresh tensor (same shapes: gradient accumulation).
pub(crate) fn add(be: &dyn Backend, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let mut c = output(be, a.shape())?;
    ops::binary(be, BinaryOp::Add, a, b, &mut c)?;
    Ok(c)
}

/// A copy of `t` under `shape` (same element count and dtype): how a value
/// that other handles share is reshaped, since a tensor owns its storage.
pub(crate) fn copy_as(be: &dyn Backend, t: &Tensor, shape: &Shape) -> Result<Tensor> {
    let mut out = ops::output(be, shape, t.dtype())?;
    ops::copy(be, t, &mut out)?;
    Ok(out)
}

/// `acc + g`, or `g` when nothing has been accumulated yet.
pub(crate) fn accumulate(be: &dyn Backend, acc: Option<Tensor>, g: Tensor) -> Result<Tensor> {
    match acc {
        None => Ok(g),
        Some(a) => add(be, &a, &g),
    }
}
