//! Softmax and log-softmax over one axis, and their gradients.

use super::{check_f32_on, check_shape, AxisPlan};
use crate::{Backend, Result, Tensor};

fn name(log: bool) -> &'static str {
    if log {
        "log_softmax"
    } else {
        "softmax"
    }
}

/// `y = softmax(x)` (or `log_softmax` when `log`) along `axis`, numerically stable.
pub fn softmax(be: &dyn Backend, x: &Tensor, axis: usize, log: bool, y: &mut Tensor) -> Result<()> {
    let op = name(log);
    let plan = AxisPlan::new(op, x.shape(), axis)?;
    check_f32_on(op, be, &[("x", x), ("y", y)])?;
    check_shape(op, "y", y, x.shape())?;
    be.softmax(&plan, log, x, y)
}

/// `dx` from the forward output `y` and `dy`:
/// softmax: `dx = y * (dy - sum(dy * y))`; log-softmax: `dx = dy - exp(y) * sum(dy)`.
pub fn softmax_backward(
    be: &dyn Backend,
    y: &Tensor,
    dy: &Tensor,
    axis: usize,
    log: bool,
    dx: &mut Tensor,
) -> Result<()> {
    let op = format!("{}_backward", name(log));
    let plan = AxisPlan::new(&op, y.shape(), axis)?;
    check_f32_on(&op, be, &[("y", y), ("dy", dy), ("dx", dx)])?;
    check_shape(&op, "dy", dy, y.shape())?;
    check_shape(&op, "dx", dx, y.shape())?;
    be.softmax_backward(&plan, log, y, dy, dx)
}
