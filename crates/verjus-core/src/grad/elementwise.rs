//! The gradients of elementwise unary ops (activations, `exp`, `scale`, ...)
//! and broadcasting binary ops.

use crate::ops::{self, check_shape, BinaryOp, UnaryGrad, UnaryOp};
use crate::{Backend, Error, Result, Tensor};

/// `dx` of `y = op(x)` from `dy`. `values` is the forward's `(x, y)`; only a
/// [`UnaryGrad::Pointwise`] gradient reads it, and fails without it.
pub fn unary(
    be: &dyn Backend,
    op: UnaryOp,
    values: Option<(&Tensor, &Tensor)>,
    dy: &Tensor,
    dx: &mut Tensor,
) -> Result<()> {
    match op.gradient_form() {
        UnaryGrad::Identity => {
            check_shape(&backward_name(op), "dx", dx, dy.shape())?;
            ops::copy(be, dy, dx)
        }
        UnaryGrad::Linear => ops::unary(be, op, dy, dx),
        UnaryGrad::Pointwise => {
            let (x, y) = values.ok_or_else(|| {
                Error::invalid(backward_name(op), "needs the forward's input and output")
            })?;
            ops::unary_backward(be, op, x, y, dy, dx)
        }
    }
}

fn backward_name(op: UnaryOp) -> String {
    format!("{}_backward", op.name())
}

/// The gradients `da` and `db` (each optional) of `c = a op b` with NumPy
/// broadcasting: `dy` times the partial derivative, summed over the axes along
/// which that operand was broadcast.
pub fn binary(
    be: &dyn Backend,
    op: BinaryOp,
    a: &Tensor,
    b: &Tensor,
    dy: &Tensor,
    da: Option<&mut Tensor>,
    db: Option<&mut Tensor>,
) -> Result<()> {
    ops::binary_backward(be, op, a, b, dy, da, db)
}
