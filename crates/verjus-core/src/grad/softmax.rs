//! The gradient of softmax and log-softmax, which needs only the output.

use crate::ops;
use crate::{Backend, Result, Tensor};

/// `dx` of `y = softmax(x)` (or log-softmax when `log`) along `axis`, from
/// the output `y` and `dy`: `dx = y * (dy - sum(dy * y))`, or for
/// log-softmax `dx = dy - exp(y) * sum(dy)`.
pub fn softmax(
    be: &dyn Backend,
    y: &Tensor,
    dy: &Tensor,
    axis: usize,
    log: bool,
    dx: &mut Tensor,
) -> Result<()> {
    ops::softmax_backward(be, y, dy, axis, log, dx)
}
