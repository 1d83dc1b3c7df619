//! Fused softmax cross-entropy from logits with integer labels.

use super::{check_device, check_f32_on, check_shape};
use crate::{Backend, DType, Error, Result, Shape, Tensor};

/// Validated sizes: `logits [n, classes]`, `labels [n]`.
#[derive(Clone, Debug, PartialEq)]
pub struct CrossEntropyPlan {
    pub n: usize,
    pub classes: usize,
    /// Label smoothing in `[0, 1)`: the target puts `1 - s + s / classes` on the
    /// label and `s / classes` elsewhere.
    pub smoothing: f32,
}

/// Per-example losses `losses[i] = -sum_c target[i, c] * log_softmax(logits)[i, c]`,
/// and, when `dlogits` is given, `dlogits[i] = (softmax(logits[i]) - target[i]) * grad_scale`.
/// A label outside `[0, classes)` is an error naming it.
pub fn softmax_cross_entropy(
    be: &dyn Backend,
    logits: &Tensor,
    labels: &Tensor,
    smoothing: f32,
    grad_scale: f32,
    losses: &mut Tensor,
    dlogits: Option<&mut Tensor>,
) -> Result<()> {
    let op = "softmax_cross_entropy";
    check_f32_on(op, be, &[("logits", logits), ("losses", losses)])?;
    if logits.shape().rank() != 2 {
        return Err(Error::shape(
            op,
            "logits",
            "rank 2 [N, classes]",
            logits.shape(),
        ));
    }
    let (n, classes) = (logits.dims()[0], logits.dims()[1]);
    check_device(op, "labels", be, labels)?;
    if !labels.dtype().is_int() {
        return Err(Error::DTypeMismatch {
            op: op.into(),
            what: "labels".into(),
            expected: DType::I64,
            actual: labels.dtype(),
        });
    }
    check_shape(op, "labels", labels, &Shape::new([n])?)?;
    check_shape(op, "losses", losses, &Shape::new([n])?)?;
    if !(0.0..1.0).contains(&smoothing) {
        return Err(Error::invalid(
            op,
            format!("label smoothing must be in [0, 1), got {smoothing}"),
        ));
    }
    if classes == 0 && n > 0 {
        return Err(Error::shape(
            op,
            "logits",
            "at least one class",
            logits.shape(),
        ));
    }
    if let Some(d) = &dlogits {
        check_f32_on(op, be, &[("dlogits", d)])?;
        check_shape(op, "dlogits", d, logits.shape())?;
    }
    let plan = CrossEntropyPlan {
        n,
        classes,
        smoothing,
    };
    be.softmax_cross_entropy(&plan, logits, labels, grad_scale, losses, dlogits)
}
