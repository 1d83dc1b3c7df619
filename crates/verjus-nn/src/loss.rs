//! Losses, computed on the device.
//!
//! Juice's losses had no scalar output and ran their gradients on the host.
//! Here [`Loss::compute`] runs entirely through the op set and reads back one
//! scalar (the mean loss over the batch). The gradient it writes is that of the
//! **sum** of the per-example losses, like the parameter gradients of
//! [`crate::Network::compute_gradients`]: a solver divides by the actual batch
//! size once, whatever the batch.

use serde::{Deserialize, Serialize};
use verjus_core::ops::{self, BinaryOp, ReduceOp, UnaryOp};
use verjus_core::{Backend, DType, Error, Result, Shape, Tensor};

/// A loss between a network output and a target.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", deny_unknown_fields)]
pub enum Loss {
    /// Cross-entropy of logits `[N, classes]` against integer labels `[N]`,
    /// through the fused softmax-cross-entropy op. With smoothing `s` the
    /// target puts `1 - s + s / classes` on the label and `s / classes` elsewhere.
    SoftmaxCrossEntropy {
        #[serde(default)]
        label_smoothing: f32,
    },
    /// Negative log-likelihood of (finite) log-probabilities `[N, classes]`
    /// against integer labels `[N]`: `-output[i, label_i]`.
    Nll,
    /// Squared error against a float target of the output's shape; an example's
    /// loss is the mean over its elements, so the returned value equals
    /// PyTorch's `MSELoss()` (the mean over all elements).
    Mse,
}

impl Loss {
    /// The name for messages.
    pub fn name(&self) -> &'static str {
        match self {
            Loss::SoftmaxCrossEntropy { .. } => "SoftmaxCrossEntropy",
            Loss::Nll => "Nll",
            Loss::Mse => "Mse",
        }
    }

    /// Checks the settings, so that a bad one is found when a trainer is made
    /// or resumed rather than at its first step.
    pub fn validate(&self) -> Result<()> {
        match *self {
            Loss::SoftmaxCrossEntropy { label_smoothing }
                if !(0.0..1.0).contains(&label_smoothing) =>
            {
                Err(Error::invalid(
                    "Loss::SoftmaxCrossEntropy",
                    format!("label_smoothing must be in [0, 1), got {label_smoothing}"),
                ))
            }
            _ => Ok(()),
        }
    }

    /// The mean loss over the batch; when `grad` is given (the output's shape),
    /// it receives the gradient of the sum of the per-example losses wrt `output`.
    /// Labels outside `[0, classes)` and mismatched shapes are errors.
    pub fn compute(
        &self,
        be: &dyn Backend,
        output: &Tensor,
        target: &Tensor,
        grad: Option<&mut Tensor>,
    ) -> Result<f32> {
        let op = format!("Loss::{}", self.name());
        match *self {
            Loss::SoftmaxCrossEntropy { label_smoothing } => {
                let n = classified_batch(&op, output)?;
                check_labels_are_classes(&op, target)?;
                let mut losses = ops::zeros(be, &Shape::new([n])?, DType::F32)?;
                ops::softmax_cross_entropy(
                    be,
                    output,
                    target,
                    label_smoothing,
                    1.0,
                    &mut losses,
                    grad,
                )?;
                mean(be, &losses)
            }
            Loss::Nll => {
                check_labels_are_classes(&op, target)?;
                nll(be, &op, output, target, grad)
            }
            Loss::Mse => mse(be, &op, output, target, grad),
        }
    }
}

/// `N` of an output `[N, classes]`.
fn classified_batch(op: &str, output: &Tensor) -> Result<usize> {
    match output.dims() {
        &[n, _] => Ok(n),
        _ => Err(Error::shape(op, "output", "[N, classes]", output.shape())),
    }
}

/// Class labels are integers: float targets (a float numpy array of labels)
/// would otherwise meet a bare dtype mismatch deep in the kernel's checks.
fn check_labels_are_classes(op: &str, labels: &Tensor) -> Result<()> {
    if labels.dtype().is_int() {
        return Ok(());
    }
    Err(Error::invalid(
        op,
        format!(
            "the targets must be integer class indices, got {} values \
             (convert them to int64; MSE is the loss for float targets)",
            labels.dtype()
        ),
    ))
}

/// The mean of all elements, read back to the host.
fn mean(be: &dyn Backend, t: &Tensor) -> Result<f32> {
    let axes: Vec<usize> = (0..t.shape().rank()).collect();
    let mut m = ops::zeros(be, &Shape::scalar(), DType::F32)?;
    ops::reduce(be, ReduceOp::Mean, t, &axes, &mut m)?;
    scalar(be, &m)
}

fn scalar(be: &dyn Backend, t: &Tensor) -> Result<f32> {
    let host = ops::download(be, t)?;
    host.as_slice::<f32>()?
        .first()
        .copied()
        .ok_or_else(|| Error::invalid("loss", "empty scalar"))
}

/// NLL without integer arithmetic on the device: the fused cross-entropy of
/// zero logits has the gradient `1/C - onehot(label)` (and checks the labels);
/// comparing it with `1/(2C)` gives the exact one-hot mask.
fn nll(
    be: &dyn Backend,
    op: &str,
    logp: &Tensor,
    labels: &Tensor,
    grad: Option<&mut Tensor>,
) -> Result<f32> {
    let n = classified_batch(op, logp)?;
    let classes = logp.dims()[1];
    let mut zeros = ops::zeros(be, logp.shape(), DType::F32)?;
    let mut g = ops::zeros(be, logp.shape(), DType::F32)?;
    let mut unused = ops::zeros(be, &Shape::new([n])?, DType::F32)?;
    ops::softmax_cross_entropy(be, &zeros, labels, 0.0, 1.0, &mut unused, Some(&mut g))?;
    let half = ops::upload(
        be,
        &Tensor::from_vec([1], vec![0.5 / classes.max(1) as f32])?,
    )?;
    let onehot = &mut zeros;
    ops::binary(be, BinaryOp::Lt, &g, &half, onehot)?;
    ops::binary(be, BinaryOp::Mul, onehot, logp, &mut g)?;
    let mut total = ops::zeros(be, &Shape::scalar(), DType::F32)?;
    ops::reduce(be, ReduceOp::Sum, &g, &[0, 1], &mut total)?;
    if let Some(grad) = grad {
        ops::unary(be, UnaryOp::Neg, onehot, grad)?;
    }
    let total = scalar(be, &total)?;
    Ok(if n == 0 { 0.0 } else { -total / n as f32 })
}

fn mse(
    be: &dyn Backend,
    op: &str,
    output: &Tensor,
    target: &Tensor,
    grad: Option<&mut Tensor>,
) -> Result<f32> {
    if output.shape() != target.shape() {
        return Err(Error::shape(op, "target", output.shape(), target.shape()));
    }
    let Some(&n) = output.dims().first() else {
        return Err(Error::shape(op, "output", "[N, ...]", output.shape()));
    };
    let per_example = output.numel().checked_div(n).unwrap_or(0);
    let mut diff = ops::zeros(be, output.shape(), DType::F32)?;
    ops::binary(be, BinaryOp::Sub, output, target, &mut diff)?;
    let mut sq = ops::zeros(be, output.shape(), DType::F32)?;
    ops::unary(be, UnaryOp::Square, &diff, &mut sq)?;
    if let Some(grad) = grad {
        let scale = if per_example == 0 {
            0.0
        } else {
            2.0 / per_example as f32
        };
        ops::unary(be, UnaryOp::Scale(scale), &diff, grad)?;
    }
    mean(be, &sq)
}

#[cfg(test)]
mod tests {
    use super::Loss;

    #[test]
    fn losses_are_data() {
        let ce: Loss = serde_json::from_str(r#"{"type": "SoftmaxCrossEntropy"}"#).unwrap();
        assert_eq!(
            ce,
            Loss::SoftmaxCrossEntropy {
                label_smoothing: 0.0
            }
        );
        let mse: Loss = serde_json::from_str(r#"{"type": "Mse"}"#).unwrap();
        assert_eq!(mse, Loss::Mse);
        let text = serde_json::to_string(&Loss::SoftmaxCrossEntropy {
            label_smoothing: 0.1,
        })
        .unwrap();
        assert_eq!(
            serde_json::from_str::<Loss>(&text).unwrap().name(),
            "SoftmaxCrossEntropy"
        );
        assert!(
            serde_json::from_str::<Loss>(r#"{"type": "SoftmaxCrossEntropy", "smoothing": 1}"#)
                .is_err()
        );
    }

    #[test]
    fn label_smoothing_outside_zero_to_one_is_refused() {
        for s in [0.0, 0.1, 0.999] {
            let loss = Loss::SoftmaxCrossEntropy { label_smoothing: s };
            assert!(loss.validate().is_ok(), "{s}");
        }
        for s in [-0.1, 1.0, 2.0, f32::NAN] {
            let loss = Loss::SoftmaxCrossEntropy { label_smoothing: s };
            let e = loss.validate().unwrap_err().to_string();
            assert!(e.contains("label_smoothing must be in [0, 1)"), "{s}: {e}");
        }
    }
}
