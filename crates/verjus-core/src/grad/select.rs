//! The gradients of `select` (`where`): the output gradient goes to `x` where
//! the condition holds and to `y` where it does not; the condition gets none.

use super::reduce::sum_to;
use crate::ops;
use crate::{Backend, Error, Result, Tensor};

/// Where the gradients of `out = where(cond, x, y)` go; `None` skips one.
#[derive(Debug, Default)]
pub struct SelectGrads<'a> {
    /// Like `x`.
    pub dx: Option<&'a mut Tensor>,
    /// Like `y`.
    pub dy: Option<&'a mut Tensor>,
}

/// The gradients of `out = where(cond != 0, x, y)` (broadcast together) from
/// `dout`: `dout` where `cond` holds for `x`, where it does not for `y`, each
/// summed over the axes it was broadcast along. `zero` is a scalar 0.
/// `scratch`, of `dout`'s shape, is needed when a wanted gradient's shape
/// differs from `dout`'s (the unsummed gradient goes there first).
pub fn select(
    be: &dyn Backend,
    cond: &Tensor,
    dout: &Tensor,
    zero: &Tensor,
    grads: SelectGrads<'_>,
    mut scratch: Option<&mut Tensor>,
) -> Result<()> {
    let sides = [(grads.dx, dout, zero), (grads.dy, zero, dout)];
    for (grad, on, off) in sides {
        let Some(grad) = grad else { continue };
        if grad.shape() == dout.shape() {
            ops::select(be, cond, on, off, grad)?;
            continue;
        }
        let full = scratch.as_deref_mut().ok_or_else(|| {
            Error::invalid(
                "select_backward",
                format!(
                    "a gradient of shape {} from {} needs a scratch tensor of the latter",
                    grad.shape(),
                    dout.shape()
                ),
            )
        })?;
        ops::select(be, cond, on, off, full)?;
        sum_to(be, full, grad)?;
    }
    Ok(())
}
