//! The scalars one solver step hands to every parameter's update: the
//! scheduled learning rate and the gradient scale (mean over the batch, times
//! the clip factor), worked out once per step for every frontend.

use super::{clip_factor, GradNorm, SolverConfig};
use crate::{Backend, Result, Tensor};
use std::borrow::Borrow;
use std::num::NonZeroUsize;

/// What one solver step passes to each parameter's
/// [`super::UpdateRule::update`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepPlan {
    /// The learning rate of this step (after the schedule).
    pub lr: f32,
    /// Multiplies each raw gradient in the fused update: `clip factor / batch`.
    pub grad_scale: f32,
    /// The global L2 norm of the mean gradient before clipping (only computed
    /// when clipping is on).
    pub grad_norm: Option<f32>,
}

impl SolverConfig {
    /// The plan of solver step `step` (0 for the first), whose gradients
    /// `grads` are *sums* over a batch of `batch` examples (1 where they are
    /// already means).
    ///
    /// The updates then use the mean gradient `ĝ = Σg / batch`, rescaled to
    /// global L2 norm at most `clip_norm` when clipping is on. The norm is
    /// computed on `be`'s device with `norm`'s buffers, and only that one scalar
    /// is read back; without clipping `grads` is not read at all.
    pub fn plan_step<G: Borrow<Tensor>>(
        &self,
        be: &dyn Backend,
        step: u64,
        grads: &[G],
        batch: NonZeroUsize,
        norm: &mut GradNorm,
    ) -> Result<StepPlan> {
        let batch = batch.get() as f32;
        let (grad_norm, factor) = match self.clip_norm {
            Some(max_norm) => {
                let mean_norm = norm.compute(be, grads)? / batch;
                (Some(mean_norm), clip_factor(mean_norm, max_norm)?)
            }
            None => (None, 1.0),
        };
        Ok(StepPlan {
            lr: self.lr_at(step),
            grad_scale: factor / batch,
            grad_norm,
        })
    }
}
