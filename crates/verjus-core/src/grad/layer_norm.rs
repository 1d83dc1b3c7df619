//! The gradient of the fused layer norm, from the per-row statistics its
//! forward kept (formulas in [`crate::ops::layer_norm`]).

use crate::ops::{self, LayerNormArgs, LayerNormGrads};
use crate::{Backend, Result, Tensor};

/// The gradients asked for in `grads` of `layer_norm(args)`, from the
/// forward's `mean` and `rstd` and the output gradient `dy`.
pub fn layer_norm(
    be: &dyn Backend,
    args: &LayerNormArgs<'_>,
    mean: &Tensor,
    rstd: &Tensor,
    dy: &Tensor,
    grads: LayerNormGrads<'_>,
) -> Result<()> {
    ops::layer_norm_backward(be, args, mean, rstd, dy, grads)
}
