//! Layer normalisation over the last axis as one fused op, and its backward.
//!
//! For each of `N` rows of `D` features:
//!
//! ```text
//! mean = sum_j x[j] / D;   var = sum_j (x[j] - mean)^2 / D   (biased, as PyTorch and RETURNN)
//! rstd = 1 / sqrt(var + eps);   xhat[j] = (x[j] - mean) * rstd
//! y[j] = xhat[j] * scale[j] + bias[j]                          (scale, bias optional)
//! ```
//!
//! Written as separate ops (two means, a subtraction, a square, an rsqrt, two
//! products and a sum) a layer norm costs about ten passes over its input
//! forward and more backward, each with a fresh tensor; the fused op reads
//! `x` once forward and `x` and `dy` once backward. The forward keeps the
//! per-row `mean` and `rstd [N]` for the backward:
//!
//! ```text
//! g = dy * scale;   dx = rstd * (g - mean_j(g) - xhat * mean_j(g * xhat))
//! dscale = sum_rows dy * xhat;   dbias = sum_rows dy
//! ```

use super::{check_f32_on, check_rank, check_shape};
use crate::{Backend, Error, Result, Shape, Tensor};

/// The sizes of one layer norm, validated.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LayerNormPlan {
    /// Rows `N` (everything but the last axis).
    pub rows: usize,
    /// Features `D` (the last axis), normalised over.
    pub features: usize,
    /// Added to the variance.
    pub eps: f32,
}

impl LayerNormPlan {
    /// `[N]`, the shape of the per-row `mean` and `rstd`.
    pub fn stats_shape(&self) -> Shape {
        Shape::new([self.rows]).expect("checked by the plan")
    }
}

/// The operands: `x [N, D]`, optional `scale [D]` and `bias [D]`, and `eps`.
#[derive(Clone, Copy, Debug)]
pub struct LayerNormArgs<'a> {
    pub x: &'a Tensor,
    pub scale: Option<&'a Tensor>,
    pub bias: Option<&'a Tensor>,
    pub eps: f32,
}

/// The gradients a backward writes (each only if asked for; overwritten).
#[derive(Debug, Default)]
pub struct LayerNormGrads<'a> {
    pub dx: Option<&'a mut Tensor>,
    pub dscale: Option<&'a mut Tensor>,
    pub dbias: Option<&'a mut Tensor>,
}

/// Validates the operands and returns the plan.
pub fn layer_norm_plan(
    op: &str,
    be: &dyn Backend,
    args: &LayerNormArgs<'_>,
) -> Result<LayerNormPlan> {
    check_rank(op, "x", args.x, 2, "[N, D]")?;
    check_f32_on(op, be, &[("x", args.x)])?;
    let (rows, features) = (args.x.dims()[0], args.x.dims()[1]);
    let feature_shape = Shape::new([features])?;
    for (what, t) in [("scale", args.scale), ("bias", args.bias)] {
        if let Some(t) = t {
            check_f32_on(op, be, &[(what, t)])?;
            check_shape(op, what, t, &feature_shape)?;
        }
    }
    if !(args.eps.is_finite() && args.eps >= 0.0) {
        return Err(Error::invalid(
            op,
            format!("eps must be finite and >= 0, got {}", args.eps),
        ));
    }
    Ok(LayerNormPlan {
        rows,
        features,
        eps: args.eps,
    })
}

/// `y [N, D]` (see the module docs) and the per-row `mean` and `rstd [N]`
/// that [`layer_norm_backward`] reads.
pub fn layer_norm(
    be: &dyn Backend,
    args: &LayerNormArgs<'_>,
    y: &mut Tensor,
    mean: &mut Tensor,
    rstd: &mut Tensor,
) -> Result<()> {
    let op = "layer_norm";
    let plan = layer_norm_plan(op, be, args)?;
    check_f32_on(op, be, &[("y", y), ("mean", mean), ("rstd", rstd)])?;
    check_shape(op, "y", y, args.x.shape())?;
    check_shape(op, "mean", mean, &plan.stats_shape())?;
    check_shape(op, "rstd", rstd, &plan.stats_shape())?;
    be.layer_norm(&plan, args, y, mean, rstd)
}

/// The gradients of [`layer_norm`] from its operands, the `mean` and `rstd`
/// it wrote, and `dy` (formulas in the module docs).
pub fn layer_norm_backward(
    be: &dyn Backend,
    args: &LayerNormArgs<'_>,
    mean: &Tensor,
    rstd: &Tensor,
    dy: &Tensor,
    grads: LayerNormGrads<'_>,
) -> Result<()> {
    let op = "layer_norm_backward";
    let plan = layer_norm_plan(op, be, args)?;
    check_f32_on(op, be, &[("mean", mean), ("rstd", rstd), ("dy", dy)])?;
    check_shape(op, "mean", mean, &plan.stats_shape())?;
    check_shape(op, "rstd", rstd, &plan.stats_shape())?;
    check_shape(op, "dy", dy, args.x.shape())?;
    let feature_shape = Shape::new([plan.features])?;
    for (what, g, like) in [
        ("dx", &grads.dx, args.x.shape()),
        ("dscale", &grads.dscale, &feature_shape),
        ("dbias", &grads.dbias, &feature_shape),
    ] {
        if let Some(g) = g {
            check_f32_on(op, be, &[(what, g)])?;
            check_shape(op, what, g, like)?;
        }
    }
    be.layer_norm_backward(&plan, args, mean, rstd, dy, grads)
}
