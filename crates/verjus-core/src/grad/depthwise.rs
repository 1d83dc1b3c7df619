//! The gradient of the depthwise 1-D convolution (formulas in
//! [`crate::ops::depthwise_conv1d_backward`]).

use crate::ops::{self, DepthwiseArgs, DepthwiseGrads};
use crate::{Backend, Result, Tensor};

/// The gradients asked for in `grads` of `depthwise_conv1d(args)` for the
/// output gradient `dy`.
pub fn depthwise_conv1d(
    be: &dyn Backend,
    args: &DepthwiseArgs<'_>,
    dy: &Tensor,
    grads: DepthwiseGrads<'_>,
) -> Result<()> {
    ops::depthwise_conv1d_backward(be, args, dy, grads)
}
