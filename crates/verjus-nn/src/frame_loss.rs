//! The per-frame loss of a sequence output: cross-entropy at every real
//! frame, the padding contributing nothing.
//!
//! A sequence output is time-major `[T*B, classes]`, the targets come as the
//! data side gives them, batch-major `[B, T]` integer ids with each example's
//! length. The targets are laid out time-major on the host (padding frames get
//! label 0, so an arbitrary padding id is never read), the fused
//! softmax-cross-entropy runs over all rows, and a 0/1 mask per row removes
//! the padding from both the loss and its gradient. The value is the mean
//! over real frames; the gradient is that of their *sum*, so the solver
//! divides by the number of real frames (which [`Loss::compute_frames`]
//! returns) as it divides by the batch size for per-example losses.

use crate::loss::Loss;
use verjus_core::ops::{self, BinaryOp, ReduceOp};
use verjus_core::{Backend, DType, Device, Error, Result, Shape, Tensor};

impl Loss {
    /// The mean loss over the real frames of a sequence output `[T*B,
    /// classes]` (time-major, as [`crate::Context::output`] gives it) against
    /// integer targets `[B, T]` (batch-major) with `lengths[b]` real frames
    /// each; returns it and the number of real frames. `grad` (the output's
    /// shape) receives the gradient of the sum over real frames. Only
    /// [`Loss::SoftmaxCrossEntropy`] applies per frame.
    pub fn compute_frames(
        &self,
        be: &dyn Backend,
        output: &Tensor,
        targets: &Tensor,
        lengths: &[i32],
        grad: Option<&mut Tensor>,
    ) -> Result<(f32, usize)> {
        let op = "Loss::compute_frames";
        let Loss::SoftmaxCrossEntropy { label_smoothing } = *self else {
            return Err(Error::invalid(
                op,
                format!(
                    "a per-frame loss is SoftmaxCrossEntropy, got {}",
                    self.name()
                ),
            ));
        };
        let batch = lengths.len();
        let &[b, time] = targets.dims() else {
            return Err(Error::shape(op, "targets", "[batch, T]", targets.shape()));
        };
        let &[rows, classes] = output.dims() else {
            return Err(Error::shape(
                op,
                "output",
                "[T*batch, classes]",
                output.shape(),
            ));
        };
        if b != batch || rows != time * batch {
            return Err(Error::shape(
                op,
                "targets",
                format!(
                    "[{batch}, {}] (output {:?})",
                    rows / batch.max(1),
                    output.dims()
                ),
                targets.shape(),
            ));
        }
        let downloaded;
        let host = if targets.device() == Device::Cpu {
            targets
        } else {
            downloaded = ops::download(be, targets)?;
            &downloaded
        };
        let ids: Vec<i64> = match host.dtype() {
            DType::I32 => host
                .as_slice::<i32>()?
                .iter()
                .map(|&v| i64::from(v))
                .collect(),
            DType::I64 => host.to_vec::<i64>()?,
            other => {
                return Err(Error::invalid(
                    op,
                    format!("the targets must be integer ids, got {other} values"),
                ))
            }
        };
        let mut labels = vec![0i64; rows];
        let mut mask = vec![0f32; rows];
        let mut real = 0usize;
        for (bi, &len) in lengths.iter().enumerate() {
            let len = len.max(0) as usize;
            if len > time {
                return Err(Error::invalid(
                    op,
                    format!("lengths[{bi}] = {len} is past the targets' {time} frames"),
                ));
            }
            for t in 0..len {
                let v = ids[bi * time + t];
                if v < 0 || v as usize >= classes {
                    return Err(Error::invalid(
                        op,
                        format!(
                            "example {bi}, frame {t}: target {v} is outside the {classes} classes"
                        ),
                    ));
                }
                labels[t * batch + bi] = v;
                mask[t * batch + bi] = 1.0;
            }
            real += len;
        }
        if real == 0 {
            return Err(Error::invalid(
                op,
                "every example has length 0: the per-frame loss needs at least one frame",
            ));
        }
        let labels = ops::upload(be, &Tensor::from_vec([rows], labels)?)?;
        let mask = ops::upload(be, &Tensor::from_vec([rows], mask)?)?;
        let mut losses = ops::zeros(be, &Shape::new([rows])?, DType::F32)?;
        let mut grad = grad;
        ops::softmax_cross_entropy(
            be,
            output,
            &labels,
            label_smoothing,
            1.0,
            &mut losses,
            grad.as_deref_mut(),
        )?;
        let mut masked = ops::zeros(be, &Shape::new([rows])?, DType::F32)?;
        ops::binary(be, BinaryOp::Mul, &losses, &mask, &mut masked)?;
        let mut sum = ops::zeros(be, &Shape::scalar(), DType::F32)?;
        ops::reduce(be, ReduceOp::Sum, &masked, &[0], &mut sum)?;
        let total = ops::download(be, &sum)?.to_vec::<f32>()?[0];
        if let Some(g) = grad {
            let mask = mask.reshape([rows, 1])?;
            let mut kept = ops::zeros(be, g.shape(), DType::F32)?;
            ops::binary(be, BinaryOp::Mul, g, &mask, &mut kept)?;
            ops::copy(be, &kept, g)?;
        }
        Ok((total / real as f32, real))
    }
}
