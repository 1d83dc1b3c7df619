//! The gradient of 2-D max and average pooling.

use crate::ops::{self, Pool2dParams, PoolKind};
use crate::{Backend, Result, Tensor};

/// `dx` of `y = pool(x)` from `dy`: max pooling routes each window's
/// gradient to its first maximum (found from `x` and `y`), average pooling
/// spreads it evenly over the window.
pub fn pool2d(
    be: &dyn Backend,
    kind: PoolKind,
    x: &Tensor,
    y: &Tensor,
    dy: &Tensor,
    params: Pool2dParams,
    dx: &mut Tensor,
) -> Result<()> {
    ops::pool2d_backward(be, kind, x, y, dy, params, dx)
}
