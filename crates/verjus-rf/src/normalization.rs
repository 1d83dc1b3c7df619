//! [`layer_norm`] over static dims, as the core's fused op.
//!
//! RETURNN's `rf.layer_norm` normalises over `axis` and applies `scale` and
//! `bias`. The core op normalises the last axis of an `[N, D]` matrix, with
//! `scale` and `bias` over `D`, in one pass forward and one backward (about
//! ten ops and their fresh tensors otherwise). Here the `axis` dims move last
//! (no copy where they already are, as for a feature dim), merge into `D`,
//! and the result takes the source's dims order back. Dynamic axes (which
//! need masking) and a scale or bias over other dims than `axis` are the
//! Python frontend's composite path.

use crate::{fmt_dims, Dim, RfDType, RfTensor};
use verjus_core::{Error, Result};

/// `x` normalised over `axis` to mean 0 and (biased) variance 1, times
/// `scale`, plus `bias` (both over exactly the `axis` dims, in any order).
pub fn layer_norm(
    x: &RfTensor,
    axis: &[Dim],
    eps: f32,
    scale: Option<&RfTensor>,
    bias: Option<&RfTensor>,
) -> Result<RfTensor> {
    let op = "layer_norm";
    check(op, x, axis, scale, bias)?;
    let mut order: Vec<Dim> = x
        .dims()
        .iter()
        .filter(|d| !axis.contains(d))
        .cloned()
        .collect();
    let others = order.len();
    order.extend(axis.iter().cloned());
    let xt = x.copy_transpose(&order)?;
    let sizes = xt.sizes();
    let rows: usize = sizes[..others].iter().product();
    let features: usize = sizes[others..].iter().product();
    let as_features = |t: &RfTensor| t.copy_transpose(axis)?.var().reshape([features]);
    let scale = scale.map(as_features).transpose()?;
    let bias = bias.map(as_features).transpose()?;
    let y = xt
        .var()
        .reshape([rows, features])?
        .layer_norm(scale.as_ref(), bias.as_ref(), eps)?
        .reshape(sizes)?;
    let y = xt.with_value(y, order);
    if y.dims() == x.dims() {
        Ok(y)
    } else {
        y.copy_transpose(x.dims())
    }
}

/// The checks that name dims: float32, `axis` distinct static dims of `x`,
/// `scale` and `bias` over exactly `axis`.
fn check(
    op: &str,
    x: &RfTensor,
    axis: &[Dim],
    scale: Option<&RfTensor>,
    bias: Option<&RfTensor>,
) -> Result<()> {
    if x.dtype() != RfDType::Float32 {
        return Err(Error::invalid(
            op,
            format!("needs a float32 tensor, got {}", x.dtype()),
        ));
    }
    for (i, d) in axis.iter().enumerate() {
        x.axis(op, d)?;
        if d.is_dynamic() || d.size().is_none() || axis[..i].contains(d) {
            return Err(Error::invalid(
                op,
                format!(
                    "axis {} must be distinct static dims (dynamic ones are masked by the composite form)",
                    fmt_dims(axis)
                ),
            ));
        }
    }
    for (what, t) in [("scale", scale), ("bias", bias)] {
        let Some(t) = t else { continue };
        let fits = t.dims().len() == axis.len() && t.dims().iter().all(|d| axis.contains(d));
        if !fits || t.dtype() != RfDType::Float32 {
            return Err(Error::invalid(
                op,
                format!(
                    "{what} {} ({}) must be float32 over the axis {}",
                    fmt_dims(t.dims()),
                    t.dtype(),
                    fmt_dims(axis)
                ),
            ));
        }
    }
    Ok(())
}
