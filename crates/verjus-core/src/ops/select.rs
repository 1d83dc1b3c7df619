//! `select`: an elementwise choice between two tensors by a condition (`where`).
//!
//! `out[i] = if cond[i] != 0 { x[i] } else { y[i] }`, all three broadcast
//! (NumPy rules) to the output shape. Unlike `cond * x + (1 - cond) * y` it
//! never reads the unchosen value, so infinities and NaNs in it (the padding
//! of a masked sequence, a `-inf` fill) do not leak into the result. This is
//! what masking by sequence lengths is built on.

use super::elementwise::broadcast_strides;
use super::{check_f32_on, check_shape};
use crate::{Backend, Result, Shape, Tensor};

/// Validated shapes of a select: the output and each operand's strides over it.
#[derive(Clone, Debug, PartialEq)]
pub struct SelectPlan {
    pub out: Shape,
    /// Strides over the output's axes (0 where the operand is broadcast).
    pub cond_strides: Vec<usize>,
    pub x_strides: Vec<usize>,
    pub y_strides: Vec<usize>,
}

impl SelectPlan {
    /// Broadcasts the three shapes together.
    pub fn new(cond: &Shape, x: &Shape, y: &Shape) -> Result<Self> {
        let out = Shape::broadcast("select", &Shape::broadcast("select", cond, x)?, y)?;
        Ok(SelectPlan {
            cond_strides: broadcast_strides(cond, &out),
            x_strides: broadcast_strides(x, &out),
            y_strides: broadcast_strides(y, &out),
            out,
        })
    }
}

/// `out = where(cond != 0, x, y)` with broadcasting; all float32.
pub fn select(
    be: &dyn Backend,
    cond: &Tensor,
    x: &Tensor,
    y: &Tensor,
    out: &mut Tensor,
) -> Result<()> {
    let plan = SelectPlan::new(cond.shape(), x.shape(), y.shape())?;
    check_f32_on(
        "select",
        be,
        &[("cond", cond), ("x", x), ("y", y), ("out", out)],
    )?;
    check_shape("select", "out", out, &plan.out)?;
    be.select(&plan, cond, x, y, out)
}
