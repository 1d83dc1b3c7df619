//! The gradients of a 2-D convolution with an optional bias.

use crate::ops::{self, Conv2dParams};
use crate::{Backend, Result, Tensor};

/// Where the gradients of `y = conv2d(x, w) + b` go; `None` skips one.
#[derive(Debug, Default)]
pub struct Conv2dGrads<'a> {
    /// `[n, c_in, h, w]`, like the input.
    pub dx: Option<&'a mut Tensor>,
    /// `[c_out, c_in, kh, kw]`, like the weight.
    pub dw: Option<&'a mut Tensor>,
    /// `[c_out]`, like the bias.
    pub db: Option<&'a mut Tensor>,
}

/// The gradients of `y = conv2d(x, w) + b` from `dy`: the op set's filter,
/// bias and data gradients, each only where `grads` asks for it.
pub fn conv2d(
    be: &dyn Backend,
    x: &Tensor,
    w: &Tensor,
    dy: &Tensor,
    params: Conv2dParams,
    grads: Conv2dGrads<'_>,
) -> Result<()> {
    if let Some(dw) = grads.dw {
        ops::conv2d_backward_filter(be, x, dy, params, dw)?;
    }
    if let Some(db) = grads.db {
        ops::conv2d_backward_bias(be, dy, db)?;
    }
    if let Some(dx) = grads.dx {
        ops::conv2d_backward_data(be, dy, w, params, dx)?;
    }
    Ok(())
}
