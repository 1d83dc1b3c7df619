//! Gradient clipping by global norm.
//!
//! The norm is computed on the device (square, sum per gradient, concatenate the
//! partial sums, sum again) and only one scalar is read back. The clip factor is
//! not applied in a separate pass: [`super::SolverConfig::plan_step`] folds it
//! into the fused update's `grad_scale`, so clipping costs no extra pass over the
//! gradients' memory beyond computing the norm.

use crate::ops::{self, ReduceOp, UnaryOp};
use crate::{Backend, DType, Error, Result, Shape, Tensor};
use std::borrow::Borrow;

/// The factor that scales a gradient of global L2 norm `norm` to at most
/// `max_norm` (PyTorch's `clip_grad_norm_`):
/// `min(1, max_norm / (norm + 1e-6))`.
///
/// A non-finite norm is an error: the loss diverged, and scaling would write NaN
/// into every parameter.
pub fn clip_factor(norm: f32, max_norm: f32) -> Result<f32> {
    if !norm.is_finite() {
        return Err(Error::invalid(
            "clip_grad_norm",
            format!("the gradient norm is {norm}; the loss has diverged"),
        ));
    }
    Ok((max_norm / (norm + 1e-6)).min(1.0))
}

/// Buffers for the global norm, reused from step to step (one gradient-sized
/// buffer per gradient: the norm costs that much memory while clipping is on).
/// A solver keeps one and lends it to [`super::SolverConfig::plan_step`].
#[derive(Debug, Default)]
pub struct GradNorm {
    /// The squared gradients.
    squares: Vec<Option<Tensor>>,
    /// One `[1]` partial sum per gradient.
    partials: Vec<Option<Tensor>>,
    /// The partial sums side by side, `[count]`.
    joined: Option<Tensor>,
    /// The total, `[1]`.
    total: Option<Tensor>,
}

impl GradNorm {
    /// `sqrt(sum over all gradients of sum(g²))`, computed on `be`'s device.
    pub fn compute<G: Borrow<Tensor>>(&mut self, be: &dyn Backend, grads: &[G]) -> Result<f32> {
        if grads.is_empty() {
            return Ok(0.0);
        }
        let one = Shape::new([1])?;
        self.squares.resize_with(grads.len(), || None);
        self.partials.resize_with(grads.len(), || None);
        for ((g, sq), partial) in grads.iter().zip(&mut self.squares).zip(&mut self.partials) {
            let g = g.borrow();
            let sq = fit(be, sq, g.shape())?;
            let partial = fit(be, partial, &one)?;
            ops::unary(be, UnaryOp::Square, g, sq)?;
            // Reduce over every axis into the partial, viewed with the reduced
            // axes kept (rank 0 for a scalar gradient), then back to `[1]`.
            let rank = g.shape().rank();
            partial.reshape_in_place(vec![1; rank])?;
            let axes: Vec<usize> = (0..rank).collect();
            let reduced = ops::reduce(be, ReduceOp::Sum, sq, &axes, partial);
            partial.reshape_in_place([1])?;
            reduced?;
        }
        let parts: Vec<&Tensor> = self.partials.iter().flatten().collect();
        let joined = fit(be, &mut self.joined, &Shape::new([parts.len()])?)?;
        ops::concat(be, &parts, 0, joined)?;
        let total = fit(be, &mut self.total, &one)?;
        ops::reduce(be, ReduceOp::Sum, joined, &[0], total)?;
        let host = ops::download(be, total)?;
        let sum = host.as_slice::<f32>()?.first().copied().unwrap_or(0.0);
        // A NaN gradient must give a NaN norm (`sum.max(0.0)` turned it into 0,
        // so clipping let NaN gradients through as if they were zero).
        Ok(sum.sqrt())
    }
}

/// The buffer in `slot` when it has `shape` on `be`'s device, else a new one there.
fn fit<'a>(
    be: &dyn Backend,
    slot: &'a mut Option<Tensor>,
    shape: &Shape,
) -> Result<&'a mut Tensor> {
    let t = match slot.take() {
        Some(t) if t.shape() == shape && t.device() == be.device() => t,
        _ => ops::zeros(be, shape, DType::F32)?,
    };
    Ok(slot.insert(t))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn factor_math() {
        assert_eq!(clip_factor(0.5, 1.0).unwrap(), 1.0);
        assert_eq!(clip_factor(0.0, 1.0).unwrap(), 1.0);
        let f = clip_factor(4.0, 1.0).unwrap();
        assert!((f - 0.25).abs() < 1e-6, "{f}");
        // Clipped norm is max_norm (up to the 1e-6 guard).
        assert!((clip_factor(10.0, 2.5).unwrap() * 10.0 - 2.5).abs() < 1e-5);
        let err = clip_factor(f32::NAN, 1.0).unwrap_err().to_string();
        assert!(err.contains("diverged"), "{err}");
        assert!(clip_factor(f32::INFINITY, 1.0).is_err());
    }
}
